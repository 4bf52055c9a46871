"""The journal protocol: record format, checksums and the interface every store implements.

A run's journal is a sequence of records numbered 1, 2, 3, ... without gaps. Each record
carries a checksum chained over the previous record's, so a torn or corrupted tail (or a
missing record) is detected when the journal is read and reported, never replayed.

The run's **version** is the sequence number of its last record: every append names the
version it was computed from and fails with ``Conflict`` when another writer got there
first (compare-and-swap), so concurrent writers cannot overwrite each other. A snapshot is
written in the same transaction as the records it follows and holds that last sequence
number, so recovery loads it and replays only what came after, once.

Stores keep SQL (or whatever they speak) to themselves; this module holds what they share:
how a record is sealed and verified, and the errors they raise.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

JSON = Any
"""A value that ``json.dumps`` accepts: records' bodies are JSON objects."""

# Record kinds. A store treats them alike; the durable runtime gives them meaning.
CREATED = "created"        # the run exists: machine, initial configuration
STEP = "step"              # an accepted event: previous and next state, reason, emitted effects
ANOMALY = "anomaly"        # an illegal event: recorded, and automatic progress stops
STALE = "stale"            # an event that came after the run ended (final state)
STARTED = "started"        # an external effect is about to run (durable before it runs)
COMPLETED = "completed"    # an external effect finished: result or receipt, or its failure
UNKNOWN = "unknown"        # recovery found an effect started but not completed
DECIDED = "decided"        # the user resolved an unknown effect or an anomaly
APPROVAL_EXPIRED = "approval-expired"  # a pending approval outlived its lifetime across a restart
REPAIRED = "repaired"      # a torn tail was discarded on the user's explicit request
INTERRUPT = "interrupt"    # the user interrupted the work under way (a table without an interrupt event)

KINDS = (CREATED, STEP, ANOMALY, STALE, STARTED, COMPLETED, UNKNOWN, DECIDED, APPROVAL_EXPIRED, REPAIRED, INTERRUPT)


def canonical(body: JSON) -> str:
    """The one text a body is checksummed as: sorted keys, no spaces, ASCII."""
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def checksum(link: str, run_id: str, seq: int, kind: str, time: float, body_text: str) -> str:
    """Chained checksum of one record: it covers the previous record's checksum (``link``)."""
    data = "\x1f".join((link, run_id, str(seq), kind, repr(time), body_text))
    return hashlib.sha256(data.encode()).hexdigest()[:32]


@dataclass(frozen=True)
class Entry:
    """A record before a store numbers and seals it."""

    kind: str
    body: Mapping[str, JSON]
    time: float


@dataclass(frozen=True)
class Record:
    run_id: str
    seq: int
    kind: str
    time: float
    body: Mapping[str, JSON]
    checksum: str

    def to_json(self) -> dict[str, JSON]:
        return {"seq": self.seq, "kind": self.kind, "time": self.time, "body": dict(self.body),
                "checksum": self.checksum}


@dataclass(frozen=True)
class StoredRecord:
    """A record as a store holds it: the body still as text, so verification sees the bytes."""

    seq: int
    kind: str
    time: float
    body_text: str
    checksum: str


@dataclass(frozen=True)
class Snapshot:
    """The runtime's state after record ``seq``; ``link`` is that record's checksum."""

    run_id: str
    seq: int
    link: str
    body: Mapping[str, JSON]


@dataclass(frozen=True)
class StoredSnapshot:
    seq: int
    link: str
    body_text: str
    checksum: str


@dataclass(frozen=True)
class Loaded:
    """What recovery needs: the newest valid snapshot (if any) and every record after it."""

    snapshot: Snapshot | None
    records: tuple[Record, ...] = field(default=())


class JournalError(Exception):
    """Base of the store's errors."""


class UnknownRun(JournalError):
    def __init__(self, run_id: str) -> None:
        super().__init__(f"no run {run_id!r} in the store")
        self.run_id = run_id


class RunExists(JournalError):
    def __init__(self, run_id: str) -> None:
        super().__init__(f"run {run_id!r} already exists")
        self.run_id = run_id


class OtherMachine(JournalError):
    """The run is of another machine than the table given to open it: bad input, not damage."""

    def __init__(self, run_id: str, machine: str, table_machine: str) -> None:
        super().__init__(f"run {run_id!r} runs machine {machine!r}, not {table_machine!r}: give its own table")
        self.run_id = run_id


class Conflict(JournalError):
    """Compare-and-swap lost: the run moved on to ``actual`` while we computed from ``expected``."""

    def __init__(self, run_id: str, expected: int, actual: int) -> None:
        super().__init__(f"run {run_id!r} is at version {actual}, not {expected}")
        self.run_id = run_id
        self.expected = expected
        self.actual = actual


class CorruptJournal(JournalError):
    """A record fails its checksum or the sequence has a gap. ``tail`` marks a torn last write."""

    def __init__(self, run_id: str, seq: int, reason: str, tail: bool) -> None:
        where = "torn tail" if tail else "corrupt record"
        super().__init__(f"run {run_id!r}: {where} at sequence {seq}: {reason}")
        self.run_id = run_id
        self.seq = seq
        self.reason = reason
        self.tail = tail


class StoreFailed(JournalError):
    """The store itself failed after it opened (a damaged file, a full disk, an I/O error): the
    message names the store and what is wrong. Never a conflict to retry."""


