"""System exploration a batch at a time against the scalar loop, and where the switch pays.

First the Loom system with 2, 3 and 4 tool calls, with and without symmetry: configurations,
the scalar loop's and the batches' (shipped switch) times and configurations/s, the speedup
(least processor time of ``--repeat`` runs each). Then the switch: the processor time of whole
explorations (Loom with 3 and 4 calls, the durable run protocol systems; symmetry on and off)
relative to the scalar loop, for several ``LEVEL_MIN``; the shipped one has the least sum.
Usage: ``.venv/bin/python bench/system_levels_bench.py [--calls 2 3 4] [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from agentfsm.spec.system_load import load_system
from agentfsm.spec.system_model import System
from agentfsm.verify.system import batched as system_batched
from agentfsm.verify.system.explore import SystemExploration, explore_system

sys.path.insert(0, str(Path(__file__).resolve().parent))
from agentfsm.spec.scaled import loom_system
from bench_systems import SYSTEMS

THRESHOLDS = (0, 64, 128, 256, 512, 1024)


def best(fn: Callable[[], object], repeat: int) -> float:
    """The least processor time of ``repeat`` runs (this process's own: steadier than wall time
    on a shared machine)."""
    times = []
    for _ in range(repeat):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return min(times)


def explore(system: System, symmetry: bool, level_min: int | None,
            level_low: int = system_batched.LEVEL_LOW) -> SystemExploration:
    saved = system_batched.LEVEL_MIN, system_batched.LEVEL_LOW
    system_batched.LEVEL_MIN, system_batched.LEVEL_LOW = level_min, level_low
    try:
        return explore_system(system, symmetry)
    finally:
        system_batched.LEVEL_MIN, system_batched.LEVEL_LOW = saved


def speedups(calls: list[int], repeat: int, tmp: Path) -> None:
    print("Loom system: agent + N tool calls (one crash); scalar loop against batches (shipped switch), best of "
          f"{repeat}")
    print(f"{'N':>2} {'symmetry':>8} {'confs':>7} {'edges':>8} {'scalar s':>9} {'conf/s':>8} {'batches s':>9} "
          f"{'conf/s':>8} {'speedup':>7}")
    for n in calls:
        system = loom_system(n, tmp)
        for symmetry in (True, False):
            ex = explore(system, symmetry, None)
            scalar = best(partial(explore, system, symmetry, None), repeat)
            batched = best(partial(explore, system, symmetry, system_batched.LEVEL_MIN), repeat)
            confs = len(ex.configs)
            print(f"{n:>2} {'on' if symmetry else 'off':>8} {confs:>7,} {len(ex.edges_src):>8,} {scalar:>9.3f} "
                  f"{confs / scalar:>8,.0f} {batched:>9.3f} {confs / batched:>8,.0f} {scalar / batched:>6.1f}x",
                  flush=True)


def switch(repeat: int, tmp: Path) -> None:
    print(f"\nSwitch: processor time relative to the scalar loop, by LEVEL_MIN (LEVEL_LOW = LEVEL_MIN / 4; "
          f"best of {repeat})")
    print(f"{'system':>34} " + " ".join(f"{n:>6}" for n in THRESHOLDS) + f" {'scalar':>7}")
    cases = [(f"loom-{n} {'sym' if s else 'full'}", loom_system(n, tmp), s) for n in (3, 4) for s in (True, False)]
    cases += [(f"{p.stem} {'sym' if s else 'full'}", load_system(p), s)
              for p in sorted(SYSTEMS.glob("durable-run-*.yaml")) for s in (True, False)]
    sums = [0.0 for _ in THRESHOLDS]
    for name, system, symmetry in cases:
        scalar = best(partial(explore, system, symmetry, None), repeat)
        ratios = [best(partial(explore, system, symmetry, t, max(1, t // 4)), repeat) / scalar for t in THRESHOLDS]
        sums = [a + b for a, b in zip(sums, ratios, strict=True)]
        print(f"{name:>34} " + " ".join(f"{r:>6.2f}" for r in ratios) + f" {scalar:>6.3f}s", flush=True)
    print(f"{'sum of ratios':>34} " + " ".join(f"{r:>6.2f}" for r in sums))
    chosen = THRESHOLDS[sums.index(min(sums))]
    print(f"least sum at LEVEL_MIN = {chosen}; shipped LEVEL_MIN = {system_batched.LEVEL_MIN}, "
          f"LEVEL_LOW = {system_batched.LEVEL_LOW}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, nargs="+", default=[2, 3, 4])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-switch", action="store_true", help="skip the switch measurement")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        speedups(args.calls, args.repeat, Path(tmp))
        if not args.no_switch:
            switch(args.repeat, Path(tmp))


if __name__ == "__main__":
    main()
