"""The durable run's rules one by one (seed 003): journal contents, recovery, decisions."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from agentfsm.impl.durable.ledger import MemoryLedger, ledger_tools
from agentfsm.impl.durable.run import DurableRun, EffectCall, Options, StatusReply, Tool, repair_torn_tail
from agentfsm.impl.stores.journal import JSON, CorruptJournal, Store
from agentfsm.impl.stores.memory import Crash, MemoryStore
from agentfsm.impl.stores.sqlite import SqliteStore
from agentfsm.spec import Table, load_table
from crashed_runs import crash_before_completed

APPROVAL_TABLE = Path(__file__).parent.parent / "tables" / "approval-demo.yaml"


@pytest.fixture(scope="module")
def approval_table() -> Table:
    return load_table(APPROVAL_TABLE)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def start(table: Table, store: Store, ledger: MemoryLedger, status: bool = False, **options: object) -> DurableRun:
    return DurableRun.create(store, table, "r", ledger_tools(table, ledger, status), options=Options(**options))  # type: ignore[arg-type]


def reopen(table: Table, store: Store, ledger: MemoryLedger, status: bool = False, **options: object) -> DurableRun:
    return DurableRun.open(store, table, "r", ledger_tools(table, ledger, status), options=Options(**options))  # type: ignore[arg-type]


def kinds(store: Store) -> list[str]:
    return [r.kind for r in store.records("r")]


def to_tools(run: DurableRun) -> None:
    run.deliver("UserInput", event_id="1")
    run.deliver("LlmCompleted", {"tool_calls": 1}, event_id="2")


def test_started_is_durable_before_the_tool_runs_and_completed_after(loom: Table) -> None:
    store, ledger = MemoryStore(), MemoryLedger()
    run = start(loom, store, ledger)
    to_tools(run)
    assert kinds(store) == ["created", "step", "started", "completed", "step", "started", "completed"]
    step = store.records("r")[4]
    assert step.body["prev"]["state"] == "CallingLlm" and step.body["next"]["state"] == "ExecutingTools"
    assert step.body["effects"] == [{"key": "r/5/0", "action": "ExecuteTools", "call_id": 0, "idempotent": False}]
    assert "row 4" in step.body["reason"] and step.body["event_id"] == "2"
    assert ledger.executions() == {"r/2/0": 1, "r/5/0": 1}


def test_an_interrupted_non_idempotent_effect_becomes_a_decision_never_a_rerun(loom: Table) -> None:
    store, ledger = MemoryStore(), MemoryLedger()
    run = start(loom, store, ledger)
    run.deliver("UserInput", event_id="1")
    crash_before_completed(store, lambda: run.deliver("LlmCompleted", {"tool_calls": 1}, event_id="2"))
    assert ledger.executions()["r/5/0"] == 1
    again = reopen(loom, store, ledger)
    assert ledger.executions()["r/5/0"] == 1
    assert kinds(store)[-1] == "unknown"
    [decision] = again.decisions()
    assert decision.kind == "unknown-effect" and decision.id == "r/5/0"
    again.decide("r/5/0", "completed", {"note": "checked by hand"})
    assert again.st.effects["r/5/0"].status == "completed" and not again.decisions()
    assert reopen(loom, store, ledger).st.effects["r/5/0"].via == "user"


def test_the_user_may_decide_to_rerun_with_the_same_key(loom: Table) -> None:
    store, ledger = MemoryStore(), MemoryLedger()
    start(loom, store, ledger).deliver("UserInput", event_id="1")
    run = DurableRun.attach(store, loom, "r", ledger_tools(loom, ledger, False))
    crash_before_completed(store, lambda: run.deliver("LlmCompleted", {"tool_calls": 1}, event_id="2"))
    again = reopen(loom, store, ledger)
    again.decide("r/5/0", "rerun")
    assert ledger.executions()["r/5/0"] == 2 and again.st.effects["r/5/0"].attempts == 2


def test_a_status_query_resolves_an_unknown_effect(loom: Table) -> None:
    store, ledger = MemoryStore(), MemoryLedger()
    run = start(loom, store, ledger, status=True)
    run.deliver("UserInput", event_id="1")
    crash_before_completed(store, lambda: run.deliver("LlmCompleted", {"tool_calls": 1}, event_id="2"))
    again = reopen(loom, store, ledger, status=True)
    effect = again.st.effects["r/5/0"]
    assert (effect.status, effect.via, effect.result) == ("completed", "status",
                                                          {"action": "ExecuteTools", "receipt": "r/5/0"})
    assert ledger.executions()["r/5/0"] == 1 and not again.decisions()


def test_a_status_query_saying_not_run_makes_recovery_run_the_effect(loom: Table) -> None:
    """Started, then a crash before the tool ran: a non-idempotent effect whose tool answers
    "not-run" is run by recovery (without the status query it would be left to the user)."""
    store, ledger = MemoryStore(), MemoryLedger()
    run = start(loom, store, ledger, status=True)
    run.deliver("UserInput", event_id="1")
    store.arm(4)   # before step, after step, before started, after started: ExecuteTools has not run
    with pytest.raises(Crash, match="after started"):
        run.deliver("LlmCompleted", {"tool_calls": 1}, event_id="2")
    store.arm(None)
    assert "r/5/0" not in ledger.executions()
    again = reopen(loom, store, ledger, status=True)
    effect = again.st.effects["r/5/0"]
    assert (effect.status, effect.via, effect.idempotent) == ("completed", "run", False)
    assert ledger.executions()["r/5/0"] == 1 and not again.decisions()
    assert kinds(store)[-3:] == ["unknown", "started", "completed"]


def test_an_idempotent_effect_is_retried_with_the_same_key(loom: Table) -> None:
    store, ledger = MemoryStore(), MemoryLedger()
    run = start(loom, store, ledger)
    store.arm(4)   # before step, after step, before started, after started: SendLlmRequest has not run
    with pytest.raises(Crash, match="after started"):
        run.deliver("UserInput", event_id="1")
    store.arm(None)
    again = reopen(loom, store, ledger)
    assert kinds(store)[-3:] == ["unknown", "started", "completed"]
    retry = store.records("r")[-2]
    assert retry.body == {"key": "r/2/0", "attempt": 2, "retry": True}
    assert ledger.executions() == {"r/2/0": 1} and again.st.effects["r/2/0"].status == "completed"


def test_an_effect_never_started_is_run_by_recovery(loom: Table) -> None:
    store, ledger = MemoryStore(), MemoryLedger()
    run = start(loom, store, ledger)
    run.deliver("UserInput", event_id="1")
    store.arm(2)
    with pytest.raises(Crash, match="after step"):
        run.deliver("LlmCompleted", {"tool_calls": 1}, event_id="2")
    store.arm(None)
    assert "r/5/0" not in ledger.executions()
    again = reopen(loom, store, ledger)
    assert ledger.executions()["r/5/0"] == 1 and again.st.effects["r/5/0"].status == "completed"
    assert again.deliver("LlmCompleted", {"tool_calls": 1}, event_id="2").status == "duplicate"


class Noted:
    """A tool that notes the key of every call it is asked to run or to query."""

    def __init__(self, tool: Tool, calls: list[str]) -> None:
        self.tool, self.calls = tool, calls

    def run(self, call: EffectCall) -> JSON:
        self.calls.append(call.key)
        return self.tool.run(call)

    def status(self, call: EffectCall) -> StatusReply | None:
        self.calls.append(call.key)
        return self.tool.status(call)


def test_completed_results_are_reused_and_terminal_runs_do_nothing(loom: Table) -> None:
    store, ledger = MemoryStore(), MemoryLedger()
    run = start(loom, store, ledger)
    to_tools(run)
    # A live run reopened: its completed effects (the read-only LLM request among them) are
    # reused as journaled, none run again (an idempotent tool would not show a second run in
    # its ledger: the tools note every call).
    records, calls = kinds(store), list[str]()
    live = DurableRun.open(store, loom, "r", {name: Noted(tool, calls) for name, tool in
                                              ledger_tools(loom, ledger, False).items()})
    assert kinds(store) == records and calls == [] and ledger.executions() == {"r/2/0": 1, "r/5/0": 1}
    assert {k: (e.status, e.result) for k, e in live.st.effects.items()} == {
        "r/2/0": ("completed", {"action": "SendLlmRequest", "receipt": "r/2/0"}),
        "r/5/0": ("completed", {"action": "ExecuteTools", "receipt": "r/5/0"})}
    run.deliver("ShutdownRequested", event_id="3")
    version, before = store.version("r"), ledger.executions()
    again = reopen(loom, store, ledger)
    assert again.terminal and store.version("r") == version and ledger.executions() == before
    assert again.st.effects["r/5/0"].result == {"action": "ExecuteTools", "receipt": "r/5/0"}
    stale = again.deliver("UserInput", event_id="4")
    assert stale.status == "stale" and not stale.accepted and kinds(store)[-1] == "stale"


def test_pending_approvals_survive_restarts_and_their_lifetime_is_revalidated(approval_table: Table) -> None:
    clock, store, ledger = Clock(), MemoryStore(), MemoryLedger()
    run = start(approval_table, store, ledger, approvals={"AskApproval": 60.0}, clock=clock)
    run.deliver("Request", event_id="1")
    [approval] = run.pending_approvals
    assert approval.expires_at == 1060.0
    clock.now = 1030.0
    again = reopen(approval_table, store, ledger, approvals={"AskApproval": 60.0}, clock=clock)
    assert [a.id for a in again.pending_approvals] == [approval.id] and not again.decisions()
    clock.now = 1100.0
    late = reopen(approval_table, store, ledger, approvals={"AskApproval": 60.0}, clock=clock)
    assert kinds(store)[-1] == "approval-expired"
    assert [d.kind for d in late.decisions()] == ["approval-expired"]
    assert late.pending_approvals[0].expired
    late.deliver("Approve", event_id="2")
    assert not late.pending_approvals and late.state == "Running"


def test_an_illegal_event_is_an_anomaly_that_stops_automatic_progress_under_halt(loom: Table) -> None:
    halting = dataclasses.replace(loom, unhandled=dataclasses.replace(loom.unhandled, anomaly="halt"))
    store, ledger = MemoryStore(), MemoryLedger()
    run = start(halting, store, ledger)
    rejected = run.deliver("ToolCompleted", {"mutating": False}, event_id="1")
    assert rejected.status == "rejected" and kinds(store)[-1] == "anomaly"
    assert run.deliver("UserInput", event_id="2").status == "halted"
    assert kinds(reopen(halting, store, ledger).store)[-1] == "anomaly"
    again = reopen(halting, store, ledger)
    assert [d.kind for d in again.decisions()] == ["anomaly"]
    again.decide("", "continue")
    assert again.deliver("UserInput", event_id="2").status == "fired"


def test_the_loom_table_logs_an_illegal_event_and_goes_on(loom: Table) -> None:
    """Seed 000: "Invalid transitions log a warning and return WaitForInput" (``anomaly: log``):
    the anomaly is journaled, nothing halts, and a restart sees no decision to make."""
    assert loom.unhandled.anomaly == "log"
    store, ledger = MemoryStore(), MemoryLedger()
    run = start(loom, store, ledger)
    rejected = run.deliver("ToolCompleted", {"mutating": False}, event_id="1")
    assert rejected.status == "rejected" and rejected.actions == ("WaitForInput",)
    assert kinds(store)[-1] == "anomaly"
    assert run.deliver("UserInput", event_id="2").status == "fired" and run.state == "CallingLlm"
    assert run.deliver("UserInput", event_id="3").status == "rejected"  # a UserInput while streaming
    again = reopen(loom, store, ledger)
    assert again.decisions() == [] and again.state == "CallingLlm"


def test_a_stale_writer_reloads_and_applies_its_event_to_the_new_state(loom: Table) -> None:
    store, ledger = MemoryStore(), MemoryLedger()
    to_tools(start(loom, store, ledger))
    completion = DurableRun.attach(store, loom, "r", ledger_tools(loom, ledger, False))
    cancel = DurableRun.attach(store, loom, "r", ledger_tools(loom, ledger, False))
    assert cancel.deliver("ShutdownRequested", event_id="cancel").state == "ShuttingDown"
    late = completion.deliver("ToolCompleted", {"mutating": False}, event_id="done")
    assert late.status == "stale" and completion.state == "ShuttingDown"
    assert [r.seq for r in store.records("r")] == list(range(1, store.version("r") + 1))


def test_recovery_starts_from_the_newest_snapshot(loom: Table) -> None:
    store, ledger = MemoryStore(), MemoryLedger()
    run = start(loom, store, ledger, snapshot_every=3)
    to_tools(run)
    run.deliver("ToolCompleted", {"mutating": True}, event_id="3")
    loaded = store.load("r")
    assert loaded.snapshot is not None and loaded.snapshot.seq >= store.version("r") - 2
    again = reopen(loom, store, ledger, snapshot_every=3)
    full = DurableRun.attach(store.clone(), loom, "r", ledger_tools(loom, ledger, False))
    assert again.st.to_json(loom) == full.st.to_json(loom)
    assert again.state == "PostToolsHook"


def test_a_torn_tail_is_refused_until_repaired_explicitly(loom: Table, tmp_path: Path) -> None:
    store, ledger = MemoryStore(), MemoryLedger()
    run = start(loom, store, ledger)
    store.arm(1, tear=True)
    with pytest.raises(Crash):
        run.deliver("UserInput", event_id="1")
    store.arm(None)
    with pytest.raises(CorruptJournal, match="torn tail at sequence 2"):
        reopen(loom, store, ledger)
    assert repair_torn_tail(store, "r") == 2
    assert kinds(store) == ["created", "repaired"]
    assert reopen(loom, store, ledger).deliver("UserInput", event_id="1").status == "fired"
    assert repair_torn_tail(store, "r") is None


def test_sqlite_run_survives_reopening(loom: Table, tmp_path: Path) -> None:
    ledger = MemoryLedger()
    to_tools(start(loom, SqliteStore(tmp_path / "j.db"), ledger))
    again = reopen(loom, SqliteStore(tmp_path / "j.db"), ledger)
    assert again.state == "ExecutingTools" and again.version == 7
    assert again.deliver("ToolCompleted", {"mutating": False}, event_id="3").state == "CallingLlm"
