"""The table workflow: one workflow type that serves every table.

Its state is the run's journal (``JournalRun``: the durable runtime over an in-memory store,
rebuilt by replay). Events arrive as signals (user input, approvals, anything the table
accepts), and so do an operator's decisions and interrupts; queries return the configuration,
the pending decisions and the journal so far. Each external effect is an activity: a
non-idempotent one gets one attempt only (Temporal never retries it), an idempotent one
Temporal's retry policy. An attempt whose outcome is lost (a start-to-close or heartbeat
timeout: its worker died or stopped; a cancellation after an interrupt) makes the effect
``unknown``: a status query (an activity), then the run's own rules, and otherwise the run
waits for the operator's decision, with no timer deciding for them. An approval's lifetime
is a workflow timer.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError
from temporalio.exceptions import TimeoutError as ActivityTimeout

with workflow.unsafe.imports_passed_through():
    from agentfsm.impl.durable.run import DecisionError
    from agentfsm.impl.temporal.journal_run import Due, JournalRun, VersionMismatch, pinned_table
    from agentfsm.impl.temporal.messages import (
        PERFORM,
        QUERY_CONFIG,
        QUERY_PENDING,
        QUERY_TRACE,
        SIGNAL_DECIDE,
        SIGNAL_EVENT,
        SIGNAL_INTERRUPT,
        STATUS,
        TOOL_FAILED,
        VERSION_REFUSED,
        WORKFLOW,
        DecisionMessage,
        EventMessage,
        StartRun,
        StatusAnswer,
    )

ONCE = RetryPolicy(maximum_attempts=1)
READ = RetryPolicy(maximum_interval=timedelta(seconds=5))


def lost(err: ActivityError) -> str:
    """Why an attempt's outcome is unknown, as the journal says it."""
    cause = err.cause
    if isinstance(cause, ActivityTimeout):
        return f"its activity timed out ({cause.type.name if cause.type else 'timeout'}): the worker stopped " \
               "or died, or the tool outlived its timeout, so whether it ran is unknown"
    if isinstance(cause, CancelledError):
        return "its activity was cancelled after an interrupt, so whether it ran is unknown"
    return f"its activity ended without an outcome ({cause or err}), so whether it ran is unknown"


