"""The run inside the table workflow: the durable runtime itself, over an in-memory journal.

The workflow's state is a ``DurableRun`` on a ``MemoryStore``: the same records, the same
rules (``started`` before an effect acts, ``unknown`` when its outcome is lost, a status
query or an operator's decision, never a silent re-run) as the SQLite and PostgreSQL
runtimes, with ``agentfsm.spec.semantics.step`` deciding each step. Temporal's history makes
it durable: a worker that replays the history rebuilds this journal record for record,
because everything here is deterministic (the clock is the workflow's). Nothing here
performs an effect: the run hands effects to ``due`` and the workflow performs them as
activities; a status query's reply is fetched by an activity and handed in before the run
asks for it (``Prefetched``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from agentfsm.impl.durable.run import Calls, CallSpec, Described, DurableRun, EffectCall, Options, Report, StatusReply
from agentfsm.impl.durable.state import Effect
from agentfsm.impl.stores.journal import JSON, Entry, Record
from agentfsm.impl.stores.memory import MemoryStore
from agentfsm.impl.temporal.messages import EffectTask, StartRun, StatusAnswer, table_hash
from agentfsm.spec import load_table_bytes
from agentfsm.spec.expr import Value
from agentfsm.spec.model import Table
from agentfsm.spec.semantics import StepResult, step

_TABLES: dict[tuple[str, str], Table] = {}
"""Compiled tables by content hash (and overrides): a worker compiles each version once."""


class VersionMismatch(ValueError):
    """A start whose table text does not have the hash it pins."""


def pinned_table(text: str, pinned: str, file: str, overrides: Mapping[str, Value]) -> Table:
    """The table a run pinned, compiled from the text that travelled with it; refused when the
    text is not the version the run pinned (both hashes named)."""
    actual = table_hash(text)
    if actual != pinned:
        raise VersionMismatch(f"{file}: the run pins table version {pinned[:16]}, but the text it carries is "
                              f"version {actual[:16]}; start the run again with its own table")
    key = _version(pinned, overrides)
    if key not in _TABLES:
        _TABLES[key] = load_table_bytes(text.encode("utf-8"), file, dict(overrides))
    return _TABLES[key]


def _version(pinned: str, overrides: Mapping[str, Value]) -> tuple[str, str]:
    return pinned, repr(sorted(overrides.items()))


def compiled(pinned: str, overrides: Mapping[str, Value]) -> Table | None:
    """The table version ``pinned`` (with ``overrides``) if this process compiled it already."""
    return _TABLES.get(_version(pinned, overrides))


class SemanticsStepper:
    """``agentfsm.spec.semantics.step`` as the durable runtime's step: pure, so it replays alike."""

    def __init__(self, table: Table) -> None:
        self.table = table

    def step(self, state: int, values: tuple[Value, ...], event: str, params: tuple[Value, ...]) -> StepResult:
        return step(self.table, state, values, event, params)


class Prefetched:
    """An external action's tool as the run inside the workflow sees it: it never runs here (an
    activity performs it); its status query answers what an activity fetched just before."""

    def __init__(self) -> None:
        self.replies: dict[str, StatusAnswer] = {}
        self.fences = False

    def run(self, call: EffectCall) -> JSON:
        raise RuntimeError(f"{call.action} is performed by an activity, not inside the workflow")

    def status(self, call: EffectCall) -> StatusReply | None:
        answer = self.replies.pop(call.key, None)
        if answer is None or not answer.known:
            self.fences = False
            return None
        self.fences = answer.fences
        reply: StatusReply = (answer.status, answer.result)  # type: ignore[assignment]
        return reply


@dataclass(frozen=True)
class Due:
    """An effect the run handed over to be performed (``retry``: again, with the same key)."""

    key: str
    retry: bool


