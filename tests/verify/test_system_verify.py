"""System exploration: symmetry, planted bugs with their exact shortest counterexamples, the
durable run protocol's defects pinned, and replay of traces."""

from __future__ import annotations

from pathlib import Path

import pytest
from agentfsm.spec.scaled import loom_system
from agentfsm.spec.system_load import load_system
from agentfsm.spec.system_model import System
from agentfsm.spec.system_trace import label_text
from agentfsm.verify.system.checks import SysCheck, run_system_checks
from agentfsm.verify.system.explore import explore_system
from agentfsm.verify.system.paths import replay
from agentfsm.verify.system.step import Config, canonicalizer

ROOT = Path(__file__).resolve().parent.parent.parent
SYSTEMS = ROOT / "spec" / "systems"
FIXTURES = Path(__file__).resolve().parent.parent / "systems"


def failing(system: System, symmetry: bool = True) -> dict[str, SysCheck]:
    verdict = run_system_checks(explore_system(system, symmetry))
    return {(c.name or c.kind): c for c in verdict.checks if not c.ok}


def story(system: System, check: SysCheck) -> list[str]:
    assert check.trace is not None
    return [label_text(system, label) for label in check.trace.steps]


def variant(tmp_path: Path, source: Path, replace: dict[str, str]) -> System:
    """A copy of a system file with some text replaced, its table paths made absolute."""
    text = source.read_text()
    for old, new in replace.items():
        assert old in text, old
        text = text.replace(old, new)
    for name in ("../", "tables/"):
        text = text.replace(f"table: {name}", f"table: {source.parent}/{name}")
    path = tmp_path / source.name
    path.write_text(text)
    return load_system(path)


def test_bundled_systems_verify_and_the_old_protocol_fails() -> None:
    for name in ("loom-with-tools", "vibework-with-user", "durable-run-fixed", "temporal-run"):
        assert failing(load_system(SYSTEMS / f"{name}.yaml")) == {}, name
    for name in ("sqlite", "pool"):
        broken = failing(load_system(SYSTEMS / f"durable-run-as-it-was-{name}.yaml"))
        assert set(broken) == {"tool-runs-at-most-once", "not-run-answers-hold", "reruns-terminate",
                               "claims-terminate"}, name


UNFENCED = {f'{{event: Act, when: "server.open and server.attempt == worker[{w}].task"}}': "Act" for w in (0, 1)}


def test_temporal_run_without_the_stale_attempt_fence_runs_the_tool_twice(tmp_path: Path) -> None:
    """Without AttemptStale, a worker stopped before its check resumes after the operator's `rerun`
    has run the tool and runs it again; the check alone stops it."""
    system = variant(tmp_path, SYSTEMS / "temporal-run.yaml", UNFENCED)
    found = failing(system)
    assert set(found) == {"tool-runs-at-most-once"}
    steps = story(system, found["tool-runs-at-most-once"])
    assert "fault: worker[0] stalls" in steps and "environment -> workflow: DecideRerun(ran=false)" in steps
    assert steps[-3:] == ["worker[0] wakes", "environment -> worker[0]: Act", "tool takes Run(who=0, token=1)"]


def test_temporal_run_a_fencing_tool_alone_also_holds(tmp_path: Path) -> None:
    """Without the check, a tool whose status query fences still refuses the stale attempt's call:
    the check is what guards the tools that do not fence."""
    fencing_only = {**UNFENCED, "    - Begin\n": "    - {event: Begin, params: {query: [true], fences: [true]}}\n"}
    assert failing(variant(tmp_path, SYSTEMS / "temporal-run.yaml", fencing_only)) == {}


def test_symmetry_counts_with_and_without() -> None:
    system = load_system(SYSTEMS / "loom-with-tools.yaml")
    reduced, full = explore_system(system, symmetry=True), explore_system(system, symmetry=False)
    assert (len(reduced.configs), len(full.configs)) == (262, 406)
    canonical = canonicalizer(system, True)
    assert set(reduced.configs) == {canonical(c) for c in full.configs}


@pytest.mark.parametrize("count", [3, 4])
def test_symmetry_quotient_with_more_calls(tmp_path: Path, count: int) -> None:
    system = loom_system(count, tmp_path)
    reduced, full = explore_system(system, symmetry=True), explore_system(system, symmetry=False)
    canonical = canonicalizer(system, True)
    assert set(reduced.configs) == {canonical(c) for c in full.configs}
    assert len(reduced.configs) < len(full.configs)
    assert failing(system) == {} and failing(system, symmetry=False) == {}


def test_planted_lost_message_deadlocks() -> None:
    system = load_system(FIXTURES / "pingpong-system.yaml")
    found = failing(system)
    assert set(found) == {"deadlock", "left-can-always-go-on"}
    assert story(system, found["deadlock"]) == ["environment -> left: Go", "fault: Ping(n=1) to right is lost"]
    assert found["deadlock"].message == "no step is possible while left, right not final"


def test_planted_race_loses_an_update() -> None:
    system = load_system(FIXTURES / "counter-race.yaml")
    found = failing(system)
    assert set(found) == {"no-lost-update"}
    assert story(system, found["no-lost-update"]) == [
        "environment -> inc[0]: Go", "environment -> inc[1]: Go", "counter takes Read(who=0)",
        "inc[0] takes Value(v=0)", "counter takes Read(who=1)", "inc[1] takes Value(v=0)",
        "counter takes Write(v=1)", "counter takes Write(v=1)"]


