"""The contract every journal store keeps, run against each store: memory, SQLite, PostgreSQL.

A kit makes a fresh store, reopens it as a new process would, and damages one stored
record or snapshot on purpose (the only store-specific part: it speaks the store's own
storage, so the conformance tests themselves stay storage-neutral).
"""

from __future__ import annotations

import sqlite3
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from agentfsm.impl.stores.journal import Conflict, CorruptJournal, Entry, RunExists, Store, UnknownRun
from agentfsm.impl.stores.memory import MemoryStore
from agentfsm.impl.stores.sqlite import SqliteStore
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pg_support import fresh_schema


@dataclass
class Kit:
    name: str
    make: Callable[[], Store]
    reopen: Callable[[Store], Store]
    damage_record: Callable[[Store, str, int], None]
    damage_snapshot: Callable[[Store, str, int], None]


def _memory_damage_record(store: Store, run_id: str, seq: int) -> None:
    assert isinstance(store, MemoryStore)
    records = store.stored(run_id)
    records[seq - 1] = replace(records[seq - 1], body_text=records[seq - 1].body_text.replace("1", "2", 1) + " ")


def _memory_damage_snapshot(store: Store, run_id: str, seq: int) -> None:
    assert isinstance(store, MemoryStore)
    snaps = store._runs[run_id].snapshots
    index = next(i for i, s in enumerate(snaps) if s.seq == seq)
    snaps[index] = replace(snaps[index], body_text=snaps[index].body_text + " ")


def _sqlite_damage(table: str) -> Callable[[Store, str, int], None]:
    def damage(store: Store, run_id: str, seq: int) -> None:
        assert isinstance(store, SqliteStore)
        with sqlite3.connect(store.path) as conn:
            conn.execute(f"UPDATE {table} SET body = body || ' ' WHERE run_id = ? AND seq = ?", (run_id, seq))
    return damage


def _sqlite_kit(tmp: Path) -> Kit:
    def make() -> Store:
        return SqliteStore(tmp / "journal.db")

    def reopen(store: Store) -> Store:
        store.close()
        return SqliteStore(tmp / "journal.db")
    return Kit("sqlite", make, reopen, _sqlite_damage("records"), _sqlite_damage("snapshots"))


def _memory_kit(tmp: Path) -> Kit:
    def reopen(store: Store) -> Store:
        assert isinstance(store, MemoryStore)
        return store.clone()
    return Kit("memory", MemoryStore, reopen, _memory_damage_record, _memory_damage_snapshot)


def _postgres_damage(url: str, schema: str, table: str) -> Callable[[Store, str, int], None]:
    def damage(store: Store, run_id: str, seq: int) -> None:
        import psycopg
        from psycopg import sql
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(sql.SQL("UPDATE {}.{} SET body = body || ' ' WHERE run_id = %s AND seq = %s").format(
                sql.Identifier(schema), sql.Identifier(table)), (run_id, seq))
    return damage


def _postgres_kit(url: str, schema: str) -> Kit:
    from agentfsm.impl.stores.postgres import PostgresStore

    def make() -> Store:
        return PostgresStore(url, schema)

    def reopen(store: Store) -> Store:
        store.close()
        return PostgresStore(url, schema)
    return Kit("postgres", make, reopen, _postgres_damage(url, schema, "records"),
               _postgres_damage(url, schema, "snapshots"))


KITS = {"memory": _memory_kit, "sqlite": _sqlite_kit}


@pytest.fixture(params=[*sorted(KITS), "postgres"])
def kit(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Kit]:
    if request.param != "postgres":
        yield KITS[request.param](tmp_path)
        return
    url = request.getfixturevalue("pg_url")
    with fresh_schema(url) as schema:
        yield _postgres_kit(url, schema)


def entry(n: int, kind: str = "step") -> Entry:
    return Entry(kind, {"n": n, "text": f"record {n}"}, float(n))


def test_create_starts_at_one_and_refuses_twice(kit: Kit) -> None:
    store = kit.make()
    record = store.create("r1", "m", entry(1, "created"))
    assert (record.seq, record.kind, store.version("r1"), store.machine("r1")) == (1, "created", 1, "m")
    with pytest.raises(RunExists):
        store.create("r1", "m", entry(1, "created"))
    with pytest.raises(UnknownRun):
        store.version("nope")
    with pytest.raises(UnknownRun):
        store.append("nope", 0, [entry(1)])
    assert store.runs() == ["r1"]


def test_sequence_strictly_increases_without_gaps_across_reopen(kit: Kit) -> None:
    store = kit.make()
    store.create("r", "m", entry(1, "created"))
    written = store.append("r", 1, [entry(2), entry(3)])
    written += store.append("r", 3, [entry(4)])
    assert [r.seq for r in written] == [2, 3, 4]
    again = kit.reopen(store)
    records = again.records("r")
    assert [r.seq for r in records] == [1, 2, 3, 4]
    assert [r.body["n"] for r in records] == [1, 2, 3, 4]
    assert [r.checksum for r in records[1:]] == [r.checksum for r in written]
    assert again.records("r", after=2)[0].seq == 3


