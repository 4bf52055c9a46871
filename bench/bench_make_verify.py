"""What ``make verify`` costs, step by step: CPU and wall seconds of each of its targets.

``make verify`` is ``check``, ``explore``, ``diagrams``, ``crash`` and ``crash-agents``; each
runs here as ``make -s TARGET`` in turn, in this checkout (its venv set up first, so no
step pays for the setup), with its CPU seconds (every process it started, waited for)
and wall seconds; the rows go to bench/results/make-verify.json for docs/durability.md.
Wall seconds follow the machine's load (the note says which): CPU seconds are the figure
to compare. Usage: ``make bench`` or ``.venv/bin/python bench/bench_make_verify.py``.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from cpu import children_cpu
from figures import record

ROOT = Path(__file__).resolve().parent.parent
STEPS = ("check", "explore", "diagrams", "crash", "crash-agents")


def step(target: str) -> tuple[float, float]:
    """``make -s TARGET``: its CPU and wall seconds."""
    cpu, wall = children_cpu(), time.perf_counter()
    subprocess.run(["make", "-s", target], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return children_cpu() - cpu, time.perf_counter() - wall


def main() -> None:
    subprocess.run(["make", "-s", "setup"], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    rows: list[dict[str, str | float]] = []
    total_cpu = total_wall = 0.0
    for target in STEPS:
        cpu, wall = step(target)
        total_cpu, total_wall = total_cpu + cpu, total_wall + wall
        rows.append({"step": f"make {target}", "CPU s": cpu, "wall s": wall})
        print(f"make {target:<13} {cpu:6.1f} CPU s {wall:6.1f} s wall", flush=True)
    rows.append({"step": "make verify (all)", "CPU s": total_cpu, "wall s": total_wall})
    record("make-verify", rows, table="every bundled table and system, the four agents' demos",
           note="Each target as `make -s TARGET`, one after the other, after `make setup`; CPU s: every process "
                "the target started; wall s follows the load.")


if __name__ == "__main__":
    main()