def test_planted_overflow(tmp_path: Path) -> None:
    system = variant(tmp_path, SYSTEMS / "loom-with-tools.yaml",
                     {"loom-agent.yaml, mailbox: 2": "loom-agent.yaml, mailbox: 1"})
    found = failing(system)
    assert set(found) == {"mailbox-overflow"}
    assert story(system, found["mailbox-overflow"]) == [
        "environment -> agent: UserInput", "environment -> agent: LlmCompleted(tool_calls=2)",
        "call[0] takes Execute", "environment -> call[0]: Finished(mutating=false)", "call[1] takes Execute",
        "environment -> call[1]: Finished(mutating=false)"]
    assert "agent's mailbox (capacity 1) is full: ToolCompleted(false) from call[1] is dropped" \
        in found["mailbox-overflow"].message


def test_planted_missing_fault_handling(tmp_path: Path) -> None:
    """A sub-agent that crashes (its Start lost with its mailbox) never reports: the agent waits forever."""
    system = variant(tmp_path, SYSTEMS / "vibework-with-user.yaml",
                     {"invariants:": "faults:\n  crash: {instances: [sub], max: 1}\ninvariants:"})
    found = failing(system)
    assert set(found) == {"agent-can-always-settle", "deadlock"}
    assert story(system, found["agent-can-always-settle"]) == [
        "environment -> agent: UserInput", "environment -> agent: SubAgentSpawned", "fault: sub crashes and restarts"]


SQLITE_RERUN = [  # defect 1: two resumers, the second finds the running tool unknown and reruns it
    "environment -> worker[0]: Resume", "store takes Claim(who=0)", "worker[0] takes Granted(token=0, journal=0)",
    "environment -> worker[1]: Resume", "store takes WriteStarted(who=0, token=0)", "worker[0] takes Ack",
    "environment -> worker[0]: Proceed", "store takes Claim(who=1)", "worker[1] takes Granted(token=0, journal=1)",
    "environment -> worker[1]: DecideRerun", "tool takes Run(who=0, token=0)", "tool takes Run(who=1, token=0)"]


def test_durable_protocol_as_it_was_defects() -> None:
    sqlite = load_system(SYSTEMS / "durable-run-as-it-was-sqlite.yaml")
    assert story(sqlite, failing(sqlite)["tool-runs-at-most-once"]) == SQLITE_RERUN

    pool = load_system(SYSTEMS / "durable-run-as-it-was-pool.yaml")
    found = failing(pool)
    # defect 3: `not run` trusted while a stalled worker can still act
    stalled = story(pool, found["not-run-answers-hold"])
    assert stalled == [
        "environment -> worker[0]: Resume", "store takes Claim(who=0)", "worker[0] takes Granted(token=0, journal=0)",
        "environment -> worker[1]: Resume", "store takes WriteStarted(who=0, token=0)", "worker[0] takes Ack",
        "fault: worker[0] stalls", "environment -> store: Expire", "store takes Claim(who=1)",
        "worker[1] takes Granted(token=0, journal=1)", "environment -> worker[1]: AskStatus",
        "tool takes Status(who=1, token=0)", "worker[1] takes StatusNotRun", "tool takes Run(who=1, token=0)",
        "worker[0] wakes", "environment -> worker[0]: Proceed", "tool takes Run(who=0, token=0)"]
    # defect 2: the tool outlives every lease; each claim re-runs it and its completion is refused, forever
    loop = found["reruns-terminate"]
    assert loop.trace is not None and loop.trace.loop_start is not None
    cycle = story(pool, loop)[loop.trace.loop_start:]
    assert cycle.count("environment -> store: Expire") == 2
    assert [s for s in cycle if s.startswith("tool takes Run")] == ["tool takes Run(who=0, token=0)",
                                                                     "tool takes Run(who=1, token=0)"]
    assert sum(s.endswith("takes Rejected") for s in cycle) == 2
    steps = replay(pool, loop.trace.steps)
    start = steps[loop.trace.loop_start - 1][1]
    assert steps[-1][1] == start  # the cycle closes: back where it began


def test_durable_protocol_fixed_runs_the_tool() -> None:
    system = load_system(SYSTEMS / "durable-run-fixed.yaml")
    ex = explore_system(system)
    tool = system.instance("tool")
    runs = {config[0][tool.index][1][2] for config in ex.configs}
    assert runs == {0, 1}
    store = system.instance("store")
    states = {store.table.states[config[0][store.index][0]].name for config in ex.configs}
    assert states == {"Open", "Finished", "Blocked"}


def test_replay_reaches_the_counterexample_configuration() -> None:
    system = load_system(FIXTURES / "counter-race.yaml")
    ex = explore_system(system, symmetry=False)
    check = failing(system, symmetry=False)["no-lost-update"]
    assert check.trace is not None
    end: Config = replay(system, check.trace.steps)[-1][1]
    assert end in set(ex.configs)
    inst = system.instance("counter")
    assert end[0][inst.index][1] == (1,)