@workflow.defn(name=WORKFLOW)
class TableWorkflow:
    def __init__(self) -> None:
        self.inbox: list[EventMessage] = []
        self.decisions: list[DecisionMessage] = []
        self.interrupts: list[str] = []
        self.notes: list[str] = []
        self.jr: JournalRun | None = None

    @workflow.run
    async def run(self, start: StartRun) -> dict[str, Any]:
        try:
            with workflow.unsafe.sandbox_unrestricted():   # compiling the table is pure, and done once per version
                table = pinned_table(start.table_text, start.table_hash, start.file, start.overrides)
        except VersionMismatch as exc:
            raise ApplicationError(str(exc), type=VERSION_REFUSED, non_retryable=True) from None
        jr = self.jr = JournalRun(start, table, lambda: workflow.now().timestamp())
        self.inbox[:0] = start.events
        while True:
            await self._take_interrupts(jr)
            self._take_decisions()
            due = jr.next_due()
            if due is not None:
                await self._perform(jr, due)
                continue
            if jr.blocked:
                await workflow.wait_condition(lambda: bool(self.decisions or self.interrupts))
                continue
            if self.inbox:
                self._deliver(jr, self.inbox.pop(0))
                continue
            if jr.run.terminal or (start.until_idle and not jr.pending()):
                return {**jr.config(), "records": jr.records(), "notes": self.notes}
            await self._wait(jr)

    async def _wait(self, jr: JournalRun) -> None:
        """For the next signal; an approval's lifetime ending first expires it (a workflow timer)."""
        expiry = jr.next_expiry()
        timeout = None if expiry is None else max(expiry - workflow.now().timestamp(), 0.0) + 0.001
        try:
            await workflow.wait_condition(lambda: bool(self.inbox or self.decisions or self.interrupts),
                                          timeout=timeout)
        except TimeoutError:   # (asyncio's)
            jr.run.recover()   # expires the approvals whose time passed (the run's own rule)

    def _deliver(self, jr: JournalRun, message: EventMessage) -> None:
        try:
            jr.run.deliver(message.name, message.params, message.event_id)
        except ValueError as exc:
            self.notes.append(f"event {message.name} refused: {exc}")

    async def _take_interrupts(self, jr: JournalRun) -> None:
        """Journal each interrupt before it takes effect; then nothing emitted before it starts, and
        an unknown effect is settled failed unless its status query says it completed."""
        if not self.interrupts:
            return
        while self.interrupts:
            jr.run.interrupt(self.interrupts.pop(0))
        await self._resolve(jr)

    def _take_decisions(self) -> None:
        assert self.jr is not None
        while self.decisions:
            message = self.decisions.pop(0)
            try:
                self.jr.run.decide(message.id, message.decision)
            except DecisionError as exc:
                self.notes.append(f"decision {message.id}={message.decision} refused: {exc}")

    async def _perform(self, jr: JournalRun, due: Due) -> None:
        """One attempt: ``started`` journaled in the same workflow task that schedules the activity."""
        run = jr.run
        call = run.begin(due.key, due.retry)
        if call is None:
            return
        effect = run.st.effects[due.key]
        timeouts = jr.start.timeouts
        handle = workflow.start_activity(
            PERFORM, jr.task(call), start_to_close_timeout=timedelta(seconds=timeouts.start_to_close),
            heartbeat_timeout=timedelta(seconds=timeouts.heartbeat),
            retry_policy=RetryPolicy(maximum_attempts=jr.start.max_attempts) if effect.idempotent else ONCE)
        await workflow.wait_condition(lambda: handle.done() or bool(self.interrupts))
        if not handle.done():
            while self.interrupts:   # journaled before the attempt is cancelled
                run.interrupt(self.interrupts.pop(0))
            handle.cancel()
        try:
            result = await handle
        except ActivityError as err:
            if isinstance(err.cause, ApplicationError) and err.cause.type == TOOL_FAILED:
                run.settle(due.key, "failed", {"error": err.cause.message}, "run")
                return
            run.mark_unknown(due.key, lost(err))
            await self._resolve(jr)
            return
        run.settle(due.key, "completed", result, "run")

    async def _resolve(self, jr: JournalRun) -> None:
        """Status queries for the unknown effects, then the run's own rules (``recover``): a done
        answer settles, a fencing tool's not-run or an idempotent retry performs again, and
        anything else waits for the operator."""
        for effect in jr.unknown():
            answer = await workflow.execute_activity(
                STATUS, jr.status_task(effect), result_type=StatusAnswer,
                start_to_close_timeout=timedelta(seconds=jr.start.timeouts.status_query), retry_policy=READ)
            jr.prefetch(effect.key, answer)
        jr.run.recover()

    @workflow.signal(name=SIGNAL_EVENT)
    def event(self, message: EventMessage) -> None:
        self.inbox.append(message)

    @workflow.signal(name=SIGNAL_DECIDE)
    def decide(self, message: DecisionMessage) -> None:
        self.decisions.append(message)

    @workflow.signal(name=SIGNAL_INTERRUPT)
    def interrupt(self, reason: str) -> None:
        self.interrupts.append(reason)

    @workflow.query(name=QUERY_CONFIG)
    def config(self) -> dict[str, Any]:
        if self.jr is None:
            return {}
        return {**self.jr.config(), "queued_events": len(self.inbox), "notes": self.notes}

    @workflow.query(name=QUERY_PENDING)
    def pending(self) -> list[dict[str, Any]]:
        return [] if self.jr is None else self.jr.pending()

    @workflow.query(name=QUERY_TRACE)
    def trace(self) -> list[dict[str, Any]]:
        return [] if self.jr is None else self.jr.records()
