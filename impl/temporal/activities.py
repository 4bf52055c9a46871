"""The effects' activities: a table's tool performs one attempt, or answers a status query.

A worker builds its tools from the run's pinned table version, with the same factories as
``agentfsm worker`` (``--tools MODULE:FACTORY``, ``--ledger FILE``). A task names the version by
its content hash: a worker that compiled it (its workflow ran here) has it; any other reads the
text from the run's start event, once per version (a task recorded with the text uses that).
While a tool runs, the activity heartbeats, so a worker that dies or stops is noticed within
the heartbeat timeout, and the effect becomes ``unknown`` in the workflow. A tool that raises
is a known outcome (failed), never retried by Temporal.

Right before a tool acts, the attempt asks the server whether it is still the current one
(``current_attempt``): an attempt whose worker was stopped past its timeout has been given up
by the workflow (the effect went the unknown path, maybe an operator's ``rerun`` has run it
again), so when that worker resumes, the server no longer knows the attempt and it refuses to
act (``ATTEMPT_STALE``). A table's agents are fenced the same way, right before their driver
performs an effect.

Every attempt notes what it did in the protocol log (``agentfsm.impl.durable.protocol_log``'s
records, one JSON Lines file per server and namespace, shared by the worker processes): the
attempt taken (``attempt``, with Temporal's own retry count ``try``), the check (``check``:
``passed`` or ``refused``), the tool's call and what it returned (``call``, ``returned``), and each
status query's answer (``status``), so a run is audited against ``spec/systems/temporal-run.yaml``
(``agentfsm.faults.temporal_audit``; docs/temporal.md, "The protocol log").

``AGENTFSM_TEMPORAL_KILL`` (``before-tool`` or ``after-tool``) makes the worker SIGKILL itself
at that point of its first attempt: the unknown-path scenarios and the fault campaign kill
real worker processes exactly there (an agent run's worker right before its agent performs a
non-idempotent effect, or once it has performed it, before the task's reply leaves).
``AGENTFSM_TEMPORAL_STOP`` (the same points) makes it SIGSTOP itself there instead, once: the
scenario of a stopped worker that resumes after its attempt was given up.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, TypeVar

from agentfsm.impl.durable.ledger import Fenced
from agentfsm.impl.durable.protocol_log import ENV, ProtocolLog, state_log
from agentfsm.impl.durable.run import EffectCall, Tool
from agentfsm.impl.stores.journal import JSON
from agentfsm.impl.temporal.agent_activity import AgentRunError, act
from agentfsm.impl.temporal.journal_run import compiled, pinned_table
from agentfsm.impl.temporal.messages import (
    AGENT,
    PERFORM,
    STATUS,
    TOOL_FAILED,
    AgentReply,
    AgentTask,
    EffectTask,
    StartRun,
    StatusAnswer,
    journal_after,
)
from agentfsm.spec.model import Table
from temporalio import activity
from temporalio.api.workflowservice.v1 import RecordActivityTaskHeartbeatRequest
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

ToolFactory = Callable[[Table], Mapping[str, Tool]]
T = TypeVar("T")
KILL = "AGENTFSM_TEMPORAL_KILL"
STOP = "AGENTFSM_TEMPORAL_STOP"
ATTEMPT_STALE = "AttemptStale"
"""The error type of an attempt that refused to act: the server no longer holds it open."""
REFUSED = "refused to act"
KILL_POINTS = ("before-tool", "after-tool")
STARTS_KEPT = 256
"""Agent runs whose start (table and script, read from their history) and journal a worker keeps at once."""


def _call(task: EffectTask) -> EffectCall:
    return EffectCall(task.run_id, task.action, task.key, task.attempt, task.tool, task.args, task.token)


async def heartbeating(work: Callable[[], T], every: float = 0.5) -> T:
    """``work`` in a thread, heartbeating meanwhile: a worker that dies or stops stops heartbeating."""
    running = asyncio.ensure_future(asyncio.to_thread(work))
    while not running.done():
        activity.heartbeat()
        await asyncio.wait([running], timeout=every)
    return running.result()


async def journal_from_history(task: AgentTask) -> list[dict[str, Any]]:
    """The journal ``task`` goes on from, put together from the agent tasks the run's history holds
    up to this one (each carries the records after those before it)."""
    info = activity.info()
    client = activity.client()
    handle = client.get_workflow_handle(info.workflow_id or task.run_id, run_id=info.workflow_run_id)
    journal: list[dict[str, Any]] = []
    async for event in handle.fetch_history_events():
        if not event.HasField("activity_task_scheduled_event_attributes"):
            continue
        scheduled = event.activity_task_scheduled_event_attributes
        if scheduled.activity_type.name != AGENT:
            continue
        [earlier] = client.data_converter.payload_converter.from_payloads(scheduled.input.payloads, [AgentTask])
        if scheduled.activity_id == info.activity_id:
            return journal_after(journal, task)
        journal = journal_after(journal, earlier)
    raise ApplicationError(f"run {task.run_id}: agent task {info.activity_id} is not in the run's history",
                           type=TOOL_FAILED, non_retryable=True)


async def started_run() -> StartRun:
    """The start of the run this activity belongs to (its table text, its agent script), from the
    run's first history event."""
    info = activity.info()
    client = activity.client()
    if info.workflow_id is not None:
        handle = client.get_workflow_handle(info.workflow_id, run_id=info.workflow_run_id)
        async for event in handle.fetch_history_events(page_size=1):
            payloads = event.workflow_execution_started_event_attributes.input.payloads
            [start] = client.data_converter.payload_converter.from_payloads(payloads, [StartRun])
            assert isinstance(start, StartRun)
            return start
    raise ApplicationError(f"activity {info.activity_id} belongs to no table run whose start can be read",
                           type=TOOL_FAILED, non_retryable=True)


