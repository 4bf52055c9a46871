"""Owning a run through a lease: what several workers sharing one store agree on.

A worker claims a queued run and gets a **lease**: an expiry (kept on the database
server's clock, so workers' clocks do not matter) and a **fencing token** that grows by
one at every claim. Every write the worker makes to the run carries the token, and the
store checks it in the same transaction as the compare-and-swap: once the lease has
expired or another worker has claimed the run, the old worker's writes are refused with
``LeaseLost`` and it stops acting on the run, exactly as if it had crashed there. The
next owner recovers the run by the durable runtime's ordinary rules (``unknown`` effects
resolved by status query or idempotent retry, never silently re-run).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from agentfsm.impl.durable.journal import JSON, Entry, Loaded, Record


class LeaseLost(BaseException):
    """The worker no longer owns the run. A BaseException, like a crash: no handler inside the
    durable runtime may swallow it (a tool failure handler would record a false outcome)."""

    def __init__(self, run_id: str, token: int, reason: str) -> None:
        super().__init__(f"run {run_id!r}: lease {token} lost: {reason}")
        self.run_id = run_id
        self.token = token


@dataclass
class Lease:
    """A claim on one run. ``deadline`` is our own conservative view of the expiry (monotonic
    clock, counted from before the claim was sent); the server's expiry is what counts."""

    run_id: str
    machine: str
    token: int
    owner: str
    seconds: float
    script: list[dict[str, JSON]] = field(default_factory=list)
    deadline: float = 0.0

    def remaining(self) -> float:
        return self.deadline - time.monotonic()


@dataclass(frozen=True)
class Job:
    """A submitted run as the queue sees it."""

    run_id: str
    machine: str
    status: str
    owner: str | None
    token: int
    claims: int
    outcome: str | None


class LeasingStore(Protocol):
    """A journal store that is also a work queue: runs submitted with a script, claimed by
    workers under leases, written with the lease's fencing token. ``transient_errors`` are the
    exceptions that mean the store is unreachable for now (not that the run is broken)."""

    transient_errors: tuple[type[Exception], ...]

    def submit(self, run_id: str, machine: str, entry: Entry, script: Sequence[Mapping[str, JSON]]) -> None:
        """Create the run (``entry`` is record 1) and queue it, in one transaction."""
        ...

    def claim(self, owner: str, machines: Sequence[str], seconds: float) -> Lease | None:
        """Take the oldest queued run of one of ``machines`` that nobody holds a live lease on."""
        ...

    def renew(self, lease: Lease) -> None:
        """Extend the lease by its length from now; raise ``LeaseLost`` if it already lapsed."""
        ...

    def finish(self, lease: Lease, status: str, outcome: str) -> None:
        """Mark the run ``done``, ``blocked`` or ``failed`` and release it; ``LeaseLost`` if not ours."""
        ...

    def jobs(self) -> list[Job]:
        ...

    def create(self, run_id: str, machine: str, entry: Entry) -> Record:
        ...

    def pending(self) -> int:
        """How many runs are still queued (held or not)."""
        ...

    def version(self, run_id: str) -> int:
        ...

    def machine(self, run_id: str) -> str:
        ...

    def runs(self) -> list[str]:
        ...

    def append(self, run_id: str, expect: int, entries: Sequence[Entry],
               snapshot: Mapping[str, JSON] | None = None, fence: Lease | None = None) -> list[Record]:
        ...

    def load(self, run_id: str) -> Loaded:
        ...

    def records(self, run_id: str, after: int = 0) -> list[Record]:
        ...

    def discard_tail(self, run_id: str, seq: int) -> None:
        ...

    def close(self) -> None:
        ...


class FencedStore:
    """The store as one lease holder sees it: every append carries the lease's token."""

    def __init__(self, store: LeasingStore, lease: Lease) -> None:
        self.store = store
        self.lease = lease

    def create(self, run_id: str, machine: str, entry: Entry) -> Record:
        raise LeaseLost(run_id, self.lease.token, "a lease holder does not create runs")

    def runs(self) -> list[str]:
        return self.store.runs()

    def version(self, run_id: str) -> int:
        return self.store.version(run_id)

    def machine(self, run_id: str) -> str:
        return self.store.machine(run_id)

    def append(self, run_id: str, expect: int, entries: Sequence[Entry],
               snapshot: Mapping[str, JSON] | None = None) -> list[Record]:
        if run_id != self.lease.run_id:
            raise LeaseLost(run_id, self.lease.token, f"the lease is on run {self.lease.run_id!r}")
        return self.store.append(run_id, expect, entries, snapshot, fence=self.lease)

    def load(self, run_id: str) -> Loaded:
        return self.store.load(run_id)

    def records(self, run_id: str, after: int = 0) -> list[Record]:
        return self.store.records(run_id, after)

    def discard_tail(self, run_id: str, seq: int) -> None:
        raise LeaseLost(run_id, self.lease.token, "repairing a journal is the user's decision, not a worker's")

    def close(self) -> None:
        """The store belongs to the worker, which closes it."""
