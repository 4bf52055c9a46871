"""The embedded default store: one SQLite file, WAL, synchronous=FULL, one transaction per write.

Compare-and-swap is the ``UPDATE runs ... WHERE version = ?`` inside a ``BEGIN IMMEDIATE``
transaction, so several processes racing on one run serialise and the loser gets
``Conflict``; records and their snapshot commit together. Checksums are verified on every
read, so a record damaged on disk is reported rather than replayed.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from pathlib import Path

from agentfsm.impl.journal import (
    JSON,
    Boundary,
    Conflict,
    Entry,
    JournalError,
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

SCHEMA_VERSION = 1

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    run_id   TEXT PRIMARY KEY,
    machine  TEXT NOT NULL,
    version  INTEGER NOT NULL,
    link     TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS records (
    run_id   TEXT NOT NULL,
    seq      INTEGER NOT NULL,
    kind     TEXT NOT NULL,
    time     REAL NOT NULL,
    body     TEXT NOT NULL,
    checksum TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS snapshots (
    run_id   TEXT NOT NULL,
    seq      INTEGER NOT NULL,
    link     TEXT NOT NULL,
    body     TEXT NOT NULL,
    checksum TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
"""


def connect(path: str | Path, timeout: float = 30.0) -> sqlite3.Connection:
    """A connection with the store's durability settings (also used by the benchmark's baseline)."""
    conn = sqlite3.connect(str(path), timeout=timeout, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")
    return conn


class SqliteStore:
    """Runs' journals in one SQLite database file; safe to share between processes."""

    def __init__(self, path: str | Path, on_boundary: Boundary | None = None, timeout: float = 30.0) -> None:
        self.path = Path(path)
        self.on_boundary = on_boundary
        try:
            self._conn = connect(self.path, timeout)
            self._migrate()
        except sqlite3.DatabaseError as exc:
            raise JournalError(f"{self.path}: not a journal store ({exc})") from None

    def _migrate(self) -> None:
        with self._transaction():
            for statement in SCHEMA.split(";"):
                if statement.strip():
                    self._conn.execute(statement)
            row = self._conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
            if row is None:
                self._conn.execute("INSERT INTO meta VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
            elif int(row[0]) != SCHEMA_VERSION:
                raise JournalError(f"{self.path}: schema version {row[0]}, this agentfsm reads {SCHEMA_VERSION}")

    def _transaction(self) -> _Transaction:
        return _Transaction(self._conn)

    def _boundary(self, phase: str, label: str) -> None:
        if self.on_boundary is not None:
            self.on_boundary(phase, label)

    def _head(self, run_id: str) -> tuple[int, str]:
        row = self._conn.execute("SELECT version, link FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        if row is None:
            raise UnknownRun(run_id)
        return int(row[0]), str(row[1])

    def _insert(self, run_id: str, sealed: Sequence[StoredRecord]) -> None:
        self._conn.executemany("INSERT INTO records VALUES (?, ?, ?, ?, ?, ?)",
                               [(run_id, r.seq, r.kind, r.time, r.body_text, r.checksum) for r in sealed])

    def create(self, run_id: str, machine: str, entry: Entry) -> Record:
        sealed = seal(run_id, "", 1, [entry])
        with self._transaction() as tx:
            if self._conn.execute("SELECT 1 FROM runs WHERE run_id = ?", (run_id,)).fetchone():
                raise RunExists(run_id)
            self._conn.execute("INSERT INTO runs VALUES (?, ?, 1, ?)", (run_id, machine, sealed[0].checksum))
            self._insert(run_id, sealed)
            tx.before_commit = lambda: self._boundary("before", entry.kind)
        self._boundary("after", entry.kind)
        return verify(run_id, "", 1, sealed)[0]

    def runs(self) -> list[str]:
        return [str(r[0]) for r in self._conn.execute("SELECT run_id FROM runs ORDER BY run_id")]

    def version(self, run_id: str) -> int:
        return self._head(run_id)[0]

    def machine(self, run_id: str) -> str:
        row = self._conn.execute("SELECT machine FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        if row is None:
            raise UnknownRun(run_id)
        return str(row[0])

    def append(self, run_id: str, expect: int, entries: Sequence[Entry],
               snapshot: Mapping[str, JSON] | None = None) -> list[Record]:
        label = write_label(entries, snapshot)
        with self._transaction() as tx:
            actual, link = self._head(run_id)
            if actual != expect:
                raise Conflict(run_id, expect, actual)
            sealed = seal(run_id, link, expect + 1, entries)
            if not sealed:
                return []
            cursor = self._conn.execute("UPDATE runs SET version = ?, link = ? WHERE run_id = ? AND version = ?",
                                        (sealed[-1].seq, sealed[-1].checksum, run_id, expect))
            if cursor.rowcount != 1:
                raise Conflict(run_id, expect, self._head(run_id)[0])
            self._insert(run_id, sealed)
            if snapshot is not None:
                snap = seal_snapshot(run_id, sealed[-1].seq, sealed[-1].checksum, snapshot)
                self._conn.execute("INSERT INTO snapshots VALUES (?, ?, ?, ?, ?)",
                                   (run_id, snap.seq, snap.link, snap.body_text, snap.checksum))
            tx.before_commit = lambda: self._boundary("before", label)
        self._boundary("after", label)
        return verify(run_id, link, expect + 1, sealed)

    def _stored(self, run_id: str, after: int) -> list[StoredRecord]:
        rows = self._conn.execute("SELECT seq, kind, time, body, checksum FROM records "
                                  "WHERE run_id = ? AND seq > ? ORDER BY seq", (run_id, after))
        return [StoredRecord(int(s), str(k), float(t), str(b), str(c)) for s, k, t, b, c in rows]

    def load(self, run_id: str) -> Loaded:
        with self._transaction():
            self._head(run_id)
            rows = self._conn.execute("SELECT seq, link, body, checksum FROM snapshots WHERE run_id = ? "
                                      "ORDER BY seq DESC", (run_id,)).fetchall()
            snapshots = (StoredSnapshot(int(seq), str(link), str(body), str(check)) for seq, link, body, check in rows)
            return load_verified(run_id, snapshots, lambda after: self._stored(run_id, after))

    def records(self, run_id: str, after: int = 0) -> list[Record]:
        with self._transaction():
            self._head(run_id)
            return [r for r in verify(run_id, "", 1, self._stored(run_id, 0)) if r.seq > after]

    def discard_tail(self, run_id: str, seq: int) -> None:
        with self._transaction():
            self._head(run_id)
            self._conn.execute("DELETE FROM records WHERE run_id = ? AND seq >= ?", (run_id, seq))
            self._conn.execute("DELETE FROM snapshots WHERE run_id = ? AND seq >= ?", (run_id, seq))
            row = self._conn.execute("SELECT seq, checksum FROM records WHERE run_id = ? ORDER BY seq DESC LIMIT 1",
                                     (run_id,)).fetchone()
            version, link = (int(row[0]), str(row[1])) if row else (0, "")
            self._conn.execute("UPDATE runs SET version = ?, link = ? WHERE run_id = ?", (version, link, run_id))

    def close(self) -> None:
        self._conn.close()


class _Transaction:
    """``BEGIN IMMEDIATE`` ... ``COMMIT`` (rollback on any exception, including a crash)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.before_commit: object = None

    def __enter__(self) -> _Transaction:
        self.conn.execute("BEGIN IMMEDIATE")
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if kind is not None:
            self.conn.execute("ROLLBACK")
            return
        try:
            if callable(self.before_commit):
                self.before_commit()
            self.conn.execute("COMMIT")
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
