"""Versions: a run pins its table's content hash and carries its text, so a worker whose table
file changed serves the old run with the old version (and new runs with the new one), never a
nondeterminism error mid-run; checked with Temporal's replayer on recorded histories, one of
them committed (tests/temporal_histories/, recorded by running this file:
``PYTHONPATH=tests .venv/bin/python tests/impl/test_temporal_versions.py ADDRESS``), so a change of the workflow's
code that would break runs under way fails here."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

from agentfsm.impl.durable.ledger import MemoryLedger, ledger_tools
from agentfsm.impl.temporal.client import config, decide, pending, send_event, start_message, start_run
from agentfsm.impl.temporal.messages import EventMessage, Timeouts, table_hash
from agentfsm.impl.temporal.worker import replayer
from conftest import ROOT
from temporal_support import in_process_worker, queue, until_async
from temporalio.client import WorkflowHistory

TOOL_CALL = ROOT / "spec" / "tool-call.yaml"
RECORDED = Path(__file__).resolve().parent.parent / "temporal_histories" / "tool-call-unknown-rerun.json"
# Version 2 of the table: a call that fails is recorded as Returned at once (one row changed).
CHANGED = TOOL_CALL.read_text(encoding="utf-8").replace(
    "{from: Running, on: Failed, to: Failed, set: {outcome_known: true}, emit: [RecordResult]}",
    "{from: Running, on: Failed, to: Returned, set: {outcome_known: true}}")


def test_the_changed_table_is_another_version() -> None:
    assert TOOL_CALL.read_text(encoding="utf-8") != CHANGED


def test_a_run_keeps_its_version_when_the_worker_s_table_changes(temporal_address: str, tmp_path: Path) -> None:
    """Started on version 1; its worker stops halfway; a worker whose table is version 2 carries it
    on by version 1 (Failed, not Returned), and starts new runs by version 2; both histories replay."""
    old_text = TOOL_CALL.read_text(encoding="utf-8")
    (tmp_path / "tool-call.yaml").write_text(CHANGED, encoding="utf-8")
    task_queue = queue()
    opening = [EventMessage("ArgumentsValid", {"ask_user": False, "takes_key": False}, "e1"),
               EventMessage("Started", {}, "e2")]

    async def main() -> tuple[dict[str, Any], dict[str, Any], list[WorkflowHistory]]:
        async with in_process_worker(temporal_address, task_queue, lambda t: ledger_tools(t, MemoryLedger(),
                                                                                           False)) as client:
            old = await start_run(client, task_queue, start_message(f"v1-{task_queue}", TOOL_CALL, old_text, {},
                                                                      opening, False), "tool-call")
            await until_async(lambda: _in(old, "Running"), what="version 1 halfway")
        async with in_process_worker(temporal_address, task_queue, lambda t: ledger_tools(t, MemoryLedger(),
                                                                                           False)) as client:
            new = await start_run(client, task_queue, start_message(f"v2-{task_queue}", tmp_path / "tool-call.yaml",
                                                                      CHANGED, {}, opening, False), "tool-call")
            for handle in (old, new):
                await until_async(lambda h=handle: _in(h, "Running"), what="the run halfway")  # type: ignore[misc]
                await send_event(handle, EventMessage("Failed", {}, "e3"))
            await send_event(old, EventMessage("ResultRecorded", {}, "e4"))
            await send_event(old, EventMessage("ResultReturned", {}, "e5"))
            first: dict[str, Any] = await old.result()
            second: dict[str, Any] = await new.result()
            return first, second, [await old.fetch_history(), await new.fetch_history()]
    first, second, histories = asyncio.run(main())
    assert (first["table_hash"], first["state"]) == (table_hash(old_text), "Returned")
    assert [r["body"]["next"]["state"] for r in first["records"] if r["kind"] == "step"][2] == "Failed"
    assert (second["table_hash"], second["state"]) == (table_hash(CHANGED), "Returned")
    assert [r["body"]["next"]["state"] for r in second["records"] if r["kind"] == "step"][2] == "Returned"
    for history in histories:
        asyncio.run(replayer().replay_workflow(history))


async def _in(handle: Any, state: str) -> bool:
    """Whether the run is in ``state``; False while no worker answers (one just stopped)."""
    try:
        return bool((await asyncio.wait_for(config(handle), 10)).get("state") == state)
    except TimeoutError:
        return False


def test_the_recorded_history_replays_with_this_code() -> None:
    history = WorkflowHistory.from_json("recorded", RECORDED.read_text(encoding="utf-8"))
    kinds = [e.WhichOneof("attributes") for e in history.events]
    assert {"activity_task_timed_out_event_attributes", "workflow_execution_signaled_event_attributes"} <= set(kinds)
    asyncio.run(replayer().replay_workflow(history))


class SlowFirst:
    """A tool whose first attempt outlives its start-to-close timeout (the recorded run's unknown)."""

    def run(self, call: Any) -> Any:
        if call.attempt == 1:
            time.sleep(3)
        return {"receipt": call.key}

    def status(self, call: Any) -> None:
        return None


async def record(address: str) -> str:
    """A run of tool-call.yaml whose one effect timed out (unknown), decided ``rerun`` by signal."""
    task_queue = queue()
    events = [EventMessage("ArgumentsValid", {"ask_user": False, "takes_key": False}, "e1"),
              EventMessage("Started", {}, "e2"), EventMessage("Completed", {}, "e3")]
    text = TOOL_CALL.read_text(encoding="utf-8")
    async with in_process_worker(address, task_queue, lambda t: {"InvokeTool": SlowFirst()}) as client:
        handle = await start_run(client, task_queue, start_message("recorded", TOOL_CALL, text, {}, events, True,
                                                                   Timeouts(1.0, 0.5, 5.0)), "tool-call")
        [decision] = await until_async(lambda: pending(handle), what="the decision")
        await decide(handle, decision["id"], "rerun")
        await handle.result()
        history = await handle.fetch_history()
        return history.to_json()


if __name__ == "__main__":
    RECORDED.write_text(asyncio.run(record(sys.argv[1])), encoding="utf-8")
