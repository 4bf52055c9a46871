"""Planted protocol defects, each a plausible mistake in the real durable code, installed as a
test-only monkeypatch (never a flag in the product): what the model-based walks and the audit
must catch. A mistake in a store is planted in SQLite's and PostgreSQL's alike (and in the job
queue's claim and lease, where the pool's workers make the same mistake)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from typing import TypeVar

import pytest
from agentfsm.impl.durable import ownership
from agentfsm.impl.durable.ledger import MemoryLedger
from agentfsm.impl.durable.protocol_log import ProtocolLog
from agentfsm.impl.durable.run import DurableRun, EffectCall
from agentfsm.impl.durable.state import Effect
from agentfsm.impl.stores.journal import DECIDED, JSON, Entry
from agentfsm.impl.stores.leases import Heartbeat, Lease, LeaseLost, OwnedStore, RunHeld
from agentfsm.impl.stores.postgres import PostgresStore
from agentfsm.impl.stores.sqlite import SqliteStore

Store = TypeVar("Store", SqliteStore, PostgresStore)
STORES = (SqliteStore, PostgresStore)
# A lease's expiry in the past, as each store keeps it (seconds since the epoch; a server timestamp).
LONG_AGO = {SqliteStore: "0", PostgresStore: "to_timestamp(0)"}


def journal_unfenced(mp: pytest.MonkeyPatch) -> None:
    """The journal's append skips the fencing check: a write under a lost lease lands."""
    for store in STORES:
        mp.setattr(store, "_check_fence", lambda self, lease: None)


def tool_unfenced(mp: pytest.MonkeyPatch) -> None:
    """The tool runs a call whatever its token: a fenced-out owner still performs the effect."""
    def execute(self: MemoryLedger, key: str, token: int = 0) -> None:
        self._counts[key] += 1
    mp.setattr(MemoryLedger, "execute", execute)


def status_unfenced(mp: pytest.MonkeyPatch) -> None:
    """The status query answers without fencing the key: its `not run` is acted on while an
    older owner's call may still land."""
    mp.setattr(MemoryLedger, "fence", lambda self, key, token: None)


def _acquire_after(original: Callable[[Store, str, str, float], Lease],
                   before: str) -> Callable[[Store, str, str, float], Lease]:
    """A store's ``acquire`` with ``before`` (SQL on the run's owner row) run first."""
    def acquire(self: Store, run_id: str, owner: str, seconds: float) -> Lease:
        with self._transaction():
            self._execute(before.format(long_ago=LONG_AGO[type(self)]), (run_id,))
        return original(self, run_id, owner, seconds)
    return acquire


def _claim_after(before: str) -> Callable[[PostgresStore, str, Sequence[str], float], Lease | None]:
    """The queue's ``claim`` with ``before`` (SQL on the machines' queued jobs) run first."""
    original = PostgresStore.claim

    def claim(self: PostgresStore, owner: str, machines: Sequence[str], seconds: float) -> Lease | None:
        self._execute(before, (list(machines),))
        return original(self, owner, machines, seconds)
    return claim


def claim_ignores_owner(mp: pytest.MonkeyPatch) -> None:
    """A resume takes the run without a claim that excludes the live owner (its lease's expiry,
    renewed by the owner's heartbeat, is not looked at); a pool worker's claim of a job alike."""
    lapse = "UPDATE owners SET expires_at = {long_ago} WHERE run_id = ?"
    mp.setattr(SqliteStore, "acquire", _acquire_after(SqliteStore.acquire, lapse))
    mp.setattr(PostgresStore, "acquire", _acquire_after(PostgresStore.acquire, lapse))
    mp.setattr(PostgresStore, "claim", _claim_after(
        "UPDATE jobs SET expires_at = to_timestamp(0) WHERE status = 'queued' AND machine = ANY(?)"))


def _keeping_token(original: Callable[[Store, str, str, float], Lease]) -> Callable[[Store, str, str, float], Lease]:
    def acquire(self: Store, run_id: str, owner: str, seconds: float) -> Lease:
        lease = original(self, run_id, owner, seconds)
        if lease.token > 1:
            with self._transaction():
                self._execute("UPDATE owners SET token = token - 1 WHERE run_id = ?", (run_id,))
            lease.token -= 1
        return lease
    return acquire


