"""The tool-call runner (seed 003) run durably: the journal is the trace, and a resumed call goes on
as the table says (``Interrupted``, ``OperatorResolved``, ``ApprovalExpired``).

A crash is a journal left as a killed process leaves it: the steps delivered, the last
execution's ``started`` durable, nothing after; a fresh runner then resumes it.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from agent_runs import run
from agentfsm.impl.agents.prompts import ScriptedPermissions
from agentfsm.impl.agents.tool_call import ToolCallRunner
from agentfsm.impl.agents.tools import ToolResult
from agentfsm.impl.driver import Envelope
from agentfsm.impl.durable.driver import DurableLink
from agentfsm.impl.durable.run import DurableRun, Options, Report
from agentfsm.impl.llm.client import ToolCall
from agentfsm.impl.stores.memory import MemoryStore
from agentfsm.spec import Table, load_table
from agentfsm.spec.expr import Value
from conftest import ROOT, SPEC, run_cli

READ = ToolCall("c1", "read_file", json.dumps({"path": "a"}))
WRITE = ToolCall("c1", "write_file", json.dumps({"path": "out", "content": "once\n"}))
KEYED = {"ask_user": False, "takes_key": True}
UNKEYED = {"ask_user": True, "takes_key": False}
Steps = Sequence[tuple[str, Mapping[str, Value]]]


@pytest.fixture(scope="module")
def trace() -> Table:
    return load_table(SPEC / "tool-call.yaml")


def runner(trace: Table, workdir: Path, call: ToolCall, *verdicts: str) -> ToolCallRunner:
    r = ToolCallRunner(trace, workdir, ScriptedPermissions(verdicts),  # type: ignore[arg-type]
                       allow=("read_file",))
    r.call = call
    return r


def crashed(trace: Table, workdir: Path, call: ToolCall, steps: Steps, *, start: bool = False,
            clock: float = 0.0) -> MemoryStore:
    """The journal a process killed after ``steps`` leaves (with the last execution started if ``start``)."""
    store = MemoryStore()
    r = runner(trace, workdir, call)
    link = DurableLink.create(r, r, store, "r", Options(clock=lambda: clock))
    for event, params in steps:
        link.run.deliver(event, params, calls=r.effect_calls(Envelope(event, params)))
    if start:
        link.run.begin(max(link.run.st.effects.values(), key=lambda e: e.seq).key)
    return store


def resume(trace: Table, workdir: Path, call: ToolCall, store: MemoryStore, *verdicts: str,
           decisions: Mapping[str, str] | None = None, clock: float = 0.0) -> tuple[ToolCallRunner, DurableRun]:
    r = runner(trace, workdir, call, *verdicts)
    link = DurableLink.open(r, r, store, "r", True, decisions, Options(clock=lambda: clock))
    run(r.run(call, link))
    return r, link.run


def events(r: ToolCallRunner) -> list[str]:
    return [c.event for c in r.history]


def test_the_journal_is_the_trace(trace: Table, tmp_path: Path) -> None:
    (tmp_path / "a").write_text("alpha")
    r = runner(trace, tmp_path, READ)
    link = DurableLink.create(r, r, MemoryStore(), "r")
    assert run(r.run(READ, link)).content == "alpha"
    assert r.journal == [] and r.status()["journal"] == ["completed r/3/c1 #1"]
    assert link.run.terminal and link.run.decisions() == []


def test_a_keyed_call_interrupted_is_retried_with_the_same_key(trace: Table, tmp_path: Path) -> None:
    (tmp_path / "a").write_text("alpha")
    store = crashed(trace, tmp_path, READ, [("ArgumentsValid", KEYED), ("Started", {})], start=True)
    r, resumed = resume(trace, tmp_path, READ, store)
    assert events(r) == ["Interrupted", "StatusUnavailable", "Completed", "ResultRecorded", "ResultReturned"]
    assert r.result is not None and r.result.content == "alpha"
    first = resumed.st.effects["r/3/c1"]
    assert (first.status, first.via) == ("completed", "retry"), "the retry's outcome is the original's"
    assert resumed.terminal and resumed.decisions() == []


def test_an_unkeyed_call_interrupted_halts_for_the_operator(trace: Table, tmp_path: Path) -> None:
    steps = [("ArgumentsValid", UNKEYED), ("ApprovalGranted", {}), ("Started", {})]
    store = crashed(trace, tmp_path, WRITE, steps, start=True)
    r, resumed = resume(trace, tmp_path, WRITE, store)
    assert events(r) == ["Interrupted", "StatusUnavailable"] and r.state() == "Halted"
    assert [d.id for d in resumed.decisions()] == ["r/4/c1"] and not (tmp_path / "out").exists()


@pytest.mark.parametrize(("decision", "state", "written"), [
    ("completed", "Completed", False), ("failed", "Failed", False), ("rerun", "Completed", True)])
def test_the_operators_decision_is_operator_resolved(trace: Table, tmp_path: Path, decision: str, state: str,
                                                     written: bool) -> None:
    steps = [("ArgumentsValid", UNKEYED), ("ApprovalGranted", {}), ("Started", {})]
    store = crashed(trace, tmp_path, WRITE, steps, start=True)
    resume(trace, tmp_path, WRITE, store)
    r, resumed = resume(trace, tmp_path, WRITE, store, decisions={"r/4/c1": decision})
    assert r.history[0].event == "OperatorResolved" and r.history[0].state == state
    assert r.state() == "Returned" and resumed.terminal and resumed.decisions() == []
    assert (tmp_path / "out").exists() is written, "only a rerun runs the tool again"


def test_a_decision_before_the_table_halted_is_found_by_the_status_query(trace: Table, tmp_path: Path) -> None:
    steps = [("ArgumentsValid", UNKEYED), ("ApprovalGranted", {}), ("Started", {})]
    store = crashed(trace, tmp_path, WRITE, steps, start=True)
    DurableRun.open(store, trace, "r", {a.name: _NoStatus() for a in trace.actions if a.effect == "external"})
    r, resumed = resume(trace, tmp_path, WRITE, store, decisions={"r/4/c1": "failed"})
    assert events(r)[:2] == ["Interrupted", "StatusFailed"] and r.state() == "Returned" and resumed.terminal


@pytest.mark.parametrize(("now", "expected"), [
    (100.0, ["Started", "Completed", "ResultRecorded", "ResultReturned"]),
    (3601.0, ["ApprovalExpired", "ApprovalGranted", "Started", "Completed", "ResultRecorded", "ResultReturned"])])
def test_a_granted_approval_not_yet_started_is_revalidated(trace: Table, tmp_path: Path, now: float,
                                                          expected: list[str]) -> None:
    """The approval asked at time 0 lives an hour (the table's RequestApproval lifetime)."""
    store = crashed(trace, tmp_path, WRITE, [("ArgumentsValid", UNKEYED), ("ApprovalGranted", {})])
    r, _ = resume(trace, tmp_path, WRITE, store, "grant", clock=now)
    assert events(r) == expected and (tmp_path / "out").read_text() == "once\n"


def test_a_pending_approval_is_asked_again(trace: Table, tmp_path: Path) -> None:
    store = crashed(trace, tmp_path, WRITE, [("ArgumentsValid", UNKEYED)])
    r, _ = resume(trace, tmp_path, WRITE, store, "deny")
    assert events(r) == ["ApprovalDenied", "ResultReturned"] and not (tmp_path / "out").exists()


def test_an_outcome_journaled_but_not_recorded_is_recorded_from_the_journal(trace: Table, tmp_path: Path) -> None:
    (tmp_path / "a").write_text("alpha")
    r = runner(trace, tmp_path, READ)
    store = MemoryStore()
    link = DurableLink.create(r, r, store, "r")
    link.run.deliver("ArgumentsValid", KEYED)
    link.run.deliver("Started", calls=r.effect_calls(Envelope("Started")))
    key = link.run.begin("r/3/c1")
    assert key is not None
    link.step(Envelope("Completed", payload=ToolResult("c1", "read_file", "alpha", False),
                       effect=Report("r/3/c1", "completed", {"content": "alpha", "is_error": False})))
    again, resumed = resume(trace, tmp_path, READ, store)
    assert events(again) == ["ResultRecorded", "ResultReturned"] and again.result is not None
    assert again.result.content == "alpha" and resumed.terminal


def test_a_timed_out_execution_is_unknown_at_once(trace: Table, tmp_path: Path) -> None:
    r = ToolCallRunner(trace, tmp_path, ScriptedPermissions(["grant"]), settings={"call_timeout": 0.2})
    call = ToolCall("c1", "run_command", json.dumps({"argv": ["sleep", "5"]}))
    r.call = call
    link = DurableLink.create(r, r, MemoryStore(), "r", Options(clock=time.time))
    run(r.run(call, link))
    assert r.state() == "Halted" and [d.kind for d in link.run.decisions()] == ["unknown-effect"]


class _NoStatus:
    def run(self, call: object) -> None:
        raise AssertionError("recovery runs no tool here")

    def status(self, call: object) -> None:
        return None



def test_the_cli_halts_for_the_operator_and_resumes_with_the_verdict(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """The bundled demo's last call outlives call_timeout unkeyed: a decision; --decide settles it."""
    shutil.copytree(ROOT / "examples" / "demo-workdir", tmp_path / "w")
    argv = ["run", str(SPEC / "tool-call.yaml"), "--script", str(ROOT / "examples" / "tool-call-agent.yaml"),
            "--workdir", str(tmp_path / "w"), "--json", "--store", str(tmp_path / "j.db")]
    code, out, _ = run_cli(argv, capsys)
    decisions = [json.loads(line)["text"] for line in out.splitlines() if '"kind": "decision"' in line]
    assert code == 1 and len(decisions) == 1 and "run/call-5/" in decisions[0]
    key = decisions[0].split(":")[0].split()[-1]
    code, out, _ = run_cli([*argv, "--resume", "--decide", f"{key}=failed"], capsys)
    steps = [json.loads(line) for line in out.splitlines() if '"kind": "step"' in line]
    assert code == 0 and (steps[0]["event"], steps[0]["state"]) == ("OperatorResolved", "Failed")
    assert "run_command: Returned: failed (no output kept)" in out
