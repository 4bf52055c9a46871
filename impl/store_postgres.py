"""The shared store: runs' journals, and the queue several workers serve, in PostgreSQL.

Compare-and-swap is ``UPDATE runs SET version = new ... WHERE run_id = ? AND version =
expected``: of two writers computed from one version, the second's UPDATE waits for the
first to commit, then matches no row and gets ``Conflict``. Records and their snapshot
commit in that transaction; checksums are verified on every read, as in SQLite. A write
made under a lease first locks the run's job row (``FOR SHARE``) and checks the fencing
token and expiry there, in the same transaction, so a claim by another worker either
commits before (and the write is refused with ``LeaseLost``) or waits until it is done.

The schema is versioned: ``agentfsm_schema`` holds one row per applied migration, and
opening a store applies the missing ones under an advisory lock (one migrating process at
a time); a database newer than this agentfsm is refused rather than misread.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

import psycopg
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
from agentfsm.impl.leases import Job, Lease, LeaseLost
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
)
SCHEMA_VERSION = len(MIGRATIONS)


class PostgresStore:
    """Runs' journals and their job queue in one PostgreSQL schema (``public`` unless named).

    One connection, used by one thread at a time: each worker thread opens its own store."""

    transient_errors: tuple[type[Exception], ...] = (psycopg.OperationalError,)

    def __init__(self, url: str, schema: str | None = None, on_boundary: Boundary | None = None) -> None:
        self.url = url
        self.schema = schema
        self.on_boundary = on_boundary
        try:
            self._conn = psycopg.connect(url, autocommit=True)
        except psycopg.Error as exc:
            raise JournalError(f"cannot connect to the PostgreSQL store: {str(exc).strip()}") from None
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

    # -- journal -------------------------------------------------------------------------

    def _boundary(self, phase: str, label: str) -> None:
        if self.on_boundary is not None:
            self.on_boundary(phase, label)

    def _head(self, run_id: str) -> tuple[int, str]:
        row = self._conn.execute("SELECT version, link FROM runs WHERE run_id = %s", (run_id,)).fetchone()
        if row is None:
            raise UnknownRun(run_id)
        return int(row[0]), str(row[1])

    def _insert(self, run_id: str, sealed: Sequence[StoredRecord]) -> None:
        with self._conn.cursor() as cur:
            cur.executemany("INSERT INTO records VALUES (%s, %s, %s, %s, %s, %s)",
                            [(run_id, r.seq, r.kind, r.time, r.body_text, r.checksum) for r in sealed])

    def _create(self, run_id: str, machine: str, entry: Entry) -> list[StoredRecord]:
        """Inside a transaction: the run's row and its record 1."""
        sealed = seal(run_id, "", 1, [entry])
        cursor = self._conn.execute("INSERT INTO runs VALUES (%s, %s, 1, %s) ON CONFLICT DO NOTHING",
                                    (run_id, machine, sealed[0].checksum))
        if cursor.rowcount != 1:
            raise RunExists(run_id)
        self._insert(run_id, sealed)
        return sealed

    def create(self, run_id: str, machine: str, entry: Entry) -> Record:
        with self._conn.transaction():
            sealed = self._create(run_id, machine, entry)
            self._boundary("before", entry.kind)
        self._boundary("after", entry.kind)
        return verify(run_id, "", 1, sealed)[0]

    def runs(self) -> list[str]:
        return [str(r[0]) for r in self._conn.execute("SELECT run_id FROM runs ORDER BY run_id")]

    def version(self, run_id: str) -> int:
        return self._head(run_id)[0]

    def machine(self, run_id: str) -> str:
        row = self._conn.execute("SELECT machine FROM runs WHERE run_id = %s", (run_id,)).fetchone()
        if row is None:
            raise UnknownRun(run_id)
        return str(row[0])

    def _check_fence(self, lease: Lease) -> None:
        """Lock the job row until commit and insist that ``lease`` still holds it."""
        row = self._conn.execute("SELECT token, status = 'queued' AND expires_at > clock_timestamp() FROM jobs "
                                 "WHERE run_id = %s FOR SHARE", (lease.run_id,)).fetchone()
        if row is None:
            raise LeaseLost(lease.run_id, lease.token, "the run has no job")
        if int(row[0]) != lease.token:
            raise LeaseLost(lease.run_id, lease.token, f"another worker holds lease {row[0]}")
        if not row[1]:
            raise LeaseLost(lease.run_id, lease.token, "the lease expired or the job was finished")

    def append(self, run_id: str, expect: int, entries: Sequence[Entry],
               snapshot: Mapping[str, JSON] | None = None, fence: Lease | None = None) -> list[Record]:
        label = write_label(entries, snapshot)
        with self._conn.transaction():
            if fence is not None:
                self._check_fence(fence)
            actual, link = self._head(run_id)
            if actual != expect:
                raise Conflict(run_id, expect, actual)
            sealed = seal(run_id, link, expect + 1, entries)
            if not sealed:
                return []
            cursor = self._conn.execute("UPDATE runs SET version = %s, link = %s "
                                        "WHERE run_id = %s AND version = %s AND link = %s",
                                        (sealed[-1].seq, sealed[-1].checksum, run_id, expect, link))
            if cursor.rowcount != 1:
                raise Conflict(run_id, expect, self._head(run_id)[0])
            self._insert(run_id, sealed)
            if snapshot is not None:
                snap = seal_snapshot(run_id, sealed[-1].seq, sealed[-1].checksum, snapshot)
                self._conn.execute("INSERT INTO snapshots VALUES (%s, %s, %s, %s, %s)",
                                   (run_id, snap.seq, snap.link, snap.body_text, snap.checksum))
            self._boundary("before", label)
        self._boundary("after", label)
        return verify(run_id, link, expect + 1, sealed)

    def _stored(self, run_id: str, after: int) -> list[StoredRecord]:
        rows = self._conn.execute("SELECT seq, kind, time, body, checksum FROM records "
                                  "WHERE run_id = %s AND seq > %s ORDER BY seq", (run_id, after))
        return [StoredRecord(int(s), str(k), float(t), str(b), str(c)) for s, k, t, b, c in rows]

    def load(self, run_id: str) -> Loaded:
        with self._conn.transaction():
            self._conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            self._head(run_id)
            rows = self._conn.execute("SELECT seq, link, body, checksum FROM snapshots WHERE run_id = %s "
                                      "ORDER BY seq DESC", (run_id,)).fetchall()
            snapshots = (StoredSnapshot(int(seq), str(link), str(body), str(check)) for seq, link, body, check in rows)
            return load_verified(run_id, snapshots, lambda after: self._stored(run_id, after))

    def records(self, run_id: str, after: int = 0) -> list[Record]:
        with self._conn.transaction():
            self._conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            self._head(run_id)
            return [r for r in verify(run_id, "", 1, self._stored(run_id, 0)) if r.seq > after]

    def discard_tail(self, run_id: str, seq: int) -> None:
        with self._conn.transaction():
            self._conn.execute("SELECT 1 FROM runs WHERE run_id = %s FOR UPDATE", (run_id,))
            self._head(run_id)
            self._conn.execute("DELETE FROM records WHERE run_id = %s AND seq >= %s", (run_id, seq))
            self._conn.execute("DELETE FROM snapshots WHERE run_id = %s AND seq >= %s", (run_id, seq))
            row = self._conn.execute("SELECT seq, checksum FROM records WHERE run_id = %s ORDER BY seq DESC LIMIT 1",
                                     (run_id,)).fetchone()
            version, link = (int(row[0]), str(row[1])) if row else (0, "")
            self._conn.execute("UPDATE runs SET version = %s, link = %s WHERE run_id = %s", (version, link, run_id))

    def close(self) -> None:
        self._conn.close()

    # -- the work queue ------------------------------------------------------------------

    def submit(self, run_id: str, machine: str, entry: Entry, script: Sequence[Mapping[str, JSON]]) -> None:
        with self._conn.transaction():
            self._create(run_id, machine, entry)
            self._conn.execute("INSERT INTO jobs (run_id, machine, script) VALUES (%s, %s, %s)",
                               (run_id, machine, json.dumps(list(script))))

    def claim(self, owner: str, machines: Sequence[str], seconds: float) -> Lease | None:
        deadline = time.monotonic() + seconds
        row = self._conn.execute(
            "UPDATE jobs SET owner = %(owner)s, token = token + 1, claims = claims + 1, "
            "expires_at = clock_timestamp() + make_interval(secs => %(secs)s) "
            "WHERE run_id = (SELECT run_id FROM jobs WHERE status = 'queued' AND machine = ANY(%(machines)s) "
            "AND (expires_at IS NULL OR expires_at <= clock_timestamp()) ORDER BY id LIMIT 1 "
            "FOR UPDATE SKIP LOCKED) RETURNING run_id, machine, token, script",
            {"owner": owner, "secs": seconds, "machines": list(machines)}).fetchone()
        if row is None:
            return None
        run_id, machine, token, script = row
        return Lease(str(run_id), str(machine), int(token), owner, seconds, json.loads(script), deadline)

    def renew(self, lease: Lease) -> None:
        deadline = time.monotonic() + lease.seconds
        cursor = self._conn.execute(
            "UPDATE jobs SET expires_at = clock_timestamp() + make_interval(secs => %s) WHERE run_id = %s "
            "AND token = %s AND status = 'queued' AND expires_at > clock_timestamp()",
            (lease.seconds, lease.run_id, lease.token))
        if cursor.rowcount != 1:
            raise LeaseLost(lease.run_id, lease.token, "it expired or another worker claimed the run")
        lease.deadline = deadline

    def finish(self, lease: Lease, status: str, outcome: str) -> None:
        cursor = self._conn.execute(
            "UPDATE jobs SET status = %s, outcome = %s, finished_by = owner, finished_at = clock_timestamp(), "
            "owner = NULL, expires_at = NULL WHERE run_id = %s AND token = %s AND status = 'queued' "
            "AND expires_at > clock_timestamp()", (status, outcome, lease.run_id, lease.token))
        if cursor.rowcount != 1:
            raise LeaseLost(lease.run_id, lease.token, "it expired or another worker claimed the run")

    def jobs(self) -> list[Job]:
        rows: list[Any] = self._conn.execute("SELECT run_id, machine, status, owner, token, claims, outcome "
                                             "FROM jobs ORDER BY id").fetchall()
        return [Job(str(r), str(m), str(s), o, int(t), int(c), oc) for r, m, s, o, t, c, oc in rows]

    def pending(self) -> int:
        row = self._conn.execute("SELECT count(*) FROM jobs WHERE status = 'queued'").fetchone()
        return int(row[0]) if row else 0
