"""What every agent shares to run durably (``agentfsm.impl.durable.driver.DurableLink``).

An external action's work takes a ``Pending`` (None unless the run is durable): the
activity makes ``started`` durable right before acting (``begin_effect``) and reports its
outcome with the event it feeds back (``report``), so the outcome and its event are one
write. On resume the agent rebuilds its context by replaying the journaled steps through
its context hooks (``replay``): the accepted events' ``on_event`` hooks and the internal
actions that only update context, never the handlers that start work.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from agentfsm.impl.driver import ActionContext, Driver, Envelope
from agentfsm.impl.durable.run import Report
from agentfsm.impl.engine import Outcome
from agentfsm.impl.llm.client import ToolCall
from agentfsm.impl.stores.journal import JSON, STEP, Record


@dataclass(frozen=True)
class Pending:
    """A journaled effect an activity performs (durable runs): its key, and whether it is a retry."""

    key: str
    retry: bool = False


def call_args(call: ToolCall) -> JSON:
    """A model's tool call as its effect journals it (``describe_call`` shows its arguments)."""
    return {"id": call.id, "arguments": call.arguments}


def report(pending: Pending | None, outcome: Literal["completed", "failed"], result: JSON,
           via: str = "run") -> Report | None:
    """The outcome an event reports for its effect (None in memory)."""
    return None if pending is None else Report(pending.key, outcome, result, via)


def begin_effect(driver: Driver, pending: Pending | None) -> bool:
    """Make ``started`` durable right before the effect acts; False: it must not act."""
    return pending is None or driver.durability is None or driver.durability.begin(pending.key, pending.retry)


def journal_interrupt(driver: Driver, reason: str) -> bool:
    """Make an interrupt durable before it takes effect (an agent whose table has no interrupt
    event); False: the journal failed and the interrupt must not take effect."""
    return driver.durability is None or driver.durability.interrupt(reason)


def replay(driver: Driver, records: Sequence[Record], payload: Callable[[str, JSON], Any],
           actions: Collection[str] = ()) -> None:
    """Run the journaled steps' context hooks again: ``on_event`` of each fired step, then the
    handlers of its ``actions`` (internal actions that only update context), in order."""
    for record in records:
        body = record.body
        if record.kind != STEP or body["status"] != "fired":
            continue
        event = str(body["event"])
        nxt = body["next"]
        envelope = Envelope(event, body["params"], payload(event, body.get("payload")))
        context = ActionContext(driver, envelope, Outcome(True, nxt["state"], nxt["vars"], tuple(body["actions"]),
                                                         body["status"]))
        hook = driver.on_event.get(event)
        if hook is not None:
            hook(context)
        for action in body["actions"]:
            if action in actions:
                driver.actions[action](context)
