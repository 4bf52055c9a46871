"""A durable async driver: every step journaled, every external action run as an effect.

There is one implementation of the protocol, ``DurableRun``; this module only plugs the
async driver into it. The driver's pump delivers each event through the run (which steps
the driver's own engine, so the two never disagree). The external actions a step emits
become effects (one per call when an action fans out, like a tool batch) and are handed
to the agent after the step's hooks ran; the agent's activity makes ``started`` durable
right before the effect runs (``DurableRun.begin``) and feeds its outcome back as an event
carrying a ``Report``, so the outcome and the event it causes are one write.

Resuming: the run replays its journal, the agent rebuilds its context from the journaled
payloads, then the run settles what the crash left open (a started effect is ``unknown``:
status query, else an idempotent retry with the same key, else a decision for the user),
and outcomes settled without an event (a status query's answer, a user's decision) are
fed back to the agent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Protocol

from agentfsm.impl.driver import Driver, Envelope
from agentfsm.impl.durable.run import Calls, DurableRun, EffectCall, EngineStepper, Options, StatusReply, Tool
from agentfsm.impl.durable.state import Effect
from agentfsm.impl.engine import Outcome
from agentfsm.impl.stores.journal import JSON, JournalError, Record, Store
from agentfsm.impl.stores.leases import LeaseLost
from agentfsm.spec.semantics import Status

STATUS: dict[str, Status] = {"fired": "fired", "ignored": "ignored", "rejected": "rejected"}  # else: stale


class EffectAgent(Protocol):
    """What a driver implements to run durably (the Loom agent does)."""

    def payload_json(self, envelope: Envelope) -> JSON:
        """What to journal of an event's payload: enough to rebuild the agent's context."""
        ...

    def effect_calls(self, envelope: Envelope) -> Calls:
        """The calls an event's step will emit: for actions that fan out (a tool batch), one
        effect each; for an action that makes one call, that call (so a decision names it)."""
        ...

    def perform(self, effect: Effect, retry: bool) -> None:
        """Start an effect's activity: ``begin`` right before it acts, report with its event."""
        ...

    def status_query(self, call: EffectCall) -> StatusReply | None:
        """What became of an effect whose outcome is unknown; None when the tool cannot tell."""
        ...

    def report_back(self, effect: Effect) -> None:
        """Feed back the event of an effect settled without one (status query, user decision)."""
        ...

    def restore(self, records: Sequence[Record]) -> None:
        """Rebuild the context (the conversation) from the journal's payloads."""
        ...

    def resumed(self) -> None:
        """Re-arm what the current state implies beyond effects (a retry timer)."""
        ...


class _AgentTool:
    """The run's view of an agent's effect: status queries only (the agent performs)."""

    def __init__(self, agent: EffectAgent) -> None:
        self.agent = agent

    def run(self, call: EffectCall) -> JSON:
        raise RuntimeError(f"{call.action} is performed by the driver, not synchronously")

    def status(self, call: EffectCall) -> StatusReply | None:
        return self.agent.status_query(call)


