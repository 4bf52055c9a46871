"""The embedded default store: one SQLite file, WAL, synchronous=FULL, one transaction per write.

The journal's SQL is ``agentfsm.impl.stores.sql``'s. Compare-and-swap is its ``UPDATE runs
... WHERE version = ?`` inside a ``BEGIN IMMEDIATE`` transaction, so several processes
racing on one run serialise and the loser gets ``Conflict``; records and their snapshot
commit together. Checksums are verified on every read, so a record damaged on disk is
reported rather than replayed.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

from agentfsm.impl.durable.journal import Boundary, JournalError
from agentfsm.impl.stores.sql import SqlJournal

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


class SqliteStore(SqlJournal):
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

    def _execute(self, query: str, params: Sequence[object] = ()) -> sqlite3.Cursor:
        return self._conn.execute(query, params)

    def _executemany(self, query: str, rows: Sequence[Sequence[object]]) -> None:
        self._conn.executemany(query, rows)

    def _transaction(self) -> _Transaction:
        return _Transaction(self._conn)

    def _read(self) -> _Transaction:
        return _Transaction(self._conn)

    def close(self) -> None:
        self._conn.close()


class _Transaction:
    """``BEGIN IMMEDIATE`` ... ``COMMIT`` (rollback on any exception, including a crash)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> _Transaction:
        self.conn.execute("BEGIN IMMEDIATE")
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if kind is not None:
            self.conn.execute("ROLLBACK")
            return
        try:
            self.conn.execute("COMMIT")
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
