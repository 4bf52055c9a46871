"""An in-memory store that can crash at any durable-write boundary.

It keeps exactly what a real store would have on disk: a write becomes durable at its
commit, all at once. Crash injection counts the boundaries (just before and just after
every commit) and raises ``Crash`` at the chosen one; whatever was not committed is lost,
and with ``tear=True`` a crash before a commit leaves the first record of that write half
written (bad checksum), as a torn disk write would. ``clone()`` copies the durable state
so the crash checker can branch many crashes off one prefix.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from agentfsm.impl.stores.journal import (
    JSON,
    Boundary,
    Conflict,
    Entry,
    Loaded,
    Record,
    RunExists,
    StoredRecord,
    StoredSnapshot,
    UnknownRun,
    load_verified,
    seal,
    seal_snapshot,
    verify,
    write_label,
)


class Crash(BaseException):
    """The simulated process died here. A BaseException so that no handler swallows it."""

    def __init__(self, point: int, phase: str, label: str) -> None:
        super().__init__(f"crash at boundary {point} ({phase} {label})")
        self.point = point
        self.phase = phase
        self.label = label


@dataclass
class _Run:
    machine: str
    records: list[StoredRecord] = field(default_factory=list)
    snapshots: list[StoredSnapshot] = field(default_factory=list)
    checked: list[tuple[StoredRecord, Record]] = field(default_factory=list)  # verified once, by identity

    def verified(self, run_id: str) -> list[Record]:
        """Every record, verified from record 1. Stored records are immutable, so each stored object
        is verified once; one that was replaced (torn, corrupted) is verified again."""
        checked, records = self.checked, self.records
        n = 0
        while n < min(len(checked), len(records)) and checked[n][0] is records[n]:
            n += 1
        del checked[n:]
        fresh = verify(run_id, checked[-1][1].checksum if checked else "", n + 1, records[n:])
        checked.extend(zip(records[n:], fresh, strict=True))
        return [record for _, record in checked]


class MemoryStore:
    """The reference store: no I/O, durable at commit, crashable. Not shared between processes."""

    def __init__(self, on_boundary: Boundary | None = None) -> None:
        self._runs: dict[str, _Run] = {}
        self.on_boundary = on_boundary
        self.points = 0
        self.crash_at: int | None = None
        self.tear = False
        self.trace: list[tuple[int, str, str]] = []

    def clone(self) -> MemoryStore:
        """A store holding the same durable data, with fresh counters and no crash armed."""
        other = MemoryStore()
        # stored records and snapshots are immutable: copying the lists copies the data
        other._runs = {k: _Run(r.machine, list(r.records), list(r.snapshots), list(r.checked))
                       for k, r in self._runs.items()}
        return other

    def arm(self, crash_at: int | None, tear: bool = False) -> None:
        """Crash at boundary number ``crash_at`` counted from now (1 = before the next commit)."""
        self.points = 0
        self.crash_at = crash_at
        self.tear = tear
        self.trace = []

    def _boundary(self, phase: str, label: str, run: _Run | None = None,
                  pending: Sequence[StoredRecord] = ()) -> None:
        self.points += 1
        self.trace.append((self.points, phase, label))
        if self.on_boundary is not None:
            self.on_boundary(phase, label)
        if self.crash_at == self.points:
            if self.tear and phase == "before" and run is not None and pending:
                torn = pending[0]
                run.records.append(replace(torn, body_text=torn.body_text[: len(torn.body_text) // 2]))
            raise Crash(self.points, phase, label)

    def _run(self, run_id: str) -> _Run:
        try:
            return self._runs[run_id]
        except KeyError:
            raise UnknownRun(run_id) from None

    def create(self, run_id: str, machine: str, entry: Entry) -> Record:
        if run_id in self._runs:
            raise RunExists(run_id)
        sealed = seal(run_id, "", 1, [entry])
        self._boundary("before", entry.kind)
        self._runs[run_id] = _Run(machine, list(sealed))
        self._boundary("after", entry.kind)
        return verify(run_id, "", 1, sealed)[0]

    def runs(self) -> list[str]:
        return sorted(self._runs)

    def version(self, run_id: str) -> int:
        records = self._run(run_id).records
        return records[-1].seq if records else 0

    def machine(self, run_id: str) -> str:
        return self._run(run_id).machine

    def append(self, run_id: str, expect: int, entries: Sequence[Entry],
               snapshot: Mapping[str, JSON] | None = None) -> list[Record]:
        run = self._run(run_id)
        actual = self.version(run_id)
        if actual != expect:
            raise Conflict(run_id, expect, actual)
        link = run.records[-1].checksum if run.records else ""
        sealed = seal(run_id, link, expect + 1, entries)
        label = write_label(entries, snapshot)
        self._boundary("before", label, run, sealed)
        run.records.extend(sealed)
        if snapshot is not None and sealed:
            run.snapshots.append(seal_snapshot(run_id, sealed[-1].seq, sealed[-1].checksum, snapshot))
        self._boundary("after", label)
        return verify(run_id, link, expect + 1, sealed)

    def load(self, run_id: str) -> Loaded:
        run = self._run(run_id)
        if not run.snapshots:
            return Loaded(None, tuple(run.verified(run_id)))  # the cached path crash injection leans on
        return load_verified(run_id, reversed(run.snapshots), lambda after: [r for r in run.records if r.seq > after])

    def records(self, run_id: str, after: int = 0) -> list[Record]:
        return [r for r in self._run(run_id).verified(run_id) if r.seq > after]

    def discard_tail(self, run_id: str, seq: int) -> None:
        run = self._run(run_id)
        run.records = [r for r in run.records if r.seq < seq]
        run.snapshots = [s for s in run.snapshots if s.seq < seq]

    def close(self) -> None:
        """Nothing to release; the data stays for the next 'process' that opens the store."""

    # Test access: the durable bytes, for corrupting them on purpose.
    def stored(self, run_id: str) -> list[StoredRecord]:
        return self._run(run_id).records
