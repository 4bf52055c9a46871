"""The durable run: every step journaled, external effects under the started/completed protocol.

Seed 003's rules, as code:

- A step is written (previous and next configuration, event, reason, ids) with
  compare-and-swap on the run's version; a writer that loses reloads and applies its event
  to the new state, where the table accepts, rejects (an anomaly: journaled, and under
  the table's ``unhandled.anomaly: halt`` it stops automatic progress; under ``log`` the
  run goes on, as seed 000's "log a warning and return WaitForInput") or, in a final
  state, refuses it as stale.
- An external action emitted by a step gets an idempotency key ``RUN/SEQ/CALL`` (run id,
  the step's sequence number, the action's position in the step). ``started`` is durable
  before the tool runs, ``completed`` (result or failure) after.
- Recovery loads the newest snapshot, replays the rest once, then settles every effect:
  one never started is run (it cannot have run: ``started`` precedes it); one started but
  not completed is recorded ``unknown`` and resolved by the tool's status query, else by
  an idempotent retry with the same key, else left as a decision for the user. It is never
  re-run silently. Completed results are reused; pending approvals are kept and their
  lifetime re-validated; a terminal run does nothing.
- An interrupt (``interrupt``, for tables without an interrupt event) is journaled before
  it takes effect; recovery then never starts nor retries an effect emitted before it:
  unless a status query says it completed, it is settled ``failed`` via ``interrupt``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from agentfsm.impl.durable.state import (
    Approval,
    Effect,
    ReplayError,
    RunState,
    Stepper,
    apply,
    config_json,
    initial_state,
)
from agentfsm.impl.engine import Engine
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
    Conflict,
    CorruptJournal,
    Entry,
    JournalError,
    OtherMachine,
    Record,
    Store,
)
from agentfsm.spec.expr import Value
from agentfsm.spec.model import Table
from agentfsm.spec.semantics import StepResult

StatusReply = tuple[Literal["done", "not-run", "unknown", "resume"], JSON]
"""A status query's answer: ``done`` (with the result), ``not-run``, ``unknown``, or ``resume``: the
effect's own work is journaled under its key (a sub-agent's child run), so performing it again
continues that work where it stopped instead of repeating it."""
Clock = Callable[[], float]


@dataclass(frozen=True)
class EffectCall:
    """What a tool is asked to do; ``key`` stays the same across retries of one effect.
    ``tool`` and ``args`` name one call of an action that fans out (a tool batch)."""

    run_id: str
    action: str
    key: str
    attempt: int
    tool: str = ""
    args: JSON = None
    token: int = 0
    """The fencing token of the run's owner making the call (0 outside leases): a service that
    fences (``Tool.fences``) refuses a call older than a status query it already answered."""


@dataclass(frozen=True)
class CallSpec:
    """One call of an action that fans out into several effects (ExecuteTools: one per tool
    call), each with its own key ``RUN/SEQ/ID`` and its own idempotence (the tool's)."""

    id: str
    tool: str
    idempotent: bool
    args: JSON = None


@dataclass(frozen=True)
class Described:
    """The one call of an action that does not fan out (vibework's current tool call, the
    explorer's commands): journaled with its effect, under the action's own key and
    idempotence, so a decision about it names the call and its arguments (``describe_call``)."""

    tool: str
    args: JSON


Calls = Mapping[str, Sequence[CallSpec] | Described]
"""What a driver's event will emit besides the table's actions: per action, its calls."""


@dataclass(frozen=True)
class Report:
    """An event that reports an effect's outcome: its ``completed`` record is written in the
    same transaction as the event's, so an outcome is never durable without the event it
    feeds back (nor the event without the outcome)."""

    key: str
    outcome: Literal["completed", "failed"]
    result: JSON
    via: str = "run"


Performer = Callable[[Effect, bool], None]
"""Performs an effect elsewhere (an async driver): called with the effect and whether it is a
retry; it calls ``DurableRun.begin`` right before the effect runs and reports the outcome
with the event it feeds back (``deliver(..., reports=Report(...))``)."""


class Tool(Protocol):
    """An external action's handler. ``status`` answers None when the tool has no status query.

    A status query's ``not-run`` is trusted (the effect is then run) only from a tool whose
    class sets ``fences = True``: its status query also fences the key at the caller's token,
    so a stalled previous owner (an older token) can no longer perform it. From any other
    tool, ``not-run`` is treated as no answer (the previous owner may still act)."""

    def run(self, call: EffectCall) -> JSON:
        ...

    def status(self, call: EffectCall) -> StatusReply | None:
        ...


class EngineStepper:
    """The runtime's Engine as the durable runtime's pure step: restored to the journaled
    configuration, stepped, and read back (one engine serves the whole run)."""

    def __init__(self, table: Table, engine: Engine | None = None) -> None:
        self.table = table
        self.engine = engine or Engine(table)

    def step(self, state: int, values: tuple[Value, ...], event: str, params: tuple[Value, ...]) -> StepResult:
        engine = self.engine
        engine.restore(self.table.states[state].name, values)
        outcome = engine.step_values(event, params)
        return StepResult(outcome.accepted, engine.state_index, engine.values, outcome.actions,
                          engine.last_rows, outcome.status)


class TokenRefused(Exception):
    """A fencing tool's refusal of a call made under an older token than one it has seen (its
    status query fenced the key for a newer owner): the call did not run."""


class DecisionError(ValueError):
    """A user's decision that settles nothing (no such open question, or not a valid answer)."""


@dataclass(frozen=True)
class Decision:
    """Something only the user can settle: an unknown effect, an expired approval, an anomaly."""

    kind: Literal["unknown-effect", "approval-expired", "anomaly"]
    id: str
    message: str


@dataclass(frozen=True)
class Delivery:
    """What delivering one event did. ``status`` is ``fired``/``ignored`` (accepted), ``rejected``
    (an anomaly), ``stale`` (the run had ended), ``duplicate`` (this event id was already
    delivered) or ``halted`` (an earlier anomaly stops automatic progress; nothing written)."""

    status: str
    accepted: bool
    state: str
    actions: tuple[str, ...]
    effects: tuple[Effect, ...] = ()
    seq: int = 0


def describe_call(effect: Effect, limit: int = 300) -> str:
    """An effect as a user deciding it needs to see it: the tool (or action) and its arguments."""
    name = effect.tool or effect.action
    shown = effect.args
    if isinstance(shown, dict) and isinstance(shown.get("arguments"), str):  # a model's tool call: its arguments
        try:
            shown = json.loads(shown["arguments"])
        except ValueError:
            shown = shown["arguments"]
    if shown is None:
        return name
    args = json.dumps(shown, sort_keys=True, ensure_ascii=False)
    return f"{name} {args if len(args) <= limit else args[:limit] + '...'}"


def table_approvals(table: Table) -> dict[str, float | None]:
    """The actions the table marks as asking for approval (``approval:``), with their lifetimes."""
    return {a.name: a.approval_lifetime for a in table.actions if a.approval}


@dataclass(frozen=True)
class Extra:
    """What a driver adds to an event besides the table's parameters (see ``deliver``)."""

    payload: JSON
    calls: Calls
    reports: Report | None


@dataclass
class Options:
    """``approvals`` maps each action that asks the user for approval to its lifetime in seconds
    (None: never expires), beside (and over) the actions the table marks ``approval:``;
    ``snapshot_every`` writes a snapshot every N records (0: never)."""

    approvals: Mapping[str, float | None] = field(default_factory=dict)
    snapshot_every: int = 0
    max_conflicts: int = 100
    clock: Clock = time.time
    max_attempts: int = 5
    """An idempotent effect started this many times without an outcome (each owner lost it
    mid-call: it keeps outliving the lease) is no longer retried: it becomes a decision."""


class DurableRun:
    """One run of a table whose every step and effect is in a journal store."""

    def __init__(self, store: Store, table: Table, run_id: str, tools: Mapping[str, Tool], st: RunState,
                 stepper: Stepper | None = None, options: Options | None = None, last_snapshot: int = 0) -> None:
        missing = sorted(a.name for a in table.actions if a.effect == "external" and a.name not in tools)
        if missing:
            raise ValueError(f"no tool for the external action(s) {', '.join(missing)}")
        self.store = store
        self.table = table
        self.run_id = run_id
        self.tools = tools
        self.st = st
        self.stepper = stepper or EngineStepper(table)
        self.options = options or Options()
        self.last_snapshot = last_snapshot
        self.performer: Performer | None = None
        self.approvals = {**table_approvals(table), **self.options.approvals}
        self.handed: set[str] = set()  # keys handed to the performer and not yet started

    # -- opening -------------------------------------------------------------------------

    @classmethod
    def create(cls, store: Store, table: Table, run_id: str, tools: Mapping[str, Tool],
               stepper: Stepper | None = None, options: Options | None = None) -> DurableRun:
        opts = options or Options()
        start = config_json(table, table.initial.index, table.initial_vars())
        record = store.create(run_id, table.machine, Entry(CREATED, {"machine": table.machine, "config": start},
                                                           opts.clock()))
        return cls(store, table, run_id, tools, initial_state(table, record), stepper, opts)

    @classmethod
    def attach(cls, store: Store, table: Table, run_id: str, tools: Mapping[str, Tool],
               stepper: Stepper | None = None, options: Options | None = None) -> DurableRun:
        """Load the run from its newest snapshot and the records after it, without recovering it."""
        machine = store.machine(run_id)
        if machine != table.machine:
            raise OtherMachine(run_id, machine, table.machine)
        stepper = stepper or EngineStepper(table)
        loaded = store.load(run_id)
        records = list(loaded.records)
        if loaded.snapshot is not None:
            st = RunState.from_json(table, loaded.snapshot.body)
        else:
            if not records:
                raise ReplayError(run_id, 1, "the journal is empty")
            st = initial_state(table, records.pop(0))
        run = cls(store, table, run_id, tools, st, stepper, options,
                  loaded.snapshot.seq if loaded.snapshot else 0)
        run._replay(records)
        return run

    @classmethod
    def open(cls, store: Store, table: Table, run_id: str, tools: Mapping[str, Tool],
             stepper: Stepper | None = None, options: Options | None = None) -> DurableRun:
        """Recover a run after a restart: load, replay once, settle its effects and approvals."""
        run = cls.attach(store, table, run_id, tools, stepper, options)
        run.recover()
        return run

    def _replay(self, records: Sequence[Record]) -> None:
        for record in records:
            apply(self.table, self.stepper, self.st, record)

    def reload(self) -> None:
        """Catch up with records other writers appended since we last looked."""
        self._replay(self.store.records(self.run_id, after=self.st.version))

    # -- views ---------------------------------------------------------------------------

    @property
    def state(self) -> str:
        return self.table.states[self.st.state].name

    @property
    def vars(self) -> dict[str, Value]:
        return self.table.vars_dict(self.st.vars)

    @property
    def version(self) -> int:
        return self.st.version

    @property
    def terminal(self) -> bool:
        return self.table.states[self.st.state].final and not self.st.unresolved()

    @property
    def pending_approvals(self) -> list[Approval]:
        return list(self.st.approvals.values())

    def decisions(self) -> list[Decision]:
        found = [Decision("unknown-effect", e.key, f"{describe_call(e)} ({e.key}) may or may not have run: "
                          "its outcome is unknown" + self._outlived(e) + "; decide completed, failed or rerun")
                 for e in self.st.effects.values() if e.status == "unknown" and e.key not in self.handed]
        found += [Decision("approval-expired", a.id, f"the approval asked by {a.action} ({a.id}) expired "
                           "while the run was down; ask again") for a in self.st.approvals.values() if a.expired]
        if self.st.halted is not None:
            found.append(Decision("anomaly", str(self.st.version), self.st.halted))
        return found

    def _outlived(self, effect: Effect) -> str:
        if effect.idempotent and effect.attempts >= self.options.max_attempts:
            return (f" (started {effect.attempts} times and no outcome journaled: each time its owner stopped, or "
                    "lost the lease before it could journal the outcome, so it may have run, even to completion, "
                    "every time; it keeps outliving the lease, so it is not retried again)")
        return ""

    # -- writing -------------------------------------------------------------------------

    def _append(self, entries: Sequence[Entry]) -> list[Record]:
        """Write ``entries`` if the run is still at our version (``Conflict`` otherwise), with a
        snapshot of the resulting state when one is due; our state follows only on success."""
        base = self.st.version
        every = self.options.snapshot_every
        if not (every and base + len(entries) - self.last_snapshot >= every):
            records = self.store.append(self.run_id, base, entries)
            self._replay_own(records, self.st)
            return records
        after = self.st.copy()
        self._replay_own([Record(self.run_id, base + 1 + i, e.kind, e.time, e.body, "")
                          for i, e in enumerate(entries)], after)
        records = self.store.append(self.run_id, base, entries, after.to_json(self.table))
        self.st = after
        self.last_snapshot = after.version
        return records

    def _replay_own(self, records: Sequence[Record], st: RunState) -> None:
        """Fold records we built from our own step (no need to derive them again)."""
        for record in records:
            apply(self.table, self.stepper, st, record, check=False)

    def _append_retrying(self, entry: Entry, still_needed: Callable[[], bool]) -> bool:
        """Append a record that does not depend on the state version (an effect's progress)."""
        for _ in range(self.options.max_conflicts):
            if not still_needed():
                return False
            try:
                self._append([entry])
                return True
            except Conflict:
                self.reload()
        raise JournalError(f"run {self.run_id!r}: gave up after {self.options.max_conflicts} write conflicts")

    def _entry(self, event: str, params: tuple[Value, ...], event_id: str | None, extra: Extra) -> tuple[
            list[Entry], StepResult]:
        table = self.table
        st = self.st
        result = self.stepper.step(st.state, st.vars, event, params)
        here = config_json(table, st.state, st.vars)
        base: dict[str, JSON] = {"event": event, "params": table.event(event).param_dict(params),
                                 "event_id": event_id}
        if extra.payload is not None:
            base["payload"] = extra.payload
        now = self.options.clock()
        before: list[Entry] = []
        report = extra.reports
        if report is not None:
            base["reports"] = report.key
            if self.st.effects[report.key].status not in ("completed", "failed"):
                before.append(Entry(COMPLETED, {"key": report.key, "outcome": report.outcome, "result": report.result,
                                                "via": report.via}, now))
        if result.status == "final":
            return [*before, Entry(STALE, {**base, "state": here["state"], "reason": "the run has ended"}, now)], result
        if result.status == "rejected":
            reason = f"illegal event {event} in state {here['state']}: no row applies"
            return [*before, Entry(ANOMALY, {**base, "state": here["state"], "reason": reason}, now)], result
        seq = st.version + len(before) + 1
        effects: list[dict[str, JSON]] = []
        approvals = []
        for call_id, name in enumerate(result.actions):
            action = table.action_index[name]
            key = f"{self.run_id}/{seq}/{call_id}"
            if action.effect == "external":
                effects += self._effects(key, name, call_id, action.idempotent, extra.calls.get(name))
            if name in self.approvals:
                lifetime = self.approvals[name]
                approvals.append({"id": key, "action": name,
                                  "expires_at": None if lifetime is None else now + lifetime})
        reason = ("; ".join(f"row {r.index}: {r.label()}" for r in result.rows)
                  or f"no row applies: {event} ignored")
        body = {**base, "prev": here, "next": config_json(table, result.state, result.vars),
                "status": result.status, "reason": reason, "rows": [r.index for r in result.rows],
                "actions": list(result.actions), "effects": effects, "approvals": approvals,
                "answers": sorted(st.approvals)}
        return [*before, Entry(STEP, body, now)], result

    def _effects(self, key: str, action: str, call_id: int, idempotent: bool,
                 calls: Sequence[CallSpec] | Described | None) -> list[dict[str, JSON]]:
        """The effects of one emitted external action: itself, or one per call when it fans out."""
        if calls is None:
            return [{"key": key, "action": action, "call_id": call_id, "idempotent": idempotent}]
        if isinstance(calls, Described):
            return [{"key": key, "action": action, "call_id": call_id, "idempotent": idempotent,
                     "tool": calls.tool, "args": calls.args}]
        prefix = key.rsplit("/", 1)[0]
        found: list[dict[str, JSON]] = []
        keys: set[str] = set()
        for j, call in enumerate(calls):
            sub = f"{prefix}/{call.id}"
            if sub in keys:   # a model may repeat a call id; keys must stay unique
                sub = f"{sub}#{j}"
            keys.add(sub)
            found.append({"key": sub, "action": action, "call_id": call_id, "idempotent": call.idempotent,
                          "tool": call.tool, "args": call.args})
        return found

    def deliver(self, event: str, params: Mapping[str, object] | None = None,
                event_id: str | None = None, *, payload: JSON = None,
                calls: Calls | None = None, reports: Report | None = None) -> Delivery:
        """Apply one event durably and run the external effects it emits.

        ``event_id`` makes delivery idempotent: an event source that redelivers after a crash
        gets ``duplicate`` for events already in the journal. ``payload`` is journaled with
        the step (what the world said: a user's text, a model's response, a tool's result);
        ``calls`` fans an emitted action out into one effect per call, or describes its one call;
        ``reports`` names the effect whose outcome this event reports (written in the same
        transaction)."""
        if event not in self.table.event_index:
            raise ValueError(f"{self.table.machine} has no event {event!r}")
        values = self.table.event(event).param_values(params or {})
        if reports is not None and reports.key not in self.st.effects:
            raise ValueError(f"no effect {reports.key!r} to report")
        extra = Extra(payload, calls or {}, reports)
        if reports is not None and reports.via == "run":
            self._note("returned", reports.key, result="done" if reports.outcome == "completed" else "failed")
        for _ in range(self.options.max_conflicts):
            if event_id is not None and event_id in self.st.events:
                return Delivery("duplicate", False, self.state, ())
            if self.st.halted is not None:
                return Delivery("halted", False, self.state, ())
            entries, result = self._entry(event, values, event_id, extra)
            try:
                record = self._append(entries)[-1]
            except Conflict:
                self.reload()
                continue
            break
        else:
            raise JournalError(f"run {self.run_id!r}: gave up after {self.options.max_conflicts} write conflicts")
        status = result.status if record.kind == STEP else record.kind if record.kind != ANOMALY else "rejected"
        keys = [e.key for e in self.st.effects.values() if e.seq == record.seq]
        for key in keys:
            self._perform(self.st.effects[key])
        return Delivery(status, result.accepted, self.state, result.actions,
                        tuple(self.st.effects[k] for k in keys), record.seq)

    def interrupt(self, reason: str) -> None:
        """Journal the user's interrupt, before it takes effect: a recovery will neither start
        nor retry the effects emitted so far (the driver stops or answers them itself)."""
        entry = Entry(INTERRUPT, {"state": self.state, "reason": reason}, self.options.clock())
        self._append_retrying(entry, lambda: True)

    def _tool(self, effect: Effect) -> Tool:
        return self.tools[effect.action]

    def _call(self, effect: Effect, attempt: int) -> EffectCall:
        lease = getattr(self.store, "lease", None)
        token = int(getattr(lease, "token", 0))
        return EffectCall(self.run_id, effect.action, effect.key, attempt, effect.tool, effect.args, token)

    def unreported(self) -> list[Effect]:
        """Settled effects whose outcome no event has fed back yet (resolved by a status query
        or by the user): a driver whose effects answer with events feeds these back."""
        return [e for e in self.st.effects.values() if e.status in ("completed", "failed") and not e.reported]

    def _perform(self, effect: Effect, retry: bool = False) -> None:
        """started (durable) -> the tool runs -> completed. The only place a tool runs here; a
        ``performer`` (the async driver) takes the effect instead and follows the same order."""
        if self.performer is not None:
            self.handed.add(effect.key)
            self.performer(effect, retry)
            return
        call = self.begin(effect.key, retry)
        if call is not None:
            self._run_tool(call)

    def begin(self, key: str, retry: bool = False) -> EffectCall | None:
        """Make ``started`` durable; the call to perform, or None when the effect is no longer
        waiting (another writer started or settled it)."""
        self.handed.discard(key)
        effect = self.st.effects[key]
        attempt = effect.attempts + 1
        before = effect.status
        started = Entry(STARTED, {"key": key, "attempt": attempt, "retry": retry}, self.options.clock())
        if not self._append_retrying(started, lambda: self.st.effects[key].status == before):
            return None
        self._note("call", key, attempt=attempt)
        return self._call(self.st.effects[key], attempt)

    def _note(self, op: str, key: str, **fields: JSON) -> None:
        """A record of the protocol log, when the store keeps one (``LoggedStore.noted``)."""
        noted = getattr(self.store, "noted", None)
        if noted is not None:
            noted(self.run_id, op, key, **fields)

    def _run_tool(self, call: EffectCall) -> None:
        effect = self.st.effects[call.key]
        returned = "done"
        try:
            result, outcome = self._tool(effect).run(call), "completed"
        except Exception as exc:
            result, outcome = {"error": f"{type(exc).__name__}: {exc}"}, "failed"
            returned = "refused" if isinstance(exc, TokenRefused) else "failed"
        self._note("returned", call.key, result=returned)
        self._complete(call.key, outcome, result, "run")

    def _complete(self, key: str, outcome: str, result: JSON, via: str) -> None:
        entry = Entry(COMPLETED, {"key": key, "outcome": outcome, "result": result, "via": via}, self.options.clock())
        self._append_retrying(entry, lambda: self.st.effects[key].status in ("started", "unknown"))

    # -- recovery ------------------------------------------------------------------------

    def recover(self) -> None:
        """Settle what a crash left open. Every write here is itself a crash boundary."""
        now = self.options.clock()
        for approval in list(self.st.approvals.values()):
            if not approval.expired and approval.expires_at is not None and now > approval.expires_at:
                self._expire(approval.id, now)
        for effect in sorted(self.st.unresolved(), key=lambda e: (e.seq, e.call_id)):
            self._settle(effect.key)

    def _expire(self, id: str, now: float) -> None:
        self._append_retrying(Entry(APPROVAL_EXPIRED, {"id": id}, now),
                              lambda: id in self.st.approvals and not self.st.approvals[id].expired)

    def _settle(self, key: str) -> None:
        effect = self.st.effects[key]
        if effect.status == "pending":
            if self.st.interrupts(effect):
                self._settle_interrupted(key, "interrupted before it started")
            else:
                self._perform(effect)
            return
        if effect.status == "started":
            self.mark_unknown(key, "started but not completed before the process stopped")
        self._resolve_unknown(key)

    def mark_unknown(self, key: str, reason: str) -> None:
        """A started effect whose outcome nobody waits for any more (a crash, a timeout): ``unknown``
        now, so it is a decision (or a status query's) rather than a silent re-run later."""
        effect = self.st.effects[key]
        entry = Entry(UNKNOWN, {"key": key, "attempt": effect.attempts, "reason": reason}, self.options.clock())
        self._append_retrying(entry, lambda: self.st.effects[key].status == "started")

    def settle(self, key: str, outcome: Literal["completed", "failed"], result: JSON, via: str) -> None:
        """Record the outcome of a started or unknown effect that no event reports (an agent that
        resolved it otherwise: a keyed retry's outcome is its original's)."""
        self._complete(key, outcome, result, via)

    def _resolve_unknown(self, key: str) -> None:
        """Status query, else (interrupted) settled failed, else a journaled work resumed (``resume``) or
        an idempotent retry with the same key, else leave it to the user."""
        effect = self.st.effects[key]
        if effect.status != "unknown":
            return
        tool = self._tool(effect)
        reply = tool.status(self._call(effect, effect.attempts))
        if reply is not None:
            self._note("status", key, answer=reply[0])
        if reply is not None and reply[0] == "done":
            self._complete(key, "completed", reply[1], "status")
        elif self.st.interrupts(effect):
            self._settle_interrupted(key, "interrupted while it ran; the process stopped before its outcome "
                                          "was journaled, so whether it completed is unknown")
        elif reply is not None and reply[0] == "not-run" and getattr(tool, "fences", False):
            self._perform(effect)
        elif (reply is not None and reply[0] == "resume") or (effect.idempotent
                                                              and effect.attempts < self.options.max_attempts):
            self._perform(effect, retry=True)

    def _settle_interrupted(self, key: str, why: str) -> None:
        """An effect the user interrupted and a crash left open: never run (again), settled failed."""
        entry = Entry(COMPLETED, {"key": key, "outcome": "failed", "result": {"error": why}, "via": "interrupt"},
                      self.options.clock())
        self._append_retrying(entry, lambda: self.st.effects[key].status in ("pending", "started", "unknown"))

    def decide(self, id: str, decision: str, result: JSON = None) -> None:
        """The user's answer to a decision: for an unknown effect ``completed``, ``failed`` or
        ``rerun`` (runs it again with the same key, on the user's word); ``continue`` for an anomaly."""
        self._append([self.decision_entry(id, decision, result)])
        if decision == "rerun":
            self._perform(self.st.effects[id])

    def decision_entry(self, id: str, decision: str, result: JSON = None) -> Entry:
        """The ``decided`` record for the user's answer, checked (``DecisionError``) but not written:
        for a store that writes it together with something else (a job queued again)."""
        if self.st.halted is not None and decision == "continue":
            return Entry(DECIDED, {"decision": "continue"}, self.options.clock())
        effect = self.st.effects.get(id)
        if effect is None or effect.status != "unknown":
            raise DecisionError(f"no unknown effect {id!r} to decide")
        if decision not in ("completed", "failed", "rerun"):
            raise DecisionError(f"decide {id!r} as completed, failed or rerun, not {decision!r}")
        return Entry(DECIDED, {"key": id, "decision": decision, "result": result}, self.options.clock())


LOST_IN_REPAIR = ("the journal lost records (repaired by journal --repair): a `started` record among them may "
                  "have been lost, so it may have run")


@dataclass(frozen=True)
class Repaired:
    """What a repair did to one run: the sequence number records were discarded from (None
    when only the write-ahead log's loss was accepted) and the effects it made ``unknown``."""

    discarded_from: int | None
    unknown: list[str]


def open_effects(records: Sequence[Record]) -> dict[str, int]:
    """The effects emitted in ``records`` that are neither settled nor ``unknown`` yet (pending
    or started), with their attempts so far, in the order they were emitted."""
    status: dict[str, tuple[bool, int]] = {}  # key: (open, attempts)
    for record in records:
        body = record.body
        if record.kind == STEP:
            for effect in body.get("effects", ()):
                status[str(effect["key"])] = (True, 0)
        elif record.kind == STARTED:
            status[str(body["key"])] = (True, int(body["attempt"]))
        elif record.kind in (UNKNOWN, COMPLETED) or (record.kind == DECIDED and "key" in body):
            key = str(body["key"])
            rerun = record.kind == DECIDED and body["decision"] == "rerun"
            status[key] = (rerun, status.get(key, (False, 0))[1])
    return {key: attempts for key, (unsettled, attempts) in status.items() if unsettled}


def repair(store: Store, run_id: str, log_lost: str | None = None, clock: Clock = time.time) -> Repaired | None:
    """Repair the run on the user's explicit request: discard a damaged tail (a torn or flipped
    last record, records missing at the end: the run's version is cut back to the last good
    record), or, with ``log_lost`` (why), accept that the store's write-ahead log lost records.
    Either way records were lost, and a lost one may be the ``started`` of an effect that then
    ran: every effect emitted and not completed in what survives becomes ``unknown`` (a decision,
    never a silent re-run), journaled with the ``repaired`` record in one write. None when the
    journal was whole and no log was lost; damage before the tail raises ``CorruptJournal``."""
    discarded: int | None = None
    try:
        store.load(run_id)
        reason = log_lost
    except CorruptJournal as exc:
        if not exc.tail:
            raise
        store.discard_tail(run_id, exc.seq)
        discarded, reason = exc.seq, exc.reason
    if reason is None:
        return None
    now = clock()
    unknown = open_effects(store.records(run_id))
    entries = [Entry(REPAIRED, {"discarded_from": discarded, "reason": reason}, now)]
    entries += [Entry(UNKNOWN, {"key": key, "attempt": attempts, "reason": LOST_IN_REPAIR}, now)
                for key, attempts in unknown.items()]
    store.append(run_id, store.version(run_id), entries)
    return Repaired(discarded, list(unknown))


def repair_torn_tail(store: Store, run_id: str, clock: Clock = time.time) -> int | None:
    """``repair`` of a damaged tail: the sequence number discarded from, or None when the journal
    was whole."""
    repaired = repair(store, run_id, clock=clock)
    return None if repaired is None else repaired.discarded_from
