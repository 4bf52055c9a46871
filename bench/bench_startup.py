"""Start-up: ``agentfsm check`` and ``agentfsm verify`` on a small table as a user runs them, next to Spin.

What a user waits for on a small table is mostly start-up, not search. Each round runs,
as separate processes from start to exit: ``agentfsm check TABLE``, ``agentfsm verify
TABLE``, and Spin end to end on the same table's Promela export (``agentfsm export``,
made once before the rounds): ``spin -a``, ``gcc -O2 -DNOREDUCE``, ``./pan``. Rounds
are interleaved so that a change in the machine's load hits every command alike; the
figures are medians of CPU seconds (user + system of the child, comparable on a loaded
machine) and wall seconds, with the ratios to Spin.

    .venv/bin/python bench/bench_startup.py [--rounds 5] [--table spec/explorer-evaluator.yaml]
"""

from __future__ import annotations

import argparse
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from agentfsm.spec import load_table
from agentfsm.verify.table.explore import explore
from figures import record

ROOT = Path(__file__).resolve().parent.parent
AGENTFSM = str(Path(sys.executable).with_name("agentfsm"))
SMALL = ROOT / "spec" / "explorer-evaluator.yaml"


def timed(argv: list[str], cwd: Path) -> tuple[float, float]:
    """CPU seconds (user + system) and wall seconds of one command, from start to exit."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}: {(done.stderr or done.stdout)[-1000:]}")
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, wall


def spin_commands(table: Path, workdir: Path) -> list[list[str]]:
    """Spin end to end on the table's export: generate, compile, search (the depth past the longest path)."""
    model = subprocess.run([AGENTFSM, "export", "--format", "promela", str(table)], capture_output=True, text=True,
                           check=True).stdout
    (workdir / "model.pml").write_text(model, encoding="utf-8")
    depth = 2 * explore(load_table(table)).count + 100
    return [["spin", "-a", "model.pml"],
            ["gcc", "-O2", "-DSAFETY", "-DMEMLIM=16000", "-DNOREDUCE", "-o", "pan", "pan.c"],
            ["./pan", f"-m{depth}", "-w24"]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--table", type=Path, default=SMALL)
    args = parser.parse_args()
    have_spin = shutil.which("spin") is not None and shutil.which("gcc") is not None
    figures: dict[str, list[tuple[float, float]]] = {"check": [], "verify": [], "spin -a + gcc": [], "spin e2e": []}
    with tempfile.TemporaryDirectory(prefix="agentfsm-startup-") as tmp:
        workdir = Path(tmp)
        spin = spin_commands(args.table, workdir) if have_spin else []
        for _ in range(args.rounds):
            figures["check"].append(timed([AGENTFSM, "check", str(args.table)], workdir))
            figures["verify"].append(timed([AGENTFSM, "verify", str(args.table)], workdir))
            if spin:
                steps = [timed(argv, workdir) for argv in spin]
                figures["spin -a + gcc"].append((steps[0][0] + steps[1][0], steps[0][1] + steps[1][1]))
                figures["spin e2e"].append((sum(s[0] for s in steps), sum(s[1] for s in steps)))
    median = {name: (statistics.median(c for c, _ in runs), statistics.median(w for _, w in runs))
              for name, runs in figures.items() if runs}
    print(f"start-up on {args.table.relative_to(ROOT) if args.table.is_relative_to(ROOT) else args.table}, "
          f"median of {args.rounds} interleaved rounds, each command a process from start to exit")
    print(f"{'command':<16} {'cpu s':>6} {'wall s':>7} | {'x spin e2e cpu':>14} {'x spin -a+gcc cpu':>17}")
    rows = []
    for name, (cpu, wall) in median.items():
        row = f"{name:<16} {cpu:>6.3f} {wall:>7.3f}"
        rows.append({"command": name, "CPU s": cpu, "wall s": wall})
        if "spin e2e" in median:
            row += f" | {cpu / median['spin e2e'][0]:>14.2f} {cpu / median['spin -a + gcc'][0]:>17.2f}"
            rows[-1]["× Spin end to end (CPU)"] = cpu / median["spin e2e"][0]
        print(row)
    record("startup", rows, table=args.table.relative_to(ROOT).as_posix() if args.table.is_relative_to(ROOT)
           else args.table.name, note=f"Medians of {args.rounds} interleaved rounds, each command a process from "
           "start to exit; spin e2e is spin -a, gcc -O2 -DNOREDUCE and ./pan.")
    if not have_spin:
        print("spin or gcc not found: no Spin figures")
    print("x: CPU seconds / Spin's (below 1: faster than Spin). spin e2e = spin -a + gcc -O2 -DNOREDUCE + ./pan.")


if __name__ == "__main__":
    main()