def test_compare_and_swap_refuses_a_stale_version_and_writes_nothing(kit: Kit) -> None:
    store = kit.make()
    store.create("r", "m", entry(1, "created"))
    store.append("r", 1, [entry(2)])
    with pytest.raises(Conflict) as info:
        store.append("r", 1, [entry(99)])
    assert (info.value.expected, info.value.actual) == (1, 2)
    with pytest.raises(Conflict):
        store.append("r", 3, [entry(99)])
    assert [r.body["n"] for r in store.records("r")] == [1, 2]


def test_snapshot_and_records_commit_together(kit: Kit) -> None:
    store = kit.make()
    store.create("r", "m", entry(1, "created"))
    store.append("r", 1, [entry(2), entry(3)], snapshot={"at": 3})
    store.append("r", 3, [entry(4)])
    loaded = kit.reopen(store).load("r")
    assert loaded.snapshot is not None and loaded.snapshot.seq == 3 and loaded.snapshot.body == {"at": 3}
    assert [r.seq for r in loaded.records] == [4]


class Boom(Exception):
    pass


@pytest.mark.parametrize("phase", ["before", "after"])
def test_a_failure_at_a_boundary_commits_all_or_nothing(kit: Kit, phase: str) -> None:
    store = kit.make()
    store.create("r", "m", entry(1, "created"))

    def fail(at: str, label: str) -> None:
        if at == phase:
            raise Boom(label)
    store.on_boundary = fail  # type: ignore[attr-defined]
    with pytest.raises(Boom, match=r"step\+step \+snapshot"):
        store.append("r", 1, [entry(2), entry(3)], snapshot={"at": 3})
    store.on_boundary = None  # type: ignore[attr-defined]
    loaded = kit.reopen(store).load("r")
    if phase == "before":
        assert loaded.snapshot is None and [r.seq for r in loaded.records] == [1]
    else:
        assert loaded.snapshot is not None and loaded.snapshot.seq == 3 and loaded.records == ()


def test_torn_tail_is_reported_never_replayed_and_repairable(kit: Kit) -> None:
    store = kit.make()
    store.create("r", "m", entry(1, "created"))
    store.append("r", 1, [entry(2), entry(3)])
    kit.damage_record(store, "r", 3)
    for read in (lambda: store.load("r"), lambda: store.records("r")):
        with pytest.raises(CorruptJournal, match="torn tail at sequence 3") as info:
            read()
        assert info.value.tail
    store.discard_tail("r", 3)
    assert store.version("r") == 2
    store.append("r", 2, [entry(30)])
    assert [r.body["n"] for r in store.records("r")] == [1, 2, 30]


def test_corruption_before_the_tail_is_not_a_torn_tail(kit: Kit) -> None:
    store = kit.make()
    store.create("r", "m", entry(1, "created"))
    store.append("r", 1, [entry(2), entry(3)])
    kit.damage_record(store, "r", 2)
    with pytest.raises(CorruptJournal, match="corrupt record at sequence 2") as info:
        store.records("r")
    assert not info.value.tail


def test_a_damaged_snapshot_falls_back_to_the_records(kit: Kit) -> None:
    store = kit.make()
    store.create("r", "m", entry(1, "created"))
    store.append("r", 1, [entry(2)], snapshot={"at": 2})
    store.append("r", 2, [entry(3)], snapshot={"at": 3})
    kit.damage_snapshot(store, "r", 3)
    loaded = store.load("r")
    assert loaded.snapshot is not None and loaded.snapshot.seq == 2
    assert [r.seq for r in loaded.records] == [3]
    kit.damage_snapshot(store, "r", 2)
    loaded = store.load("r")
    assert loaded.snapshot is None and [r.seq for r in loaded.records] == [1, 2, 3]


def test_runs_are_independent(kit: Kit) -> None:
    store = kit.make()
    store.create("a", "m", entry(1, "created"))
    store.create("b", "m", entry(1, "created"))
    store.append("a", 1, [entry(2)])
    store.append("b", 1, [entry(20), entry(21)])
    assert (store.version("a"), store.version("b")) == (2, 3)
    assert store.runs() == ["a", "b"]


@pytest.fixture(params=[*sorted(KITS), "postgres"])
def store_maker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[
        Callable[[], Store]]:
    """A fresh store per example (PostgreSQL: one schema for all, each example on its own run)."""
    if request.param == "memory":
        yield MemoryStore
    elif request.param == "sqlite":
        yield lambda: SqliteStore(tmp_path_factory.mktemp("model") / "j.db")
    else:
        url = request.getfixturevalue("pg_url")
        with fresh_schema(url) as schema:
            yield _postgres_kit(url, schema).make


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(1, 3), st.integers(-1, 1), st.booleans()), max_size=12))
def test_appends_match_a_list_model(store_maker: Callable[[], Store], ops: list[tuple[int, int, bool]]) -> None:
    store, r = store_maker(), uuid.uuid4().hex
    store.create(r, "m", entry(0, "created"))
    model = [0]
    for count, skew, snap in ops:
        batch = [entry(len(model) + i) for i in range(count)]
        try:
            store.append(r, len(model) + skew, batch, snapshot={"n": len(model) + count} if snap else None)
        except Conflict:
            assert skew != 0
            continue
        assert skew == 0
        model += [e.body["n"] for e in batch]
    assert [rec.body["n"] for rec in store.records(r)] == model
    loaded = store.load(r)
    start = loaded.snapshot.seq if loaded.snapshot else 0
    assert [rec.seq for rec in loaded.records] == list(range(start + 1, len(model) + 1))
    store.close()
