"""Benchmark of the shared store: durable steps/s with 1, 2 and 4 worker processes on
PostgreSQL, against one process on SQLite (the embedded default), measured in the same run.

    .venv/bin/python bench/bench_postgres.py [--runs N] [--ticks N] [--workers 1,2,4] [--rounds N] [--dir DIR]

Every run is a counter run: TICKS ticks (each a step that emits one external effect, so
three durable writes: step, started, completed) then Stop. The PostgreSQL workers claim
runs under leases, recover them and deliver their scripts exactly as ``agentfsm worker``
does; SQLite's single process delivers the same scripts without a queue. Both keep their
durability settings (PostgreSQL: fsync and synchronous_commit on; SQLite: WAL,
synchronous=FULL). The server is $AGENTFSM_TEST_PG_URL, else the private cluster of
scripts/postgres.sh (started if need be). Both stores wait for the disk at every commit, so
the figures follow the disk's sync latency, which drifts on a shared machine: the
configurations run interleaved, round after round, and each ratio is taken within a round.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import resource
import statistics
import subprocess
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing import Queue
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

import psycopg
from agentfsm.impl.durable.ledger import FileLedger, MemoryLedger, ledger_tools
from agentfsm.impl.durable.run import DurableRun, Options
from agentfsm.impl.stores.postgres import PostgresStore
from agentfsm.impl.stores.sqlite import SqliteStore
from agentfsm.impl.workers.worker import Events, ToolFactory, serve, submit
from agentfsm.spec import Table, load_table
from figures import record
from psycopg import sql

ROOT = Path(__file__).resolve().parent.parent
COUNTER = ROOT / "tests" / "tables" / "counter.yaml"


def server_url() -> str:
    url = os.environ.get("AGENTFSM_TEST_PG_URL")
    if url:
        return url
    proc = subprocess.run([str(ROOT / "scripts" / "postgres.sh"), "start"], capture_output=True, text=True,
                          check=True)
    return proc.stdout.strip().splitlines()[-1]


def script(ticks: int) -> Events:
    return [("Tick", {})] * ticks + [("Stop", {})]


def cpu_seconds() -> float:
    """This process's own processor time so far (user and system)."""
    used = resource.getrusage(resource.RUSAGE_SELF)
    return used.ru_utime + used.ru_stime


def worker_process(url: str, schema: str, name: str, table_path: str, ledger: str | None, ready: Barrier,
                   cpu: Queue[float]) -> None:
    """One pool worker: set up, wait at ``ready`` with the others, serve until no run is left queued,
    and report the processor time it spent serving (its start-up excluded)."""
    table = load_table(Path(table_path))
    PostgresStore(url, schema).close()
    tools: ToolFactory = (lambda t: ledger_tools(t, MemoryLedger(), False)) if ledger is None else \
        (lambda t: ledger_tools(t, FileLedger(Path(ledger)), False))
    ready.wait()
    begin = cpu_seconds()
    try:
        tally = serve(lambda: PostgresStore(url, schema), {table.machine: table}, tools, name, exit_when_idle=True,
                      poll=0.01)
    finally:
        cpu.put(cpu_seconds() - begin)
    if tally.failed or tally.blocked or tally.lost or tally.abandoned:
        raise SystemExit(f"{name}: {tally.summary()}")


@dataclass(frozen=True)
class Served:
    """How long the workers took once all were up (wall seconds), and the processor seconds they spent."""

    seconds: float
    cpu: float


