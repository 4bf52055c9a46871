"""The journal over SQL, shared by the SQLite and PostgreSQL stores.

Both keep the same three tables (``runs`` with each run's version and last checksum,
``records``, ``snapshots``) and the same transactions: compare-and-swap is ``UPDATE runs
SET version = new ... WHERE run_id = ? AND version = expected`` and the records and their
snapshot go in with it; every read verifies the checksum chain. A store subclass brings
its driver: how a statement runs (queries here use ``?`` placeholders), what a write
transaction and a consistent read are, and how to lock a run's row.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

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
    check_head,
    load_verified,
    seal,
    seal_snapshot,
    verify,
    write_label,
)


class Cursor(Protocol):
    @property
    def rowcount(self) -> int:
        ...

    def fetchone(self) -> Any:
        ...

    def fetchall(self) -> Any:
        ...

    def __iter__(self) -> Iterator[Any]:
        ...


class SqlJournal:
    """Runs' journals in SQL tables; every public method is one transaction."""

    on_boundary: Boundary | None = None
    LOCK_ROW = ""
    """What ends a ``SELECT`` to lock the row it reads until commit (none where a write
    transaction already excludes every other writer)."""

    # -- the driver ----------------------------------------------------------------------

    def _execute(self, query: str, params: Sequence[object] = ()) -> Cursor:
        raise NotImplementedError

    def _executemany(self, query: str, rows: Sequence[Sequence[object]]) -> None:
        raise NotImplementedError

    def _transaction(self) -> AbstractContextManager[object]:
        """A write transaction: committed at the end of the block, rolled back on any exception."""
        raise NotImplementedError

    def _read(self) -> AbstractContextManager[object]:
        """A transaction that reads one consistent state of the tables."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    # -- the journal ---------------------------------------------------------------------

    def _boundary(self, phase: str, label: str) -> None:
        if self.on_boundary is not None:
            self.on_boundary(phase, label)

    def _head(self, run_id: str, lock: bool = False) -> tuple[int, str]:
        row = self._execute("SELECT version, link FROM runs WHERE run_id = ?" + (self.LOCK_ROW if lock else ""),
                            (run_id,)).fetchone()
        if row is None:
            raise UnknownRun(run_id)
        return int(row[0]), str(row[1])

    def _insert(self, run_id: str, sealed: Sequence[StoredRecord]) -> None:
        self._executemany("INSERT INTO records VALUES (?, ?, ?, ?, ?, ?)",
                          [(run_id, r.seq, r.kind, r.time, r.body_text, r.checksum) for r in sealed])

    def _create(self, run_id: str, machine: str, entry: Entry) -> list[StoredRecord]:
        """Inside a transaction: the run's row and its record 1."""
        sealed = seal(run_id, "", 1, [entry])
        cursor = self._execute("INSERT INTO runs VALUES (?, ?, 1, ?) ON CONFLICT DO NOTHING",
                               (run_id, machine, sealed[0].checksum))
        if cursor.rowcount != 1:
            raise RunExists(run_id)
        self._insert(run_id, sealed)
        return sealed

    def create(self, run_id: str, machine: str, entry: Entry) -> Record:
        with self._transaction():
            sealed = self._create(run_id, machine, entry)
            self._boundary("before", entry.kind)
        self._boundary("after", entry.kind)
        return verify(run_id, "", 1, sealed)[0]

    def runs(self) -> list[str]:
        return [str(r[0]) for r in self._execute("SELECT run_id FROM runs ORDER BY run_id")]

    def version(self, run_id: str) -> int:
        return self._head(run_id)[0]

    def machine(self, run_id: str) -> str:
        row = self._execute("SELECT machine FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        if row is None:
            raise UnknownRun(run_id)
        return str(row[0])

    def append(self, run_id: str, expect: int, entries: Sequence[Entry],
               snapshot: Mapping[str, JSON] | None = None) -> list[Record]:
        return self._append(run_id, expect, entries, snapshot)

    def _append(self, run_id: str, expect: int, entries: Sequence[Entry], snapshot: Mapping[str, JSON] | None,
                check: Callable[[], None] | None = None) -> list[Record]:
        """The compare-and-swap write; ``check`` runs first in the same transaction (a lease's fence)."""
        label = write_label(entries, snapshot)
        with self._transaction():
            if check is not None:
                check()
            actual, link = self._head(run_id)
            if actual != expect:
                raise Conflict(run_id, expect, actual)
            sealed = seal(run_id, link, expect + 1, entries)
            if not sealed:
                return []
            cursor = self._execute("UPDATE runs SET version = ?, link = ? WHERE run_id = ? AND version = ? "
                                   "AND link = ?", (sealed[-1].seq, sealed[-1].checksum, run_id, expect, link))
            if cursor.rowcount != 1:
                raise Conflict(run_id, expect, self._head(run_id)[0])
            self._insert(run_id, sealed)
            if snapshot is not None:
                snap = seal_snapshot(run_id, sealed[-1].seq, sealed[-1].checksum, snapshot)
                self._execute("INSERT INTO snapshots VALUES (?, ?, ?, ?, ?)",
                              (run_id, snap.seq, snap.link, snap.body_text, snap.checksum))
            self._boundary("before", label)
        self._boundary("after", label)
        return verify(run_id, link, expect + 1, sealed)

    def _stored(self, run_id: str, after: int) -> list[StoredRecord]:
        rows = self._execute("SELECT seq, kind, time, body, checksum FROM records "
                             "WHERE run_id = ? AND seq > ? ORDER BY seq", (run_id, after))
        return [StoredRecord(int(s), str(k), float(t), str(b), str(c)) for s, k, t, b, c in rows]

    def load(self, run_id: str) -> Loaded:
        with self._read():
            version, link = self._head(run_id)
            rows = self._execute("SELECT seq, link, body, checksum FROM snapshots WHERE run_id = ? "
                                 "ORDER BY seq DESC", (run_id,)).fetchall()
            snapshots = (StoredSnapshot(int(seq), str(link), str(body), str(check)) for seq, link, body, check in rows)
            loaded = load_verified(run_id, snapshots, lambda after: self._stored(run_id, after))
        if loaded.records:
            check_head(run_id, version, link, loaded.records[-1].seq, loaded.records[-1].checksum)
        elif loaded.snapshot is not None:
            check_head(run_id, version, link, loaded.snapshot.seq, loaded.snapshot.link)
        else:
            check_head(run_id, version, link, 0, "")
        return loaded

    def records(self, run_id: str, after: int = 0) -> list[Record]:
        with self._read():
            version, link = self._head(run_id)
            records = verify(run_id, "", 1, self._stored(run_id, 0))
        last = records[-1] if records else None
        check_head(run_id, version, link, last.seq if last else 0, last.checksum if last else "")
        return [r for r in records if r.seq > after]

    def discard_tail(self, run_id: str, seq: int) -> None:
        with self._transaction():
            self._head(run_id, lock=True)
            self._execute("DELETE FROM records WHERE run_id = ? AND seq >= ?", (run_id, seq))
            self._execute("DELETE FROM snapshots WHERE run_id = ? AND seq >= ?", (run_id, seq))
            row = self._execute("SELECT seq, checksum FROM records WHERE run_id = ? ORDER BY seq DESC LIMIT 1",
                                (run_id,)).fetchone()
            version, link = (int(row[0]), str(row[1])) if row else (0, "")
            self._execute("UPDATE runs SET version = ?, link = ? WHERE run_id = ?", (version, link, run_id))
