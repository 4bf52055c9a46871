"""A durable run's state as a fold over its journal, and its snapshot form.

Recovery and the live runtime use the same ``apply``: the live runtime folds the records
it is about to write (to build the snapshot that goes with them), recovery folds what it
reads back. Replaying a step record re-runs the pure step from the recorded previous
configuration and insists on the recorded next one, so a journal that does not continue
from where the state is (a record replayed twice, a record missing, another table) is
refused instead of silently producing a different run.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol

from agentfsm.impl.stores.journal import (
    ANOMALY,
    APPROVAL_EXPIRED,
    COMPLETED,
    CREATED,
    DECIDED,
    INTERRUPT,
    JSON,
    REPAIRED,
    STALE,
    STARTED,
    STEP,
    UNKNOWN,
    JournalError,
    Record,
)
from agentfsm.spec.expr import Value
from agentfsm.spec.model import Table
from agentfsm.spec.semantics import StepResult

EffectStatus = Literal["pending", "started", "completed", "failed", "unknown"]
UNRESOLVED: tuple[EffectStatus, ...] = ("pending", "started", "unknown")


class Stepper(Protocol):
    """The pure step the durable runtime drives: ``agentfsm.spec.semantics`` or the Engine."""

    def step(self, state: int, values: tuple[Value, ...], event: str, params: tuple[Value, ...]) -> StepResult:
        ...


class ReplayError(JournalError):
    """The journal does not continue the state it is replayed onto."""

    def __init__(self, run_id: str, seq: int, reason: str) -> None:
        super().__init__(f"run {run_id!r}: record {seq} cannot be replayed: {reason}")
        self.seq = seq
        self.reason = reason


@dataclass
class Effect:
    """One external action emitted by a step; ``key`` is its idempotency key."""

    key: str
    action: str
    seq: int
    call_id: int
    idempotent: bool
    status: EffectStatus = "pending"
    attempts: int = 0
    result: JSON = None
    via: str = ""
    tool: str = ""        # one call of an action that fans out: the tool and its arguments
    args: JSON = None
    reported: bool = False  # an event fed the outcome back (drivers whose effects answer with events)

    def to_json(self) -> dict[str, JSON]:
        return {"key": self.key, "action": self.action, "seq": self.seq, "call_id": self.call_id,
                "idempotent": self.idempotent, "status": self.status, "attempts": self.attempts,
                "result": self.result, "via": self.via, "tool": self.tool, "args": self.args,
                "reported": self.reported}


@dataclass
class Approval:
    """A request for the user's approval, pending until the next accepted event answers it."""

    id: str
    action: str
    seq: int
    expires_at: float | None
    expired: bool = False

    def to_json(self) -> dict[str, JSON]:
        return {"id": self.id, "action": self.action, "seq": self.seq, "expires_at": self.expires_at,
                "expired": self.expired}


@dataclass
class RunState:
    state: int
    vars: tuple[Value, ...]
    version: int = 0
    halted: str | None = None
    effects: dict[str, Effect] = field(default_factory=dict)
    approvals: dict[str, Approval] = field(default_factory=dict)
    events: set[str] = field(default_factory=set)
    interrupted: int = 0
    """The sequence number of the latest ``interrupt`` record (0: none). It covers the effects
    emitted before it: recovery never starts or retries them (``DurableRun.recover``)."""

    def copy(self) -> RunState:
        return copy.deepcopy(self)

    def unresolved(self) -> list[Effect]:
        return [e for e in self.effects.values() if e.status in UNRESOLVED]

    def interrupts(self, effect: Effect) -> bool:
        """Whether an interrupt came after ``effect`` was emitted (the user asked to stop it)."""
        return effect.seq < self.interrupted

    def to_json(self, table: Table) -> dict[str, JSON]:
        return {"state": table.states[self.state].name, "vars": table.vars_dict(self.vars),
                "version": self.version, "halted": self.halted,
                "effects": [e.to_json() for e in self.effects.values()],
                "approvals": [a.to_json() for a in self.approvals.values()],
                "events": sorted(self.events), "interrupted": self.interrupted}

    @classmethod
    def from_json(cls, table: Table, body: Mapping[str, JSON]) -> RunState:
        return cls(state=table.state_index[body["state"]], vars=config_vars(table, body["vars"]),
                   version=int(body["version"]), halted=body["halted"],
                   effects={e["key"]: Effect(**e) for e in body["effects"]},
                   approvals={a["id"]: Approval(**a) for a in body["approvals"]},
                   events=set(body["events"]), interrupted=int(body.get("interrupted", 0)))