_stopped: set[str] = set()


def _kill_here(point: str) -> None:
    if os.environ.get(KILL) == point:
        os.kill(os.getpid(), signal.SIGKILL)
    if os.environ.get(STOP) == point and point not in _stopped:
        _stopped.add(point)
        os.kill(os.getpid(), signal.SIGSTOP)


async def current_attempt(what: str) -> None:
    """Raise unless the server still holds this activity's attempt open: a heartbeat with the
    attempt's task token, sent now and answered. Once the attempt timed out (its worker stopped or
    died), the workflow has taken the unknown path and the server answers not-found (the SDK may
    hear it first, from its own heartbeat, and cancel the activity): the attempt refuses to act,
    ``ATTEMPT_STALE``. A server that cannot be asked, or a cancellation meanwhile, refuses too: the
    workflow then finds the outcome unknown, which it is to the workflow (the tool did not act).
    The check is made right before the tool acts; a worker stopped between the check and the act
    still acts when it resumes (the residual window)."""
    info = activity.info()
    client = activity.client()
    request = RecordActivityTaskHeartbeatRequest(task_token=info.task_token, namespace=client.namespace,
                                                 identity=client.identity)
    try:
        await client.workflow_service.record_activity_task_heartbeat(request, retry=True)
    except (RPCError, asyncio.CancelledError) as exc:
        details = activity.cancellation_details()
        gone = (exc.status == RPCStatusCode.NOT_FOUND if isinstance(exc, RPCError)
                else details is not None and (details.not_found or details.timed_out))
        reason = ("the server no longer holds it open (it timed out: the workflow took the unknown path)" if gone
                  else f"it could not be checked ({exc})" if isinstance(exc, RPCError) else "it was cancelled")
        activity.logger.warning(f"{what}: attempt {info.attempt} of activity {info.activity_id} {REFUSED}: {reason}")
        if isinstance(exc, asyncio.CancelledError):
            raise
        raise ApplicationError(f"{what}: {REFUSED}: {reason}", type=ATTEMPT_STALE, non_retryable=True) from None


def protocol_path(address: str, namespace: str) -> Path | None:
    """Where the workers of a server's namespace write their protocol log (``$AGENTFSM_PROTOCOL_LOG``
    chooses another file, ``off`` none)."""
    return state_log(f"temporal-{namespace}", address, namespace)


