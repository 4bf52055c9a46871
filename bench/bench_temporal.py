"""Benchmark of runs on Temporal: runs/s of the Loom demo turn as table workflows with 1 and 4
worker processes, beside agentfsm's own PostgreSQL worker pool with 1 and 4 workers, in the
same run.

    .venv/bin/python bench/bench_temporal.py [--runs N] [--workers 1,4] [--rounds N]

Every run is the Loom turn of the Temporal fault campaign (8 events, 4 external effects, 2 of
them non-idempotent) with ledger tools appending to a file. On Temporal the runs start with
their events and `agentfsm temporal worker` processes serve them on the private dev server of
scripts/temporal.sh (SQLite-backed, $AGENTFSM_TEST_TEMPORAL_ADDRESS if set); on PostgreSQL the
runs are submitted and `serve` processes (what `agentfsm worker` runs) claim them under
leases, on the private cluster of scripts/postgres.sh ($AGENTFSM_TEST_PG_URL if set), through
bench_postgres's `pool_served`. Both sides are timed from the moment all their worker
processes are up (neither counts start-up) until the last run finished; Temporal's time
includes starting its workflows (the pool's runs are queued before). Besides runs/s (wall
time), each side's worker processes' processor seconds per run while serving are measured
(the servers' own are not). The configurations run interleaved, round after round; medians
are reported, each ratio (Temporal's over the pool's) taken within a round.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentfsm.faults.temporal_chaos import LOOM_EVENTS
from agentfsm.impl.temporal.client import start_message, start_run
from agentfsm.impl.temporal.messages import EventMessage
from agentfsm.impl.temporal.process_end import exit_before_finalizing
from agentfsm.impl.temporal.worker import connect

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_postgres import Served, pool_served
from cpu import process_cpu
from figures import record

ROOT = Path(__file__).resolve().parent.parent
LOOM = ROOT / "spec" / "loom-agent.yaml"


def started(script: str, env: str) -> str:
    if os.environ.get(env):
        return os.environ[env]
    done = subprocess.run([str(ROOT / "scripts" / script), "start"], capture_output=True, text=True, check=True)
    return done.stdout.strip().splitlines()[-1]

def temporal_served(address: str, runs: int, workers: int, ledger: Path) -> Served:
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

        async def main() -> Served:
            client = await connect(address)
            cpu = sum(process_cpu(p.pid) for p in procs)
            begin = time.perf_counter()
            handles = [await start_run(client, queue, start_message(f"{queue}-{k}", LOOM, text, {}, events, True),
                                       "loom-agent") for k in range(runs)]
            for handle in handles:
                result = await handle.result()
                if result["state"] != "ShuttingDown":
                    raise SystemExit(f"bench: a run ended in {result['state']}")
            return Served(time.perf_counter() - begin, sum(process_cpu(p.pid) for p in procs) - cpu)
        return asyncio.run(main())
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(30)


def pool_loom(url: str, runs: int, workers: int, ledger: Path) -> Served:
    return pool_served(url, LOOM, [(f"run-{k}", LOOM_EVENTS) for k in range(runs)], workers, ledger,
                       spawn=True)   # (a fork after the Temporal client's threads ran can hang)


def main(argv: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """Measure, print, and return one row per worker count (medians over the rounds)."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--workers", default="1,4")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; medians are reported")
    args = parser.parse_args(argv)
    counts = [int(w) for w in args.workers.split(",")]
    address = started("temporal.sh", "AGENTFSM_TEST_TEMPORAL_ADDRESS")
    url = started("postgres.sh", "AGENTFSM_TEST_PG_URL")
    seen: dict[tuple[str, int], list[Served]] = {(side, n): [] for side in ("temporal", "pool") for n in counts}
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(args.rounds):
            for n in counts:
                ledger = Path(tmp) / f"{k}-{n}"
                seen["temporal", n].append(temporal_served(address, args.runs, n, ledger.with_suffix(".t")))
                seen["pool", n].append(pool_loom(url, args.runs, n, ledger.with_suffix(".p")))
    rows: list[dict[str, Any]] = []
    for n in counts:
        temporal, pool = seen["temporal", n], seen["pool", n]
        rows.append({"workers": n, "runs": args.runs, "rounds": args.rounds,
                     "temporal_runs_per_s": statistics.median(args.runs / s.seconds for s in temporal),
                     "pool_runs_per_s": statistics.median(args.runs / s.seconds for s in pool),
                     "ratio": statistics.median(p.seconds / t.seconds for t, p in zip(temporal, pool, strict=True)),
                     "temporal_cpu_per_run": statistics.median(s.cpu / args.runs for s in temporal),
                     "pool_cpu_per_run": statistics.median(s.cpu / args.runs for s in pool)})
    print(f"runs on Temporal beside the PostgreSQL pool: {args.runs} Loom turns (8 events, 4 effects each), "
          f"median of {args.rounds} interleaved rounds, timed once all workers are up")
    for row in rows:
        n = row["workers"]
        print(f"  {n} worker{'s' if n > 1 else ' '}: Temporal {row['temporal_runs_per_s']:6.1f} runs/s "
              f"({row['temporal_cpu_per_run'] * 1000:4.0f} worker CPU-ms/run), PostgreSQL pool "
              f"{row['pool_runs_per_s']:6.1f} runs/s ({row['pool_cpu_per_run'] * 1000:4.0f} worker CPU-ms/run), "
              f"Temporal/pool {row['ratio']:.2f}x")
    record("temporal-pool", [{"workers": row["workers"], "Temporal runs/s": row["temporal_runs_per_s"],
                              "Temporal worker CPU-ms/run": row["temporal_cpu_per_run"] * 1000,
                              "pool runs/s": row["pool_runs_per_s"],
                              "pool worker CPU-ms/run": row["pool_cpu_per_run"] * 1000,
                              "× pool": row["ratio"]} for row in rows],
           table=f"spec/loom-agent.yaml, {args.runs} Loom turns (8 events, 4 effects each) per configuration",
           note=f"Medians of {args.rounds} interleaved rounds, timed once all workers are up; × pool is "
                "Temporal's rate over the PostgreSQL pool's, taken within a round.")
    return rows


if __name__ == "__main__":
    main()
    exit_before_finalizing(0)
