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

import pytest
from agentfsm.impl.durable.ledger import LedgerTool, MemoryLedger, ledger_tools
from agentfsm.impl.temporal.activities import EffectActivities
from agentfsm.impl.temporal.client import config, decide, pending, send_event, start_message, start_run
from agentfsm.impl.temporal.journal_run import VersionMismatch, compiled
from agentfsm.impl.temporal.messages import EffectTask, EventMessage, Timeouts, table_hash
from agentfsm.impl.temporal.worker import build_worker, connect, replayer
from conftest import ROOT
from temporal_support import in_process_worker, queue, until_async, worker_process
from temporalio.client import WorkflowHistory
from temporalio.converter import DataConverter

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
            # (its effect settled first: a worker that stops while it runs leaves it unknown, for an operator)
            await until_async(lambda: _in(old, "Running", settled=True), what="version 1 halfway")
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


async def _in(handle: Any, state: str, settled: bool = False) -> bool:
    """Whether the run is in ``state`` (with ``settled``: and its effects are); False while no worker
    answers (one just stopped)."""
    try:
        found = await asyncio.wait_for(config(handle), 10)
    except TimeoutError:
        return False
    done = all(e["status"] in ("completed", "failed") for e in found.get("effects", []))
    return bool(found.get("state") == state and (done or not settled))


def test_the_recorded_history_replays_with_this_code() -> None:
    history = WorkflowHistory.from_json("recorded", RECORDED.read_text(encoding="utf-8"))
    kinds = [e.WhichOneof("attributes") for e in history.events]
    assert {"activity_task_timed_out_event_attributes", "workflow_execution_signaled_event_attributes"} <= set(kinds)
    asyncio.run(replayer().replay_workflow(history))


def test_effects_name_the_table_by_hash_and_a_worker_that_never_saw_the_start_finds_it(
        temporal_address: str, tmp_path: Path) -> None:
    """An activity's input names the run's table by its content hash, not by its text (which made a
    recorded history 115 KB: the text once per activity); a worker process serving only the
    activities, which never ran the workflow, reads the text from the run's start."""
    task_queue = queue()
    text = TOOL_CALL.read_text(encoding="utf-8")
    events = [EventMessage("ArgumentsValid", {"ask_user": False, "takes_key": False}, "e1"),
              EventMessage("Started", {}, "e2"), EventMessage("Completed", {}, "e3")]
    child = worker_process(temporal_address, task_queue, "--activities-only", "--ledger", str(tmp_path / "ledger"),
                           log=tmp_path / "worker.log")

    async def main() -> tuple[dict[str, Any], WorkflowHistory]:
        client = await connect(temporal_address)
        async with build_worker(client, task_queue, lambda t: {}, activities=False, sticky=1.0):
            handle = await start_run(client, task_queue, start_message(f"hash-{task_queue}", TOOL_CALL, text, {},
                                                                         events, True), "tool-call")
            result: dict[str, Any] = await handle.result()
            return result, await handle.fetch_history()
    try:
        result, history = asyncio.run(main())
    finally:
        child.terminate()
        child.wait(30)
    assert result["effects"] and all(e["status"] == "completed" for e in result["effects"])
    scheduled = [e.activity_task_scheduled_event_attributes.input.payloads for e in history.events
                 if e.HasField("activity_task_scheduled_event_attributes")]
    tasks = [DataConverter.default.payload_converter.from_payloads(p, [EffectTask])[0] for p in scheduled]
    assert tasks and all((t.table_text, t.table_hash) == ("", table_hash(text)) for t in tasks)


def test_a_task_recorded_with_the_table_text_is_served_from_it() -> None:
    """Activities scheduled before tasks named the table by hash alone carry its text: a worker that
    never compiled that version uses the text, and refuses one that is not the version pinned."""
    text = (ROOT / "tests" / "tables" / "counter.yaml").read_text(encoding="utf-8") + "\n# recorded\n"
    effects = EffectActivities(lambda t: ledger_tools(t, MemoryLedger(), False))
    task = EffectTask(text, table_hash(text), "counter.yaml", {}, "old", "Note", "old/1/0", 1, 1)
    assert compiled(task.table_hash, {}) is None
    assert isinstance(asyncio.run(effects.tool(task)), LedgerTool)
    task.table_hash = table_hash(text + "# another version\n")
    with pytest.raises(VersionMismatch, match=task.table_hash[:16]):
        asyncio.run(effects.tool(task))


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