def pool_served(url: str, table_path: Path, jobs: Sequence[tuple[str, Events]], workers: int,
                ledger: Path | None = None, spawn: bool = False) -> Served:
    """``workers`` pool processes serving the queued ``jobs`` (run id, events) of one table, timed
    from the moment all of them are up (a barrier: their start-up is not counted) until the last
    one found nothing left. Tools: ledger tools on ``ledger`` (a file), else in memory. A parent
    that ran the Temporal client's threads must not fork (``spawn``)."""
    table = load_table(table_path)
    schema = f"bench_{uuid.uuid4().hex[:10]}"
    store = PostgresStore(url, schema)
    try:
        for run_id, events in jobs:
            submit(store, table, run_id, events)
        ctx = multiprocessing.get_context("spawn") if spawn else multiprocessing.get_context("fork")
        ready = ctx.Barrier(workers + 1)
        cpu: Queue[float] = ctx.Queue()
        procs = [ctx.Process(target=worker_process, args=(url, schema, f"w{i}", str(table_path),
                                                          None if ledger is None else str(ledger), ready, cpu))
                 for i in range(workers)]
        for p in procs:
            p.start()
        ready.wait()
        start = time.perf_counter()
        spent = [cpu.get() for _ in procs]
        for p in procs:
            p.join()
        took = time.perf_counter() - start
        if any(p.exitcode for p in procs) or store.pending() or any(j.status != "done" for j in store.jobs()):
            raise SystemExit("bench: a worker failed or a run did not finish")
        return Served(took, sum(spent))
    finally:
        store.close()
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


def postgres_steps(url: str, runs: int, ticks: int, workers: int) -> float:
    """Seconds for ``workers`` processes to serve ``runs`` queued counter runs."""
    return pool_served(url, COUNTER, [(f"run-{k}", script(ticks)) for k in range(runs)], workers).seconds


def sqlite_steps(path: Path, table: Table, runs: int, ticks: int) -> float:
    """Seconds for one process to deliver the same scripts on SQLite, run after run."""
    store = SqliteStore(path)
    start = time.perf_counter()
    for k in range(runs):
        run = DurableRun.create(store, table, f"run-{k}", ledger_tools(table, MemoryLedger(), False), options=Options())
        for n, (event, params) in enumerate(script(ticks), 1):
            run.deliver(event, params, event_id=f"script-{n}")
    took = time.perf_counter() - start
    store.close()
    return took


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):6.0f} ({min(values):.0f}-{max(values):.0f})"


def main(argv: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Measure, print, and return one row per store configuration (medians over the rounds)."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=60)
    parser.add_argument("--ticks", type=int, default=9)
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; medians are reported")
    parser.add_argument("--dir", default=None, help="where the SQLite file goes (default: a temporary folder)")
    args = parser.parse_args(argv)
    table = load_table(COUNTER)
    steps = args.runs * (args.ticks + 1)
    counts = [int(w) for w in args.workers.split(",")]
    url = server_url()
    print(f"shared store: {args.runs} counter runs x {args.ticks + 1} events = {steps} durable steps "
          f"({args.runs * (3 * args.ticks + 1)} journal writes), median of {args.rounds} interleaved rounds")
    base: list[float] = []
    rates: dict[int, list[float]] = {n: [] for n in counts}
    ratios: dict[int, list[float]] = {n: [] for n in counts}
    for _ in range(args.rounds):
        with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
            took = sqlite_steps(Path(tmp) / "journal.db", table, args.runs, args.ticks)
        base.append(steps / took)
        for n in counts:
            rates[n].append(steps / postgres_steps(url, args.runs, args.ticks, n))
            ratios[n].append(rates[n][-1] / base[-1])
    print(f"  SQLite, 1 process (baseline):  {spread(base)} steps/s")
    for n in counts:
        print(f"  PostgreSQL, {n} worker{'s' if n > 1 else ' '}:        {spread(rates[n])} steps/s, "
              f"{statistics.median(ratios[n]):5.2f}x SQLite (per round: "
              f"{', '.join(f'{r:.2f}' for r in ratios[n])})")
    rows = [{"store": "sqlite", "workers": 1, "steps_per_s": statistics.median(base), "ratio": 1.0},
            *({"store": "postgres", "workers": n, "steps_per_s": statistics.median(rates[n]),
               "ratio": statistics.median(ratios[n])} for n in counts)]
    record("postgres-pool", [{"store": "SQLite" if r["store"] == "sqlite" else "PostgreSQL",
                              "workers": r["workers"], "steps/s": r["steps_per_s"], "× SQLite": r["ratio"]}
                             for r in rows],
           table=f"tests/tables/counter.yaml, {args.runs} runs x {args.ticks + 1} events ({steps} durable steps)",
           note=f"Medians of {args.rounds} interleaved rounds; × SQLite is each round's ratio to one SQLite "
                "process (its median). Both stores sync every commit: the figures follow the disk.")
    return rows


if __name__ == "__main__":
    main()
