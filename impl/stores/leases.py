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

import os
import socket
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from agentfsm.impl.stores.journal import JSON, Entry, JournalError, Loaded, Record


class LeaseLost(BaseException):
    """The worker no longer owns the run. A BaseException, like a crash: no handler inside the
    durable runtime may swallow it (a tool failure handler would record a false outcome)."""

    def __init__(self, run_id: str, token: int, reason: str) -> None:
        super().__init__(f"run {run_id!r}: lease {token} lost: {reason}")
        self.run_id = run_id
        self.token = token


class RunHeld(JournalError):
    """Another live process owns the run: a second resumer is refused, not let in to race it."""

    def __init__(self, run_id: str, owner: str, token: int, left: float) -> None:
        super().__init__(f"run {run_id!r} is owned by {owner} (lease {token}, {max(left, 0.0):.0f} s left): it "
                         "continues there; if that process is stuck, try again once its lease lapses")
        self.run_id = run_id
        self.owner = owner


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
    owned: bool = False
    """A lease on a run outside the queue (``OwnedStore.acquire``: a CLI run), not a job's."""

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


class FencingStore(Protocol):
    """A journal store whose appends can carry a lease's fencing token (checked in the write's
    own transaction)."""

    def create(self, run_id: str, machine: str, entry: Entry) -> Record:
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


class OwnedStore(FencingStore, Protocol):
    """A store where one process owns a run at a time without a queue (a CLI run, on SQLite or
    PostgreSQL): ``acquire``
    takes the run (``RunHeld`` while another live owner holds it), ``renew`` extends the lease
    (``LeaseLost`` once another took it), ``release`` gives it back."""

    def acquire(self, run_id: str, owner: str, seconds: float) -> Lease:
        ...

    def renew(self, lease: Lease) -> None:
        ...

    def release(self, lease: Lease) -> None:
        ...

    def reopen(self) -> OwnedStore:
        """A second connection to the same store, for a heartbeat that renews from elsewhere."""
        ...


def owner_name() -> str:
    """This process as a lease's owner: ``HOST:PID``."""
    return f"{socket.gethostname()}:{os.getpid()}"


def owner_gone(owner: str) -> bool:
    """Whether ``owner`` (``HOST:PID``) is a process of this host that no longer runs (or a zombie),
    so its lease can be taken over at once instead of waiting for it to lapse. A stopped process
    is not gone: its lease lapses when its heartbeat stops."""
    host, _, pid_text = owner.rpartition(":")
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    pid = int(pid_text)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[:1] == ["Z"]


class Heartbeat:
    """Renews a lease every third of its length from a thread, so a long tool (or a long turn)
    does not let the lease lapse while its owner is alive; a stalled or killed owner stops
    renewing and loses the run. ``lost`` holds why renewing failed, if it did. ``noted`` hears
    each beat (the time before it, whether it renewed): the protocol log's record of it."""

    def __init__(self, lease: Lease, renew: Callable[[Lease], None],
                 noted: Callable[[Lease, float, bool], None] | None = None) -> None:
        self.lease = lease
        self.renew = renew
        self.noted = noted
        self.lost: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"heartbeat {lease.run_id}", daemon=True)

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _beat(self) -> None:
        while not self._stop.wait(self.lease.seconds / 3):
            before, failed = time.time(), self.lost
            alive = self.beat()
            if self.noted is not None:
                self.noted(self.lease, before, alive and self.lost is failed)
            if not alive:
                return

    def beat(self) -> bool:
        """One renewal; False once the lease is lost (``lost`` says why)."""
        try:
            self.renew(self.lease)
        except LeaseLost as exc:
            self.lost = exc
            return False
        except Exception as exc:  # the store is unreachable now: try again at the next beat
            self.lost = exc
        return True


class LeasingStore(FencingStore, Protocol):
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

    def requeue(self, run_id: str, expect: int, entries: Sequence[Entry]) -> None:
        """Append ``entries`` (the user's decisions) to a blocked run and queue it again, atomically."""
        ...

    def pending(self) -> int:
        """How many runs are still queued (held or not)."""
        ...


class FencedStore:
    """The store as one lease holder sees it: every append carries the lease's token."""

    def __init__(self, store: FencingStore, lease: Lease) -> None:
        self.store = store
        self.lease = lease

    def _covers(self, run_id: str) -> bool:
        """The lease's run and its sub-runs (``RUN/task-N``: an agent that journals each task
        as its own run, under the one owner of RUN; the fence is the owner row of RUN)."""
        return run_id == self.lease.run_id or run_id.startswith(self.lease.run_id + "/")

    def create(self, run_id: str, machine: str, entry: Entry) -> Record:
        if not self._covers(run_id):
            raise LeaseLost(run_id, self.lease.token, f"the lease is on run {self.lease.run_id!r}")
        return self.store.create(run_id, machine, entry)

    def runs(self) -> list[str]:
        return self.store.runs()

    def version(self, run_id: str) -> int:
        return self.store.version(run_id)

    def machine(self, run_id: str) -> str:
        return self.store.machine(run_id)

    def append(self, run_id: str, expect: int, entries: Sequence[Entry],
               snapshot: Mapping[str, JSON] | None = None) -> list[Record]:
        if not self._covers(run_id):
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
