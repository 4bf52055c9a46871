"""The SQLite store's own rules (impl/stores/sqlite.py), in-process, one test a rule: its
durability settings, its errors in a user's words, its retry of SQLite's lock races, the
check of the write-ahead log before the first connection, the schema, its leases (token,
expiry, release, renewal) and the fence on its writes, and its transactions. A bug here is a
lost step (a write not committed, a log's damage unseen) or a duplicated effect (a live
owner's run taken, a stale writer let through). The journal's contract itself is
tests/impl/test_store_conformance.py's."""

from __future__ import annotations

import re
import sqlite3
import threading
from pathlib import Path

import pytest
from agentfsm.impl.stores import sqlite as store_module
from agentfsm.impl.stores.journal import CREATED, STEP, Entry, JournalError, StoreFailed
from agentfsm.impl.stores.leases import Lease, LeaseLost, RunHeld, owner_name
from agentfsm.impl.stores.sqlite import SqliteStore, _Transaction, connect, retry_lock_races, what_failed
from lease_owners import reaped_owner


class FakeTime:
    """Stands in for the module's ``time``: one clock for wall and monotonic time, which moves
    only when the code sleeps (or a test moves it)."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now
        self.sleeps: list[float] = []

    def time(self) -> float:
        return self.now

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> FakeTime:
    fake = FakeTime()
    monkeypatch.setattr(store_module, "time", fake)
    return fake


class LogChecks:
    """Stands in for the write-ahead log's check: records each file it was asked about and
    answers ``damage``."""

    def __init__(self) -> None:
        self.asked: list[Path] = []
        self.damage: str | None = None

    def __call__(self, db: Path) -> str | None:
        self.asked.append(db)
        return self.damage


@pytest.fixture
def log_checks(monkeypatch: pytest.MonkeyPatch) -> LogChecks:
    checks = LogChecks()
    monkeypatch.setattr(store_module, "wal_damage", checks)
    return checks


def test_a_connection_is_in_wal_mode_synced_in_full_and_waits_its_timeout_for_a_lock(tmp_path: Path) -> None:
    conn = connect(tmp_path / "j.db", timeout=2.5)
    try:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert conn.execute("PRAGMA synchronous").fetchone()[0] == 2, "FULL"
        assert conn.execute("PRAGMA busy_timeout").fetchone()[0] == 2500
    finally:
        conn.close()


@pytest.mark.parametrize(("text", "said"), [
    ("database or disk is full", "the disk is full or failing (database or disk is full)"),
    ("disk I/O error", "the disk is full or failing (disk I/O error)"),
    ("database disk image is malformed", "the database file is damaged (database disk image is malformed)"),
    ("file is not a database", "the database file is damaged (file is not a database)"),
    ("Could not decode to UTF-8", "the database file is damaged (Could not decode to UTF-8)"),
    ("database is locked", "another process holds the file's write lock too long (database is locked)"),
    ("database table is busy", "another process holds the file's write lock too long (database table is busy)"),
    ("attempt to write a readonly database",
     "the file or its folder cannot be written (a read-only file or mount?) (attempt to write a readonly database)"),
    ("read-only file system",
     "the file or its folder cannot be written (a read-only file or mount?) (read-only file system)"),
    ("unable to open database file",
     "the file or its folder cannot be written (a read-only file or mount?) (unable to open database file)"),
    ("locking protocol", "another process keeps the write-ahead log's index locked (stopped or starved?) "
                         "(locking protocol)"),
    ("no such table: runs", "no such table: runs"),
])
def test_a_sqlite_error_is_said_in_a_users_words(text: str, said: str) -> None:
    assert what_failed(sqlite3.OperationalError(text)) == said


def test_a_lock_race_is_tried_again_with_pauses_doubling_up_to_half_a_second(clock: FakeTime) -> None:
    failures = 8

    def attempt() -> str:
        nonlocal failures
        if failures:
            failures -= 1
            raise sqlite3.OperationalError("locking protocol")
        return "done"
    assert retry_lock_races(attempt, 30.0) == "done"
    assert clock.sleeps == [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.5, 0.5]


def test_a_lock_race_is_given_up_when_the_next_pause_would_pass_the_timeout(clock: FakeTime) -> None:
    attempts = 0

    def attempt() -> None:
        nonlocal attempts
        attempts += 1
        if clock.now > 1100.0:
            raise RuntimeError("still trying 100 s past a timeout of 1 s")
        raise sqlite3.OperationalError("locking protocol")
    with pytest.raises(sqlite3.OperationalError, match="locking protocol"):
        retry_lock_races(attempt, 1.0)
    assert clock.sleeps == [0.01, 0.02, 0.04, 0.08, 0.16, 0.32] and attempts == 7
    clock.sleeps.clear()
    with pytest.raises(sqlite3.OperationalError):
        retry_lock_races(attempt, 0.01)
    assert clock.sleeps == [0.01], "a pause that ends exactly at the timeout is still taken"


def test_any_other_error_is_not_tried_again(clock: FakeTime) -> None:
    attempts = 0

    def attempt() -> None:
        nonlocal attempts
        attempts += 1
        if attempts > 1:
            raise RuntimeError("tried again")
        raise sqlite3.OperationalError("database is locked")
    with pytest.raises(sqlite3.OperationalError, match="database is locked"):
        retry_lock_races(attempt, 30.0)
    assert attempts == 1 and clock.sleeps == []


def test_an_error_after_opening_is_store_failed_naming_the_file(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "j.db")
    store.create("r", "m", Entry(CREATED, {}, 0.0))
    assert store.version("r") == 1
    store.close()
    with pytest.raises(StoreFailed, match=f"^{re.escape(str(tmp_path / 'j.db'))}: Cannot operate on a closed database"):
        store.version("r")


def test_a_file_that_is_not_a_database_is_not_a_journal_store(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes(b"these are not the pages of a database " * 200)
    with pytest.raises(JournalError, match=f"^{re.escape(str(path))}: not a journal store") as refused:
        SqliteStore(path)
    assert not isinstance(refused.value, StoreFailed)


def test_a_file_that_cannot_be_opened_is_store_failed_not_a_verdict_on_the_file(tmp_path: Path) -> None:
    path = tmp_path / "no-such-folder" / "j.db"
    with pytest.raises(StoreFailed, match=f"^{re.escape(str(path))}: the file or its folder cannot be written"):
        SqliteStore(path)


def malformed(path: Path) -> None:
    """A store whose first table's page (``meta``'s) is overwritten: opening reads it."""
    SqliteStore(path).close()
    with sqlite3.connect(path) as conn:
        page = conn.execute("PRAGMA page_size").fetchone()[0]
    data = bytearray(path.read_bytes())
    data[page:2 * page] = b"\xa5" * page
    path.write_bytes(bytes(data))


def test_a_store_damaged_past_its_header_is_refused_and_leaves_nothing_open(tmp_path: Path,
                                                                              log_checks: LogChecks) -> None:
    path = tmp_path / "j.db"
    malformed(path)
    log_checks.asked.clear()
    with pytest.raises(JournalError, match=f"^{re.escape(str(path))}: not a journal store .*malformed"):
        SqliteStore(path)
    with pytest.raises(JournalError):
        SqliteStore(path)
    assert log_checks.asked == [path, path], "the refused store gave its connection back"


def test_the_schema_is_version_1_and_another_version_is_refused(tmp_path: Path, log_checks: LogChecks) -> None:
    path = tmp_path / "j.db"
    SqliteStore(path).close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT key, value FROM meta").fetchall() == [("schema", "1")]
    earlier = tmp_path / "earlier.db"
    with sqlite3.connect(earlier) as conn:   # what every release so far wrote: schema 1
        conn.executescript(store_module.SCHEMA + "INSERT INTO meta VALUES ('schema', '1');")
    SqliteStore(earlier).close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET value = '2'")
    log_checks.asked.clear()
    for _ in range(2):
        with pytest.raises(JournalError, match=f"^{re.escape(str(path))}: schema version 2, this agentfsm reads 1$"):
            SqliteStore(path)
    assert log_checks.asked == [path, path], "the refused store gave its connection back"


def test_the_log_is_checked_only_while_this_process_has_no_connection_to_the_file(
        tmp_path: Path, log_checks: LogChecks) -> None:
    path = tmp_path / "j.db"
    first = SqliteStore(path)
    second = SqliteStore(path)
    assert log_checks.asked == [path], "a second store leaves the log alone"
    second.close()
    second.close()   # closing twice gives the file back once
    third = first.reopen()
    assert log_checks.asked == [path], "the first store still has the file open"
    first.close()
    third.close()
    SqliteStore(path).close()
    assert log_checks.asked == [path, path]


def test_a_damaged_log_is_refused_unless_the_loss_is_accepted_and_then_kept(tmp_path: Path,
                                                                             log_checks: LogChecks) -> None:
    path = tmp_path / "j.db"
    SqliteStore(path).close()
    wal = Path(f"{path}-wal")
    wal.write_bytes(b"a log SQLite will not read")
    log_checks.damage = "frame 3 fails its checksum"
    with pytest.raises(StoreFailed, match=r"^frame 3 fails its checksum; `agentfsm journal --repair` accepts the loss"):
        SqliteStore(path)
    store = SqliteStore(path, accept_damaged_log=True)
    try:
        assert store.log_damage == "frame 3 fails its checksum"
        assert Path(f"{path}-wal.damaged").read_bytes() == b"a log SQLite will not read"
        store.create("r", "m", Entry(CREATED, {}, 0.0))
    finally:
        store.close()


def test_a_log_without_damage_is_not_copied_aside(tmp_path: Path, log_checks: LogChecks) -> None:
    path = tmp_path / "j.db"
    SqliteStore(path).close()
    Path(f"{path}-wal").write_bytes(b"a log SQLite will not read")
    store = SqliteStore(path, accept_damaged_log=True)
    store.close()
    assert store.log_damage is None and not Path(f"{path}-wal.damaged").exists()



def test_leases_count_their_tokens_up_from_1(tmp_path: Path, clock: FakeTime) -> None:
    store = SqliteStore(tmp_path / "j.db")
    try:
        first = store.acquire("r", owner_name(), 30.0)
        assert (first.run_id, first.machine, first.token, first.owner) == ("r", "", 1, owner_name())
        assert first.seconds == 30.0
        assert first.owned and first.deadline == 1030.0
        store.release(first)
        assert store.acquire("r", "me:1", 30.0).token == 2
        assert store.acquire("other", "me:1", 30.0).token == 1, "each run counts its own"
    finally:
        store.close()


def test_a_live_owners_lease_is_held_until_it_expires(tmp_path: Path, clock: FakeTime) -> None:
    store = SqliteStore(tmp_path / "j.db")
    try:
        store.acquire("r", owner_name(), 30.0)
        clock.now += 0.4
        with pytest.raises(RunHeld) as held:
            store.acquire("r", "another:1", 30.0)
        assert (held.value.run_id, held.value.owner) == ("r", owner_name())
        assert str(held.value).startswith(f"run 'r' is owned by {owner_name()} (lease 1, 30 s left)")
        clock.now += 29.6   # expires exactly now: lapsed
        assert store.acquire("r", "another:1", 30.0).token == 2
    finally:
        store.close()


def test_a_gone_owners_lease_is_taken_over_at_once(tmp_path: Path, clock: FakeTime) -> None:
    store = SqliteStore(tmp_path / "j.db")
    try:
        store.acquire("r", reaped_owner(), 30.0)
        assert store.acquire("r", owner_name(), 30.0).token == 2
    finally:
        store.close()


def test_a_released_run_is_free_at_once_and_a_stale_release_frees_nothing(tmp_path: Path, clock: FakeTime) -> None:
    store = SqliteStore(tmp_path / "j.db")
    try:
        first = store.acquire("r", owner_name(), 30.0)
        store.release(first)
        second = store.acquire("r", owner_name(), 30.0)
        store.release(first)
        with pytest.raises(RunHeld):
            store.acquire("r", "another:1", 30.0)
        assert second.token == 2
    finally:
        store.close()


def test_renewing_moves_the_expiry_and_a_lost_lease_is_not_renewed(tmp_path: Path, clock: FakeTime) -> None:
    store = SqliteStore(tmp_path / "j.db")
    try:
        lease = store.acquire("r", owner_name(), 30.0)
        clock.now += 20.0
        store.renew(lease)
        assert lease.deadline == 1050.0
        clock.now += 20.0   # past the first expiry, before the renewed one
        with pytest.raises(RunHeld, match=r"\(lease 1, 10 s left\)"):
            store.acquire("r", "another:1", 30.0)
        clock.now += 10.0
        later = store.acquire("r", "another:1", 30.0)
        with pytest.raises(LeaseLost) as lost:
            store.renew(lease)
        assert (lost.value.run_id, lost.value.token) == ("r", 1)
        assert str(lost.value) == "run 'r': lease 1 lost: another process took the run over"
        assert lease.deadline == 1050.0
        store.renew(later)
    finally:
        store.close()


def test_a_fenced_write_passes_with_the_runs_token_only(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "j.db")
    try:
        store.create("r", "m", Entry(CREATED, {}, 0.0))
        nobody = Lease("r", "m", 1, "me", 30.0)
        with pytest.raises(LeaseLost) as refused:
            store.append("r", 1, [Entry(STEP, {"n": 1}, 0.0)], fence=nobody)
        assert str(refused.value) == "run 'r': lease 1 lost: the run is now owned by nobody"
        first = store.acquire("r", "one:1", 30.0)
        [record] = store.append("r", 1, [Entry(STEP, {"n": 1}, 0.0)], fence=first)
        assert (record.run_id, record.seq) == ("r", 2)
        store.release(first)
        store.acquire("r", "two:2", 30.0)
        with pytest.raises(LeaseLost) as refused:
            store.append("r", 2, [Entry(STEP, {"n": 2}, 0.0)], fence=first)
        assert (refused.value.run_id, refused.value.token) == ("r", 1)
        assert str(refused.value) == "run 'r': lease 1 lost: the run is now owned by two:2 (lease 2)"
        assert [r.seq for r in store.append("r", 2, [Entry(STEP, {"n": 2}, 0.0)])] == [3], "no fence, no check"
        assert store.version("r") == 3
    finally:
        store.close()


def test_a_reopened_store_is_the_same_file_usable_from_another_thread(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "j.db", timeout=7.0)
    store.create("r", "m", Entry(CREATED, {}, 0.0))
    other = store.reopen()
    seen: list[object] = []
    thread = threading.Thread(target=lambda: seen.append((other.path, other.timeout, other.version("r"))))
    thread.start()
    thread.join()
    other.close()
    store.close()
    assert seen == [(tmp_path / "j.db", 7.0, 1)]


def test_a_failed_write_commits_nothing_and_the_store_goes_on(tmp_path: Path) -> None:
    def boundary(phase: str, label: str) -> None:
        if phase == "before" and label == STEP:
            raise OSError("crash before the commit")
    store = SqliteStore(tmp_path / "j.db", on_boundary=boundary)
    try:
        store.create("r", "m", Entry(CREATED, {}, 0.0))
        with pytest.raises(OSError):
            store.append("r", 1, [Entry(STEP, {"n": 1}, 0.0)])
        assert store.version("r") == 1 and [r.seq for r in store.records("r")] == [1]
        store.on_boundary = None
        store.append("r", 1, [Entry(STEP, {"n": 1}, 0.0)])
    finally:
        store.close()
    reopened = SqliteStore(tmp_path / "j.db")
    assert [r.kind for r in reopened.records("r")] == [CREATED, STEP]
    reopened.close()


def test_a_commit_sqlite_refuses_is_rolled_back_and_raised(tmp_path: Path) -> None:
    conn = connect(tmp_path / "fk.db")
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("CREATE TABLE parent (id INTEGER PRIMARY KEY)")
    conn.execute("CREATE TABLE child (parent INTEGER REFERENCES parent (id) DEFERRABLE INITIALLY DEFERRED)")
    with pytest.raises(sqlite3.IntegrityError, match="FOREIGN KEY"), _Transaction(conn):
        conn.execute("INSERT INTO child VALUES (7)")   # refused only at COMMIT
    assert not conn.in_transaction and conn.execute("SELECT count(*) FROM child").fetchone()[0] == 0
    conn.close()


def test_a_transaction_sqlite_already_ended_keeps_its_own_error(tmp_path: Path) -> None:
    conn = connect(tmp_path / "t.db")
    with pytest.raises(ValueError, match="the real error"), _Transaction(conn):
        conn.execute("ROLLBACK")   # as SQLite does itself on some errors (a full disk)
        raise ValueError("the real error")
    conn.close()