class JournalRun:
    """One table run's journal and the effects it waits to have performed."""

    def __init__(self, start: StartRun, table: Table, clock: Callable[[], float]) -> None:
        self.start = start
        self.table = table
        self.tools = {a.name: Prefetched() for a in table.actions if a.effect == "external"}
        options = Options(approvals=dict(start.approval_lifetimes), clock=clock, max_attempts=start.max_attempts)
        stepper = SemanticsStepper(table)
        if start.carried is None:
            self.run = DurableRun.create(MemoryStore(), table, start.run_id, self.tools, stepper, options)
        else:   # continued as new: the journal so far, replayed
            store = journal_store(start.run_id, table.machine, start.carried.records)
            self.run = DurableRun.attach(store, table, start.run_id, self.tools, stepper, options)
        self.due: list[Due] = []
        self.run.performer = self._hand

    def _hand(self, effect: Effect, retry: bool) -> None:
        if all(d.key != effect.key for d in self.due):
            self.due.append(Due(effect.key, retry))

    def next_due(self) -> Due | None:
        """The next effect to perform that still waits for it (a decision or an interrupt may have
        settled one handed over earlier)."""
        while self.due:
            due = self.due.pop(0)
            if self.run.st.effects[due.key].status in ("pending", "unknown"):
                return due
        return None

    def task(self, call: EffectCall) -> EffectTask:
        """The activity's input for one attempt; the attempt number is its fencing token. It names the
        table by its content hash only (the worker finds the text in the run's start)."""
        start = self.start
        return EffectTask("", start.table_hash, start.file, dict(start.overrides), call.run_id,
                          call.action, call.key, call.attempt, call.attempt, call.tool, call.args)

    def status_task(self, effect: Effect) -> EffectTask:
        """A status query's input: fenced one above the last attempt, so that attempt is refused if it
        ever acts after the query (a stopped worker resumed)."""
        call = EffectCall(self.run.run_id, effect.action, effect.key, effect.attempts, effect.tool, effect.args)
        task = self.task(call)
        task.token = effect.attempts + 1
        return task

    def unknown(self) -> list[Effect]:
        return [e for e in self.run.st.effects.values() if e.status == "unknown"]

    def prefetch(self, key: str, answer: StatusAnswer) -> None:
        self.tools[self.run.st.effects[key].action].replies[key] = answer

    @property
    def blocked(self) -> bool:
        """No event may be delivered: an effect's outcome is unknown, or an anomaly halted the run."""
        return self.run.st.halted is not None or bool(self.unknown())

    def next_expiry(self) -> float | None:
        times = [a.expires_at for a in self.run.pending_approvals if not a.expired and a.expires_at is not None]
        return min(times, default=None)

    def records(self, after: int = 0) -> list[dict[str, Any]]:
        """The journal's records from the ``after``-th on (all by default)."""
        return [record_json(r) for r in self.run.store.records(self.run.run_id, after)]

    def config(self) -> dict[str, Any]:
        run = self.run
        return {"run_id": run.run_id, "machine": self.table.machine, "table_hash": self.start.table_hash,
                "state": run.state, "vars": run.vars, "version": run.version, "halted": run.st.halted,
                "terminal": run.terminal,
                "approvals": [a.to_json() for a in run.pending_approvals],
                "effects": [e.to_json() for e in run.st.effects.values()]}

    def pending(self) -> list[dict[str, Any]]:
        return [{"kind": d.kind, "id": d.id, "message": d.message} for d in self.run.decisions()]


def journal_store(run_id: str, machine: str, records: list[dict[str, Any]]) -> MemoryStore:
    """An in-memory store holding ``records`` (as ``record_json`` gives them) as the run's journal."""
    store = MemoryStore()
    first, *rest = records
    store.create(run_id, machine, Entry(first["kind"], first["body"], first["time"]))
    if rest:
        store.append(run_id, 1, [Entry(r["kind"], r["body"], r["time"]) for r in rest])
    return store


def record_json(record: Record) -> dict[str, Any]:
    return {"seq": record.seq, "kind": record.kind, "time": record.time, "body": record.body}


def calls_json(calls: Calls | None) -> dict[str, JSON]:
    found: dict[str, JSON] = {}
    for action, made in (calls or {}).items():
        found[action] = asdict(made) if isinstance(made, Described) else [asdict(c) for c in made]
    return found


def calls_from_json(data: Mapping[str, Any]) -> Calls:
    return {action: Described(**made) if isinstance(made, dict) else [CallSpec(**c) for c in made]
            for action, made in data.items()}


def report_from_json(data: Mapping[str, Any] | None) -> Report | None:
    return None if data is None else Report(**data)
