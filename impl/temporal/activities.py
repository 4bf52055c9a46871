"""The effects' activities: a table's tool performs one attempt, or answers a status query.

A worker builds its tools from the table the task carries (the run's pinned version), with
the same factories as ``agentfsm worker`` (``--tools MODULE:FACTORY``, ``--ledger FILE``).
While a tool runs, the activity heartbeats, so a worker that dies or stops is noticed within
the heartbeat timeout, and the effect becomes ``unknown`` in the workflow. A tool that raises
is a known outcome (failed), never retried by Temporal.

``AGENTFSM_TEMPORAL_KILL`` (``before-tool`` or ``after-tool``) makes the worker SIGKILL itself
at that point of its first attempt: the unknown-path scenarios and the fault campaign kill
real worker processes exactly there.
"""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Callable, Mapping
from typing import TypeVar

from agentfsm.impl.durable.run import EffectCall, Tool
from agentfsm.impl.stores.journal import JSON
from agentfsm.impl.temporal.journal_run import pinned_table
from agentfsm.impl.temporal.messages import PERFORM, STATUS, TOOL_FAILED, EffectTask, StatusAnswer
from agentfsm.spec.model import Table
from temporalio import activity
from temporalio.exceptions import ApplicationError

ToolFactory = Callable[[Table], Mapping[str, Tool]]
T = TypeVar("T")
KILL = "AGENTFSM_TEMPORAL_KILL"
KILL_POINTS = ("before-tool", "after-tool")


def _call(task: EffectTask) -> EffectCall:
    return EffectCall(task.run_id, task.action, task.key, task.attempt, task.tool, task.args, task.token)


async def heartbeating(work: Callable[[], T], every: float = 0.5) -> T:
    """``work`` in a thread, heartbeating meanwhile: a worker that dies or stops stops heartbeating."""
    running = asyncio.ensure_future(asyncio.to_thread(work))
    while not running.done():
        activity.heartbeat()
        await asyncio.wait([running], timeout=every)
    return running.result()


def _kill_here(point: str) -> None:
    if os.environ.get(KILL) == point:
        os.kill(os.getpid(), signal.SIGKILL)


class EffectActivities:
    """The two activities of a worker, over its tool factory; ``heartbeat_every`` in seconds."""

    def __init__(self, factory: ToolFactory, heartbeat_every: float = 0.5) -> None:
        self.factory = factory
        self.heartbeat_every = heartbeat_every
        self._tools: dict[str, Mapping[str, Tool]] = {}

    def tool(self, task: EffectTask) -> Tool:
        if task.table_hash not in self._tools:
            table = pinned_table(task.table_text, task.table_hash, task.file, task.overrides)
            self._tools[task.table_hash] = self.factory(table)
        tools = self._tools[task.table_hash]
        if task.action not in tools:
            raise ApplicationError(f"this worker has no tool for {task.action}", type=TOOL_FAILED, non_retryable=True)
        return tools[task.action]

    @activity.defn(name=PERFORM)
    async def perform(self, task: EffectTask) -> JSON:
        tool = self.tool(task)
        _kill_here("before-tool")
        try:
            result = await heartbeating(lambda: tool.run(_call(task)), self.heartbeat_every)
        except Exception as exc:
            raise ApplicationError(f"{type(exc).__name__}: {exc}", type=TOOL_FAILED, non_retryable=True) from None
        _kill_here("after-tool")
        return result

    @activity.defn(name=STATUS)
    async def status(self, task: EffectTask) -> StatusAnswer:
        tool = self.tool(task)
        reply = await asyncio.to_thread(tool.status, _call(task))
        if reply is None:
            return StatusAnswer(False)
        return StatusAnswer(True, reply[0], reply[1], bool(getattr(tool, "fences", False)))
