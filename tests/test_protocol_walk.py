"""Model-based testing of the durable protocol: seeded walks of durable-run-fixed.yaml performed
on the real store (SQLite; PostgreSQL too) and the real ledger tool agree with the model at every
store and tool step; planted protocol defects are each caught at the step where they show."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from agentfsm.faults.protocol_walk import Divergence, RealProtocol, Walked, walk
from agentfsm.impl.durable.leases import OwnedStore
from agentfsm.impl.durable.ledger import MemoryLedger
from agentfsm.impl.stores.sqlite import SqliteStore
from agentfsm.spec.system_load import load_system
from conftest import ROOT
from pg_support import fresh_schema
from protocol_plants import PLANTS

SYSTEM = load_system(str(ROOT / "spec/systems/durable-run-fixed.yaml"))
WALKS, LENGTH = 60, 60
PLANT_WALKS = 200
# Where each plant shows first: the real step whose answer is not the model's.
CAUGHT_AT = {"journal-unfenced": "store takes Write", "tool-unfenced": "tool takes Run",
             "status-unfenced": "tool takes Run", "claim-ignores-owner": "store takes Claim",
             "claim-keeps-token": "store takes Claim"}


def walks(store: OwnedStore, seeds: range, walked: Walked | None = None) -> list[Divergence]:
    """The first divergence of the walks with these seeds, in order (none: [])."""
    for seed in seeds:
        real = RealProtocol(store, MemoryLedger(), f"walk-{uuid.uuid4().hex[:8]}-{seed}")
        divergence = walk(SYSTEM, real, seed, LENGTH, walked or Walked())
        if divergence is not None:
            return [divergence]
    return []


@pytest.fixture
def sqlite(tmp_path: Path) -> Iterator[SqliteStore]:
    store = SqliteStore(tmp_path / "runs.db")
    yield store
    store.close()


def test_the_real_sqlite_store_and_tool_follow_the_model(sqlite: SqliteStore) -> None:
    walked = Walked()
    found = walks(sqlite, range(WALKS), walked)
    assert not found, "\n".join(map(str, found))
    assert walked.checked > 300   # the walks reach the store and the tool, not only the workers


def test_the_real_postgresql_store_follows_the_model(pg_url: str) -> None:
    from agentfsm.impl.stores.postgres import PostgresStore
    with fresh_schema(pg_url) as schema:
        store = PostgresStore(pg_url, schema)
        try:
            walked = Walked()
            found = walks(store, range(WALKS // 2), walked)
        finally:
            store.close()
    assert not found, "\n".join(map(str, found))
    assert walked.checked > 150


@pytest.mark.parametrize("plant", sorted(PLANTS))
def test_a_planted_defect_is_caught_where_it_shows(plant: str, sqlite: SqliteStore,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    PLANTS[plant](monkeypatch)
    found = walks(sqlite, range(PLANT_WALKS))
    assert found, f"{plant}: no walk of {PLANT_WALKS} diverged"
    first = found[0]
    assert first.model != first.real and first.label.startswith(CAUGHT_AT[plant]), str(first)
    print(first)
