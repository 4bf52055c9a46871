"""The batch system explorer against the scalar loop: the same SystemExploration (configurations,
numbering, parents, edges and their labels, out-degrees, first findings) and the same verdicts
and traces, on every bundled and test system and on hypothesis systems, with symmetry on and
off, the batches forced from the first configuration and at the shipped threshold."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from agentfsm.spec.scaled import loom_system
from agentfsm.spec.system_load import load_system
from agentfsm.spec.system_model import System
from agentfsm.verify.kernel import visited
from agentfsm.verify.system import batched as system_batched
from agentfsm.verify.system import rows as system_rows
from agentfsm.verify.system.checks import run_system_checks
from agentfsm.verify.system.explore import SystemExploration, explore_system
from agentfsm.verify.system.step import canonicalizer
from agentfsm.verify.table.explore import ExplorationLimit
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from system_strategies import drawn_system

ROOT = Path(__file__).resolve().parent.parent.parent
SYSTEMS = sorted((ROOT / "spec" / "systems").glob("*.yaml")) + [
    ROOT / "tests" / "systems" / name for name in ("pingpong-system.yaml", "counter-race.yaml")]
SHIPPED = system_batched.LEVEL_MIN


def scalar(system: System, symmetry: bool) -> SystemExploration:
    saved = system_batched.LEVEL_MIN
    system_batched.LEVEL_MIN = None
    try:
        return explore_system(system, symmetry)
    finally:
        system_batched.LEVEL_MIN = saved


def shape(ex: SystemExploration) -> tuple[Any, ...]:
    return (ex.symmetry, ex.configs, ex.parent, ex.edges_src, ex.edges_dst, ex.edges_label, ex.out_degree,
            ex.step_findings)


def assert_same(system: System, symmetry: bool, verdicts: bool = True) -> SystemExploration:
    expected = scalar(system, symmetry)
    got = explore_system(system, symmetry)
    assert shape(got) == shape(expected)
    if verdicts:
        assert run_system_checks(got).checks == run_system_checks(expected).checks
    return got


# (LEVEL_MIN, LEVEL_LOW, DENSE_CODES, WORD, PREFIX): batches from the first configuration, with the
# hash-table visited set and keys chained over several words; and the shipped switch.
SWITCHES = [(0, 1, 0, 30, 16), (SHIPPED, system_batched.LEVEL_LOW, visited.DENSE_CODES, system_rows.WORD,
                                system_rows.PREFIX)]


@pytest.fixture(params=SWITCHES, ids=["forced", "shipped"])
def switch(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    level_min, level_low, dense, word, prefix = request.param
    monkeypatch.setattr(system_batched, "LEVEL_MIN", level_min)
    monkeypatch.setattr(system_batched, "LEVEL_LOW", level_low)
    monkeypatch.setattr(visited, "DENSE_CODES", dense)
    monkeypatch.setattr(visited, "DENSE_MAX", visited.DENSE_MAX if dense else 0)
    monkeypatch.setattr(system_rows, "WORD", word)
    monkeypatch.setattr(system_rows, "PREFIX", prefix)
    yield


@pytest.mark.parametrize("symmetry", [True, False], ids=["symmetry", "full"])
@pytest.mark.parametrize("path", SYSTEMS, ids=[p.stem for p in SYSTEMS])
def test_batches_equal_the_scalar_loop_on_every_system(path: Path, symmetry: bool, switch: None) -> None:
    system = load_system(path)
    assert system_batched.batches(system, symmetry) is not None   # the array path is taken, not skipped
    assert_same(system, symmetry)


# Every fault kind, a link to any one member (a choice in the label), a guarded environment
# event, a full mailbox (the agent's holds one message) and a message its target rejects (a
# duplicated Execute reaching a running call).
CORNERS = (('to: "call[*]", event: Execute', 'to: "call[any]", event: Execute'),
           ("mailbox: 2, set:", "mailbox: 1, set:"),
           ("count: 2, passive: true}", "count: 2, passive: true, mailbox: 2}"),
           ("    - UserInput\n", '    - {event: UserInput, when: "agent.mailbox == 0 or all(call[*], not stalled)"}\n'),
           ('  crash: {instances: ["call[*]"], max: 1}\n',
            '  crash: {instances: ["call[*]"], max: 1}\n  lose: {instances: [agent], max: 1}\n'
            '  duplicate: {instances: ["call[*]"], max: 1}\n  stall: {instances: ["call[*]"], max: 1}\n'))


@pytest.mark.parametrize("symmetry", [True, False], ids=["symmetry", "full"])
def test_every_step_kind_and_finding_of_messages_is_the_same(tmp_path: Path, symmetry: bool, switch: None) -> None:
    system = loom_system(2, tmp_path, CORNERS)
    ex = assert_same(system, symmetry)
    assert {label[0] for label in ex.edges_label} == {"env", "deliver", "crash", "lose", "duplicate", "stall", "wake"}
    assert any(label[4] for label in ex.edges_label)
    assert {"mailbox-overflow", "unhandled-message"} <= set(ex.step_findings)


@pytest.mark.parametrize("calls", [3, pytest.param(4, marks=pytest.mark.slow)])
def test_loom_with_more_calls_is_the_same_and_symmetry_sorts_as_the_canonicalizer(tmp_path: Path, calls: int) -> None:
    system = loom_system(calls, tmp_path)
    full = assert_same(system, False, verdicts=False)
    assert_same(system, True, verdicts=False)
    batches = system_batched.batches(system, True)
    assert batches is not None
    layout = batches.levels.layout
    rows = np.array([layout.encode(c) for c in full.configs], dtype=np.int64)
    canonical = canonicalizer(system, True)
    assert layout.decode(batches.levels.canonical(rows)) == [canonical(c) for c in full.configs]
    assert layout.decode(rows) == full.configs


def test_the_limit_stops_the_batches(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(system_batched, "LEVEL_MIN", 0)
    with pytest.raises(ExplorationLimit, match="more than 500 configurations"):
        explore_system(loom_system(3, tmp_path), symmetry=False, limit=500)


def test_keys_never_collide_when_prefix_numbers_run_out(monkeypatch: pytest.MonkeyPatch) -> None:
    system = load_system(ROOT / "spec" / "systems" / "durable-run-fixed.yaml")
    monkeypatch.setattr(system_batched, "LEVEL_MIN", 0)
    monkeypatch.setattr(system_rows, "PREFIX", 4)
    with pytest.raises(OverflowError, match="more than 2\\*\\*4 distinct key prefixes"):
        explore_system(system)


def test_a_system_with_too_many_messages_for_the_arrays_is_explored_by_the_scalar_loop(
        monkeypatch: pytest.MonkeyPatch) -> None:
    system = load_system(ROOT / "tests" / "systems" / "pingpong-system.yaml")
    monkeypatch.setattr(system_rows, "MAX_MESSAGES", 1)
    assert system_batched.batches(system, True) is None
    monkeypatch.setattr(system_batched, "LEVEL_MIN", 0)
    assert shape(explore_system(system)) == shape(scalar(system, True))


@settings(max_examples=30, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data(), st.booleans())
def test_batches_equal_the_scalar_loop_on_random_systems(data: st.DataObject, symmetry: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        system = drawn_system(data, Path(tmp))
        saved = system_batched.LEVEL_MIN, system_batched.LEVEL_LOW
        system_batched.LEVEL_MIN, system_batched.LEVEL_LOW = 0, 1
        try:
            assert system_batched.batches(system, symmetry) is not None
            assert_same(system, symmetry)
        finally:
            system_batched.LEVEL_MIN, system_batched.LEVEL_LOW = saved


def test_two_kinds_of_error_from_one_local_state_in_one_batch_are_both_found(tmp_path: Path, switch: None) -> None:
    """The sink is ``Idle`` in both configurations of the second level, one with a ``Ring`` at the
    head of its mailbox (taking it breaks a bound), the other with a ``Knock`` (two rows enabled):
    the batch keeps the first configuration of each kind, not of each local state."""
    (tmp_path / "sender.yaml").write_text(
        "format: 1\nmachine: sender\nstates:\n  Ready: {initial: true}\n  Sent: {final: true}\n"
        "events:\n  GoRing: {}\n  GoKnock: {}\nactions:\n  Ping: {}\n  Pong: {}\n"
        "transitions:\n  - {from: Ready, on: GoRing, to: Sent, emit: [Ping]}\n"
        "  - {from: Ready, on: GoKnock, to: Sent, emit: [Pong]}\n")
    (tmp_path / "sink.yaml").write_text(
        "format: 1\nmachine: sink\nvariables:\n  n: {type: int, min: 0, max: 1, init: 0}\n"
        "states:\n  Idle: {initial: true}\nevents:\n  Ring: {}\n  Knock: {}\n"
        "transitions:\n  - {from: Idle, on: Ring, to: Idle, set: {n: n + 2}}\n"
        "  - {from: Idle, on: Knock, to: Idle}\n  - {from: Idle, on: Knock, to: Idle, set: {n: 1}}\n")
    (tmp_path / "errors-system.yaml").write_text(
        "format: 1\nsystem: errors\ninstances:\n  sender: {table: sender.yaml}\n  sink: {table: sink.yaml}\n"
        "links:\n  - {from: sender, action: Ping, to: sink, event: Ring}\n"
        "  - {from: sender, action: Pong, to: sink, event: Knock}\nenvironment:\n  sender: [GoRing, GoKnock]\n")
    system = load_system(tmp_path / "errors-system.yaml")
    assert system_batched.batches(system, False) is not None
    ex = assert_same(system, False)
    assert {kind: node for kind, (node, _, _) in ex.step_findings.items()} == {"bounds": 1, "determinism": 2}


@pytest.mark.parametrize("symmetry", [True, False], ids=["symmetry", "full"])
def test_a_frontier_cut_into_several_batches_is_explored_the_same(tmp_path: Path, symmetry: bool, switch: None,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """``BATCH`` bounds the rows of one batch: a wider frontier goes in several, in order, and the
    numbering by first occurrence carries over from one to the next."""
    monkeypatch.setattr(system_batched, "BATCH", 3)
    assert_same(loom_system(2, tmp_path, CORNERS), symmetry)


def test_deliveries_with_a_choice_of_target_keep_the_scalar_order(tmp_path: Path, switch: None) -> None:
    """In one configuration the relay takes ``Go`` and rings either bell (two steps, one per choice)
    and the door takes its ``Ring``: the successors are numbered in the scalar order, the relay's
    two steps before the door's, not by choice first."""
    (tmp_path / "starter.yaml").write_text(
        "format: 1\nmachine: starter\nstates:\n  Ready: {initial: true}\n  Done: {final: true}\n"
        "events:\n  Start: {}\nactions:\n  Go: {}\n  Poke: {}\n"
        "transitions:\n  - {from: Ready, on: Start, to: Done, emit: [Go, Poke]}\n")
    (tmp_path / "relay.yaml").write_text(
        "format: 1\nmachine: relay\nstates:\n  Idle: {initial: true}\n  Sent: {final: true}\n"
        "events:\n  Go: {}\nactions:\n  Ping: {}\ntransitions:\n  - {from: Idle, on: Go, to: Sent, emit: [Ping]}\n")
    bell = ROOT / "tests" / "systems" / "bell.yaml"
    (tmp_path / "relay-system.yaml").write_text(
        f"format: 1\nsystem: relay\ninstances:\n  starter: {{table: starter.yaml}}\n  relay: {{table: relay.yaml}}\n"
        f"  door: {{table: {bell}}}\n  bell: {{table: {bell}, count: 2}}\n"
        "links:\n  - {from: starter, action: Go, to: relay, event: Go}\n"
        "  - {from: starter, action: Poke, to: door, event: Ring}\n"
        "  - {from: relay, action: Ping, to: 'bell[any]', event: Ring}\nenvironment:\n  starter: [Start]\n")
    system = load_system(tmp_path / "relay-system.yaml")
    assert system_batched.batches(system, False) is not None
    ex = assert_same(system, False)
    assert [ex.edges_label[k] for k in range(len(ex.edges_src)) if ex.edges_src[k] == 1] == [
        ("deliver", 1, "Go", (), (3,)), ("deliver", 1, "Go", (), (4,)), ("deliver", 2, "Ring", (), ())]


