"""The shared store: runs' journals, and the queue several workers serve, in PostgreSQL.

The journal's SQL is ``agentfsm.impl.stores.sql``'s, as for SQLite. Compare-and-swap is
``UPDATE runs SET version = new ... WHERE run_id = ? AND version = expected``: of two
writers computed from one version, the second's UPDATE waits for the first to commit,
then matches no row and gets ``Conflict``. Records and their snapshot commit in that
transaction; checksums are verified on every read. A write made under a lease first locks
the run's job row (``FOR SHARE``) and checks the fencing token there, in the same
transaction: a claim committed before is seen (the write is refused with ``LeaseLost``), and
a claim that comes later skips the locked row until the write is done. A lapsed lease that
nobody claimed since still writes, renews and finishes, as an owned lease does: the token
fences, and every claim raises it.

The schema is versioned: ``agentfsm_schema`` holds one row per applied migration, and
opening a store applies the missing ones under an advisory lock (one migrating process at
a time); a database newer than this agentfsm is refused rather than misread.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import psycopg
from agentfsm.impl.stores.journal import JSON, Boundary, Entry, JournalError, Record
from agentfsm.impl.stores.leases import Job, Lease, LeaseLost, RunHeld, owner_gone
from agentfsm.impl.stores.sql import SqlJournal
from psycopg import sql

MIGRATIONS: tuple[str, ...] = (
    # 1: the journal, as in SQLite.
    """
    CREATE TABLE runs (
        run_id   TEXT PRIMARY KEY,
        machine  TEXT NOT NULL,
        version  BIGINT NOT NULL,
        link     TEXT NOT NULL
    );
    CREATE TABLE records (
        run_id   TEXT NOT NULL REFERENCES runs (run_id),
        seq      BIGINT NOT NULL,
        kind     TEXT NOT NULL,
        time     DOUBLE PRECISION NOT NULL,
        body     TEXT NOT NULL,
        checksum TEXT NOT NULL,
        PRIMARY KEY (run_id, seq)
    );
    CREATE TABLE snapshots (
        run_id   TEXT NOT NULL REFERENCES runs (run_id),
        seq      BIGINT NOT NULL,
        link     TEXT NOT NULL,
        body     TEXT NOT NULL,
        checksum TEXT NOT NULL,
        PRIMARY KEY (run_id, seq)
    );
    """,
    # 2: the work queue: one job per submitted run, owned through a lease.
    """
    CREATE TABLE jobs (
        id          BIGSERIAL UNIQUE,
        run_id      TEXT PRIMARY KEY REFERENCES runs (run_id),
        machine     TEXT NOT NULL,
        script      TEXT NOT NULL,
        status      TEXT NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'done', 'blocked', 'failed')),
        owner       TEXT,
        token       BIGINT NOT NULL DEFAULT 0,
        expires_at  TIMESTAMPTZ,
        claims      INTEGER NOT NULL DEFAULT 0,
        outcome     TEXT,
        finished_by TEXT,
        finished_at TIMESTAMPTZ
    );
    CREATE INDEX jobs_queued ON jobs (id) WHERE status = 'queued';
    """,
    # 3: one owner per run outside the queue (``agentfsm run --store``), as on SQLite.
    """
    CREATE TABLE owners (
        run_id     TEXT PRIMARY KEY,
        owner      TEXT NOT NULL,
        token      BIGINT NOT NULL,
        expires_at TIMESTAMPTZ NOT NULL
    );
    """,
)
SCHEMA_VERSION = len(MIGRATIONS)
IDLE_IN_TRANSACTION = 5.0
"""Seconds a session may sit idle inside a transaction (every transaction here is a few
statements sent back to back) before the server ends it and releases its locks."""


def unreachable(exc: psycopg.Error) -> JournalError:
    return JournalError(f"cannot connect to the PostgreSQL store: {str(exc).strip()}")


class PostgresStore(SqlJournal):
    """Runs' journals and their job queue in one PostgreSQL schema (``public`` unless named).

    One connection, used by one thread at a time: each worker thread opens its own store."""

    transient_errors: tuple[type[Exception], ...] = (psycopg.OperationalError,)
    LOCK_ROW = " FOR UPDATE"

    def __init__(self, url: str, schema: str | None = None, on_boundary: Boundary | None = None) -> None:
        self.url = url
        self.schema = schema
        self.on_boundary = on_boundary
        try:
            self._conn = psycopg.connect(url, autocommit=True)
        except psycopg.Error as exc:
            raise unreachable(exc) from None
        try:
            self._set_up(schema)
        except psycopg.Error as exc:  # the server went away just after it accepted (killed, restarting)
            self._conn.close()
            raise unreachable(exc) from None

    def _set_up(self, schema: str | None) -> None:
        # A worker stalled inside a transaction (a frozen VM, SIGSTOP) would keep the run's rows
        # locked: the server ends such a session, its locks go, and the stalled worker's commit fails.
        self._conn.execute(f"SET idle_in_transaction_session_timeout = {int(IDLE_IN_TRANSACTION * 1000)}")
        if schema is not None:
            self._conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
            self._conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        self._migrate()

    # -- schema --------------------------------------------------------------------------

    def schema_version(self) -> int:
        row = self._conn.execute("SELECT coalesce(max(version), 0) FROM agentfsm_schema").fetchone()
        return int(row[0]) if row else 0

    def _migrate(self) -> None:
        with self._conn.transaction():
            self._conn.execute("SELECT pg_advisory_xact_lock(hashtext(current_schema() || '/agentfsm'))")
            self._conn.execute("CREATE TABLE IF NOT EXISTS agentfsm_schema (version INTEGER PRIMARY KEY, "
                               "applied_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp())")
            current = self.schema_version()
            if current > SCHEMA_VERSION:
                raise JournalError(f"the PostgreSQL store has schema version {current}, "
                                   f"this agentfsm reads up to {SCHEMA_VERSION}: upgrade agentfsm")
            for version in range(current + 1, SCHEMA_VERSION + 1):
                self._conn.execute(MIGRATIONS[version - 1].encode())
                self._conn.execute("INSERT INTO agentfsm_schema (version) VALUES (%s)", (version,))

    # -- the driver --------------------------------------------------------------------

    def _execute(self, query: str, params: Sequence[object] = ()) -> psycopg.Cursor[Any]:
        return self._conn.execute(query.replace("?", "%s").encode(), params)

    def _executemany(self, query: str, rows: Sequence[Sequence[object]]) -> None:
        with self._conn.cursor() as cur:
            cur.executemany(query.replace("?", "%s").encode(), rows)

    def _transaction(self) -> AbstractContextManager[object]:
        return self._conn.transaction()

    @contextmanager
    def _read(self) -> Iterator[None]:
        with self._conn.transaction():
            self._conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            yield

    def close(self) -> None:
        self._conn.close()

    # -- fenced writes -------------------------------------------------------------------

    def append(self, run_id: str, expect: int, entries: Sequence[Entry],
               snapshot: Mapping[str, JSON] | None = None, fence: Lease | None = None) -> list[Record]:
        """The journal's compare-and-swap append; under a lease, fenced in the same transaction."""
        check = None if fence is None else lambda: self._check_fence(fence)
        return self._append(run_id, expect, entries, snapshot, check)

    def _check_fence(self, lease: Lease) -> None:
        """Lock the job (or owner) row until commit and insist that ``lease`` still holds it."""
        if lease.owned:
            held = self._conn.execute("SELECT owner, token FROM owners WHERE run_id = %s FOR SHARE",
                                      (lease.run_id,)).fetchone()
            if held is None or int(held[1]) != lease.token:
                holder = "nobody" if held is None else f"{held[0]} (lease {held[1]})"
                raise LeaseLost(lease.run_id, lease.token, f"the run is now owned by {holder}")
            return
        # The token alone fences, as an owned lease's: every claim raises it, so a lapsed lease nobody
        # claimed since still writes (durable-run-fixed.yaml's store; docs/durability.md).
        row = self._conn.execute("SELECT token, status = 'queued' FROM jobs WHERE run_id = %s FOR SHARE",
                                 (lease.run_id,)).fetchone()
        if row is None:
            raise LeaseLost(lease.run_id, lease.token, "the run has no job")
        if int(row[0]) != lease.token:
            raise LeaseLost(lease.run_id, lease.token, f"another worker holds lease {row[0]}")
        if not row[1]:
            raise LeaseLost(lease.run_id, lease.token, "the job was finished")

    # -- one owner per run outside the queue (a CLI run) --------------------------------

    def acquire(self, run_id: str, owner: str, seconds: float) -> Lease:
        """Own the run (it need not exist yet), as ``SqliteStore.acquire`` does: a token one above
        the last one; ``RunHeld`` while another owner's lease is live and its process exists. The
        row is made first and then locked, so two acquirers of a new run serialise on it."""
        deadline = time.monotonic() + seconds
        with self._conn.transaction():
            self._conn.execute("INSERT INTO owners VALUES (%s, '', 0, to_timestamp(0)) ON CONFLICT DO NOTHING",
                               (run_id,))
            row = self._conn.execute("SELECT owner, token, extract(epoch FROM expires_at - clock_timestamp()) "
                                     "FROM owners WHERE run_id = %s FOR UPDATE", (run_id,)).fetchone()
            assert row is not None  # inserted above
            owner_then, token, left = str(row[0]), int(row[1]), float(row[2])
            if left > 0 and not owner_gone(owner_then):
                raise RunHeld(run_id, owner_then, token, left)
            self._conn.execute("UPDATE owners SET owner = %s, token = %s, "
                               "expires_at = clock_timestamp() + make_interval(secs => %s) WHERE run_id = %s",
                               (owner, token + 1, seconds, run_id))
        return Lease(run_id, "", token + 1, owner, seconds, deadline=deadline, owned=True)

    def reopen(self) -> PostgresStore:
        """A second connection to the same schema (a heartbeat's)."""
        return PostgresStore(self.url, self.schema)

    def release(self, lease: Lease) -> None:
        """Give the run back (the token stays, so a later owner's is still higher)."""
        self._conn.execute("UPDATE owners SET expires_at = to_timestamp(0) WHERE run_id = %s AND token = %s",
                           (lease.run_id, lease.token))

    # -- the work queue ------------------------------------------------------------------

    def submit(self, run_id: str, machine: str, entry: Entry, script: Sequence[Mapping[str, JSON]]) -> None:
        with self._conn.transaction():
            self._create(run_id, machine, entry)
            self._conn.execute("INSERT INTO jobs (run_id, machine, script) VALUES (%s, %s, %s)",
                               (run_id, machine, json.dumps(list(script))))

    def claim(self, owner: str, machines: Sequence[str], seconds: float) -> Lease | None:
        """The oldest claimable run. A run whose last lease lapsed (its owner died or stalled) waits
        out a back-off that doubles with every claim (0, 1, 3, 7, 15 lease lengths), so a run whose
        effect keeps outliving its lease does not starve the runs queued behind it."""
        deadline = time.monotonic() + seconds
        row = self._conn.execute(
            "UPDATE jobs SET owner = %(owner)s, token = token + 1, claims = claims + 1, "
            "expires_at = clock_timestamp() + make_interval(secs => %(secs)s) "
            "WHERE run_id = (SELECT run_id FROM jobs WHERE status = 'queued' AND machine = ANY(%(machines)s) "
            "AND (expires_at IS NULL OR expires_at + make_interval(secs => %(secs)s * "
            "(power(2, least(claims, 5) - 1) - 1)) <= clock_timestamp()) ORDER BY id LIMIT 1 "
            "FOR UPDATE SKIP LOCKED) RETURNING run_id, machine, token, script",
            {"owner": owner, "secs": seconds, "machines": list(machines)}).fetchone()
        if row is None:
            return None
        run_id, machine, token, script = row
        return Lease(str(run_id), str(machine), int(token), owner, seconds, json.loads(script), deadline)

    def renew(self, lease: Lease) -> None:
        deadline = time.monotonic() + lease.seconds
        if lease.owned:
            cursor = self._conn.execute("UPDATE owners SET expires_at = clock_timestamp() + make_interval(secs => %s) "
                                        "WHERE run_id = %s AND token = %s", (lease.seconds, lease.run_id, lease.token))
            if cursor.rowcount != 1:
                raise LeaseLost(lease.run_id, lease.token, "another process took the run over")
            lease.deadline = deadline
            return
        cursor = self._conn.execute(
            "UPDATE jobs SET expires_at = clock_timestamp() + make_interval(secs => %s) WHERE run_id = %s "
            "AND token = %s AND status = 'queued'", (lease.seconds, lease.run_id, lease.token))
        if cursor.rowcount != 1:
            raise LeaseLost(lease.run_id, lease.token, "another worker claimed the run, or it was finished")
        lease.deadline = deadline

    def finish(self, lease: Lease, status: str, outcome: str) -> None:
        cursor = self._conn.execute(
            "UPDATE jobs SET status = %s, outcome = %s, finished_by = owner, finished_at = clock_timestamp(), "
            "owner = NULL, expires_at = NULL WHERE run_id = %s AND token = %s AND status = 'queued'",
            (status, outcome, lease.run_id, lease.token))
        if cursor.rowcount != 1:
            raise LeaseLost(lease.run_id, lease.token, "another worker claimed the run, or it was finished")

    def requeue(self, run_id: str, expect: int, entries: Sequence[Entry]) -> None:
        """Journal the user's decisions on a blocked run and queue it again for a worker (which
        performs a ``rerun`` with the real tools), in one transaction."""
        with self._conn.transaction():
            row = self._conn.execute("SELECT status FROM jobs WHERE run_id = %s FOR UPDATE", (run_id,)).fetchone()
            if row is None or row[0] != "blocked":
                raise JournalError(f"run {run_id!r} is {'not a job' if row is None else row[0]}, not blocked: "
                                   "only a blocked run waits for a decision")
            self._append(run_id, expect, entries, None)
            self._conn.execute("UPDATE jobs SET status = 'queued', outcome = NULL, owner = NULL, expires_at = NULL, "
                               "claims = 0 WHERE run_id = %s", (run_id,))

    def jobs(self) -> list[Job]:
        rows: list[Any] = self._conn.execute("SELECT run_id, machine, status, owner, token, claims, outcome "
                                             "FROM jobs ORDER BY id").fetchall()
        return [Job(str(r), str(m), str(s), o, int(t), int(c), oc) for r, m, s, o, t, c, oc in rows]

    def pending(self) -> int:
        row = self._conn.execute("SELECT count(*) FROM jobs WHERE status = 'queued'").fetchone()
        return int(row[0]) if row else 0
