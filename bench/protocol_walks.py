"""The figures of the model-based walks (docs/durability.md, "The code held to its model"): how
many seeded walks of durable-run-fixed.yaml the real code followed — with the scheduler playing
the workers against the real store and ledger tool, and with the workers real processes of the
durable runtime (``agentfsm.faults.runtime_walk``: ``agentfsm run --resume`` bodies, and on
PostgreSQL the pool's workers too) — their steps, the real calls and worker steps
checked, the distinct system configurations the walks passed through (as the explorer counts
them, under symmetry, beside the explorer's total) and the CPU time, on SQLite and PostgreSQL;
then, for each planted defect (tests/protocol_plants.py) on each store, the walk and step that caught it.
Recorded as ``protocol-walks`` and ``protocol-walk-plants`` (bench/figures.py). Usage:
``.venv/bin/python bench/protocol_walks.py [--walks N] [--pg-walks N] [--length N] [--no-pg]``;
PostgreSQL is $AGENTFSM_TEST_PG_URL, else the private server of scripts/postgres.sh.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest
from agentfsm.faults.protocol_walk import Divergence, RealProtocol, Walked, walk
from agentfsm.faults.runtime_walk import PoolProtocol, QueueStore, RuntimeProtocol
from agentfsm.impl.durable.ledger import MemoryLedger
from agentfsm.impl.stores.leases import OwnedStore
from agentfsm.impl.stores.sqlite import SqliteStore
from agentfsm.spec.system_load import load_system
from agentfsm.verify.system.explore import explore_system
from agentfsm.verify.system.step import Config, canonicalizer
from bench_postgres import server_url
from figures import record

ROOT = Path(__file__).resolve().parent.parent
SYSTEM = load_system(str(ROOT / "spec/systems/durable-run-fixed.yaml"))
Real = Callable[[OwnedStore, str], RealProtocol]
POOL = "pool workers"
WORKERS: dict[str, Real] = {
    "played by the scheduler": lambda store, run: RealProtocol(store, MemoryLedger(), run),
    "real runtime processes": lambda store, run: RuntimeProtocol(store, MemoryLedger(), run),
    POOL: lambda store, run: PoolProtocol(cast(QueueStore, store), MemoryLedger(), run),   # PostgreSQL's queue only
}
SQLITE_WORKERS = [w for w in WORKERS if w != POOL]


def clean(name: str, workers: str, store: OwnedStore, walks: int, length: int, total: int) -> dict[str, Any]:
    walked, seen = Walked(), set[Config]()
    start, cpu = time.perf_counter(), time.process_time()
    diverged = [d for seed in range(walks)
                if (d := walk(SYSTEM, WORKERS[workers](store, uuid.uuid4().hex), seed, length, walked, seen))
                is not None]
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    canonical = canonicalizer(SYSTEM, True)
    reached = len({canonical(c) for c in seen})
    print(f"{name}, workers {workers}: {walked.walks} walks, {walked.steps:,} steps, {walked.checked:,} checked, "
          f"{reached:,} of {total:,} configurations, {len(diverged)} diverged; {seconds:.1f} s wall, {cpu:.1f} s CPU")
    for d in diverged[:3]:
        print(f"  {d}")
    return {"store": name, "workers": workers, "walks": walked.walks, "steps": walked.steps,
            "checked": walked.checked, "configurations": reached, "diverged": len(diverged), "CPU-s": cpu,
            "CPU-ms a walk": 1000 * cpu / max(walked.walks, 1)}


def first_catch(store: OwnedStore, workers: str, plant: Callable[[pytest.MonkeyPatch], None], walks: int,
                length: int) -> Divergence | None:
    with pytest.MonkeyPatch.context() as mp:
        plant(mp)
        return next((d for seed in range(walks)
                     if (d := walk(SYSTEM, WORKERS[workers](store, uuid.uuid4().hex), seed, length, Walked()))
                     is not None), None)


def plants(store_name: str, store: OwnedStore, kinds: list[str], walks: int, length: int) -> list[dict[str, Any]]:
    sys.path.insert(0, str(ROOT / "tests"))
    from protocol_plants import PLANTS, RUNTIME_PLANTS
    rows = []
    for name, plant in sorted({**PLANTS, **RUNTIME_PLANTS}.items()):
        row: dict[str, Any] = {"plant": name, "store": store_name}
        for workers in WORKERS:
            found = first_catch(store, workers, plant, walks, length) if workers in kinds else None
            row[workers] = ("no queue" if workers not in kinds else
                            f"walk {found.seed}, step {found.step}: {found.label}" if found
                            else f"not caught in {walks} walks")
        print(f"plant {name} on {store_name}: " + "; ".join(f"{w}: {row[w]}" for w in WORKERS))
        rows.append(row)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--walks", type=int, default=1000, help="walks on SQLite, for each kind of workers")
    parser.add_argument("--pg-walks", type=int, default=100, help="walks on PostgreSQL, for each kind of workers")
    parser.add_argument("--length", type=int, default=60)
    parser.add_argument("--no-pg", action="store_true", help="leave PostgreSQL out (nothing is recorded)")
    args = parser.parse_args()
    total = len(explore_system(SYSTEM).configs)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        store = SqliteStore(Path(folder) / "runs.db")
        rows += [clean("sqlite", workers, store, args.walks, args.length, total) for workers in SQLITE_WORKERS]
        caught = plants("sqlite", store, SQLITE_WORKERS, 200, args.length)
        store.close()
    if args.no_pg:
        return
    from agentfsm.impl.stores.postgres import PostgresStore
    schema = f"walks_{uuid.uuid4().hex[:8]}"
    pg = PostgresStore(server_url(), schema)
    try:
        rows += [clean("postgresql", workers, pg, args.pg_walks, args.length, total) for workers in WORKERS]
        caught += plants("postgresql", pg, list(WORKERS), 200, args.length)
    finally:
        pg._execute(f"DROP SCHEMA {schema} CASCADE")
        pg.close()
    for row in rows:   # the runtime's processes against the scheduler's own workers, same store, same run
        played = next(r for r in rows if r["store"] == row["store"])
        row["× played"] = row["CPU-ms a walk"] / played["CPU-ms a walk"]
    record("protocol-walks", rows, table=f"spec/systems/durable-run-fixed.yaml ({total:,} configurations under "
           f"symmetry), seeded walks of up to {args.length} steps",
           note="CPU seconds of this process (its threads included: the runtime's processes are threads here; "
                "PostgreSQL's server not counted). `configurations`: the distinct ones the walks passed through, "
                "under symmetry; `× played`: CPU a walk against the walks with the scheduler's own workers on the "
                "same store.")
    caught.sort(key=lambda row: (row["plant"], row["store"] != "sqlite"))
    record("protocol-walk-plants", caught, table="tests/protocol_plants.py on SQLite and PostgreSQL, up to 200 walks "
           "each", note="The first walk and step where the real code and the model disagree; the scheduler's own "
           "workers take no claim through the runtime's claim_run nor query the status through DurableRun; the pool's "
           "workers (PostgreSQL's queue) take no claim_run and make no decision (a blocked job waits for the user).")


if __name__ == "__main__":
    main()