def claim_keeps_token(mp: pytest.MonkeyPatch) -> None:
    """A claim that takes over a run keeps the previous owner's fencing token (a resume's, or a
    pool worker's claim of a job)."""
    mp.setattr(SqliteStore, "acquire", _keeping_token(SqliteStore.acquire))
    mp.setattr(PostgresStore, "acquire", _keeping_token(PostgresStore.acquire))
    original = PostgresStore.claim

    def claim(self: PostgresStore, owner: str, machines: Sequence[str], seconds: float) -> Lease | None:
        lease = original(self, owner, machines, seconds)
        if lease is not None and lease.token > 1:
            self._execute("UPDATE jobs SET token = token - 1 WHERE run_id = ?", (lease.run_id,))
            lease.token -= 1
        return lease
    mp.setattr(PostgresStore, "claim", claim)


def expiry_ignores_heartbeat(mp: pytest.MonkeyPatch) -> None:
    """The lease runs out at its first expiry: the owner's heartbeat renewals are not counted (an
    owned lease's, or a job's)."""
    def renew(self: SqliteStore | PostgresStore, lease: Lease) -> None:
        table = "owners" if lease.owned else "jobs"
        row = self._execute(f"SELECT token FROM {table} WHERE run_id = ?", (lease.run_id,)).fetchone()
        if row is None or int(row[0]) != lease.token:
            raise LeaseLost(lease.run_id, lease.token, "another process took the run over")
    for store in STORES:
        mp.setattr(store, "renew", renew)


def tool_unguarded(mp: pytest.MonkeyPatch) -> None:
    """The lease is not renewed while a tool runs: the heartbeat that guards a call never beats."""
    mp.setattr(Heartbeat, "beat", lambda self: True)


PLANTS: dict[str, Callable[[pytest.MonkeyPatch], None]] = {
    "journal-unfenced": journal_unfenced,
    "tool-unfenced": tool_unfenced,
    "status-unfenced": status_unfenced,
    "claim-ignores-owner": claim_ignores_owner,
    "claim-keeps-token": claim_keeps_token,
    "expiry-ignores-heartbeat": expiry_ignores_heartbeat,
    "lease-not-renewed-while-a-tool-runs": tool_unguarded,
}


def decision_applied_twice(mp: pytest.MonkeyPatch) -> None:
    """A decision is applied whatever the effect's status: a second ``--decide KEY=rerun`` (two
    resumers given the same answer) performs an effect the first one's rerun already completed."""
    def decision_entry(self: DurableRun, id: str, decision: str, result: JSON = None) -> Entry:
        return Entry(DECIDED, {"key": id, "decision": decision, "result": result}, self.options.clock())
    mp.setattr(DurableRun, "decision_entry", decision_entry)


# A plant the walks with the scheduler's own workers cannot show (they drive no decision): the audit of
# the real runtime's protocol log catches it (tests/faults/test_protocol_audit.py), and so do the walks
# whose workers are the runtime's processes (agentfsm.faults.runtime_walk).
RUNTIME_PLANTS: dict[str, Callable[[pytest.MonkeyPatch], None]] = {"decision-applied-twice": decision_applied_twice}


def resume_takes_no_claim(mp: pytest.MonkeyPatch) -> None:
    """A ``--resume`` refused by a live owner goes on anyway, under that owner's lease token: it
    takes no claim of its own (as PostgreSQL's CLI runs once took none)."""
    original = ownership.claim_run

    def claim_run(owned: OwnedStore, run_id: str, owner: str, seconds: float, log: ProtocolLog) -> Lease:
        try:
            return original(owned, run_id, owner, seconds, log)
        except RunHeld as held:
            token = int(re.search(r"\(lease (\d+),", str(held)).group(1))  # type: ignore[union-attr]
            return Lease(run_id, "", token, owner, seconds, owned=True)
    mp.setattr(ownership, "claim_run", claim_run)


def status_under_old_token(mp: pytest.MonkeyPatch) -> None:
    """The status query of an unknown effect carries the token the effect was started under (the
    previous owner's), so its answer is acted on without fencing that owner out."""
    original = DurableRun._call

    def call(self: DurableRun, effect: Effect, attempt: int) -> EffectCall:
        made = original(self, effect, attempt)
        if effect.status == "unknown":
            return dataclasses.replace(made, token=max(made.token - 1, 0))
        return made
    mp.setattr(DurableRun, "_call", call)


# Plants in the runtime's own steps (its claim, its status query), shown when the walks drive the
# real runtime (agentfsm.faults.runtime_walk).
RUNTIME_PLANTS["resume-takes-no-claim"] = resume_takes_no_claim
RUNTIME_PLANTS["status-under-old-token"] = status_under_old_token
