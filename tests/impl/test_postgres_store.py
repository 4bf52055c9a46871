"""The PostgreSQL store's own rules (impl/stores/postgres.py), in-process, one test a rule: its
errors when the server cannot be reached, the session's limit on idling in a transaction, its
schema and migrations (applied once, under a lock, a newer database refused), reads at one
snapshot, the fence on writes under a lease (a run's own or a job's), the leases of `agentfsm
run --store`, and the queue (submit, claim, renew, finish, requeue, jobs, pending). A bug here
is a step lost or a duplicated effect: a live owner's run taken, a stale writer let through, a
job served twice. The journal's contract itself is tests/impl/test_store_conformance.py's."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from agentfsm.impl.stores.journal import CREATED, STEP, Entry, JournalError, RunExists
from agentfsm.impl.stores.leases import Lease, LeaseLost, RunHeld, owner_name
from agentfsm.impl.stores.postgres import MIGRATIONS, SCHEMA_VERSION, PostgresStore
from lease_owners import reaped_owner
from pg_support import fresh_schema
from psycopg import sql

SCRIPT = [{"event": "Tick", "params": {}}]


@pytest.fixture
def schema(pg_url: str) -> Iterator[str]:
    with fresh_schema(pg_url) as name:
        yield name


@pytest.fixture
def store(pg_url: str, schema: str) -> Iterator[PostgresStore]:
    opened = PostgresStore(pg_url, schema)
    yield opened
    opened.close()


def created(n: int = 0) -> Entry:
    return Entry(CREATED, {"n": n}, 0.0)


def step(n: int) -> Entry:
    return Entry(STEP, {"n": n}, float(n))


def admin(pg_url: str, schema: str, query: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """``query`` run from a connection of its own, ``{}`` standing for the schema."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        cursor = conn.execute(sql.SQL(query).format(sql.Identifier(schema)), params)
        return cursor.fetchall() if cursor.description else []



def test_a_server_that_cannot_be_reached_is_a_journal_error() -> None:
    with pytest.raises(JournalError, match=r"^cannot connect to the PostgreSQL store: ") as refused:
        PostgresStore("postgresql://nobody@127.0.0.1:1/none?connect_timeout=5")
    assert not isinstance(refused.value, psycopg.Error)