class EffectActivities:
    """The two activities of a worker, over its tool factory; ``heartbeat_every`` in seconds;
    ``log`` the protocol log (by default the server's, opened with the first attempt)."""

    def __init__(self, factory: ToolFactory, heartbeat_every: float = 0.5, log: ProtocolLog | None = None) -> None:
        self.factory = factory
        self.heartbeat_every = heartbeat_every
        self._tools: dict[tuple[str, str], Mapping[str, Tool]] = {}
        self._starts: dict[str, StartRun] = {}
        self._journals: dict[str, list[dict[str, Any]]] = {}
        self._log = log

    def note(self, run_id: str, op: str, key: str, attempt: int, token: int | None = None, **fields: JSON) -> None:
        """One record of this attempt (its fencing token the attempt's number, unless given; ``try``:
        Temporal's retry of the same attempt, 1 first)."""
        if self._log is None:
            try:
                client = activity.client()
                path = protocol_path(client.service_client.config.target_host, client.namespace)
            except RuntimeError:   # an activity run without its client (a test's environment): the chosen file only
                path = state_log("temporal", "") if os.environ.get(ENV) else None
            self._log = ProtocolLog(path, f"{socket.gethostname()}:{os.getpid()}")
        self._log.note(run_id, op, key=key, attempt=attempt, token=attempt if token is None else token,
                       **{"try": activity.info().attempt}, **fields)

    async def checked(self, run_id: str, key: str, attempt: int, what: str) -> None:
        """``current_attempt``, its answer noted."""
        try:
            await current_attempt(what)
        except (ApplicationError, asyncio.CancelledError):
            self.note(run_id, "check", key, attempt, result="refused")
            raise
        self.note(run_id, "check", key, attempt, result="passed")

    async def tool(self, task: EffectTask) -> Tool:
        version = (task.table_hash, repr(sorted(task.overrides.items())))
        if version not in self._tools:
            table = compiled(task.table_hash, task.overrides)
            if table is None:
                text = task.table_text or (await started_run()).table_text
                table = pinned_table(text, task.table_hash, task.file, task.overrides)
            self._tools[version] = self.factory(table)
        tools = self._tools[version]
        if task.action not in tools:
            raise ApplicationError(f"this worker has no tool for {task.action}", type=TOOL_FAILED, non_retryable=True)
        return tools[task.action]

    @activity.defn(name=PERFORM)
    async def perform(self, task: EffectTask) -> JSON:
        tool = await self.tool(task)
        self.note(task.run_id, "attempt", task.key, task.attempt, action=task.action,
                  idempotent=bool(getattr(tool, "idempotent", False)))
        _kill_here("before-tool")
        await self.checked(task.run_id, task.key, task.attempt, f"run {task.run_id}: {task.action} {task.key}")
        self.note(task.run_id, "call", task.key, task.attempt)
        try:
            result = await heartbeating(lambda: tool.run(_call(task)), self.heartbeat_every)
        except Exception as exc:
            self.note(task.run_id, "returned", task.key, task.attempt,
                      result="refused" if isinstance(exc, Fenced) else "failed")
            raise ApplicationError(f"{type(exc).__name__}: {exc}", type=TOOL_FAILED, non_retryable=True) from None
        self.note(task.run_id, "returned", task.key, task.attempt, result="done")
        _kill_here("after-tool")
        return result

    @activity.defn(name=STATUS)
    async def status(self, task: EffectTask) -> StatusAnswer:
        tool = await self.tool(task)
        reply = await asyncio.to_thread(tool.status, _call(task))
        self.note(task.run_id, "status", task.key, task.attempt, task.token,
                  answer="none" if reply is None else reply[0])
        if reply is None:
            return StatusAnswer(False)
        return StatusAnswer(True, reply[0], reply[1], bool(getattr(tool, "fences", False)))

    @activity.defn(name=AGENT)
    async def agent(self, task: AgentTask) -> AgentReply:
        """One task of an agent run (``agentfsm.impl.temporal.agent_activity``): the start (its table
        and script) is read from the run's history once per run and worker; the journal is the one
        this worker kept with the task's new records, or read from the run's history."""
        run = activity.info().workflow_run_id or task.run_id
        if run not in self._starts:
            self._starts[run] = await started_run()
        start = self._starts[run]
        known = self._journals.get(run, [])
        journal = journal_after(known, task) if len(known) >= task.base else await journal_from_history(task)
        for kept in (self._starts, self._journals):
            kept.pop(run, None)   # kept again as the newest (a dict keeps insertion order)
            while len(kept) >= STARTS_KEPT:
                del kept[next(iter(kept))]
        self._starts[run], self._journals[run] = start, journal
        table = pinned_table(start.table_text, start.table_hash, start.file, start.overrides)
        try:
            reply: AgentReply = await act(start, table, replace(task, records=journal, base=0), activity.heartbeat,
                                          self.heartbeat_every,
                                          lambda point, idempotent: None if idempotent else _kill_here(point),
                                          current=lambda what, key, attempt: self.checked(task.run_id, key, attempt,
                                                                                          what),
                                          noted=lambda op, key, attempt, **fields: self.note(task.run_id, op, key,
                                                                                             attempt, **fields))
            return reply
        except AgentRunError as exc:
            raise ApplicationError(str(exc), type=TOOL_FAILED, non_retryable=True) from None
