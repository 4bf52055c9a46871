"""Explorer throughput on the grown Loom table, beside Spin on the exported model (same run).

Grows ``max_retries`` with ``--set`` (the Loom space is linear in it: about three
configurations per retry value) up to about a million configurations, and prints for
each size: configurations/s of the explorer alone and with every check, Spin's search
time and its end-to-end time (spin -a, gcc, pan), and the ratios. Usage:
``make bench`` or ``.venv/bin/python bench/explore_vs_spin.py [--max 1000000]``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from agentfsm.spec import load_table
from agentfsm.verify import spin
from agentfsm.verify.checks import run_checks
from agentfsm.verify.explore import explore

LOOM = Path(__file__).resolve().parent.parent / "spec" / "loom-agent.yaml"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--max", type=int, default=1_000_000, help="largest configuration count (about)")
    args = parser.parse_args()
    sizes = [n for n in (30_000, 100_000, 300_000, 1_000_000, 3_000_000) if n <= args.max]
    have_spin = spin.available()
    print(f"{'configs':>9} {'explore s':>9} {'conf/s':>9} {'+checks s':>9} {'spin search s':>13} "
          f"{'spin total s':>12} {'ratio search':>12} {'ratio total':>11}")
    for size in sizes:
        table = load_table(LOOM, {"max_retries": size // 3, "max_tools": 2})
        start = time.perf_counter()
        ex = explore(table)
        explored = time.perf_counter() - start
        verdict = run_checks(ex)
        checked = time.perf_counter() - start
        assert verdict.ok
        row = f"{ex.count:>9,} {explored:>9.2f} {ex.count / explored:>9,.0f} {checked:>9.2f}"
        if have_spin:
            with tempfile.TemporaryDirectory() as tmp:
                run = spin.run_spin(table, Path(tmp), depth=2 * ex.count + 100)
            assert run.states == ex.count, (run.states, ex.count)
            row += (f" {run.search_s:>13.2f} {run.total_s:>12.2f} {explored / run.search_s:>12.2f}"
                    f" {explored / run.total_s:>11.2f}")
        print(row, flush=True)
    print("ratio = explorer seconds / Spin seconds (below 1: the explorer is faster); "
          "Spin: -DSAFETY -DNOREDUCE, exhaustive DFS, no compression")


if __name__ == "__main__":
    main()
