"""Which system steps are steps: a fired row, a message taken, an environment event that fires
a row are steps even when they return to the same system configuration (docs/systems.md,
"Semantics"); only an environment event the instance does not take, or ignores without
sending a message, is no step. Checked in the scalar loop, the batches and replay."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from agentfsm.spec.system_load import load_system
from agentfsm.spec.system_model import System
from agentfsm.verify.system import batched as system_batched
from agentfsm.verify.system.checks import SysCheck, run_system_checks
from agentfsm.verify.system.explore import explore_system
from agentfsm.verify.system.step import Sent, Stepper, initial_config
from agentfsm.verify.table.explore import ExplorationLimit
from test_system_por import batch_runs

from agentfsm.cli import main

FIXTURES = Path(__file__).resolve().parent.parent / "systems"


@pytest.fixture(params=[None, 0], ids=["scalar", "batches"])
def level_min(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(system_batched, "LEVEL_MIN", request.param)
    yield


def checks(name: str, reduction: bool = False) -> dict[str, SysCheck]:
    """The checks of a fixture system, explored with a limit: each has a few dozen configurations at
    most, so an exploration that finds more is wrong, and fails here rather than run on."""
    system = load_system(FIXTURES / f"{name}.yaml")
    ex = explore_system(system, reduction=reduction, limit=100)
    return {(c.name or c.kind): c for c in run_system_checks(ex).checks}


def test_a_tick_that_returns_to_the_same_configuration_is_a_step(level_min: None) -> None:
    found = checks("heartbeat-system")
    assert found["deadlock"].ok
    cycle = found["ticks-end"]
    assert not cycle.ok and cycle.trace is not None
    assert (len(cycle.trace.steps), cycle.trace.loop_start) == (1, 0)


def test_a_message_an_instance_sends_itself_again_is_a_step(level_min: None) -> None:
    found = checks("self-ping-system")
    assert found["deadlock"].ok
    cycle = found["pings-end"]
    assert not cycle.ok and cycle.trace is not None
    assert (len(cycle.trace.steps), cycle.trace.loop_start) == (2, 1)


def test_replay_takes_the_step_that_changes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps({
        "system": "self-ping", "check": "pings-end", "kind": "no-cycle-within", "loop_start": 1,
        "steps": [{"step": "env", "instance": "pinger", "event": "Start", "params": {}},
                  {"step": "deliver", "instance": "pinger", "event": "Ping", "params": {}}]}))
    assert main(["replay", str(FIXTURES / "self-ping-system.yaml"), str(trace)]) == 1
    assert "no-cycle-within pings-end: the cycle from step 2 uses only pinger.Ping" in capsys.readouterr().out


def test_a_deadlock_in_the_initial_configuration_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "stuck.yaml"
    path.write_text(f"format: 1\nsystem: stuck\ninstances:\n  beat: {{table: {FIXTURES / 'heartbeat.yaml'}}}\n")
    assert main(["verify", str(path)]) == 1
    out = capsys.readouterr().out
    assert "FAIL deadlock: no step is possible while beat not final" in out
    assert "counterexample:\n       in the initial configuration:\n         beat: Up" in out


def test_a_reduced_search_returns_a_shortest_counterexample(capsys: pytest.CaptureFixture[str]) -> None:
    path = str(FIXTURES / "race-dials-system.yaml")
    assert main(["verify", "--json", path]) == 1
    entry = json.loads(capsys.readouterr().out)["systems"][0]
    assert entry["partial_order_reduction"] is True and entry["shortest_counterexamples"] is True
    [failed] = [c for c in entry["checks"] if not c["ok"]]
    assert failed["counterexample"]["steps"] == [{"step": "env", "instance": "c", "event": "Turn", "params": {}}]


def test_a_shortest_counterexample_past_the_limit_is_said_not_to_be(capsys: pytest.CaptureFixture[str]) -> None:
    path = str(FIXTURES / "race-dials-system.yaml")
    assert main(["verify", "--max-configurations", "10", path]) == 1
    out = capsys.readouterr().out
    assert ("note: counterexamples may be longer than the shortest: the search without partial-order reduction "
            "to depth 5 stopped past --max-configurations 10") in out
    assert "5. environment -> c: Turn" in out


def test_a_steps_effect_holds_the_instance_before_and_after_it_and_a_broken_step_no_after(tmp_path: Path) -> None:
    """What message sequence charts and traces read of a step: the instance as it was, then as it is
    (none when the step broke its table's rules)."""
    (tmp_path / "up.yaml").write_text(
        "format: 1\nmachine: up\nvariables:\n  n: {type: int, min: 0, max: 1, init: 0}\n"
        "states:\n  On: {initial: true}\nevents:\n  Up: {}\n"
        "transitions:\n  - {from: On, on: Up, to: On, set: {n: n + 1}}\n")
    (tmp_path / "up-system.yaml").write_text(
        "format: 1\nsystem: up\ninstances:\n  up: {table: up.yaml}\nenvironment:\n  up: [Up]\n"
        "faults:\n  crash: {instances: [up], max: 1}\n")
    system = load_system(tmp_path / "up-system.yaml")
    stepper = Stepper(system)
    start = initial_config(system)
    [(_, after, effect), _] = stepper.successors(start)
    assert (effect.before, effect.after, effect.status) == ((0, (0,)), (0, (1,)), "fired")
    [(_, same, broken), (_, _, crashed)] = stepper.successors(after)
    assert (crashed.before, crashed.after, crashed.status) == ((0, (1,)), (0, (0,)), "crashed")
    assert same is after and (broken.before, broken.after) == ((0, (1,)), None)
    assert [f.kind for f in broken.findings] == ["bounds"]


def test_a_step_names_the_member_each_any_link_picked(tmp_path: Path) -> None:
    """Two choices of ``bell[any]`` are two steps with two labels (a trace replays the one it took),
    each with the message it sent (what a message sequence chart draws)."""
    (tmp_path / "sender.yaml").write_text(
        "format: 1\nmachine: sender\nstates:\n  Ready: {initial: true}\n  Sent: {final: true}\n"
        "events:\n  Go: {}\nactions:\n  Ping: {}\ntransitions:\n  - {from: Ready, on: Go, to: Sent, emit: [Ping]}\n")
    (tmp_path / "any-system.yaml").write_text(
        f"format: 1\nsystem: any-bell\ninstances:\n  sender: {{table: sender.yaml}}\n"
        f"  bell: {{table: {FIXTURES / 'bell.yaml'}, count: 2}}\n"
        "links:\n  - {from: sender, action: Ping, to: 'bell[any]', event: Ring}\nenvironment:\n  sender: [Go]\n")
    system = load_system(tmp_path / "any-system.yaml")
    steps = list(Stepper(system).successors(initial_config(system)))
    assert [(label[4], config[1]) for label, config, _ in steps] == [
        ((1,), ((), (("Ring", ()),), ())), ((2,), ((), (), (("Ring", ()),)))]
    assert {(effect.before, effect.after) for _, _, effect in steps} == {((0, ()), (1, ()))}
    assert [effect.sent for _, _, effect in steps] == [(Sent(0, "Ping", 1, "Ring", ()),),
                                                       (Sent(0, "Ping", 2, "Ring", ()),)]


@pytest.mark.parametrize(("fault", "box"), [("lose", (("Knock", ()),)),
                                           ("duplicate", (("Ring", (1,)), ("Ring", (1,)), ("Knock", ())))],
                         ids=["lose", "duplicate"])
def test_a_lost_or_duplicated_message_is_the_head_of_the_mailbox_and_named_so(
        tmp_path: Path, fault: str, box: tuple[tuple[str, tuple[int, ...]], ...]) -> None:
    """The message lost or duplicated, and the one its step names, is the head (``Ring(1)``), not
    the last one (``Knock``): its name and its parameters."""
    (tmp_path / "sender.yaml").write_text(
        "format: 1\nmachine: sender\nstates:\n  Ready: {initial: true}\n  Sent: {final: true}\n"
        "events:\n  Go: {}\nactions:\n  Ping: {params: {v: {type: int, min: 0, max: 1}}}\n  Pong: {}\n"
        "transitions:\n  - {from: Ready, on: Go, to: Sent, emit: [{action: Ping, args: {v: 1}}, Pong]}\n")
    (tmp_path / "sink.yaml").write_text(
        "format: 1\nmachine: sink\nstates:\n  Idle: {initial: true}\n"
        "events:\n  Ring: {params: {v: {type: int, min: 0, max: 1}}}\n  Knock: {}\n"
        "transitions:\n  - {from: Idle, on: Ring, to: Idle}\n  - {from: Idle, on: Knock, to: Idle}\n")
    (tmp_path / "faulty-system.yaml").write_text(
        "format: 1\nsystem: faulty\nmailbox: {capacity: 3}\n"
        "instances:\n  sender: {table: sender.yaml}\n  sink: {table: sink.yaml}\n"
        "links:\n  - {from: sender, action: Ping, to: sink, event: Ring}\n"
        "  - {from: sender, action: Pong, to: sink, event: Knock}\n"
        f"environment:\n  sender: [Go]\nfaults:\n  {fault}: {{instances: [sink], max: 1}}\n")
    system = load_system(tmp_path / "faulty-system.yaml")
    stepper = Stepper(system)
    [(_, sent, _)] = stepper.successors(initial_config(system))
    assert sent[1] == ((), (("Ring", (1,)), ("Knock", ())))
    found = [(label, config[1]) for label, config, _ in stepper.successors(sent) if label[0] == fault]
    assert found == [((fault, 1, "Ring", (1,), ()), ((), box))]


def chain(tmp_path: Path) -> System:
    """A chain of configurations: a counter from 0 to 9 that an environment event counts up."""
    (tmp_path / "up.yaml").write_text(
        "format: 1\nmachine: up\nvariables:\n  n: {type: int, min: 0, max: 9, init: 0}\n"
        "states:\n  On: {initial: true}\nevents:\n  Up: {}\n"
        "transitions:\n  - {from: On, on: Up, to: On, when: n < 9, set: {n: n + 1}}\n")
    (tmp_path / "up-system.yaml").write_text(
        "format: 1\nsystem: up\ninstances:\n  up: {table: up.yaml}\nenvironment:\n  up: [Up]\n")
    return load_system(tmp_path / "up-system.yaml")


def test_an_exploration_past_its_limit_says_how_far_it_got(tmp_path: Path, level_min: None) -> None:
    """The chain stopped past 3 configurations: 4 found, 3 steps, the last one 3 steps deep."""
    with pytest.raises(ExplorationLimit) as stopped:
        explore_system(chain(tmp_path), limit=3)
    assert (stopped.value.configurations, stopped.value.transitions, stopped.value.depth) == (4, 3, 3)


def test_a_search_to_a_depth_expands_only_the_configurations_that_deep(tmp_path: Path, level_min: None) -> None:
    """The chain to depth 1: the two configurations at most 1 step deep are expanded (the batches
    never run, they know no depth), which finds the one 2 steps deep."""
    ex = explore_system(chain(tmp_path), depth=1)
    assert [config[0][0][1] for config in ex.configs] == [(0,), (1,), (2,)]
    assert ex.out_degree == [1, 1]


def full_mailbox(tmp_path: Path) -> System:
    """A sender that sends ``Ring(1)`` and ``Knock`` to a sink whose mailbox holds one message, and
    which rejects ``Ring`` in ``Idle``."""
    (tmp_path / "sender.yaml").write_text(
        "format: 1\nmachine: sender\nstates:\n  Ready: {initial: true}\n  Sent: {final: true}\n"
        "events:\n  Go: {}\nactions:\n  Ping: {params: {v: {type: int, min: 0, max: 1}}}\n  Pong: {}\n"
        "transitions:\n  - {from: Ready, on: Go, to: Sent, emit: [{action: Ping, args: {v: 1}}, Pong]}\n")
    (tmp_path / "sink.yaml").write_text(
        "format: 1\nmachine: sink\nstates:\n  Idle: {initial: true}\n  Done: {}\n"
        "events:\n  Ring: {params: {v: {type: int, min: 0, max: 1}}}\n  Knock: {}\n"
        "transitions:\n  - {from: Idle, on: Knock, to: Done}\n  - {from: Done, on: Ring, to: Done}\n")
    (tmp_path / "full-system.yaml").write_text(
        "format: 1\nsystem: full\nmailbox: {capacity: 1}\n"
        "instances:\n  sender: {table: sender.yaml}\n  sink: {table: sink.yaml}\n"
        "links:\n  - {from: sender, action: Ping, to: sink, event: Ring}\n"
        "  - {from: sender, action: Pong, to: sink, event: Knock}\nenvironment:\n  sender: [Go]\n")
    return load_system(tmp_path / "full-system.yaml")


def test_a_findings_message_names_the_message_with_its_parameters_or_none(tmp_path: Path) -> None:
    """``Ring(1)`` rejected, ``Knock`` (no parameters: no parentheses) dropped by a full mailbox."""
    system = full_mailbox(tmp_path)
    stepper = Stepper(system)
    [(_, sent, went)] = stepper.successors(initial_config(system))
    assert [f.message for f in went.findings] == [
        "sink's mailbox (capacity 1) is full: Knock from sender is dropped"]
    [(_, _, taken)] = stepper.successors(sent)
    assert [f.message for f in taken.findings] == ["sink rejects Ring(1) in Idle"]


def test_an_exploration_keeps_the_first_finding_of_each_kind_with_its_step(tmp_path: Path, level_min: None) -> None:
    """Each kind's first finding, the configuration it was found in and the step, whether the
    scalar loop or the batches found it (they take it from the scalar step, word for word)."""
    ex = explore_system(full_mailbox(tmp_path))
    assert {kind: (node, label, finding.message) for kind, (node, label, finding) in ex.step_findings.items()} == {
        "mailbox-overflow": (0, ("env", 0, "Go", (), ()),
                             "sink's mailbox (capacity 1) is full: Knock from sender is dropped"),
        "unhandled-message": (1, ("deliver", 1, "Ring", (1,), ()), "sink rejects Ring(1) in Idle")}


def test_a_frontier_as_wide_as_the_threshold_goes_a_batch_at_a_time(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """``LEVEL_MIN`` is the narrowest frontier the batches take: the chain's frontiers of one
    configuration each, at a threshold of one."""
    monkeypatch.setattr(system_batched, "LEVEL_MIN", 1)
    runs = batch_runs(monkeypatch)
    explore_system(chain(tmp_path))
    assert runs


def test_a_walk_up_the_parents_that_loops_is_an_error_not_a_hang(tmp_path: Path) -> None:
    """The parents lead each configuration back to the initial one; parents that loop (a corrupted
    exploration) end the walk after one step per configuration, with an error."""
    ex = explore_system(chain(tmp_path))
    assert ex.path_to(3) == [0, 1, 2, 3]
    ex.parent[1] = 2
    with pytest.raises(ValueError, match="the parents of configuration 3 loop"):
        ex.path_to(3)
