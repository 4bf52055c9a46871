"""Partial-order reduction of systems: it finds every planted bug the full exploration finds, its
configurations are a subset of the full ones with equal safety verdicts on random systems,
its counterexamples replay to their violation, and the cycle proviso stops a reduced
exploration from ignoring an instance."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from agentfsm.spec.errors import TableError
from agentfsm.spec.scaled import loom_system
from agentfsm.spec.system_load import load_system
from agentfsm.spec.system_model import System
from agentfsm.verify.system import batched as system_batched
from agentfsm.verify.system.checks import SysVerdict, run_system_checks
from agentfsm.verify.system.explore import SystemExploration, explore_system
from agentfsm.verify.system.paths import replay
from agentfsm.verify.system.reduction import Reducer
from agentfsm.verify.system.replay import system_violations
from agentfsm.verify.system.step import Config, Stepper, initial_config
from agentfsm.verify.system.verify import verify_system
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from system_strategies import system_files
from test_system_verify import variant

from agentfsm.cli import main

ROOT = Path(__file__).resolve().parent.parent.parent
FIXTURES = Path(__file__).resolve().parent.parent / "systems"
LIVENESS = ("always-reachable", "no-cycle-within")
PLANTED = [*sorted((ROOT / "spec" / "systems").glob("*.yaml")), FIXTURES / "counter-race.yaml",
           FIXTURES / "pingpong-system.yaml", FIXTURES / "toggles-system.yaml", FIXTURES / "independent-system.yaml"]
# One system per dependency the reduction must respect: each is missed when its rule is dropped.
RULES = {"a guard reads what a step writes": "guarded-bell-system.yaml",
         "a message races a crash of its receiver": "crash-race-system.yaml",
         "a shared fault budget": "fault-budget-system.yaml",
         "an invariant reads a mailbox": "mailbox-watch-system.yaml"}


def safety(verdict: SysVerdict) -> list[tuple[str, str | None, bool]]:
    return [(c.kind, c.name, c.ok) for c in verdict.checks if c.kind not in LIVENESS]


def terminal(ex: SystemExploration) -> set[Config]:
    """The configurations with no step that changes them."""
    return {config for config, degree in zip(ex.configs, ex.out_degree, strict=True) if not degree}


def assert_same_safety_verdicts(system: System, symmetry: bool) -> tuple[int, int]:
    """Reduced against full: a subset of configurations, the same safety verdicts, and each reduced
    counterexample replays (to the violation it reports). (full, reduced) configuration counts."""
    full = run_system_checks(explore_system(system, symmetry))
    reduced = run_system_checks(explore_system(system, symmetry, reduction=True))
    assert set(reduced.exploration.configs) <= set(full.exploration.configs)
    assert safety(reduced) == safety(full)
    assert terminal(reduced.exploration) == terminal(full.exploration)  # stubborn sets keep every deadlock
    for check in reduced.checks:
        if check.ok or check.kind in LIVENESS:
            continue
        assert check.trace is not None
        found = system_violations(system, check.trace, replay(system, check.trace.steps))
        # A deadlock's trace ends where no step is possible; replay also counts failing steps.
        assert check.kind == "deadlock" or any(line.startswith(check.kind) for line in found), (check.kind, found)
    return len(full.exploration.configs), len(reduced.exploration.configs)


@pytest.mark.parametrize("path", PLANTED, ids=lambda p: p.stem)
@pytest.mark.parametrize("symmetry", [True, False])
def test_every_planted_bug_is_still_found(path: Path, symmetry: bool) -> None:
    assert_same_safety_verdicts(load_system(path), symmetry)


# The planted bugs tests/verify/test_system_verify.py writes as variants of the bundled systems.
VARIANTS = {"overflow": ("loom-with-tools.yaml", {"loom-agent.yaml, mailbox: 2": "loom-agent.yaml, mailbox: 1"}),
            "missing-fault-handling": ("vibework-with-user.yaml",
                                       {"invariants:": "faults:\n  crash: {instances: [sub], max: 1}\ninvariants:"})}


@pytest.mark.parametrize("name", VARIANTS)
def test_the_planted_variants_are_still_found(tmp_path: Path, name: str) -> None:
    source, replace = VARIANTS[name]
    system = variant(tmp_path, ROOT / "spec" / "systems" / source, replace)
    assert_same_safety_verdicts(system, symmetry=True)
    reduced = run_system_checks(explore_system(system, reduction=True))
    assert {c.kind for c in reduced.checks if not c.ok} & {"mailbox-overflow", "deadlock"}


@pytest.mark.parametrize("name", RULES.values(), ids=list(RULES))
def test_each_dependency_is_respected(name: str) -> None:
    system = load_system(FIXTURES / name)
    assert_same_safety_verdicts(system, symmetry=False)
    assert not verify_system(system).ok


def test_a_guard_that_reads_another_instance_keeps_it_in_the_set(tmp_path: Path) -> None:
    """The bell's guard reads the dial: with the invariant on the dial the bell's ring is invisible,
    and still it cannot go first alone (the dial's turn would disable it)."""
    text = (FIXTURES / "guarded-bell-system.yaml").read_text().replace("table: ", f"table: {FIXTURES}/")
    old = "{name: bell-quiet, expr: bell.state == Quiet}"
    assert old in text
    path = tmp_path / "dial-watched.yaml"
    path.write_text(text.replace(old, "{name: dial-unturned, expr: dial.state != S2}"))
    system = load_system(path)
    assert_same_safety_verdicts(system, symmetry=False)
    assert {c.name or c.kind for c in verify_system(system).checks if not c.ok} == {"dial-unturned", "deadlock"}


def test_independent_steps_are_explored_in_one_order() -> None:
    system = load_system(FIXTURES / "independent-system.yaml")
    full, reduced = assert_same_safety_verdicts(system, symmetry=False)
    assert (full, reduced) == (8, 4)
    failed = {c.name or c.kind for c in verify_system(system).checks if not c.ok}
    assert failed == {"c-stays-ready", "deadlock"}


def test_a_step_an_invariant_reads_is_never_postponed() -> None:
    """With the invariant on ``a`` instead, ``a``'s step is visible: the reduced set is ``b``'s or ``c``'s."""
    system = load_system(FIXTURES / "independent-system.yaml")
    reducer = Reducer(system)
    first = initial_config(system)
    chosen = reducer.reduce(first, list(Stepper(system).successors(first)), lambda _: True)
    assert [label[1] for label, _, _ in chosen] == [0]
    assert reducer.visible == {("st", 2)}


def reduced_without_proviso(system: System) -> set[Config]:
    """Breadth-first search expanding the reduced sets with the cycle proviso always satisfied."""
    stepper, reducer = Stepper(system), Reducer(system)
    seen = [initial_config(system)]
    known = set(seen)
    for config in seen:
        for _, nxt, _ in reducer.reduce(config, list(stepper.successors(config)), lambda _: True):
            if nxt not in known:
                known.add(nxt)
                seen.append(nxt)
    return known


def test_the_cycle_proviso_stops_ignoring_an_instance() -> None:
    """``ticker`` flips forever, invisibly; without the proviso ``watched`` is never expanded."""
    system = load_system(FIXTURES / "toggles-system.yaml")
    watched = system.instance("watched").index
    assert all(config[0][watched][0] == 0 for config in reduced_without_proviso(system))
    failed = {c.name or c.kind for c in verify_system(system).checks if not c.ok}
    assert failed == {"watched-stays-off"}


def test_liveness_properties_are_checked_on_the_full_graph() -> None:
    system = load_system(ROOT / "spec" / "systems" / "loom-with-tools.yaml")
    assert system.properties
    assert not verify_system(system).exploration.reduction


def test_verify_no_por_flag(capsys: pytest.CaptureFixture[str]) -> None:
    path = str(FIXTURES / "independent-system.yaml")
    assert main(["verify", "--json", "--no-symmetry", path]) == 1
    reduced = json.loads(capsys.readouterr().out)["systems"][0]
    assert main(["verify", "--json", "--no-symmetry", "--no-por", path]) == 1
    full = json.loads(capsys.readouterr().out)["systems"][0]
    assert (reduced["partial_order_reduction"], reduced["configurations"]) == (True, 4)
    assert (full["partial_order_reduction"], full["configurations"]) == (False, 8)
    assert [c["ok"] for c in reduced["checks"]] == [c["ok"] for c in full["checks"]]


@st.composite
def invariants(draw: st.DrawFn, path: Path) -> list[dict[str, str]]:
    """Up to three invariants ``INSTANCE.state != S`` over the random system at ``path``."""
    data: dict[str, Any] = json.loads(path.read_text())
    found: list[dict[str, str]] = []
    for _ in range(draw(st.integers(0, 3))):
        name = draw(st.sampled_from(sorted(data["instances"])))
        spec = data["instances"][name]
        table = json.loads((path.parent / spec["table"]).read_text())
        member = f"{name}[{draw(st.integers(0, spec['count'] - 1))}]" if "count" in spec else name
        state = draw(st.sampled_from(sorted(table["states"])))
        found.append({"name": f"inv{len(found)}", "expr": f"{member}.state != {state}"})
    return found


@settings(max_examples=80, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(st.data())
def test_random_systems_reduce_to_a_subset_with_equal_verdicts(data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = data.draw(system_files(Path(tmp)))
        system_data = json.loads(path.read_text())
        system_data["invariants"] = data.draw(invariants(path))
        system_data["properties"] = []
        # Fewer links and faults than system_files draws: instances that can step independently.
        system_data["links"] = system_data["links"][:data.draw(st.integers(0, len(system_data["links"])))]
        if data.draw(st.booleans()):
            system_data["faults"] = {}
        path.write_text(json.dumps(system_data))
        try:
            system = load_system(path)
        except TableError:
            assume(False)
            return
        for symmetry in (True, False):
            assert_same_safety_verdicts(system, symmetry)


def peers(tmp_path: Path, count: int) -> System:
    """``count`` independent peers, an invariant on the last: 2^count configurations, count + 1 reduced."""
    names = [f"p{k}" for k in range(count)]
    lines = ["format: 1", "system: peers", "instances:",
             *(f"  {n}: {{table: {FIXTURES / 'pingpong.yaml'}}}" for n in names),
             "environment:", *(f"  {n}: [Go]" for n in names),
             "invariants:", f"  - {{name: last-sends-once, expr: {names[-1]}.seq <= 1}}"]
    path = tmp_path / f"peers-{count}.yaml"
    path.write_text("\n".join(lines) + "\n")
    return load_system(path)


def batch_runs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the batch runs of the explorations that follow (one entry per run)."""
    runs: list[int] = []
    real = system_batched.batches

    def counted(system: System, symmetry: bool) -> Any:
        batches = real(system, symmetry)
        if batches is not None:
            run = batches.run

            def counting(*args: Any) -> Any:
                runs.append(1)
                return run(*args)

            monkeypatch.setattr(batches, "run", counting)
        return batches

    monkeypatch.setattr(system_batched, "batches", counted)
    return runs


def test_a_reduction_that_prunes_nothing_takes_the_batches(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """On the Loom system every stubborn set is the full set: the reduced exploration goes a batch
    at a time as the full one does, and is the full one."""
    system = loom_system(3, tmp_path)
    runs = batch_runs(monkeypatch)
    reduced = explore_system(system, symmetry=False, reduction=True)
    assert runs
    assert reduced.configs == explore_system(system, symmetry=False).configs
    assert_same_safety_verdicts(system, symmetry=False)


def test_a_reduction_that_prunes_stays_in_the_scalar_loop(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Full expansion is always allowed, but a batch expands every step, so once something was
    pruned the batches are not taken. Six dials turn one at a time (pruned), then the ping peer
    the invariant reads takes a Ping of one of three values: a frontier wide enough for a batch."""
    dials = [f"d{k}" for k in range(6)]
    lines = ["format: 1", "system: pings", "instances:", f"  p0: {{table: {FIXTURES / 'pingpong.yaml'}}}",
             *(f"  {n}: {{table: {FIXTURES / 'dial.yaml'}}}" for n in dials),
             "environment:", "  p0: [Ping]", *(f"  {n}: [Turn]" for n in dials),
             "invariants:", "  - {name: p0-got-small, expr: p0.got <= 2}"]
    path = tmp_path / "pings.yaml"
    path.write_text("\n".join(lines) + "\n")
    system = load_system(path)
    runs = batch_runs(monkeypatch)
    monkeypatch.setattr(system_batched, "LEVEL_MIN", 2)
    reduced = len(explore_system(system, symmetry=False, reduction=True).configs)
    assert not runs
    assert reduced < len(explore_system(system, symmetry=False).configs) == 3 ** 7
    assert runs
    assert_same_safety_verdicts(system, symmetry=False)