@pytest.mark.parametrize(("top", "arrays"), [(16383, True), (32767, False)], ids=["63-bits", "64-bits"])
def test_a_group_whose_members_sort_keys_pass_63_bits_is_left_to_the_scalar_loop(
        tmp_path: Path, top: int, arrays: bool, switch: None) -> None:
    """Under symmetry a member's sort key is its local code (a counter of ``top + 1`` values: 14 or
    15 bits), its 16 mailbox slots (4 messages: 3 bits each) and its stalled bit: 63 bits sort
    exactly as int64s; 64 would put a member counted up to 16384 below one at 16383, so those
    batches are not taken."""
    (tmp_path / "counter.yaml").write_text(
        f"format: 1\nmachine: counter\nvariables:\n  n: {{type: int, min: 0, max: {top}, init: 16382}}\n"
        "states:\n  On: {initial: true}\nevents:\n  Up: {}\n  Ring: {params: {v: {type: int, min: 0, max: 3}}}\n"
        f"transitions:\n  - {{from: On, on: Up, to: On, when: n < {min(top, 16384)}, set: {{n: n + 1}}}}\n")
    (tmp_path / "sender.yaml").write_text(
        "format: 1\nmachine: sender\nstates:\n  Ready: {initial: true}\nevents:\n  Go: {}\n"
        "actions:\n  Ping: {params: {v: {type: int, min: 0, max: 3}}}\n"
        "transitions:\n  - {from: Ready, on: Go, to: Ready, emit: [{action: Ping, args: {v: 0}}]}\n")
    (tmp_path / "counters-system.yaml").write_text(
        "format: 1\nsystem: counters\ninstances:\n  sender: {table: sender.yaml}\n"
        "  counter: {table: counter.yaml, count: 2, mailbox: 16}\n"
        "links:\n  - {from: sender, action: Ping, to: 'counter[*]', event: Ring, params: {v: v}}\n"
        "environment:\n  'counter[*]': [Up]\n")
    system = load_system(tmp_path / "counters-system.yaml")
    assert (system_batched.batches(system, True) is not None) is arrays
    ex = assert_same(system, True)
    assert len(ex.configs) == (3 if arrays else 6)   # each counter at 16382 to 16383, or to 16384


