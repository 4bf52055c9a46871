"""Several processes racing events on one SQLite run: compare-and-swap loses no update."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

from agentfsm.impl.durable.ledger import FileLedger, ledger_tools
from agentfsm.impl.durable.run import DurableRun
from agentfsm.impl.stores.sqlite import SqliteStore
from agentfsm.spec import load_table

COUNTER = Path(__file__).parent.parent / "tables" / "counter.yaml"
WRITERS, TICKS = 4, 25


def writer(db: str, ledger: str, name: str) -> None:
    table = load_table(COUNTER)
    store = SqliteStore(db)
    run = DurableRun.attach(store, table, "race", ledger_tools(table, FileLedger(Path(ledger)), False))
    for k in range(TICKS):
        delivery = run.deliver("Tick", event_id=f"{name}-{k}")
        assert delivery.status == "fired", delivery
    store.close()


def test_racing_processes_lose_no_update(tmp_path: Path) -> None:
    table = load_table(COUNTER)
    db, ledger = tmp_path / "j.db", tmp_path / "ledger"
    DurableRun.create(SqliteStore(db), table, "race", ledger_tools(table, FileLedger(ledger), False))
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=writer, args=(str(db), str(ledger), f"w{i}")) for i in range(WRITERS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    store = SqliteStore(db)
    run = DurableRun.open(store, table, "race", ledger_tools(table, FileLedger(ledger), False))
    assert run.vars == {"n": WRITERS * TICKS}
    records = store.records("race")
    assert [r.seq for r in records] == list(range(1, len(records) + 1))
    steps = [r for r in records if r.kind == "step"]
    assert len(steps) == WRITERS * TICKS
    assert [s.body["next"]["vars"]["n"] for s in steps] == list(range(1, WRITERS * TICKS + 1))
    executions = FileLedger(ledger).executions()
    assert len(executions) == WRITERS * TICKS and set(executions.values()) == {1}
    assert all(e.status == "completed" for e in run.st.effects.values())