class DurableLink:
    """Binds a driver (that is also its ``EffectAgent``) to a durable run."""

    def __init__(self, driver: Driver, agent: EffectAgent, run: DurableRun) -> None:
        self.driver = driver
        self.agent = agent
        self.run = run
        self._due: list[tuple[Effect, bool]] = []
        self._fed: set[str] = set()  # settled outcomes already fed back (their event may still be queued)
        run.performer = lambda effect, retry: self._due.append((effect, retry))
        driver.durability = self

    # -- opening -------------------------------------------------------------------------

    @classmethod
    def create(cls, driver: Driver, agent: EffectAgent, store: Store, run_id: str,
               options: Options | None = None) -> DurableLink:
        run = DurableRun.create(store, driver.table, run_id, cls._tools(driver, agent),
                                EngineStepper(driver.table, driver.engine), options)
        return cls(driver, agent, run)

    @classmethod
    def attach(cls, driver: Driver, agent: EffectAgent, store: Store, run_id: str,
               options: Options | None = None) -> DurableLink:
        """Load the run and the agent's context, without settling anything yet (see ``recover``)."""
        run = DurableRun.attach(store, driver.table, run_id, cls._tools(driver, agent),
                                EngineStepper(driver.table, driver.engine), options)
        driver.engine.restore(run.state, run.st.vars)
        agent.restore(store.records(run_id))
        return cls(driver, agent, run)

    @staticmethod
    def _tools(driver: Driver, agent: EffectAgent) -> dict[str, Tool]:
        return {a.name: _AgentTool(agent) for a in driver.table.actions if a.effect == "external"}

    @classmethod
    def open(cls, driver: Driver, agent: EffectAgent, store: Store, run_id: str, resume: bool,
             decisions: Mapping[str, str] | None = None, options: Options | None = None) -> DurableLink:
        """A new run, or (``resume``) the run recovered with the user's ``decisions`` applied
        (``{id: decision}``, see ``DurableRun.decide``); effects start with ``resume()``."""
        if not resume:
            return cls.create(driver, agent, store, run_id, options)
        link = cls.attach(driver, agent, store, run_id, options)
        link.run.recover()
        for id, decision in (decisions or {}).items():
            link.run.decide(id, decision)
        return link

    def resume(self) -> None:
        """Once the driver runs: start due effects, feed back settled outcomes, re-arm timers."""
        if self.run.terminal:
            return
        self.flush()
        self._report_settled()
        self.agent.resumed()

    def decide(self, id: str, decision: str) -> None:
        """The user's answer while the driver runs: a rerun starts, a settled outcome is fed back."""
        self.run.decide(id, decision)
        self.flush()
        self._report_settled()

    def _report_settled(self) -> None:
        for effect in self.run.unreported():
            if effect.key not in self._fed:
                self._fed.add(effect.key)
                self.agent.report_back(effect)

    # -- the driver's journal ------------------------------------------------------------

    def step(self, envelope: Envelope) -> tuple[Outcome, int] | None:
        run = self.run
        try:
            delivery = run.deliver(envelope.event, envelope.params, envelope.event_id,
                                   payload=self.agent.payload_json(envelope),
                                   calls=self.agent.effect_calls(envelope), reports=envelope.effect)
        except (JournalError, LeaseLost):
            # Nothing was written: the driver's engine goes back to the journaled state (it must
            # not show a state the journal never reached) and the run stops instead of waiting
            # for events that depend on this one.
            self.driver.engine.restore(run.state, run.st.vars)
            self.driver.halt()
            raise
        if delivery.status == "duplicate":
            return None
        if delivery.status == "halted" or run.st.halted is not None:
            self.driver.halt()  # an anomaly stops automatic progress until the user decides
            if delivery.status == "halted":
                return None
        status = STATUS.get(delivery.status, "final")
        return Outcome(delivery.accepted, delivery.state, run.vars, delivery.actions, status), delivery.seq

    def begin(self, key: str, retry: bool) -> bool:
        """Make ``started`` durable; False when the effect must not run (settled elsewhere, or the
        journal failed: then the agent stops, as when a step cannot be journaled)."""
        try:
            return self.run.begin(key, retry) is not None
        except JournalError as exc:
            self._stop(f"{key} cannot start", exc)
            return False

    def interrupt(self, reason: str) -> bool:
        """Journal an interrupt before it takes effect; False when the journal failed (the agent
        then stops, as when a step cannot be journaled)."""
        try:
            self.run.interrupt(reason)
            return True
        except JournalError as exc:
            self._stop("the interrupt cannot be journaled", exc)
            return False

    def _stop(self, what: str, exc: JournalError) -> None:
        self.driver.failures.append(exc)
        self.driver.log.error("%s: %s: %s", self.driver.name, what, exc)
        self.driver.halt()
        asyncio.get_running_loop().create_task(self.driver.shutdown())

    def flush(self) -> None:
        due, self._due = self._due, []
        for effect, retry in due:
            self.agent.perform(effect, retry)
