"""The async driver: runs any table's engine against the world (Loom's inversion of control).

The engine decides; the driver performs. One pump task takes events from a queue, steps
the engine, publishes the state change, then runs the hooks a table-specific agent
registered: ``on_event`` (update context from an accepted event's payload), ``on_enter``
(a step fired into a state, e.g. start a retry timer) and one handler per action. Handlers are
quick and synchronous; I/O runs in *activities* (tracked tasks) that feed events back.
Cancelling an activity also discards the events it already queued, so a late reply from
an interrupted LLM stream can never move the engine.

Monitoring follows vibework's handle: ``state()``, ``is_idle()``, ``is_processing()``,
``is_done()`` and ``subscribe()`` (an async iterator of state changes), plus one structured
log record (``logging`` with ``extra`` fields) per step.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable, Collection, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from agentfsm.impl.engine import Engine, Outcome
from agentfsm.spec.expr import Value

LOG = logging.getLogger("agentfsm.driver")


@dataclass(frozen=True)
class Envelope:
    """An event on its way to the engine: table parameters plus what the world said (payload)."""

    event: str
    params: Mapping[str, Value] = field(default_factory=dict)
    payload: Any = None
    source: int | None = None  # the activity that fed it
    event_id: str | None = None  # durable runs: a redelivered event with this id is a duplicate
    effect: Any = None  # durable runs: the outcome of the external effect this event reports


@dataclass(frozen=True)
class StateChange:
    """One step as subscribers see it (rejected steps too: the state is then unchanged)."""

    seq: int
    previous: str
    state: str
    event: str
    params: Mapping[str, Value]
    accepted: bool
    status: str
    actions: tuple[str, ...]
    vars: Mapping[str, Value]


@dataclass(frozen=True)
class ActionContext:
    """What a hook gets: the event that led here and the engine's outcome."""

    driver: Driver
    envelope: Envelope
    outcome: Outcome


Hook = Callable[[ActionContext], None]


class Journal(Protocol):
    """Makes a driver durable (``agentfsm.impl.durable.driver``): it steps the engine through a
    journal and performs the table's external actions as effects, so the driver's own
    handlers for them do not run."""

    def step(self, envelope: Envelope) -> tuple[Outcome, int] | None:
        """The journaled step and its sequence number; None when nothing was applied."""
        ...

    def flush(self) -> None:
        """Start the effects the last step (or a recovery) made due."""
        ...

    def begin(self, key: str, retry: bool) -> bool:
        """Make an effect's ``started`` durable right before it runs; False: it must not run."""
        ...

    def interrupt(self, reason: str) -> bool:
        """Make the user's interrupt durable before it takes effect; False: the journal failed."""
        ...


@dataclass
class Activity:
    id: int
    name: str
    task: asyncio.Task[None] | None = None

    def feed(self, driver: Driver, event: str, payload: Any = None, effect: Any = None, **params: Value) -> None:
        driver.feed(event, payload, self.id, effect, None, **params)


class _Control:
    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.done: asyncio.Future[None] = asyncio.get_running_loop().create_future()


class Subscription:
    """An async iterator of ``StateChange``; ends when the driver stops."""

    _END = object()

    def __init__(self, driver: Driver) -> None:
        self._driver = driver
        self._queue: asyncio.Queue[Any] = asyncio.Queue()

    def _put(self, item: Any) -> None:
        self._queue.put_nowait(item)

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> StateChange:
        item = await self._queue.get()
        if item is self._END:
            raise StopAsyncIteration
        change: StateChange = item
        return change

    def close(self) -> None:
        self._driver._subscribers.discard(self)
        self._put(self._END)


