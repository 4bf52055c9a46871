"""Explorer throughput on the grown Loom table, beside Spin on the exported model (same run).

Grows ``max_retries`` with ``--set`` (the Loom space is linear in it: about three
configurations per retry value) up to about a million configurations, and prints for
each size: configurations/s of the explorer, the time of each phase (exploration, each
kind of check), Spin's search time without partial-order reduction (``-DNOREDUCE``) and
with its default reduction, Spin's end-to-end time (spin -a, gcc, pan), and the ratios.
Usage: ``make bench`` or ``.venv/bin/python bench/explore_vs_spin.py [--max 1000000]``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from agentfsm.spec import load_table
from agentfsm.verify import spin
from agentfsm.verify.checks import Verdict, run_checks
from agentfsm.verify.explore import explore

LOOM = Path(__file__).resolve().parent.parent / "spec" / "loom-agent.yaml"
PHASES = ("invariant", "always-reachable", "no-cycle-within")


def phases(verdict: Verdict) -> dict[str, float]:
    """Seconds per check kind; the cheap kinds (step errors, deadlock, rows, states) as ``other``."""
    spent = dict.fromkeys((*PHASES, "other"), 0.0)
    for check, seconds in zip(verdict.checks, verdict.seconds, strict=True):
        spent[check.kind if check.kind in PHASES else "other"] += seconds
    return spent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--max", type=int, default=1_000_000, help="largest configuration count (about)")
    args = parser.parse_args()
    sizes = [n for n in (30_000, 100_000, 300_000, 1_000_000, 3_000_000) if n <= args.max]
    have_spin = spin.available()
    print(f"{'configs':>9} {'explore':>7} {'conf/s':>9} {'invar':>6} {'reach':>6} {'cycle':>6} {'other':>6} "
          f"{'verify':>7} | {'spin NR':>7} {'spin PO':>7} {'spin e2e':>8} | {'x NR':>5} {'x PO':>5} {'x e2e':>5}")
    for size in sizes:
        table = load_table(LOOM, {"max_retries": size // 3, "max_tools": 2})
        start = time.perf_counter()
        ex = explore(table)
        explored = time.perf_counter() - start
        verdict = run_checks(ex)
        total = time.perf_counter() - start
        assert verdict.ok
        spent = phases(verdict)
        row = (f"{ex.count:>9,} {explored:>7.2f} {ex.count / explored:>9,.0f} "
               + " ".join(f"{spent[p]:>6.2f}" for p in (*PHASES, "other")) + f" {total:>7.2f}")
        if have_spin:
            with tempfile.TemporaryDirectory() as tmp:
                plain = spin.run_spin(table, Path(tmp), depth=2 * ex.count + 100)
                reduced = spin.run_spin(table, Path(tmp), depth=2 * ex.count + 100, reduce=True)
            assert plain.states == ex.count, (plain.states, ex.count)
            row += (f" | {plain.search_s:>7.2f} {reduced.search_s:>7.2f} {plain.total_s:>8.2f}"
                    f" | {explored / plain.search_s:>5.2f} {explored / reduced.search_s:>5.2f}"
                    f" {total / plain.total_s:>5.2f}")
        print(row, flush=True)
    print("explore: the explorer alone; invar/reach/cycle/other: the checks by kind; verify: explore + every check.\n"
          "spin NR: pan's exhaustive search with -DNOREDUCE; spin PO: with its default partial-order reduction;\n"
          "spin e2e: spin -a + gcc -O2 + pan (NOREDUCE). x NR, x PO = explore / spin search; "
          "x e2e = verify / spin e2e (below 1: agentfsm is faster).")


if __name__ == "__main__":
    main()
