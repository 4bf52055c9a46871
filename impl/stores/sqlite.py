"""The embedded default store: one SQLite file, WAL, synchronous=FULL, one transaction per write.

The journal's SQL is ``agentfsm.impl.stores.sql``'s. Compare-and-swap is its ``UPDATE runs
... WHERE version = ?`` inside a ``BEGIN IMMEDIATE`` transaction, so several processes
racing on one run serialise and the loser gets ``Conflict``; records and their snapshot
commit together. Checksums are verified on every read, so a record damaged on disk is
reported rather than replayed.
"""

from __future__ import annotations

import shutil
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Concatenate, ParamSpec, TypeVar

from agentfsm.impl.stores.journal import JSON, Boundary, Entry, JournalError, Record, StoreFailed
from agentfsm.impl.stores.leases import Lease, LeaseLost, RunHeld, owner_gone
from agentfsm.impl.stores.sql import SqlJournal
from agentfsm.impl.stores.wal import wal_damage

P = ParamSpec("P")
R = TypeVar("R")

SCHEMA_VERSION = 1
_OPEN: Counter[Path] = Counter()  # databases this process has connections to (the log check reads
_OPEN_LOCK = threading.Lock()     # their files only before the first: see ``agentfsm.impl.stores.wal``)

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
CREATE TABLE IF NOT EXISTS owners (
    run_id     TEXT PRIMARY KEY,
    owner      TEXT NOT NULL,
    token      INTEGER NOT NULL,
    expires_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS snapshots (
    run_id   TEXT NOT NULL,
    seq      INTEGER NOT NULL,
    link     TEXT NOT NULL,
    body     TEXT NOT NULL,
    checksum TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
"""


def connect(path: str | Path, timeout: float = 30.0, same_thread: bool = True) -> sqlite3.Connection:
    """A connection with the store's durability settings (also used by the benchmark's baseline).
    ``timeout`` is SQLite's busy timeout: how long a write waits for another's lock."""
    conn = sqlite3.connect(str(path), timeout=timeout, isolation_level=None, check_same_thread=same_thread)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    return conn


def what_failed(exc: sqlite3.Error) -> str:
    """What a SQLite error says about the file, in a user's words."""
    text = str(exc)
    if "disk is full" in text or "disk I/O error" in text:
        return f"the disk is full or failing ({text})"
    if "malformed" in text or "not a database" in text or "decode" in text:
        return f"the database file is damaged ({text})"
    if "locked" in text or "busy" in text:
        return f"another process holds the file's write lock too long ({text})"
    if "readonly" in text or "read-only" in text or "unable to open" in text:
        return f"the file or its folder cannot be written (a read-only file or mount?) ({text})"
    if "locking protocol" in text:
        return f"another process keeps the write-ahead log's index locked (stopped or starved?) ({text})"
    return text


def _guarded(method: Callable[Concatenate[SqliteStore, P], R]) -> Callable[Concatenate[SqliteStore, P], R]:
    """A store method whose SQLite errors become ``StoreFailed`` naming the file (never a traceback)."""

    def wrapper(self: SqliteStore, /, *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return retry_lock_races(lambda: method(self, *args, **kwargs), self.timeout)
        except sqlite3.Error as exc:
            raise StoreFailed(f"{self.path}: {what_failed(exc)}") from None
    wrapper.__doc__ = method.__doc__
    return wrapper


def retry_lock_races(attempt: Callable[[], R], timeout: float) -> R:
    """``attempt()``, again while SQLite answers ``locking protocol`` (SQLITE_PROTOCOL: a race for
    the write-ahead log's index that SQLite gave up retrying, common when another process is
    stopped or starved; the busy timeout does not cover it), for up to ``timeout`` seconds. The
    error comes before a transaction's first statement takes effect, and a store method is one
    transaction, so trying it again is safe."""
    deadline = time.monotonic() + timeout
    pause = 0.01
    while True:
        try:
            return attempt()
        except sqlite3.OperationalError as exc:
            if "locking protocol" not in str(exc) or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.5)




class SqliteStore(SqlJournal):
    """Runs' journals in one SQLite database file; safe to share between processes."""

    def __init__(self, path: str | Path, on_boundary: Boundary | None = None, timeout: float = 30.0,
                 same_thread: bool = True, accept_damaged_log: bool = False) -> None:
        """``accept_damaged_log``: open even when the write-ahead log is damaged (``journal
        --repair``): SQLite then drops the damaged frames and the ones after them."""
        self.path = Path(path)
        self.on_boundary = on_boundary
        self.timeout = timeout
        self._key = self.path.resolve()
        self._counted = False
        with _OPEN_LOCK:  # a second store of this process (a heartbeat's) leaves the log's files alone
            damage = wal_damage(self.path) if _OPEN[self._key] == 0 else None
            if damage is not None and not accept_damaged_log:
                raise StoreFailed(f"{damage}; `agentfsm journal --repair` accepts the loss (a copy of the log is "
                                  "kept)")
            if damage is not None and Path(f"{self.path}-wal").exists():
                shutil.copyfile(f"{self.path}-wal", f"{self.path}-wal.damaged")
            self.log_damage = damage
            try:
                self._conn = retry_lock_races(lambda: connect(self.path, timeout, same_thread), timeout)
            except sqlite3.DatabaseError as exc:
                raise self._open_failed(exc) from None
            _OPEN[self._key] += 1
            self._counted = True
        try:
            retry_lock_races(self._migrate, timeout)
        except sqlite3.DatabaseError as exc:
            self.close()
            raise self._open_failed(exc) from None
        except BaseException:
            self.close()  # a refused file keeps no connection, nor this process's claim on its log
            raise

    def _open_failed(self, exc: sqlite3.DatabaseError) -> JournalError:
        """Why opening failed: a file that is not a database is not a journal store; anything
        else (a lock held, a full disk, a read-only file or mount, an I/O error) is said as such,
        of a store that may be healthy."""
        if "not a database" in str(exc) or "malformed" in str(exc):
            return JournalError(f"{self.path}: not a journal store ({exc})")
        return StoreFailed(f"{self.path}: {what_failed(exc)}")

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
        with _OPEN_LOCK:
            if self._counted:
                self._counted = False
                _OPEN[self._key] -= 1
                if not _OPEN[self._key]:
                    del _OPEN[self._key]
        self._conn.close()

    # -- one owner per run ---------------------------------------------------------------

    @_guarded
    def acquire(self, run_id: str, owner: str, seconds: float) -> Lease:
        """Own the run (it need not exist yet): a lease with a token one above the last one. While
        another owner's lease is live and that process still exists, ``RunHeld``."""
        with self._transaction():
            now = time.time()
            row = self._conn.execute("SELECT owner, token, expires_at FROM owners WHERE run_id = ?",
                                     (run_id,)).fetchone()
            if row is not None and float(row[2]) > now and not owner_gone(str(row[0])):
                raise RunHeld(run_id, str(row[0]), int(row[1]), float(row[2]) - now)
            token = (int(row[1]) if row is not None else 0) + 1
            self._conn.execute("INSERT INTO owners VALUES (?, ?, ?, ?) ON CONFLICT (run_id) DO UPDATE SET "
                               "owner = excluded.owner, token = excluded.token, expires_at = excluded.expires_at",
                               (run_id, owner, token, now + seconds))
        return Lease(run_id, "", token, owner, seconds, deadline=time.monotonic() + seconds, owned=True)

    @_guarded
    def renew(self, lease: Lease) -> None:
        deadline = time.monotonic() + lease.seconds
        with self._transaction():
            cursor = self._conn.execute("UPDATE owners SET expires_at = ? WHERE run_id = ? AND token = ?",
                                        (time.time() + lease.seconds, lease.run_id, lease.token))
            if cursor.rowcount != 1:
                raise LeaseLost(lease.run_id, lease.token, "another process took the run over")
        lease.deadline = deadline

    @_guarded
    def release(self, lease: Lease) -> None:
        """Give the run back (the token stays, so a later owner's is still higher)."""
        with self._transaction():
            self._conn.execute("UPDATE owners SET expires_at = 0 WHERE run_id = ? AND token = ?",
                               (lease.run_id, lease.token))

    def reopen(self) -> SqliteStore:
        """A second connection to the file, usable from another thread (a heartbeat's)."""
        return SqliteStore(self.path, timeout=self.timeout, same_thread=False)

    def _check_fence(self, lease: Lease) -> None:
        row = self._conn.execute("SELECT owner, token FROM owners WHERE run_id = ?", (lease.run_id,)).fetchone()
        if row is None or int(row[1]) != lease.token:
            holder = "nobody" if row is None else f"{row[0]} (lease {row[1]})"
            raise LeaseLost(lease.run_id, lease.token, f"the run is now owned by {holder}")

    @_guarded
    def append(self, run_id: str, expect: int, entries: Sequence[Entry],
               snapshot: Mapping[str, JSON] | None = None, fence: Lease | None = None) -> list[Record]:
        """The compare-and-swap append; under a lease, fenced in the same transaction."""
        check = None if fence is None else lambda: self._check_fence(fence)
        return self._append(run_id, expect, entries, snapshot, check)

    create = _guarded(SqlJournal.create)
    runs = _guarded(SqlJournal.runs)
    version = _guarded(SqlJournal.version)
    machine = _guarded(SqlJournal.machine)
    load = _guarded(SqlJournal.load)
    records = _guarded(SqlJournal.records)
    discard_tail = _guarded(SqlJournal.discard_tail)


class _Transaction:
    """``BEGIN IMMEDIATE`` ... ``COMMIT`` (rollback on any exception, including a crash)."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> _Transaction:
        self.conn.execute("BEGIN IMMEDIATE")
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: object) -> None:
        if kind is not None:
            self._rollback()
            return
        try:
            self.conn.execute("COMMIT")
        except BaseException:
            self._rollback()
            raise

    def _rollback(self) -> None:
        """Roll back what is still open: SQLite itself ends a transaction on some errors (a full
        disk), and a second ROLLBACK would hide the real error behind "no transaction is active"."""
        if self.conn.in_transaction:
            self.conn.execute("ROLLBACK")