class Driver:
    """Runs an engine: ``start()``, ``feed()``, ``interrupt()``, ``shutdown()`` and vibework's monitoring API.

    ``actions``, ``on_event`` and ``on_enter`` map the table's names to hooks; an action
    without a handler is logged and skipped. ``shutdown_event`` is the table's event that
    leads to a final state from any state; ``idle_states`` default to the initial state.
    """

    def __init__(self, engine: Engine, *, actions: Mapping[str, Hook] | None = None,
                 on_event: Mapping[str, Hook] | None = None, on_enter: Mapping[str, Hook] | None = None,
                 shutdown_event: str | None = None, idle_states: Collection[str] | None = None,
                 processing_states: Collection[str] = (), name: str = "agent",
                 logger: logging.Logger = LOG, history: int = 1000) -> None:
        self.engine = engine
        self.table = engine.table
        self.name = name
        self.actions: dict[str, Hook] = dict(actions or {})
        self.on_event: dict[str, Hook] = dict(on_event or {})
        self.on_enter: dict[str, Hook] = dict(on_enter or {})
        self.shutdown_event = shutdown_event
        self.idle_states = frozenset(idle_states if idle_states is not None else {self.table.initial.name})
        self.processing_states = frozenset(processing_states)
        self.log = logger
        self.failures: list[BaseException] = []
        self.history: deque[StateChange] = deque(maxlen=history)  # the latest steps, for debugging
        self._seq = 0
        self._queue: asyncio.Queue[Envelope | _Control] | None = None
        self._pump: asyncio.Task[None] | None = None
        self._activities: dict[int, Activity] = {}
        self._cancelled: set[int] = set()
        self._next_activity = 0
        self._subscribers: set[Subscription] = set()
        self._listeners: list[Callable[[StateChange], None]] = []
        self._waiters: list[tuple[asyncio.Future[None], Callable[[], bool]]] = []
        self._stopped = False
        self._halt = False
        self.durability: Journal | None = None
        table = self.table
        for kind, names, known in (("action", self.actions, table.action_index),
                                   ("event", self.on_event, table.event_index),
                                   ("state", self.on_enter, table.state_index),
                                   ("event", [shutdown_event] if shutdown_event else [], table.event_index)):
            for unknown in set(names) - set(known):
                raise ValueError(f"{table.machine} has no {kind} named {unknown!r}")

    # -- lifecycle -----------------------------------------------------------------------

    def start(self) -> None:
        if self._pump is None:
            self._queue = asyncio.Queue()
            self._pump = asyncio.create_task(self._run(), name=f"{self.name}-pump")

    async def __aenter__(self) -> Driver:
        self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()

    def feed(self, event: str, payload: Any = None, source: int | None = None, effect: Any = None,
             event_id: str | None = None, **params: Value) -> None:
        """Queue an event for the engine (from the world, a handler or an activity).

        Raises ValueError for an event the table does not declare or parameters it does not admit.
        """
        if self._queue is None:
            raise RuntimeError("the driver is not started")
        decl = self.table.event_index.get(event)
        if decl is None:
            raise ValueError(f"{self.table.machine} has no event {event!r}")
        decl.param_values(params)
        if not self._stopped:
            self._queue.put_nowait(Envelope(event, params, payload, source, event_id, effect))

    async def interrupt(self) -> None:
        """Ask the agent to stop what it is doing (``on_interrupt`` decides how); returns when handled."""
        await self._control("interrupt")

    async def shutdown(self) -> None:
        """Deliver the shutdown event from whatever state, stop every activity and the pump."""
        if self._pump is None:
            return
        if not self._stopped:
            await self._control("shutdown")
        with contextlib.suppress(asyncio.CancelledError):
            await self._pump

    async def _control(self, kind: str) -> None:
        if self._queue is None or self._stopped:
            return
        control = _Control(kind)
        self._queue.put_nowait(control)
        await control.done

    # -- monitoring ----------------------------------------------------------------------

    def state(self) -> str:
        return self.engine.state

    def is_idle(self) -> bool:
        return self.engine.state in self.idle_states and (self._queue is None or self._queue.empty())

    def is_processing(self) -> bool:
        return self.engine.state in self.processing_states

    def is_done(self) -> bool:
        return self.engine.is_final or self._stopped

    def subscribe(self) -> Subscription:
        subscription = Subscription(self)
        if self._stopped:
            subscription._put(Subscription._END)
        else:
            self._subscribers.add(subscription)
        return subscription

    def add_listener(self, listener: Callable[[StateChange], None]) -> None:
        """Call ``listener`` synchronously on every step, before the step's hooks run."""
        self._listeners.append(listener)

    async def wait_until(self, predicate: Callable[[], bool]) -> None:
        """Return once ``predicate`` holds after a step (or the driver stopped)."""
        if predicate() or self._stopped:
            return
        waiter = asyncio.get_running_loop().create_future()
        entry = (waiter, predicate)
        self._waiters.append(entry)
        try:
            await waiter
        finally:
            with contextlib.suppress(ValueError):
                self._waiters.remove(entry)

    def is_quiet(self) -> bool:
        """No event waits for the engine and no activity runs."""
        return (self._queue is None or self._queue.empty()) and not self._activities

    async def wait_idle(self) -> None:
        await self.wait_until(lambda: self.is_idle() and not self._activities)

    async def wait_done(self) -> None:
        await self.wait_until(lambda: self._stopped)

    # -- activities ----------------------------------------------------------------------

    def spawn(self, name: str, work: Callable[[Activity], Coroutine[Any, Any, None]]) -> Activity:
        """Run ``work(activity)`` as a tracked task; it feeds events through the activity."""
        self._next_activity += 1
        activity = Activity(self._next_activity, name)
        self._activities[activity.id] = activity
        activity.task = asyncio.create_task(self._guard(activity, work), name=f"{self.name}-{name}")
        return activity

    async def _guard(self, activity: Activity, work: Callable[[Activity], Coroutine[Any, Any, None]]) -> None:
        try:
            await work(activity)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.failures.append(exc)
            self.log.exception("activity %s failed; shutting down", activity.name,
                               extra={"agent": self.name, "machine": self.table.machine, "activity": activity.name})
            if not self._stopped and self._queue is not None:
                self._queue.put_nowait(_Control("shutdown"))
        finally:
            self._activities.pop(activity.id, None)
            self._notify()

    def cancel(self, activity: Activity | None) -> None:
        """Stop an activity and discard the events it queued and has not been stepped yet (also once it ended)."""
        if activity is None:
            return
        self._cancelled.add(activity.id)
        if activity.id not in self._activities:
            return
        self._activities.pop(activity.id, None)
        if activity.task is not None:
            activity.task.cancel()

    def cancel_all(self) -> None:
        for activity in list(self._activities.values()):
            self.cancel(activity)

    def running(self, name: str | None = None) -> list[Activity]:
        return [a for a in self._activities.values() if name is None or a.name == name]

    # -- the pump ------------------------------------------------------------------------

    def on_interrupt(self) -> None:
        """Table-specific: bring the agent back to an idle state. The default cancels every activity."""
        self.cancel_all()

    def on_shutdown(self) -> None:
        """Table-specific: end the agent on shutdown. The default delivers ``shutdown_event``."""
        if self.shutdown_event is not None and not self.engine.is_final:
            self.apply(Envelope(self.shutdown_event))

    async def _run(self) -> None:
        assert self._queue is not None
        try:
            while not self.engine.is_final and not self._halt:
                item = await self._queue.get()
                if isinstance(item, _Control):
                    self._handle_control(item)
                else:
                    self.apply(item)
                self._notify()
        finally:
            self._stop()

    def _handle_control(self, control: _Control) -> None:
        try:
            if control.kind == "interrupt":
                self.on_interrupt()
            else:
                self.on_shutdown()
        finally:
            if not control.done.done():
                control.done.set_result(None)
        if control.kind == "shutdown":
            if not self.is_done():
                self.log.warning("%s: %s did not reach a final state on shutdown; stopping anyway",
                                 self.name, self.table.machine, extra={"agent": self.name})
            self._halt = True

    def _stop(self) -> None:
        self._stopped = True
        self.cancel_all()
        if self._queue is not None:
            while not self._queue.empty():
                item = self._queue.get_nowait()
                if isinstance(item, _Control) and not item.done.done():
                    item.done.set_result(None)
        for subscription in list(self._subscribers):
            subscription.close()
        self._notify()

    def _notify(self) -> None:
        for entry in list(self._waiters):
            waiter, predicate = entry
            if not waiter.done() and (self._stopped or predicate()):
                waiter.set_result(None)

    def apply(self, envelope: Envelope) -> Outcome | None:
        """Step the engine with one event and run its hooks (called by the pump, or by hooks inline)."""
        if envelope.source is not None and envelope.source in self._cancelled:
            self.log.debug("%s: dropped %s from a cancelled activity", self.name, envelope.event,
                           extra={"agent": self.name, "event": envelope.event})
            return None
        previous = self.engine.state
        seq = None
        try:
            if self.durability is None:
                outcome = self.engine.step(envelope.event, **envelope.params)
            else:
                stepped = self.durability.step(envelope)
                if stepped is None:
                    return None
                outcome, seq = stepped
        except Exception as exc:  # a bug in a handler, a table that breaks its rules, a journal that fails
            self.failures.append(exc)
            self.log.error("%s: %s %s failed in %s: %s", self.name, envelope.event, dict(envelope.params),
                           previous, exc, extra={"agent": self.name, "machine": self.table.machine,
                                                 "event": envelope.event, "from_state": previous})
            return None
        self._publish(previous, envelope, outcome, seq)
        if outcome.status == "rejected":
            self._on_rejected()
        context = ActionContext(self, envelope, outcome)
        if outcome.status == "fired":
            hook = self.on_event.get(envelope.event)
            if hook is not None:
                hook(context)
            entered = self.on_enter.get(outcome.state)
            if entered is not None:
                entered(context)
        for action in outcome.actions:
            external = self.table.action_index[action].effect == "external"
            handler = self.actions.get(action)
            if external and self.durability is not None:
                continue  # performed as a journaled effect (flushed below)
            if handler is not None:
                handler(context)
            elif external:
                self.log.warning("%s: no handler for external action %s", self.name, action,
                                 extra={"agent": self.name, "action": action})
        if self.durability is not None:
            self.durability.flush()
        return outcome

    def _on_rejected(self) -> None:
        """A rejected event, as the table's ``unhandled`` says: ``halt`` stops automatic progress
        (in memory as in a durable run), ``log`` goes on (the step was logged as a warning);
        ``feed`` delivers its event next."""
        unhandled = self.table.unhandled
        if unhandled.anomaly == "halt":
            self.halt()
        elif unhandled.feed is not None:
            self.feed(unhandled.feed)

    def halt(self) -> None:
        """Stop the pump after the current item: automatic progress must stop (a durable anomaly)."""
        self._halt = True

    def _publish(self, previous: str, envelope: Envelope, outcome: Outcome, seq: int | None = None) -> None:
        self._seq = self._seq + 1 if seq is None else seq
        change = StateChange(self._seq, previous, outcome.state, envelope.event, dict(envelope.params),
                             outcome.accepted, outcome.status, outcome.actions, outcome.vars)
        self.history.append(change)
        level = logging.INFO if outcome.accepted else logging.WARNING
        self.log.log(level, "%s: %s --%s--> %s %s", self.name, previous, envelope.event, outcome.state,
                     " ".join(outcome.actions) or "-", extra={
                         "agent": self.name, "machine": self.table.machine, "seq": change.seq,
                         "event": envelope.event, "params": dict(envelope.params), "from_state": previous,
                         "to_state": outcome.state, "status": outcome.status, "actions": list(outcome.actions),
                         "vars": dict(outcome.vars), "ts": time.time()})
        for subscription in self._subscribers:
            subscription._put(change)
        for listener in self._listeners:
            listener(change)