def test_a_server_that_fails_while_the_store_is_set_up_is_a_journal_error_and_the_connection_goes(
        pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[psycopg.Connection[Any]] = []
    real = psycopg.connect

    def connect(*args: Any, **kwargs: Any) -> psycopg.Connection[Any]:
        opened.append(real(*args, **kwargs))
        return opened[-1]

    def dies(self: PostgresStore, schema: str | None) -> None:
        raise psycopg.OperationalError("server closed the connection unexpectedly")
    monkeypatch.setattr(psycopg, "connect", connect)
    monkeypatch.setattr(PostgresStore, "_set_up", dies)
    with pytest.raises(JournalError, match=r"^cannot connect to the PostgreSQL store: server closed the connection"):
        PostgresStore(pg_url, "unused")
    assert len(opened) == 1 and opened[0].closed


def test_a_session_may_idle_in_a_transaction_for_5_seconds(store: PostgresStore) -> None:
    assert store._conn.execute("SHOW idle_in_transaction_session_timeout").fetchone() == ("5s",)


def test_a_named_schema_is_made_and_holds_the_tables(pg_url: str, schema: str) -> None:
    PostgresStore(pg_url, schema).close()
    tables = admin(pg_url, schema, "SELECT table_name FROM information_schema.tables WHERE table_schema = %s "
                   "ORDER BY table_name", (schema,))
    assert [t for (t,) in tables] == ["agentfsm_schema", "jobs", "owners", "records", "runs", "snapshots"]


def test_without_a_schema_the_store_uses_the_sessions_search_path(pg_url: str, schema: str) -> None:
    admin(pg_url, schema, "CREATE SCHEMA {}")
    separator = "&" if "?" in pg_url else "?"
    store = PostgresStore(f"{pg_url}{separator}options=-csearch_path%3D{schema}")
    try:
        assert store.schema is None and store.schema_version() == SCHEMA_VERSION
        store.create("r", "m", created())
    finally:
        store.close()
    assert admin(pg_url, schema, "SELECT run_id FROM {}.runs") == [("r",)]


def test_a_new_schema_gets_every_migration_once_and_an_older_one_the_missing_ones(pg_url: str, schema: str) -> None:
    store = PostgresStore(pg_url, schema)
    assert store.schema_version() == SCHEMA_VERSION == len(MIGRATIONS) == 3
    store.close()
    PostgresStore(pg_url, schema).close()
    assert admin(pg_url, schema, "SELECT version FROM {}.agentfsm_schema ORDER BY version") == [(1,), (2,), (3,)]
    with fresh_schema(pg_url) as older:
        admin(pg_url, older, "CREATE SCHEMA {}")
        admin(pg_url, older, "CREATE TABLE {}.agentfsm_schema (version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ)")
        admin(pg_url, older, "SET search_path TO {}; " + MIGRATIONS[0] + MIGRATIONS[1]
              + "INSERT INTO agentfsm_schema VALUES (1, now()), (2, now())")
        upgraded = PostgresStore(pg_url, older)
        assert upgraded.schema_version() == 3
        assert upgraded.acquire("r", owner_name(), 30.0).token == 1, "migration 3's owners table is there"
        upgraded.close()


def test_a_database_newer_than_this_agentfsm_is_refused(pg_url: str, schema: str) -> None:
    PostgresStore(pg_url, schema).close()
    admin(pg_url, schema, "INSERT INTO {}.agentfsm_schema VALUES (4, now())")
    with pytest.raises(JournalError, match=r"^the PostgreSQL store has schema version 4, this agentfsm reads up to 3: "
                                           r"upgrade agentfsm$"):
        PostgresStore(pg_url, schema)


def test_one_process_migrates_a_schema_at_a_time(pg_url: str, schema: str) -> None:
    admin(pg_url, schema, "CREATE SCHEMA {}")
    with psycopg.connect(pg_url, autocommit=True) as holder:
        holder.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        holder.execute("SELECT pg_advisory_lock(hashtext(current_schema() || '/agentfsm'))")
        done: list[PostgresStore] = []
        opening = threading.Thread(target=lambda: done.append(PostgresStore(pg_url, schema)))
        opening.start()
        deadline = time.monotonic() + 60
        while not holder.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted") \
                .fetchone()[0]:  # type: ignore[index]
            assert not done, "the store migrated while another process held the migration lock"
            assert time.monotonic() < deadline, "the store never asked for the migration lock"
            time.sleep(0.01)
        holder.execute("SELECT pg_advisory_unlock(hashtext(current_schema() || '/agentfsm'))")
        opening.join(60)
    assert done and done[0].schema_version() == 3
    done[0].close()


def test_a_load_reads_one_snapshot_of_the_run_while_another_writer_appends(pg_url: str, schema: str,
                                                                          store: PostgresStore) -> None:
    store.create("r", "m", created())
    store.append("r", 1, [step(1)])
    other = PostgresStore(pg_url, schema)
    real = store._execute
    wrote: list[int] = []

    def execute(query: str, params: Any = ()) -> Any:
        cursor = real(query, params)
        if not wrote:   # after the load's first statement, another writer appends
            wrote.append(len(other.append("r", 2, [step(2)])))
        return cursor
    store._execute = execute  # type: ignore[method-assign]
    loaded = store.load("r")
    store._execute = real  # type: ignore[method-assign]
    other.close()
    assert wrote == [1]
    assert [r.seq for r in loaded.records] == [1, 2], "the load saw the run as it was when it began"
    assert store.version("r") == 3


def test_a_closed_store_has_no_connection(store: PostgresStore) -> None:
    store.close()
    with pytest.raises(psycopg.OperationalError, match="closed"):
        store.runs()


def test_a_reopened_store_is_the_same_schema(store: PostgresStore) -> None:
    store.create("r", "m", created())
    again = store.reopen()
    try:
        assert (again.url, again.schema, again.runs()) == (store.url, store.schema, ["r"])
    finally:
        again.close()


def test_owned_leases_count_tokens_from_1_and_hold_a_live_owners_run(store: PostgresStore) -> None:
    before = time.monotonic()
    first = store.acquire("r", owner_name(), 30.0)
    assert (first.run_id, first.machine, first.token, first.owner, first.seconds, first.owned) == \
        ("r", "", 1, owner_name(), 30.0, True)
    assert before + 30.0 <= first.deadline <= time.monotonic() + 30.0
    with pytest.raises(RunHeld) as held:
        store.acquire("r", "another:1", 30.0)
    assert (held.value.run_id, held.value.owner) == ("r", owner_name())
    assert str(held.value).startswith(f"run 'r' is owned by {owner_name()} (lease 1, 30 s left)")
    store.release(first)
    second = store.acquire("r", "another:1", 30.0)
    assert second.token == 2
    store.release(first)
    with pytest.raises(RunHeld, match=r"owned by another:1 \(lease 2"):
        store.acquire("r", owner_name(), 30.0)
    assert store.acquire("other", owner_name(), 30.0).token == 1, "each run counts its own"


def test_a_lapsed_or_gone_owners_run_is_taken_over(store: PostgresStore) -> None:
    store.acquire("lapsed", owner_name(), 0.0)
    assert store.acquire("lapsed", "another:1", 30.0).token == 2
    store.acquire("gone", reaped_owner(), 30.0)
    assert store.acquire("gone", owner_name(), 30.0).token == 2


def test_renewing_an_owned_lease_moves_its_expiry_and_a_lost_one_is_not_renewed(store: PostgresStore) -> None:
    lease = store.acquire("r", owner_name(), 0.0)
    store.renew(lease)   # from 0 s to 0 s more: still lapsed
    lease.seconds = 30.0
    before = time.monotonic()
    store.renew(lease)
    assert lease.deadline >= before + 30.0
    with pytest.raises(RunHeld, match="lease 1, 30 s left"):
        store.acquire("r", "another:1", 30.0)
    store.release(lease)
    store.acquire("r", "another:1", 30.0)
    with pytest.raises(LeaseLost) as lost:
        store.renew(lease)
    assert (lost.value.run_id, lost.value.token) == ("r", 1)
    assert str(lost.value) == "run 'r': lease 1 lost: another process took the run over"


def test_a_write_under_an_owned_lease_passes_with_its_token_only(store: PostgresStore) -> None:
    store.create("r", "m", created())
    nobody = Lease("r", "m", 1, "me", 30.0, owned=True)
    with pytest.raises(LeaseLost) as refused:
        store.append("r", 1, [step(1)], fence=nobody)
    assert str(refused.value) == "run 'r': lease 1 lost: the run is now owned by nobody"
    first = store.acquire("r", "one:1", 30.0)
    assert [r.seq for r in store.append("r", 1, [step(1)], fence=first)] == [2]
    store.release(first)
    store.acquire("r", "two:2", 30.0)
    with pytest.raises(LeaseLost) as refused:
        store.append("r", 2, [step(2)], fence=first)
    assert (refused.value.run_id, refused.value.token) == ("r", 1)
    assert str(refused.value) == "run 'r': lease 1 lost: the run is now owned by two:2 (lease 2)"
    assert [r.seq for r in store.append("r", 2, [step(2)])] == [3], "no fence, no check"


def test_a_write_under_a_jobs_lease_passes_while_its_token_holds_an_unfinished_job(store: PostgresStore) -> None:
    store.create("free", "m", created())
    with pytest.raises(LeaseLost) as refused:
        store.append("free", 1, [step(1)], fence=Lease("free", "m", 1, "w", 30.0))
    assert str(refused.value) == "run 'free': lease 1 lost: the run has no job"
    store.submit("r", "m", created(), SCRIPT)
    first = store.claim("w1", ["m"], 30.0)
    assert first is not None and first.token == 1
    assert [r.seq for r in store.append("r", 1, [step(1)], fence=first)] == [2]
    store.renew(first)
    with pytest.raises(LeaseLost) as refused:
        store.append("r", 2, [step(2)], fence=Lease("r", "m", 2, "w2", 30.0))
    assert (refused.value.run_id, refused.value.token) == ("r", 2)
    assert str(refused.value) == "run 'r': lease 2 lost: another worker holds lease 1"
    store.finish(first, "done", "ok")
    with pytest.raises(LeaseLost) as refused:
        store.append("r", 2, [step(2)], fence=first)
    assert str(refused.value) == "run 'r': lease 1 lost: the job was finished"
    assert store.version("r") == 2


def test_a_submitted_run_and_its_job_are_made_together(store: PostgresStore) -> None:
    store.submit("r", "m", created(), SCRIPT)
    with pytest.raises(RunExists):
        store.submit("r", "m", created(1), [])
    assert [(j.run_id, j.machine, j.status, j.owner, j.token, j.claims, j.outcome) for j in store.jobs()] == \
        [("r", "m", "queued", None, 0, 0, None)]
    assert [r.body for r in store.records("r")] == [{"n": 0}]
    assert store.pending() == 1


def test_a_claim_takes_the_oldest_queued_run_of_its_machines(store: PostgresStore) -> None:
    assert store.claim("w", ["m"], 30.0) is None
    store.submit("other", "x", created(), [])
    store.submit("first", "m", created(), SCRIPT)
    store.submit("second", "m", created(), [])
    before = time.monotonic()
    lease = store.claim("w", ["m"], 30.0)
    assert lease is not None
    assert (lease.run_id, lease.machine, lease.token, lease.owner, lease.seconds, lease.script, lease.owned) == \
        ("first", "m", 1, "w", 30.0, SCRIPT, False)
    assert before + 30.0 <= lease.deadline <= time.monotonic() + 30.0
    again = store.claim("w", ["m"], 30.0)
    assert again is not None and again.run_id == "second"
    assert store.claim("w", ["m"], 30.0) is None
    assert store.pending() == 3


def test_renewing_a_jobs_lease_keeps_it_and_a_lost_or_finished_one_is_not_renewed(pg_url: str, schema: str,
                                                                                 store: PostgresStore) -> None:
    store.submit("r", "m", created(), SCRIPT)
    lease = store.claim("w", ["m"], 0.0)
    assert lease is not None
    lease.seconds = 30.0
    before = time.monotonic()
    store.renew(lease)
    assert lease.deadline >= before + 30.0
    assert store.claim("w2", ["m"], 30.0) is None, "the renewed lease holds the job"
    admin(pg_url, schema, "UPDATE {}.jobs SET token = token + 1")
    with pytest.raises(LeaseLost) as lost:
        store.renew(lease)
    assert (lost.value.run_id, lost.value.token) == ("r", 1)
    assert str(lost.value) == "run 'r': lease 1 lost: another worker claimed the run, or it was finished"


def test_finishing_records_the_outcome_once_and_only_under_the_jobs_lease(store: PostgresStore) -> None:
    store.submit("r", "m", created(), SCRIPT)
    lease = store.claim("w", ["m"], 30.0)
    assert lease is not None
    with pytest.raises(LeaseLost) as lost:
        store.finish(Lease("r", "m", 2, "w", 30.0), "done", "no")
    assert (lost.value.run_id, lost.value.token) == ("r", 2)
    assert str(lost.value) == "run 'r': lease 2 lost: another worker claimed the run, or it was finished"
    store.finish(lease, "blocked", "decide r/2/0")
    with pytest.raises(LeaseLost):
        store.finish(lease, "done", "twice")
    assert [(j.status, j.owner, j.outcome) for j in store.jobs()] == [("blocked", None, "decide r/2/0")]
    assert store.pending() == 0


def test_only_a_blocked_run_is_requeued_with_the_users_decisions(store: PostgresStore) -> None:
    with pytest.raises(JournalError, match=r"^run 'nope' is not a job, not blocked: only a blocked run waits"):
        store.requeue("nope", 1, [step(1)])
    store.submit("r", "m", created(), SCRIPT)
    with pytest.raises(JournalError, match=r"^run 'r' is queued, not blocked"):
        store.requeue("r", 1, [step(1)])
    lease = store.claim("w", ["m"], 30.0)
    assert lease is not None
    store.finish(lease, "blocked", "decide")
    store.requeue("r", 1, [step(1)])
    assert [(j.status, j.owner, j.claims, j.outcome) for j in store.jobs()] == [("queued", None, 0, None)]
    assert [r.seq for r in store.records("r")] == [1, 2]
    again = store.claim("w", ["m"], 30.0)
    assert again is not None and again.token == 2


class Fixed:
    """A cursor whose row's last column, the seconds a lease has left, reads ``left``."""

    def __init__(self, row: tuple[Any, ...], left: float) -> None:
        self.row = (*row[:-1], left)

    def fetchone(self) -> tuple[Any, ...]:
        return self.row


class ServerClock:
    """Stands in for the server's clock in ``acquire``: the seconds left on a lease read ``left``."""

    def __init__(self, conn: psycopg.Connection[Any], left: float) -> None:
        self.conn = conn
        self.left = left

    def execute(self, query: str, params: Any = ()) -> Any:
        cursor = self.conn.execute(query, params)
        if "expires_at - clock_timestamp()" not in query:
            return cursor
        row = cursor.fetchone()
        assert row is not None
        return Fixed(row, self.left)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.conn, name)


@pytest.mark.parametrize(("left", "held"), [(0.5, True), (1e-6, True), (0.0, False), (-0.5, False)])
def test_a_live_owners_lease_is_held_while_any_time_is_left_on_it(store: PostgresStore, left: float,
                                                                  held: bool) -> None:
    store.acquire("r", owner_name(), 30.0)
    real = store._conn
    store._conn = ServerClock(real, left)  # type: ignore[assignment]
    try:
        if held:
            with pytest.raises(RunHeld):
                store.acquire("r", "another:1", 30.0)
        else:
            assert store.acquire("r", "another:1", 30.0).token == 2
    finally:
        store._conn = real
