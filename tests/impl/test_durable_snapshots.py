"""When the durable run writes snapshots (``Options.snapshot_every``: one every N records, 0 never),
counted by hand on a table whose every event is one record; also after a reopen, counting from
the newest snapshot, or from the start when there is none. Found by the mutation run
(tests/mutation_run.py): no other fast test pins down the first snapshot's place."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest
from agentfsm.impl.durable.run import DurableRun, Options
from agentfsm.impl.stores.journal import Entry, Record
from agentfsm.impl.stores.memory import MemoryStore
from agentfsm.spec import Table, load_table_bytes

TICK = b"format: 1\nmachine: tick\nstates: {A: {initial: true}}\nevents: {Tick: {}}\ntransitions:\n" \
       b"  - {from: A, on: Tick, to: A}\n"


class SnapshotLog(MemoryStore):
    """A memory store that notes the record each snapshot is written with."""

    def __init__(self) -> None:
        super().__init__()
        self.snapshots: list[int] = []

    def append(self, run_id: str, expect: int, entries: Sequence[Entry],
               snapshot: Mapping[str, object] | None = None) -> list[Record]:
        records = super().append(run_id, expect, entries, snapshot)
        if snapshot is not None:
            self.snapshots.append(records[-1].seq)
        return records


@pytest.fixture
def tick() -> Table:
    return load_table_bytes(TICK, "tick.yaml")


def ticks(run: DurableRun, n: int) -> None:
    for _ in range(n):
        run.deliver("Tick")


def test_no_snapshot_unless_asked(tick: Table) -> None:
    store = SnapshotLog()
    ticks(DurableRun.create(store, tick, "r", {}), 6)
    assert store.snapshots == [] and store.load("r").snapshot is None


def test_a_snapshot_every_three_records_from_the_created_one(tick: Table) -> None:
    store = SnapshotLog()
    ticks(DurableRun.create(store, tick, "r", {}, options=Options(snapshot_every=3)), 6)   # records 2..7
    assert store.snapshots == [3, 6]


@pytest.mark.parametrize(("every", "first"), [(6, 6), (7, 7)])
def test_after_a_reopen_without_snapshots_the_count_starts_at_the_beginning(tick: Table, every: int,
                                                                             first: int) -> None:
    store = SnapshotLog()
    ticks(DurableRun.create(store, tick, "r", {}), 4)                                      # records 1..5
    ticks(DurableRun.open(store, tick, "r", {}, options=Options(snapshot_every=every)), 3)  # records 6..8
    assert store.snapshots == [first]


def test_after_a_reopen_the_count_starts_at_the_newest_snapshot(tick: Table) -> None:
    store = SnapshotLog()
    ticks(DurableRun.create(store, tick, "r", {}, options=Options(snapshot_every=3)), 3)   # snapshot at 3
    ticks(DurableRun.open(store, tick, "r", {}, options=Options(snapshot_every=3)), 4)     # records 5..8
    assert store.snapshots == [3, 6]
