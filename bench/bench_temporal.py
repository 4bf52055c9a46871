"""Benchmark of runs on Temporal: runs/s of the Loom demo turn as table workflows with 1 and 4
worker processes, beside agentfsm's own PostgreSQL worker pool with 1 and 4 workers, in the
same run.

    .venv/bin/python bench/bench_temporal.py [--runs N] [--workers 1,4]

Every run is the Loom turn of the Temporal fault campaign (8 events, 4 external effects, 2 of
them non-idempotent) with ledger tools appending to a file. On Temporal the runs start with
their events and `agentfsm temporal worker` processes serve them on the private dev server of
scripts/temporal.sh (SQLite-backed, $AGENTFSM_TEST_TEMPORAL_ADDRESS if set); on PostgreSQL the
runs are submitted and `serve` processes (what `agentfsm worker` runs) claim them under
leases, on the private cluster of scripts/postgres.sh ($AGENTFSM_TEST_PG_URL if set). Both
time until the last run finished: Temporal's from the first start (its workers are up
before), the pool's from starting its worker processes (their start-up is counted).
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import psycopg
from agentfsm.faults.temporal_chaos import LOOM_EVENTS
from agentfsm.impl.durable.ledger import FileLedger, ledger_tools
from agentfsm.impl.stores.postgres import PostgresStore
from agentfsm.impl.temporal.client import start_message, start_run
from agentfsm.impl.temporal.messages import EventMessage
from agentfsm.impl.temporal.process_end import exit_before_finalizing
from agentfsm.impl.temporal.worker import connect
from agentfsm.impl.workers.worker import serve, submit
from agentfsm.spec import load_table
from psycopg import sql

ROOT = Path(__file__).resolve().parent.parent
LOOM = ROOT / "spec" / "loom-agent.yaml"


def started(script: str, env: str) -> str:
    if os.environ.get(env):
        return os.environ[env]
    done = subprocess.run([str(ROOT / "scripts" / script), "start"], capture_output=True, text=True, check=True)
    return done.stdout.strip().splitlines()[-1]


def temporal_seconds(address: str, runs: int, workers: int, ledger: Path) -> float:
    queue = f"bench-{uuid.uuid4().hex[:10]}"
    agentfsm = Path(sys.executable).parent / "agentfsm"
    procs = [subprocess.Popen([str(agentfsm), "temporal", "worker", "--address", address, "--task-queue", queue,
                               "--ledger", str(ledger)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
             for _ in range(workers)]
    try:
        for proc in procs:
            assert proc.stdout is not None and proc.stdout.readline().startswith(b"worker on")
        text = LOOM.read_text(encoding="utf-8")
        events = [EventMessage(name, dict(params), f"e{n}") for n, (name, params) in enumerate(LOOM_EVENTS, 1)]

        async def main() -> float:
            client = await connect(address)
            begin = time.perf_counter()
            handles = [await start_run(client, queue, start_message(f"{queue}-{k}", LOOM, text, {}, events, True),
                                       "loom-agent") for k in range(runs)]
            for handle in handles:
                result = await handle.result()
                if result["state"] != "ShuttingDown":
                    raise SystemExit(f"bench: a run ended in {result['state']}")
            return time.perf_counter() - begin
        return asyncio.run(main())
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(30)


def pool_worker(url: str, schema: str, name: str, ledger: str) -> None:
    table = load_table(LOOM)
    tally = serve(lambda: PostgresStore(url, schema), {table.machine: table},
                  lambda t: ledger_tools(t, FileLedger(Path(ledger)), False), name, exit_when_idle=True, poll=0.01)
    if tally.failed or tally.blocked or tally.lost or tally.abandoned:
        raise SystemExit(f"{name}: {tally.summary()}")


def pool_seconds(url: str, runs: int, workers: int, ledger: Path) -> float:
    table = load_table(LOOM)
    schema = f"bench_{uuid.uuid4().hex[:10]}"
    store = PostgresStore(url, schema)
    try:
        for k in range(runs):
            submit(store, table, f"run-{k}", list(LOOM_EVENTS))
        ctx = multiprocessing.get_context("spawn")   # (a fork after the Temporal client's threads ran can hang)
        begin = time.perf_counter()
        procs = [ctx.Process(target=pool_worker, args=(url, schema, f"w{i}", str(ledger))) for i in range(workers)]
        for p in procs:
            p.start()
        for p in procs:
            p.join()
        took = time.perf_counter() - begin
        if any(p.exitcode for p in procs) or any(j.status != "done" for j in store.jobs()):
            raise SystemExit("bench: a pool worker failed or a run did not finish")
        return took
    finally:
        store.close()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--workers", default="1,4")
    args = parser.parse_args()
    counts = [int(w) for w in args.workers.split(",")]
    address = started("temporal.sh", "AGENTFSM_TEST_TEMPORAL_ADDRESS")
    url = started("postgres.sh", "AGENTFSM_TEST_PG_URL")
    # (each line's ratio: Temporal's rate over the pool's)
    print(f"runs on Temporal beside the PostgreSQL pool: {args.runs} Loom turns (8 events, 4 effects each)")
    with tempfile.TemporaryDirectory() as tmp:
        for n in counts:
            took = temporal_seconds(address, args.runs, n, Path(tmp) / f"t{n}.txt")
            pool = pool_seconds(url, args.runs, n, Path(tmp) / f"p{n}.txt")
            print(f"  {n} worker{'s' if n > 1 else ' '}: Temporal {args.runs / took:6.1f} runs/s, "
                  f"PostgreSQL pool {args.runs / pool:6.1f} runs/s ({pool / took:.2f}x)")


if __name__ == "__main__":
    main()
    exit_before_finalizing(0)