def check_head(run_id: str, version: int, link: str, seq: int, last_link: str) -> None:
    """Compare the journal read back with the run's recorded version and the checksum recorded
    with it: records missing at the tail (a cut or rolled-back log) or a replaced last record
    are reported as a damaged tail, which ``agentfsm journal --repair`` may cut back to."""
    if seq < version:
        missing = f"record {version}" if seq + 1 == version else f"records {seq + 1}..{version}"
        raise CorruptJournal(run_id, seq + 1, f"the run's recorded version is {version} but its records end at "
                                              f"{seq}: {missing} missing", True)
    if seq > version:
        raise CorruptJournal(run_id, version + 1, f"records run past the run's recorded version {version} "
                                                  f"(to {seq})", True)
    if last_link != link:
        raise CorruptJournal(run_id, seq, "the last record is not the one recorded with the run's version "
                                          "(checksum differs)", True)


def seal(run_id: str, link: str, first_seq: int, entries: Sequence[Entry]) -> list[StoredRecord]:
    """Number and checksum ``entries`` following the record whose checksum is ``link``."""
    sealed: list[StoredRecord] = []
    for offset, entry in enumerate(entries):
        seq = first_seq + offset
        text = canonical(dict(entry.body))
        link = checksum(link, run_id, seq, entry.kind, entry.time, text)
        sealed.append(StoredRecord(seq, entry.kind, entry.time, text, link))
    return sealed


def seal_snapshot(run_id: str, seq: int, link: str, body: Mapping[str, JSON]) -> StoredSnapshot:
    text = canonical(dict(body))
    return StoredSnapshot(seq, link, text, checksum(link, run_id, seq, "snapshot", 0.0, text))


def verify(run_id: str, link: str, first_seq: int, stored: Sequence[StoredRecord]) -> list[Record]:
    """Check sequence numbers and the checksum chain; raise ``CorruptJournal`` at the first fault."""
    records: list[Record] = []
    expected = first_seq
    for position, item in enumerate(stored):
        tail = position == len(stored) - 1
        if item.seq != expected:
            raise CorruptJournal(run_id, expected, f"found sequence {item.seq} where {expected} belongs", False)
        if checksum(link, run_id, item.seq, item.kind, item.time, item.body_text) != item.checksum:
            raise CorruptJournal(run_id, item.seq, "checksum mismatch", tail)
        try:
            body = json.loads(item.body_text)
        except ValueError:
            raise CorruptJournal(run_id, item.seq, "body is not JSON", tail) from None
        records.append(Record(run_id, item.seq, item.kind, item.time, body, item.checksum))
        link = item.checksum
        expected += 1
    return records


def verify_snapshot(run_id: str, item: StoredSnapshot) -> Snapshot | None:
    """The snapshot if its checksum holds, else None (recovery falls back to an older one)."""
    if checksum(item.link, run_id, item.seq, "snapshot", 0.0, item.body_text) != item.checksum:
        return None
    try:
        return Snapshot(run_id, item.seq, item.link, json.loads(item.body_text))
    except ValueError:
        return None


def load_verified(run_id: str, snapshots: Iterable[StoredSnapshot],
                  stored_after: Callable[[int], Sequence[StoredRecord]]) -> Loaded:
    """Recovery's read, for every store: the first snapshot (newest first) whose checksum holds
    and the verified records after it, else every record from the start."""
    for item in snapshots:
        snap = verify_snapshot(run_id, item)
        if snap is not None:
            return Loaded(snap, tuple(verify(run_id, snap.link, snap.seq + 1, stored_after(snap.seq))))
    return Loaded(None, tuple(verify(run_id, "", 1, stored_after(0))))


def write_label(entries: Sequence[Entry], snapshot: Mapping[str, JSON] | None) -> str:
    """How a write names itself at its boundaries: its record kinds, and whether a snapshot goes with it."""
    return "+".join(e.kind for e in entries) + (" +snapshot" if snapshot is not None else "")


Boundary = Callable[[str, str], None]
"""Called by a store around each durable write: ``(phase, label)`` with phase ``before``
or ``after`` the commit and a label naming the record kinds. Crash injection hooks in here."""


class Store(Protocol):
    """A durable home for runs' journals. Every method is one transaction."""

    def create(self, run_id: str, machine: str, entry: Entry) -> Record:
        """Start a run's journal with ``entry`` as record 1; raise ``RunExists``."""
        ...

    def runs(self) -> list[str]:
        ...

    def version(self, run_id: str) -> int:
        """The sequence number of the run's last record; raise ``UnknownRun``."""
        ...

    def machine(self, run_id: str) -> str:
        ...

    def append(self, run_id: str, expect: int, entries: Sequence[Entry],
               snapshot: Mapping[str, JSON] | None = None) -> list[Record]:
        """Append records numbered ``expect + 1 ...`` if the run is still at version ``expect``
        (else raise ``Conflict``), with an optional snapshot of the state after them, atomically."""
        ...

    def load(self, run_id: str) -> Loaded:
        """The newest valid snapshot and the verified records after it (``CorruptJournal``)."""
        ...

    def records(self, run_id: str, after: int = 0) -> list[Record]:
        """Verified records with ``seq > after`` (the whole chain is checked from record 1)."""
        ...

    def discard_tail(self, run_id: str, seq: int) -> None:
        """Drop records from ``seq`` on: the explicit repair of a torn tail, never automatic."""
        ...

    def close(self) -> None:
        ...
