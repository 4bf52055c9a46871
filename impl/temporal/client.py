"""What a client does with table runs on Temporal: start one, send it events, decisions and
interrupts, read its configuration, pending decisions and journal, list the runs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentfsm.impl.temporal.messages import (
    QUERY_CONFIG,
    QUERY_PENDING,
    QUERY_TRACE,
    SIGNAL_DECIDE,
    SIGNAL_EVENT,
    SIGNAL_INTERRUPT,
    WORKFLOW,
    DecisionMessage,
    EventMessage,
    StartRun,
    Timeouts,
    table_hash,
)
from agentfsm.spec.expr import Value
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowHandle


def start_message(run_id: str, path: Path, text: str, overrides: dict[str, Value], events: list[EventMessage],
                  until_idle: bool, timeouts: Timeouts | None = None,
                  approval_lifetimes: dict[str, float | None] | None = None) -> StartRun:
    """A run's start, pinning its table's text and content hash."""
    return StartRun(run_id, text, table_hash(text), path.name, dict(overrides), events, until_idle,
                    timeouts or Timeouts(), approval_lifetimes=dict(approval_lifetimes or {}))


async def start_run(client: Client, task_queue: str, start: StartRun, machine: str) -> WorkflowHandle[Any, Any]:
    return await client.start_workflow(WORKFLOW, start, id=start.run_id, task_queue=task_queue,
                                       memo={"machine": machine, "table_hash": start.table_hash})


@dataclass(frozen=True)
class Listed:
    run_id: str
    status: str
    machine: str
    table_hash: str
    task_queue: str


async def list_runs(client: Client, limit: int = 1000) -> list[Listed]:
    found: list[Listed] = []
    async for execution in client.list_workflows(f"WorkflowType = '{WORKFLOW}'", limit=limit):
        memo = await execution.memo()
        status = execution.status.name.lower() if execution.status is not None else "unknown"
        found.append(Listed(execution.id, status, str(memo.get("machine", "")), str(memo.get("table_hash", "")),
                            execution.task_queue))
    return found


async def closed_result(handle: WorkflowHandle[Any, Any]) -> dict[str, Any] | None:
    """A completed run's result (its final configuration and journal); None while it runs."""
    described = await handle.describe()
    if described.status == WorkflowExecutionStatus.COMPLETED:
        result: dict[str, Any] = await handle.result()
        return result
    return None


async def status_of(handle: WorkflowHandle[Any, Any]) -> str:
    described = await handle.describe()
    return described.status.name.lower() if described.status is not None else "unknown"


async def query(handle: WorkflowHandle[Any, Any], name: str) -> Any:
    return await handle.query(name)


async def trace(handle: WorkflowHandle[Any, Any]) -> list[dict[str, Any]]:
    """The run's journal: from its result once completed, else by query (a worker replays its history)."""
    done = await closed_result(handle)
    if done is not None:
        return list(done["records"])
    records: list[dict[str, Any]] = await handle.query(QUERY_TRACE)
    return records


async def pending(handle: WorkflowHandle[Any, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = await handle.query(QUERY_PENDING)
    return found


async def config(handle: WorkflowHandle[Any, Any]) -> dict[str, Any]:
    done = await closed_result(handle)
    if done is not None:
        return done
    found: dict[str, Any] = await handle.query(QUERY_CONFIG)
    return found


async def send_event(handle: WorkflowHandle[Any, Any], message: EventMessage) -> None:
    await handle.signal(SIGNAL_EVENT, message)


async def decide(handle: WorkflowHandle[Any, Any], key: str, decision: str) -> None:
    await handle.signal(SIGNAL_DECIDE, DecisionMessage(key, decision))


async def interrupt(handle: WorkflowHandle[Any, Any], reason: str) -> None:
    await handle.signal(SIGNAL_INTERRUPT, reason)