def config_vars(table: Table, values: Mapping[str, JSON]) -> tuple[Value, ...]:
    return tuple(values[v.name] for v in table.variables)


def config_json(table: Table, state: int, values: tuple[Value, ...]) -> dict[str, JSON]:
    return {"state": table.states[state].name, "vars": table.vars_dict(values)}


def initial_state(table: Table, record: Record) -> RunState:
    if record.kind != CREATED:
        raise ReplayError(record.run_id, record.seq, f"a journal starts with {CREATED!r}, not {record.kind!r}")
    start = record.body["config"]
    return RunState(table.state_index[start["state"]], config_vars(table, start["vars"]), record.seq)


def apply(table: Table, stepper: Stepper, st: RunState, record: Record, check: bool = True) -> None:
    """Fold one record into ``st`` (in place). ``check`` re-derives step records from the table."""
    if record.seq != st.version + 1:
        raise ReplayError(record.run_id, record.seq, f"the state is at version {st.version}")
    body = record.body
    kind = record.kind
    if kind == STEP:
        _apply_step(table, stepper, st, record, check)
    elif kind == ANOMALY:
        if table.unhandled.anomaly == "halt":  # else (log) the anomaly is on record and the run goes on
            st.halted = str(body["reason"])
    elif kind == STALE:
        pass
    elif kind == INTERRUPT:
        st.interrupted = record.seq
    elif kind in (STARTED, COMPLETED, UNKNOWN):
        effect = _effect(st, record)
        if kind == STARTED:
            effect.status, effect.attempts = "started", int(body["attempt"])
        elif kind == UNKNOWN:
            effect.status = "unknown"
        else:
            effect.status = "completed" if body["outcome"] == "completed" else "failed"
            effect.result, effect.via = body["result"], str(body["via"])
    elif kind == DECIDED:
        _apply_decision(st, record)
    elif kind == APPROVAL_EXPIRED:
        approval = st.approvals.get(str(body["id"]))
        if approval is None:
            raise ReplayError(record.run_id, record.seq, f"no pending approval {body['id']!r}")
        approval.expired = True
    elif kind != REPAIRED:
        raise ReplayError(record.run_id, record.seq, f"unknown record kind {kind!r}")
    if body.get("event_id"):
        st.events.add(str(body["event_id"]))
    if body.get("reports") and kind in (STEP, ANOMALY, STALE):
        _effect(st, record, "reports").reported = True
    st.version = record.seq


def _effect(st: RunState, record: Record, attr: str = "key") -> Effect:
    effect = st.effects.get(str(record.body[attr]))
    if effect is None:
        raise ReplayError(record.run_id, record.seq, f"no effect with key {record.body[attr]!r}")
    return effect


def _apply_step(table: Table, stepper: Stepper, st: RunState, record: Record, check: bool) -> None:
    body = record.body
    prev = body["prev"]
    here = config_json(table, st.state, st.vars)
    if prev != here:
        raise ReplayError(record.run_id, record.seq, f"it starts from {prev}, the run is at {here}")
    if check:
        event = table.event(body["event"])
        result = stepper.step(st.state, st.vars, event.name, event.param_values(body["params"]))
        derived = config_json(table, result.state, result.vars)
        if derived != body["next"] or list(result.actions) != list(body["actions"]):
            raise ReplayError(record.run_id, record.seq, f"the table takes {here} to {derived} "
                              f"with {list(result.actions)}, the journal says {body['next']} with {body['actions']}")
    nxt = body["next"]
    st.state, st.vars = table.state_index[nxt["state"]], config_vars(table, nxt["vars"])
    for answered in body.get("answers", ()):
        st.approvals.pop(str(answered), None)
    for e in body.get("effects", ()):
        st.effects[e["key"]] = Effect(e["key"], e["action"], record.seq, int(e["call_id"]), bool(e["idempotent"]),
                                      tool=str(e.get("tool", "")), args=e.get("args"))
    for a in body.get("approvals", ()):
        st.approvals[a["id"]] = Approval(a["id"], a["action"], record.seq, a["expires_at"])


def _apply_decision(st: RunState, record: Record) -> None:
    body = record.body
    decision = str(body["decision"])
    if "key" not in body:
        if decision != "continue":
            raise ReplayError(record.run_id, record.seq, f"an anomaly is resolved by 'continue', not {decision!r}")
        st.halted = None
        return
    effect = _effect(st, record)
    if decision == "completed" or decision == "failed":
        effect.status = "completed" if decision == "completed" else "failed"
        effect.result, effect.via = body.get("result"), "user"
    elif decision == "rerun":
        effect.status = "pending"
    else:
        raise ReplayError(record.run_id, record.seq, f"unknown decision {decision!r}")
