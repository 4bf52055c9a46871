"""System exploration on the Loom system with 2 to 5 tool-call instances, with and
without symmetry reduction and with and without partial-order reduction, beside Spin on the
Promela export (with and without its own reduction) in the same run.

Each exploration runs in a fresh interpreter (``--one CALLS SYMMETRY REDUCTION``) so that its
peak resident memory is its own. For each size: configurations, seconds and peak memory of
the explorer in its four settings; Spin's stored states, search and end-to-end seconds (spin
-a, gcc, pan) and memory without reduction (``-DNOREDUCE``) and with its partial-order
reduction; then the ratios. The partial-order reduction serves the safety checks only, so
its row is the safety exploration (``verify`` explores the Loom system in full: it has
liveness properties). A second series, N independent peers with an invariant on one, shows
what the reduction does where instances do not interact. Usage: ``make bench`` or
``.venv/bin/python bench/bench_systems.py [--calls 2 3 4 5] [--peers 8 12 14]``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from agentfsm.spec.scaled import loom_system
from agentfsm.spec.system_load import load_system
from agentfsm.spec.system_model import System
from agentfsm.verify.spin import runner as spin
from agentfsm.verify.spin.system_promela import export_system_promela
from agentfsm.verify.system.explore import explore_system
from explore_vs_spin import peak_memory

SYSTEMS = Path(__file__).resolve().parent.parent / "spec" / "systems"
SETTINGS = ((False, False), (True, False), (False, True), (True, True))   # (symmetry, reduction)


def peers_system(count: int, directory: Path) -> System:
    """``count`` peers (tests/systems/pingpong.yaml) that each send one Ping nobody receives, an
    invariant on the last: 2^count configurations, count + 1 with partial-order reduction."""
    names = [f"p{k}" for k in range(count)]
    table = SYSTEMS.parent.parent / "tests" / "systems" / "pingpong.yaml"
    lines = ["format: 1", "system: peers", "instances:", *(f"  {n}: {{table: {table}}}" for n in names),
             "environment:", *(f"  {n}: [Go]" for n in names),
             "invariants:", f"  - {{name: last-sends-once, expr: {names[-1]}.seq <= 1}}"]
    path = directory / f"peers-{count}.yaml"
    path.write_text("\n".join(lines) + "\n")
    return load_system(path)


SERIES: dict[str, Callable[[int, Path], System]] = {"loom": loom_system, "peers": peers_system}


def one(series: str, size: int, symmetry: bool, reduction: bool) -> None:
    """One exploration in this (fresh) process: print its figures as JSON."""
    with tempfile.TemporaryDirectory() as tmp:
        system = SERIES[series](size, Path(tmp))
        start, cpu = time.perf_counter(), time.process_time()
        ex = explore_system(system, symmetry, reduction=reduction)
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    print(json.dumps({"configurations": len(ex.configs), "steps": len(ex.edges_src), "seconds": seconds,
                      "cpu": cpu, "peak": peak_memory()}))


def measured(series: str, size: int, symmetry: bool, reduction: bool) -> dict[str, float]:
    args = [sys.executable, __file__, "--one", series, str(size), str(int(symmetry)), str(int(reduction))]
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    result: dict[str, float] = json.loads(out.splitlines()[-1])
    return result


def series(name: str, sizes: list[int], settings: tuple[tuple[bool, bool], ...], have_spin: bool) -> None:
    """One row per size and setting: ours, then Spin on the export with the matching reduction."""
    print(f"{'N':>2} {'setting':>8} {'confs':>8} {'steps':>8} {'s':>5} {'cpu':>5} {'conf/s':>7} {'MB':>3} | "
          f"{'spin':>4} {'states':>7} {'search':>6} {'cpu':>5} {'e2e':>5} {'MB':>3} | {'x search':>8} {'x cpu':>5} "
          f"{'x e2e':>5} {'x MB':>5}")
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            ours = {setting: measured(name, size, *setting) for setting in settings}
            full = ours[False, False]
            runs: dict[bool, spin.SpinRun] = {}
            if have_spin:
                model = export_system_promela(SERIES[name](size, Path(tmp)))
                for reduce in (False, True):
                    runs[reduce] = spin.run_spin_model(model, Path(tmp) / f"{size}-{reduce}", timeout=900,
                                                       reduce=reduce)
                assert runs[False].states == full["configurations"], (runs[False].states, full["configurations"])
            for k, (symmetry, reduction) in enumerate(settings):
                mine = ours[symmetry, reduction]
                label = ("sym" if symmetry else "full") + ("+por" if reduction else "")
                row = (f"{size:>2} {label:>8} {int(mine['configurations']):>8,} {int(mine['steps']):>8,} "
                       f"{mine['seconds']:>5.2f} {mine['cpu']:>5.2f} {mine['configurations'] / mine['seconds']:>7,.0f} "
                       f"{mine['peak'] / 1e6:>3,.0f}")
                if have_spin:
                    run = runs[reduction]
                    row += (f" | {'PO' if reduction else 'NR':>4} {run.states:>7,} {run.search_s:>6.2f} "
                            f"{run.search_cpu_s:>5.2f} {run.total_s:>5.2f} {run.memory_mb:>3,.0f} | "
                            f"{mine['seconds'] / run.search_s:>8.2f} {mine['cpu'] / max(run.search_cpu_s, 0.01):>5.2f} "
                            f"{mine['seconds'] / run.total_s:>5.2f} {mine['peak'] / 1e6 / run.memory_mb:>5.2f}")
                elif k == 0:
                    row += " | spin not installed"
                print(row, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, nargs="+", default=[2, 3, 4, 5])
    parser.add_argument("--peers", type=int, nargs="+", default=[8, 12, 14])
    parser.add_argument("--one", nargs=4, help=argparse.SUPPRESS)   # series size symmetry reduction, in a child
    args = parser.parse_args()
    if args.one is not None:
        one(args.one[0], int(args.one[1]), args.one[2] == "1", args.one[3] == "1")
        return
    have_spin = spin.available()
    print("Loom system: agent + N tool calls (one crash); ours: configurations, seconds, peak MB per setting;"
          " Spin on the export, same run")
    series("loom", args.calls, SETTINGS, have_spin)
    print("\nN independent peers, an invariant on one (where partial-order reduction pays)")
    series("peers", args.peers, ((False, False), (False, True)), have_spin)
    print("setting: full = every configuration, sym = symmetry reduction, +por = partial-order reduction (the\n"
          "safety exploration). s, cpu, MB: the exploration's wall and CPU seconds and the peak resident memory\n"
          "of its (fresh) process. Spin beside each row: NR = -DNOREDUCE for the rows without +por, PO = its\n"
          "partial-order reduction for the rows with it; search, cpu = pan's wall and CPU seconds (at least 0.01 in\n"
          "the ratio), e2e = spin -a + gcc -O2 + pan, MB = pan's total memory. x search, x cpu, x e2e, x MB: ours /\n"
          "Spin's (below 1: agentfsm is faster or smaller).")


if __name__ == "__main__":
    main()