def test_a_batch_whose_every_successor_needs_its_members_swapped_is_sorted(tmp_path: Path, switch: None,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Two members in ``X`` and ``Y`` (states in the order W, X, Y, Z): one steps up to ``Z``, the
    other down to ``W``, so each successor has its members out of order; with a batch of one
    configuration, no successor of that batch is in order before the sort."""
    (tmp_path / "swap.yaml").write_text(
        "format: 1\nmachine: swap\nstates:\n  W: {}\n  X: {}\n  Y: {}\n  Z: {}\n  I: {initial: true}\n"
        "events:\n  A: {}\n  B: {}\n  Go: {}\n"
        "transitions:\n  - {from: I, on: A, to: X}\n  - {from: I, on: B, to: Y}\n"
        "  - {from: X, on: Go, to: Z}\n  - {from: Y, on: Go, to: W}\n")
    (tmp_path / "swap-system.yaml").write_text(
        "format: 1\nsystem: swap\ninstances:\n  m: {table: swap.yaml, count: 2}\n"
        "environment:\n  'm[*]': [A, B, Go]\n")
    monkeypatch.setattr(system_batched, "BATCH", 1)
    system = load_system(tmp_path / "swap-system.yaml")
    assert system_batched.batches(system, True) is not None
    states = [[inst[0] for inst in config[0]] for config in assert_same(system, True).configs]
    assert [1, 2] in states and [2, 3] in states and [0, 1] in states   # (X, Y), then (Y, Z) and (W, X), sorted


def sender_and_sink(tmp_path: Path, top: int) -> System:
    """One link whose action carries ``v`` in 0..top: top + 1 possible messages."""
    (tmp_path / "talker.yaml").write_text(
        "format: 1\nmachine: talker\nstates:\n  Ready: {initial: true}\n  Said: {final: true}\n"
        f"events:\n  Talk: {{}}\nactions:\n  Say:\n    params: {{v: {{type: int, min: 0, max: {top}}}}}\n"
        "transitions:\n  - {from: Ready, on: Talk, to: Said, emit: [{action: Say, args: {v: 0}}]}\n")
    (tmp_path / "ear.yaml").write_text(
        "format: 1\nmachine: ear\nstates:\n  Idle: {initial: true}\n"
        f"events:\n  Hear:\n    params: {{v: {{type: int, min: 0, max: {top}}}}}\n"
        "transitions:\n  - {from: Idle, on: Hear, to: Idle}\n")
    (tmp_path / "talk-system.yaml").write_text(
        "format: 1\nsystem: talk\ninstances:\n  talker: {table: talker.yaml}\n  ear: {table: ear.yaml}\n"
        "links:\n  - {from: talker, action: Say, to: ear, event: Hear}\nenvironment:\n  talker: [Talk]\n")
    return load_system(tmp_path / "talk-system.yaml")


@pytest.mark.parametrize(("top", "arrays"), [(32767, True), (32768, False)], ids=["32768", "32769"])
def test_up_to_32768_possible_messages_the_batches_take_the_system(tmp_path: Path, top: int, arrays: bool) -> None:
    """The documented limit (docs/verifier.md): a system with more than 32,768 possible linked
    messages is left to the scalar loop; one with exactly 32,768 is not."""
    system = sender_and_sink(tmp_path, top)
    found = system_rows.messages(system)
    assert (found is not None) == arrays
    if found is not None:
        assert found == [("Hear", (v,)) for v in range(top + 1)]
    assert (system_batched.batches(system, False) is not None) == arrays


def test_variables_not_from_zero_and_booleans_decode_as_the_scalar_loop_has_them(tmp_path: Path,
                                                                                 switch: None) -> None:
    """A level in 3..6 and a lamp (a boolean) in a linked instance: the rows hold codes from 0, and
    decode back to the same values, of the same types (True, not 1), as the scalar loop's."""
    (tmp_path / "pusher.yaml").write_text(
        "format: 1\nmachine: pusher\nvariables:\n  left: {type: int, min: 0, max: 3, init: 3}\n"
        "states:\n  Ready: {initial: true}\nevents:\n  Push: {}\nactions:\n  Bump: {}\n"
        "transitions:\n  - {from: Ready, on: Push, to: Ready, when: left > 0, set: {left: left - 1}, emit: [Bump]}\n")
    (tmp_path / "meter.yaml").write_text(
        "format: 1\nmachine: meter\nvariables:\n  level: {type: int, min: 3, max: 6, init: 3}\n"
        "  lit: {type: bool, init: false}\nstates:\n  On: {initial: true}\nevents:\n  Bump: {}\n"
        "transitions:\n  - {from: On, on: Bump, to: On, set: {level: level + 1, lit: not lit}}\n")
    (tmp_path / "meter-system.yaml").write_text(
        "format: 1\nsystem: meter\ninstances:\n  pusher: {table: pusher.yaml}\n  meter: {table: meter.yaml}\n"
        "mailbox: {capacity: 2}\nlinks:\n  - {from: pusher, action: Bump, to: meter, event: Bump}\n"
        "environment:\n  pusher: [Push]\n")
    system = load_system(tmp_path / "meter-system.yaml")
    assert system_batched.batches(system, False) is not None
    ex = assert_same(system, False)
    assert repr(shape(ex)) == repr(shape(scalar(system, False)))
    assert {conf[0][1][1] for conf in ex.configs} == {(level, level % 2 == 0) for level in range(3, 7)}


def test_exactly_two_to_the_prefix_bits_prefixes_fit(monkeypatch: pytest.MonkeyPatch) -> None:
    """With 6-bit key words and 2-bit prefix numbers the crash race's keys chain over two words
    whose leading one takes exactly 4 distinct values: numbers 0 to 3 hold them all, so the batches
    explore it (the same as the scalar loop) rather than stop at an overflow one prefix early."""
    system = load_system(ROOT / "tests" / "systems" / "crash-race-system.yaml")
    monkeypatch.setattr(system_batched, "LEVEL_MIN", 0)
    monkeypatch.setattr(system_batched, "LEVEL_LOW", 1)
    monkeypatch.setattr(system_rows, "WORD", 6)
    monkeypatch.setattr(system_rows, "PREFIX", 2)
    made = system_batched.batches(system, False)
    assert made is not None and len(made.levels.layout.words) == 2
    assert_same(system, False)
