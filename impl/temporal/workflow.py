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

import asyncio
from dataclasses import replace
from datetime import timedelta
from typing import Any, NoReturn

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError
from temporalio.exceptions import TimeoutError as ActivityTimeout
from temporalio.workflow import ActivityCancellationType

with workflow.unsafe.imports_passed_through():
    from agentfsm.impl.durable.children import child_run_id
    from agentfsm.impl.durable.run import DecisionError
    from agentfsm.impl.temporal.journal_run import (
        Due,
        JournalRun,
        VersionMismatch,
        calls_from_json,
        pinned_table,
        report_from_json,
    )
    from agentfsm.impl.temporal.messages import (
        AGENT,
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
        AgentInput,
        AgentReply,
        AgentStart,
        AgentTask,
        Carried,
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
        self.unit: str | None = None
        self.shipped = 0
        """The journal's records the run's agent tasks carried so far (each carries those after)."""
        self.timers = 0
        """Script interrupts waiting for their time (the run does not continue as new meanwhile)."""
        """The unit's run under way (an agent that plays each input or call as a child workflow)."""

    @workflow.run
    async def run(self, start: StartRun) -> dict[str, Any]:
        try:
            with workflow.unsafe.sandbox_unrestricted():   # compiling the table is pure, and done once per version
                table = pinned_table(start.table_text, start.table_hash, start.file, start.overrides)
        except VersionMismatch as exc:
            raise ApplicationError(str(exc), type=VERSION_REFUSED, non_retryable=True) from None
        jr = self.jr = JournalRun(start, table, lambda: workflow.now().timestamp())
        carried = start.carried or Carried([])
        self.inbox[:0] = carried.inbox
        self.decisions[:0] = carried.decisions
        self.interrupts[:0] = carried.interrupts
        self.notes[:0] = carried.notes
        if start.agent is not None:
            return await self._agent_run(jr, carried)
        self.inbox[:0] = start.events
        while True:
            if self._long(jr):
                self._continue(jr)
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

    def _long(self, jr: JournalRun) -> bool:
        """The history is past its bound (or the server suggests so) and nothing is under way or due."""
        info = workflow.info()
        return not jr.due and (info.get_current_history_length() >= jr.start.history_bound
                               or info.is_continue_as_new_suggested())

    def _continue(self, jr: JournalRun, sent: int = 0, fed: set[str] | None = None) -> NoReturn:
        """Continue as new: the next execution's history starts with the journal so far, so no execution's
        history outgrows its bound; the run keeps its id (queries, signals and its end reach the newest)."""
        carried = Carried(jr.records(), list(self.inbox), list(self.decisions), list(self.interrupts),
                          list(self.notes), sent, sorted(fed or ()))
        workflow.continue_as_new(replace(jr.start, events=[], carried=carried))

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

    # -- agent runs: the table's own agent acts in activities, the journal and the step stay here --

    async def _agent_run(self, jr: JournalRun, carried: Carried) -> dict[str, Any]:
        """Send the script's inputs one by one, each once the agent has nothing left to do; perform
        the effects its steps make due and feed back those settled without their event (a status
        query, a decision, an interrupt); end with the agent's shutdown (or, ``--open``, in a final
        state)."""
        agent = jr.start.agent
        assert agent is not None
        inputs = list(agent.inputs)
        sent = carried.sent
        fed = set(carried.fed)
        while True:
            if not agent.units and not self.timers and self._long(jr):
                self._continue(jr, sent, fed)
            if agent.units:
                return {**jr.config(), "records": jr.records(), "notes": self.notes, "units": await self._units(jr)}
            if self.interrupts:
                self.interrupts.clear()
                await self._act(jr, "interrupt")
                continue
            self._take_decisions()
            due = jr.next_due()
            if due is not None:
                await self._agent_perform(jr, due)
                continue
            settled = [e for e in jr.run.unreported() if e.key not in fed]
            if settled:
                fed.add(settled[0].key)
                await self._act(jr, "report", key=settled[0].key)
                continue
            if jr.blocked:
                await workflow.wait_condition(lambda: bool(self.decisions or self.interrupts))
                continue
            if (agent.child or agent.unit) and (jr.run.terminal or sent == len(inputs)):
                ended = await self._act(jr, "outcome")   # a sub-agent's or a unit's run ends where it settled
                return {**jr.config(), "records": jr.records(), "notes": self.notes, "outcome": ended.outcome}
            if jr.run.terminal:
                return {**jr.config(), "records": jr.records(), "notes": self.notes}
            if self.inbox:   # the user's input to an open run: `agentfsm temporal send RUN input --param text=...`
                message = self.inbox.pop(0)
                if message.name == "input" and isinstance(message.params.get("text"), str):
                    await self._act(jr, "input", text=message.params["text"], event_id=message.event_id)
                else:
                    self.notes.append(f"event {message.name} refused: an agent run takes input with a text")
                continue
            if sent < len(inputs):
                turn = inputs[sent]
                sent += 1
                await self._act(jr, "input", text=turn.text, event_id="task" if agent.child else f"input-{sent}")
                if turn.interrupt_after is not None:
                    self._interrupt_later(turn.interrupt_after)
                continue
            if jr.start.until_idle:
                await self._act(jr, "shutdown")
                return {**jr.config(), "records": jr.records(), "notes": self.notes}
            await workflow.wait_condition(lambda: bool(self.inbox or self.decisions or self.interrupts))

    def _interrupt_later(self, seconds: float) -> None:
        """The script's interrupt: ``seconds`` after its input was sent (a workflow timer)."""
        async def later() -> None:
            await asyncio.sleep(seconds)
            self.interrupts.append(f"the script interrupts after {seconds:g}s")
            self.timers -= 1
        self.timers += 1
        asyncio.get_running_loop().create_task(later())

    def _agent_task(self, jr: JournalRun, op: str, **fields: Any) -> AgentTask:
        """The task carries only the records the run's earlier tasks did not (the history stays linear)."""
        records = jr.records(self.shipped)
        task = AgentTask(jr.run.run_id, op, records, base=self.shipped, **fields)
        self.shipped += len(records)
        return task

    async def _act(self, jr: JournalRun, op: str, **fields: Any) -> AgentReply:
        """One agent task that performs no effect (so Temporal may retry it: the replica is thrown
        away); an interrupt meanwhile cancels it, and the agent, interrupted as live, still answers
        with what it fed. Its events are delivered here, where the table's step decides."""
        timeouts = jr.start.timeouts
        handle = workflow.start_activity(
            AGENT, self._agent_task(jr, op, **fields), result_type=AgentReply,
            start_to_close_timeout=timedelta(seconds=timeouts.start_to_close),
            heartbeat_timeout=timedelta(seconds=timeouts.heartbeat), retry_policy=READ,
            cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED)
        if op != "status":   # a status query is not the agent's work: an interrupt waits for it
            await workflow.wait_condition(lambda: handle.done() or bool(self.interrupts))
            if not handle.done():
                self.interrupts.clear()
                handle.cancel()
        try:
            reply: AgentReply = await handle
        except ActivityError as err:
            raise ApplicationError(f"run {jr.run.run_id}: the agent could not {op}: {err.cause or err}",
                                   non_retryable=True) from None
        self._deliver_fed(jr, reply)
        return reply

    def _deliver_fed(self, jr: JournalRun, reply: AgentReply) -> None:
        run = jr.run
        for item in reply.fed:
            if "interrupt" in item:
                run.interrupt(str(item["interrupt"]))
                continue
            if "settle" in item:
                run.settle(item["settle"], item["outcome"], item["result"], item["via"])
                continue
            if "unknown" in item:
                run.mark_unknown(item["unknown"], item["reason"])
                continue
            delivery = run.deliver(item["event"], item["params"], item["event_id"], payload=item["payload"],
                                   calls=calls_from_json(item["calls"]), reports=report_from_json(item["report"]))
            if delivery.status in ("halted", "stale"):
                self.notes.append(f"event {item['event']}: {delivery.status}")

    async def _agent_perform(self, jr: JournalRun, due: Due) -> None:
        """One attempt of an agent's effect, its ``started`` journaled with the task's scheduling; a
        non-idempotent one is never retried by Temporal, an idempotent one (a model call: safe to repeat,
        though it costs again) by its retry policy; a lost outcome takes the unknown path."""
        run = jr.run
        if run.begin(due.key, due.retry) is None:
            return
        effect = run.st.effects[due.key]
        timeouts = jr.start.timeouts
        handle = workflow.start_activity(
            AGENT, self._agent_task(jr, "perform", key=due.key, retry=due.retry), result_type=AgentReply,
            start_to_close_timeout=timedelta(seconds=timeouts.start_to_close),
            heartbeat_timeout=timedelta(seconds=timeouts.heartbeat),
            retry_policy=RetryPolicy(maximum_attempts=jr.start.max_attempts) if effect.idempotent else ONCE,
            cancellation_type=ActivityCancellationType.WAIT_CANCELLATION_COMPLETED)
        await workflow.wait_condition(lambda: handle.done() or bool(self.interrupts))
        if not handle.done():
            self.interrupts.clear()
            handle.cancel()
        try:
            reply = await handle
        except ActivityError as err:
            if run.st.effects[due.key].status == "started":
                run.mark_unknown(due.key, lost(err))
            await self._agent_resolve(jr)
            return
        self._deliver_fed(jr, reply)
        if reply.child is not None:
            ended = await self._sub_agent(jr, due.key, reply.child, reply.used)
            await self._act(jr, "perform", key=due.key, ended=ended)

    async def _units(self, jr: JournalRun) -> list[dict[str, Any]]:
        """Each unit (an explorer's task, a tool-call runner's call) as a child workflow ``RUN/UNIT-N``,
        one after the other, each going on in the script where the one before stopped; an interrupt
        reaches the unit under way."""
        agent = jr.start.agent
        assert agent is not None
        used = dict(agent.skip)
        done: list[dict[str, Any]] = []
        for n in range(1, agent.units + 1):
            inputs = agent.inputs[n - 1:n] or [AgentInput("")]
            unit = replace(agent, inputs=inputs, units=0, unit=n, skip=dict(used))
            self.unit = f"{jr.run.run_id}/{agent.unit_name}-{n}"
            result = await self._child(jr, self.unit, unit)
            outcome = dict(result["outcome"])
            for kind, count in dict(outcome.get("used", {})).items():
                used[kind] = used.get(kind, 0) + int(count)
            done.append({"run_id": result["run_id"], "state": result["state"], "outcome": outcome,
                         "effects": result["effects"], "decisions": result.get("pending", [])})
        self.unit = None
        return done

    async def _child(self, jr: JournalRun, run_id: str, agent: AgentStart, journaled: bool = False) -> dict[str, Any]:
        """A child workflow of this run's table with ``agent``, until it ends; this run's interrupts
        reach it (``journaled``: after this run's agent journaled them, as a parent waiting for its
        sub-agent does)."""
        start = jr.start
        child = StartRun(run_id, start.table_text, start.table_hash, start.file, dict(start.overrides),
                         timeouts=start.timeouts, max_attempts=start.max_attempts,
                         approval_lifetimes=dict(start.approval_lifetimes), agent=agent)
        handle = await workflow.start_child_workflow(WORKFLOW, child, id=run_id, result_type=dict)
        while not handle.done():
            await workflow.wait_condition(lambda: handle.done() or bool(self.interrupts))
            if self.interrupts and not handle.done():
                reasons = list(self.interrupts)
                self.interrupts.clear()
                if journaled:
                    await self._act(jr, "interrupt")
                for reason in reasons:
                    await handle.signal(SIGNAL_INTERRUPT, reason)
        result: dict[str, Any] = await handle
        return result

    async def _sub_agent(self, jr: JournalRun, key: str, task: str, used: dict[str, int]) -> dict[str, Any]:
        """A spawn's sub-agent as a child workflow (run ``KEY/sub-agent``): the parent waits for it, an
        interrupt of the parent is journaled by the parent's agent and reaches the child, and how the
        child settled is the parent's next event (the spawn's ``perform`` with ``ended``)."""
        agent = jr.start.agent
        assert agent is not None
        child = replace(agent, inputs=[AgentInput(task)], child=True, depth=agent.depth + 1,
                        skip={k: used.get(k, 0) + agent.skip.get(k, 0) for k in {*used, *agent.skip}})
        result = await self._child(jr, child_run_id(key), child, journaled=True)
        return dict(result["outcome"])

    async def _agent_resolve(self, jr: JournalRun) -> None:
        """The agent's status query for each unknown effect, then the run's own rules."""
        for effect in jr.unknown():
            reply = await self._act(jr, "status", key=effect.key)
            if reply.status is not None:
                jr.prefetch(effect.key, reply.status)
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
        unit = {} if self.unit is None else {"unit": self.unit}
        return {**self.jr.config(), "queued_events": len(self.inbox), "notes": self.notes, **unit}

    @workflow.query(name=QUERY_PENDING)
    def pending(self) -> list[dict[str, Any]]:
        return [] if self.jr is None else self.jr.pending()

    @workflow.query(name=QUERY_TRACE)
    def trace(self) -> list[dict[str, Any]]:
        return [] if self.jr is None else self.jr.records()
