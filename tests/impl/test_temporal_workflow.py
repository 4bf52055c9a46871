"""The table workflow on a real Temporal dev server, with a worker in this process: a script ends
as the durable runtime ends it, and an effect's lost outcome takes the table's unknown path
(status query, else the operator's decision; never a retry), a failure is known, an approval
expires by a workflow timer, an interrupt cancels the attempt, a start's pinned version holds, an
attempt the server does not hold refuses to act."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from agentfsm.faults.temporal_chaos import LOOM_EVENTS
from agentfsm.impl.durable.ledger import LedgerTool, MemoryLedger, ledger_tools
from agentfsm.impl.durable.run import DurableRun, EffectCall, StatusReply
from agentfsm.impl.script import EventScript, load_script
from agentfsm.impl.stores.journal import JSON
from agentfsm.impl.stores.memory import MemoryStore
from agentfsm.impl.temporal.client import decide, interrupt, pending, send_event, start_message, start_run
from agentfsm.impl.temporal.messages import EventMessage, StartRun, Timeouts
from agentfsm.spec import load_table
from conftest import ROOT
from temporal_support import executions, in_process_worker, queue, until_async

TOOL_CALL = ROOT / "spec" / "tool-call.yaml"
CALL: list[tuple[str, Mapping[str, Any]]] = [
    ("ArgumentsValid", {"ask_user": False, "takes_key": False}), ("Started", {}), ("Completed", {}),
    ("ResultRecorded", {}), ("ResultReturned", {})]
QUICK = Timeouts(start_to_close=2.0, heartbeat=1.0, status_query=10.0)


def scripts() -> list[tuple[str, list[tuple[str, Mapping[str, Any]]]]]:
    """Every bundled table with an event script: the demos, and a Loom turn with tools."""
    found: list[tuple[str, list[tuple[str, Mapping[str, Any]]]]] = [("loom-agent", list(LOOM_EVENTS))]
    for table in ("tool-call", "vibework-agent", "explorer-evaluator"):
        script = load_script(ROOT / "examples" / f"{table}-demo.yaml")
        assert isinstance(script, EventScript)
        found.append((table, [(name, dict(params)) for name, params in script.events]))
    return found


def start_of(path: Path, run_id: str, events: Sequence[tuple[str, Mapping[str, Any]]], until_idle: bool = True,
             timeouts: Timeouts = QUICK, **lifetimes: float) -> StartRun:
    text = path.read_text(encoding="utf-8")
    messages = [EventMessage(name, dict(params), f"script-{n}") for n, (name, params) in enumerate(events, 1)]
    return start_message(run_id, path, text, {}, messages, until_idle, timeouts, dict(lifetimes))


def on_temporal(address: str, start: StartRun, factory: Any) -> dict[str, Any]:
    async def main() -> dict[str, Any]:
        task_queue = queue()
        async with in_process_worker(address, task_queue, factory) as client:
            handle = await start_run(client, task_queue, start, load_table(ROOT / "spec" / start.file).machine)
            result: dict[str, Any] = await handle.result()
            return result
    return asyncio.run(main())


def shape(records: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """What two journals of one run must share (not the clock)."""
    return [(r["kind"], r["body"].get("event"), r["body"].get("next"), r["body"].get("key"),
             r["body"].get("outcome")) for r in records]


@pytest.mark.parametrize(("machine", "events"), scripts(), ids=[name for name, _ in scripts()])
def test_a_script_ends_as_the_durable_runtime_ends_it(temporal_address: str, machine: str,
                                                      events: list[tuple[str, Mapping[str, Any]]]) -> None:
    path = ROOT / "spec" / f"{machine}.yaml"
    table = load_table(path)
    on_ledger = MemoryLedger()
    result = on_temporal(temporal_address, start_of(path, f"{machine}-1", events),
                         lambda t: ledger_tools(t, on_ledger, False))
    in_ledger = MemoryLedger()
    store = MemoryStore()
    run = DurableRun.create(store, table, f"{machine}-1", ledger_tools(table, in_ledger, False))
    for n, (name, params) in enumerate(events, 1):
        run.deliver(name, params, f"script-{n}")
    assert (result["state"], result["vars"]) == (run.state, run.vars)
    assert shape(result["records"]) == shape([{"kind": r.kind, "body": r.body} for r in store.records(run.run_id)])
    assert on_ledger.executions() == in_ledger.executions() and sum(in_ledger.executions().values()) > 0
    assert result["table_hash"] and not result["notes"]


def test_a_run_past_its_history_bound_continues_as_new_with_its_journal(temporal_address: str) -> None:
    """A Loom turn's 8 events with a bound of 12 history events: the run continues as new several times,
    each execution's history ends within one step of the bound, and it ends as the durable runtime does,
    its journal whole (carried from one execution to the next), its effects each run once."""
    path = ROOT / "spec" / "loom-agent.yaml"
    table = load_table(path)
    start = start_of(path, f"bounded-{queue()}", LOOM_EVENTS)
    start.history_bound = 12
    on_ledger = MemoryLedger()
    on_temporal(temporal_address, start, lambda t: ledger_tools(t, on_ledger, False))
    histories, result = executions(temporal_address, start.run_id)
    assert len(histories) >= 3 and all(len(events) <= 12 + 12 for events in histories), [len(h) for h in histories]
    store = MemoryStore()
    run = DurableRun.create(store, table, start.run_id, ledger_tools(table, MemoryLedger(), False))
    for n, (name, params) in enumerate(LOOM_EVENTS, 1):
        run.deliver(name, params, f"script-{n}")
    assert (result["state"], result["vars"]) == (run.state, run.vars)
    assert shape(result["records"]) == shape([{"kind": r.kind, "body": r.body} for r in store.records(run.run_id)])
    assert set(on_ledger.executions().values()) == {1}


class Raising:
    def run(self, call: EffectCall) -> JSON:
        raise OSError("the service said no")

    def status(self, call: EffectCall) -> StatusReply | None:
        return None


def test_a_tool_that_raises_is_a_known_failure_not_retried(temporal_address: str) -> None:
    calls = []

    class Counting(Raising):
        def run(self, call: EffectCall) -> JSON:
            calls.append(call.key)
            return super().run(call)
    result = on_temporal(temporal_address, start_of(TOOL_CALL, "raising-1", CALL[:2]),
                         lambda t: {"InvokeTool": Counting()})
    [effect] = result["effects"]
    assert effect["status"] == "failed" and "the service said no" in effect["result"]["error"]
    assert calls == ["raising-1/3/0"]


class Hanging:
    """A ledger tool whose first attempt acts, then hangs (its worker heartbeats on: only the
    start-to-close timeout ends it); ``release`` lets the hung thread go at the end."""

    def __init__(self, ledger: MemoryLedger, has_status: bool = False) -> None:
        self.inner = LedgerTool(ledger, False, has_status)
        self.fences = True
        self.release = threading.Event()

    def run(self, call: EffectCall) -> JSON:
        result = self.inner.run(call)
        if call.attempt == 1:
            self.release.wait(60)
        return result

    def status(self, call: EffectCall) -> StatusReply | None:
        self.release.set()   # the hung attempt's outcome is lost by now: let its thread go
        return self.inner.status(call)


def test_an_attempt_that_times_out_is_unknown_until_the_operator_decides(temporal_address: str) -> None:
    ledger = MemoryLedger()
    tool = Hanging(ledger)
    factory: Any = lambda t: {"InvokeTool": tool}  # noqa: E731

    async def main() -> tuple[list[dict[str, Any]], int, dict[str, Any]]:
        task_queue = queue()
        async with in_process_worker(temporal_address, task_queue, factory) as client:
            handle = await start_run(client, task_queue, start_of(TOOL_CALL, "hang-1", CALL[:2]), "tool-call")
            decisions = await until_async(lambda: pending(handle), what="the unknown effect's decision")
            before = ledger.executions()["hang-1/3/0"]
            tool.release.set()
            await decide(handle, "hang-1/3/0", "rerun")
            return decisions, before, await handle.result()
    decisions, before, result = asyncio.run(main())
    assert [d["kind"] for d in decisions] == ["unknown-effect"] and decisions[0]["id"] == "hang-1/3/0"
    assert "timed out" in next(r for r in result["records"] if r["kind"] == "unknown")["body"]["reason"]
    assert before == 1                                       # acted once, then lost: not retried
    assert ledger.executions()["hang-1/3/0"] == 2            # once more, on the operator's word
    assert [e["status"] for e in result["effects"]] == ["completed"]


def test_a_status_query_settles_an_unknown_effect_without_a_decision(temporal_address: str) -> None:
    ledger = MemoryLedger()
    tool = Hanging(ledger, has_status=True)
    try:
        result = on_temporal(temporal_address, start_of(TOOL_CALL, "status-1", CALL[:2]),
                             lambda t: {"InvokeTool": tool})
    finally:
        tool.release.set()
    [effect] = result["effects"]
    assert (effect["status"], effect["via"]) == ("completed", "status")
    assert ledger.executions()["status-1/3/0"] == 1


def test_an_approval_expires_by_a_workflow_timer(temporal_address: str) -> None:
    events = [("ArgumentsValid", {"ask_user": True, "takes_key": False})]

    async def main() -> tuple[list[dict[str, Any]], dict[str, Any]]:
        task_queue = queue()
        async with in_process_worker(temporal_address, task_queue, lambda t: ledger_tools(t, MemoryLedger(),
                                                                                           False)) as client:
            start = start_of(TOOL_CALL, "approval-1", events, until_idle=False, RequestApproval=0.5)
            handle = await start_run(client, task_queue, start, "tool-call")
            decisions = await until_async(lambda: pending(handle), what="the approval's expiry")
            await send_event(handle, EventMessage("CancelRequested"))
            await send_event(handle, EventMessage("ResultReturned"))
            return decisions, await handle.result()
    decisions, result = asyncio.run(main())
    assert [(d["kind"], d["id"]) for d in decisions] == [("approval-expired", "approval-1/2/0")]
    assert [r["kind"] for r in result["records"]].count("approval-expired") == 1
    assert result["state"] == "Returned" and result["approvals"] == []


def test_an_interrupt_cancels_the_attempt_and_settles_it_failed(temporal_address: str) -> None:
    ledger = MemoryLedger()
    tool = Hanging(ledger)
    slow = Timeouts(start_to_close=60.0, heartbeat=5.0, status_query=10.0)

    async def main() -> dict[str, Any]:
        task_queue = queue()
        async with in_process_worker(temporal_address, task_queue, lambda t: {"InvokeTool": tool}) as client:
            handle = await start_run(client, task_queue, start_of(TOOL_CALL, "stop-1", CALL[:2], timeouts=slow),
                                     "tool-call")
            await until_async(lambda: asyncio.to_thread(lambda: ledger.executions()["stop-1/3/0"]),
                              what="the tool's start")
            await interrupt(handle, "the user pressed Ctrl-C")
            result: dict[str, Any] = await handle.result()
            tool.release.set()
            return result
    try:
        result = asyncio.run(main())
    finally:
        tool.release.set()
    kinds = [r["kind"] for r in result["records"]]
    assert kinds.index("interrupt") < kinds.index("unknown") < len(kinds) - 1
    [effect] = result["effects"]
    assert (effect["status"], effect["via"]) == ("failed", "interrupt")
    assert ledger.executions()["stop-1/3/0"] == 1


def test_a_start_whose_text_is_not_its_pinned_version_is_refused(temporal_address: str) -> None:
    from temporalio.client import WorkflowFailureError
    start = start_of(TOOL_CALL, "pinned-1", CALL)
    pinned = start.table_hash
    start.table_text += "\n# changed after the hash was taken\n"
    with pytest.raises(WorkflowFailureError) as caught:
        on_temporal(temporal_address, start, lambda t: ledger_tools(t, MemoryLedger(), False))
    message = str(caught.value.cause)
    from agentfsm.impl.temporal.messages import table_hash
    assert pinned[:16] in message and table_hash(start.table_text)[:16] in message




def test_an_attempt_the_server_does_not_hold_refuses_to_act(temporal_address: str) -> None:
    """The perform activity asks the server, right before its tool acts, whether it still holds the
    attempt: one it does not know (here a task token no server issued; in the kill scenarios one
    that timed out) refuses, ``AttemptStale``, and the tool never runs."""
    from agentfsm.impl.temporal.activities import ATTEMPT_STALE, EffectActivities
    from agentfsm.impl.temporal.messages import EffectTask, table_hash
    from agentfsm.impl.temporal.worker import connect
    from temporalio.exceptions import ApplicationError
    from temporalio.testing import ActivityEnvironment

    ledger = MemoryLedger()
    activities = EffectActivities(lambda table: ledger_tools(table, ledger, False))
    text = TOOL_CALL.read_text(encoding="utf-8")
    task = EffectTask(text, table_hash(text), str(TOOL_CALL), {}, "stale-1", "InvokeTool", "stale-1/3/0", 1, 1)

    async def main() -> ApplicationError:
        environment = ActivityEnvironment(client=await connect(temporal_address))
        with pytest.raises(ApplicationError) as refused:
            await environment.run(activities.perform, task)
        return refused.value
    refused = asyncio.run(main())
    assert refused.type == ATTEMPT_STALE and "refused to act" in refused.message
    assert not ledger.executions()
