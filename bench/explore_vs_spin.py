"""Explorer throughput beside Spin on the exported model (same run): a narrow and a wide series.

Narrow: grows the Loom table's ``max_retries`` with ``--set`` (the Loom space is linear
in it: a fixed number of configurations per retry value, measured on two small sizes) to
about 0.1, 0.3 and 1 million configurations, and prints for each size in CPU seconds (the
least of interleaved rounds): the explorer as shipped and with its memo keyed by value
(the baseline before interval keys), the checks, ``agentfsm verify`` as a process (both
ways), Spin's search without partial-order reduction (``-DNOREDUCE``) and Spin end to
end (spin -a, gcc, pan), and the ratios; ``narrow`` returns the rows.

Wide: grows ``n`` of tests/tables/wide-counters.yaml (a product of bounded counters with
coupling guards, many configurations per breadth-first level) from about 0.5 to 2 million
configurations (6.8 million with ``--wide 7000000``). Each size runs in a fresh interpreter
(``--one N``) so that its peak resident memory is its own; it prints the exploration in
batches (the shipped explorer) and the checks after it, the scalar loop alone for
comparison, then ``agentfsm verify`` as a user runs it (its own process, start to exit: CPU
seconds and peak resident memory) beside Spin end to end (spin -a, gcc, pan ``-DNOREDUCE``:
CPU seconds, and pan's "total actual memory usage"), in interleaved rounds, with the
ratios; ``wide`` returns its rows.

Past 2**24: wide-counters at n=127 (16.8 million configurations, codes of 25 bits) explored
in fresh interpreters with the visited set as shipped and with the hash table it used
before past a 2**24 span: CPU and peak memory per configuration. Usage: ``make bench`` or
``.venv/bin/python bench/explore_vs_spin.py [--max 1000000] [--wide 2000000] [--past 127] [--only-wide]``
(0 skips a series: ``--wide 0 --past 0`` measures and records the narrow series alone).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from math import nan
from pathlib import Path

from agentfsm.spec import Table, load_table
from agentfsm.verify.kernel import visited
from agentfsm.verify.spin import runner as spin
from agentfsm.verify.table import batched, intervals
from agentfsm.verify.table import explore as explore_module
from agentfsm.verify.table.checks import Verdict, run_checks
from agentfsm.verify.table.explore import Exploration, explore
from cpu import children_cpu
from figures import record

ROOT = Path(__file__).resolve().parent.parent
# The console script: `python -m agentfsm.cli` run from the repository's root would import the
# agentfsm/ folder there instead of the installed package and its mapped subpackages.
AGENTFSM = str(Path(sys.executable).parent / "agentfsm")
LOOM = ROOT / "spec" / "loom-agent.yaml"
WIDE = ROOT / "tests" / "tables" / "wide-counters.yaml"
WIDE_SIZES = {500_000: 34, 1_300_000: 47, 2_000_000: 54, 6_800_000: 82}   # about that many configurations: n
LIMIT = 100_000_000   # past verify's default (5 million), as a user exploring 6.8 million must set it
SCALAR_MAX = 2_000_000   # the scalar loop is timed up to this size (minutes past it)
PHASES = ("invariant", "always-reachable", "no-cycle-within")


def phases(verdict: Verdict) -> dict[str, float]:
    """Seconds per check kind; the cheap kinds (step errors, deadlock, rows, states) as ``other``."""
    spent = dict.fromkeys((*PHASES, "other"), 0.0)
    for check, seconds in zip(verdict.checks, verdict.seconds, strict=True):
        spent[check.kind if check.kind in PHASES else "other"] += seconds
    return spent


def loom_grown(size: int) -> Table:
    """The Loom table with ``max_retries`` set for about ``size`` configurations: its space is
    linear in ``max_retries``, so two small explorations give the intercept and the slope."""
    small, large = (explore(load_table(LOOM, {"max_retries": r, "max_tools": 2})).count for r in (10, 20))
    per_retry = (large - small) / 10
    return load_table(LOOM, {"max_retries": max(1, round(10 + (size - small) / per_retry)), "max_tools": 2})

def explore_cpu(table: Table, mode: str) -> tuple[Exploration, float]:
    """Explore in this process: CPU seconds. ``mode``: ``shipped``; ``scalar``: without
    exploring ahead (the explorer before it); ``by_value``: the memo keyed by value only (no
    interval keys, so nothing to explore ahead along: the explorer before interval keys)."""
    saved = intervals.MIN_SIZE, explore_module.AHEAD_AT
    if mode == "by_value":
        intervals.MIN_SIZE = 1 << 62
    if mode != "shipped":
        explore_module.AHEAD_AT = None
    try:
        cpu = time.process_time()
        ex = explore(table)
        return ex, time.process_time() - cpu
    finally:
        intervals.MIN_SIZE, explore_module.AHEAD_AT = saved


def as_installed() -> dict[str, str]:
    """The environment of a process run as a user runs it: bytecode cached, as an installed
    package has it, even where PYTHONDONTWRITEBYTECODE is set (the first run writes it)."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


# Runs a command and prints its CPU seconds and peak resident bytes (wait4): a small process,
# so that the peak is the command's own (a child's ru_maxrss starts from its parent's size at fork).
LAUNCH = """import json, os, subprocess, sys
child = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
_, status, usage = os.wait4(child.pid, 0)
assert os.waitstatus_to_exitcode(status) == 0, sys.argv[1:]
print(json.dumps([usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024]))"""


def verify_cli(sets: dict[str, int], by_value: bool = False) -> tuple[float, int]:
    """``agentfsm verify`` on the grown Loom table as a user runs it, process start to
    exit: CPU seconds and peak resident bytes (``by_value``: through this file, with the
    baseline's memo)."""
    words = ["verify", *(w for name, value in sets.items() for w in ("--set", f"{name}={value}")), str(LOOM)]
    args = ([sys.executable, __file__, "--cli-by-value", *words] if by_value
            else [AGENTFSM, *words])
    out = subprocess.run([sys.executable, "-c", LAUNCH, *args], check=True, capture_output=True, text=True,
                         env=as_installed()).stdout
    cpu, peak = json.loads(out)
    return float(cpu), int(peak)


def narrow(largest: int, have_spin: bool, rounds: int = 3) -> list[dict[str, float]]:
    """The narrow series: per size the least CPU seconds over ``rounds`` interleaved rounds
    of the explorer (as shipped, and with the memo keyed by value as before interval keys),
    every check, ``agentfsm verify`` as a process, and Spin; prints a table, returns its rows."""
    sizes = [n for n in (100_000, 300_000, 1_000_000) if n <= largest]
    print("narrow: the Loom table grown (about 10 configurations per breadth-first level), CPU seconds, "
          f"least of {rounds} interleaved rounds")
    print(f"{'configs':>9} {'explore':>7} {'scalar':>6} {'by val':>7} {'checks':>6} {'cli':>6} {'cli old':>7} "
          f"{'MB':>5} | {'pan NR':>6} {'spin e2e':>8} {'pan MB':>6} | {'x NR':>5} {'x NR old':>8} {'x e2e':>5} "
          f"{'x e2e old':>9} {'x MB':>5}")
    rows = []
    verify_cli({"max_retries": 1})   # writes the bytecode the measured runs read
    for size in sizes:
        table = loom_grown(size)
        sets = {"max_retries": table.constants["max_retries"], "max_tools": 2}
        best: dict[str, float] = {}
        for _ in range(rounds):
            ex, old = explore_cpu(table, "by_value")
            del ex
            ex, scalar = explore_cpu(table, "scalar")
            del ex
            ex, new = explore_cpu(table, "shipped")
            cpu = time.process_time()
            verdict = run_checks(ex)
            checks = time.process_time() - cpu
            assert verdict.ok
            count = ex.count
            del ex, verdict
            cli, peak = verify_cli(sets)
            got = {"explore": new, "scalar": scalar, "by_value": old, "checks": checks, "cli": cli,
                   "cli_peak_mb": -peak / 1e6, "cli_by_value": verify_cli(sets, by_value=True)[0]}
            if have_spin:
                with tempfile.TemporaryDirectory() as tmp:
                    before = children_cpu()
                    plain = spin.run_spin(table, Path(tmp), depth=2 * count + 100)
                    got["spin_e2e"] = children_cpu() - before
                assert plain.states == count, (plain.states, count)
                got["pan"] = plain.search_cpu_s
                got["pan_mb"] = -plain.memory_mb
            best = {k: min(v, best.get(k, v)) for k, v in got.items()}
        best["cli_peak_mb"], best["pan_mb"] = -best["cli_peak_mb"], -best.get("pan_mb", nan)   # the largest peaks
        row = {"configurations": float(count), **best}
        line = (f"{count:>9,} {best['explore']:>7.2f} {best['scalar']:>6.2f} {best['by_value']:>7.2f} "
                f"{best['checks']:>6.2f} {best['cli']:>6.2f} {best['cli_by_value']:>7.2f} {best['cli_peak_mb']:>5.0f}")
        if have_spin:
            line += (f" | {best['pan']:>6.2f} {best['spin_e2e']:>8.2f} {best['pan_mb']:>6.0f}"
                     f" | {best['explore'] / best['pan']:>5.2f} {best['by_value'] / best['pan']:>8.2f}"
                     f" {best['cli'] / best['spin_e2e']:>5.2f} {best['cli_by_value'] / best['spin_e2e']:>9.2f}"
                     f" {best['cli_peak_mb'] / best['pan_mb']:>5.2f}")
        print(line, flush=True)
        rows.append(row)
    print("explore: the explorer as shipped; scalar: without exploring ahead (before it); by val: with its memo\n"
          "keyed by value (before interval keys); checks: every check; cli, cli old: `agentfsm verify` as a process,\n"
          "start to exit (old: by value), MB its peak resident memory. pan NR: pan's search with -DNOREDUCE; spin\n"
          "e2e: spin -a + gcc -O2 + pan; pan MB: its total actual memory usage. x NR = explore / pan, x e2e = cli /\n"
          "spin e2e, x MB = MB / pan MB; the old ones by value (below 1: agentfsm is better).\n")
    return rows


def peak_memory() -> int:
    """This process's peak resident memory in bytes: VmHWM, which (unlike ``ru_maxrss``, kept
    across exec) starts afresh in a new program."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def one(n: int, scalar: bool) -> None:
    """One wide size in this (fresh) process: print its figures as JSON."""
    table = load_table(WIDE, {"n": n})
    if scalar:
        explore_module.LEVEL_MIN = None
    start, cpu = time.perf_counter(), time.process_time()
    ex = explore(table, max_configurations=LIMIT)
    explored, explore_cpu = time.perf_counter() - start, time.process_time() - cpu
    explore_peak = peak_memory()
    ok = True if scalar else run_checks(ex).ok
    total = time.perf_counter() - start
    print(json.dumps({"configurations": ex.count, "transitions": ex.transitions, "explore": explored,
                      "cpu": explore_cpu, "checks_cpu": time.process_time() - cpu - explore_cpu, "verify": total,
                      "explore_peak": explore_peak, "peak": peak_memory(), "ok": ok}))


def measured(n: int, scalar: bool = False) -> dict[str, float]:
    args = [sys.executable, __file__, "--one", str(n)] + (["--scalar"] if scalar else [])
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    result: dict[str, float] = json.loads(out.splitlines()[-1])
    return result


def as_a_user_runs_it(n: int) -> tuple[float, int]:
    """``agentfsm verify`` on the wide table in its own process, start to exit: CPU seconds
    (user + system) and peak resident bytes, from the kernel's accounting of that child
    (``as_installed``)."""
    child = subprocess.Popen([AGENTFSM, "verify", str(WIDE), "--set", f"n={n}",
                              "--max-configurations", str(LIMIT)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=as_installed())
    _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    assert child.returncode == 0, f"agentfsm verify exited {child.returncode} on n={n}"
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024


def spin_end_to_end(n: int, depth: int) -> tuple[spin.SpinRun, float]:
    """Spin on the exported wide table: spin -a, gcc, pan -DNOREDUCE; and their CPU seconds."""
    before = children_cpu()
    with tempfile.TemporaryDirectory() as tmp:
        run = spin.run_spin(load_table(WIDE, {"n": n}), Path(tmp), depth=depth)
    return run, children_cpu() - before


def wide(largest: int, have_spin: bool, rounds: int = 2) -> list[dict[str, float]]:
    """The wide series; returns one row per size (the figures printed)."""
    print("wide: tests/tables/wide-counters.yaml grown (a product of bounded counters, coupling guards)")
    print(f"{'configs':>9} {'transitions':>11} {'explore':>7} {'cpu':>5} {'conf/s':>9} {'checks':>6} {'scalar':>6} "
          f"{'MB ex':>5} | {'verify':>6} {'MB':>5} | {'spin NR':>7} {'e2e':>5} {'MB':>5} | {'x cpu':>5} {'x e2e':>5} "
          f"{'x MB':>5} {'x scalar':>8}")
    rows: list[dict[str, float]] = []
    as_a_user_runs_it(2)   # writes the bytecode the measured runs read
    for size, n in WIDE_SIZES.items():
        if size > largest:
            continue
        ours = measured(n)
        count = int(ours["configurations"])
        row = {"configurations": count, "transitions": ours["transitions"], "explore_s": ours["explore"],
               "explore_cpu": ours["cpu"], "checks_cpu": ours["checks_cpu"],
               "explore_peak_mb": ours["explore_peak"] / 1e6}
        if size <= SCALAR_MAX:
            old = measured(n, scalar=True)
            assert old["configurations"] == count
            row.update(scalar_s=old["explore"], x_scalar=old["explore"] / ours["explore"])
        assert ours["ok"]
        verify_cpu, verify_peak, spin_cpu, pan = float("inf"), 0, float("inf"), None
        for _ in range(rounds):   # interleaved: each side's best round
            cpu, peak = as_a_user_runs_it(n)
            verify_cpu, verify_peak = min(verify_cpu, cpu), max(verify_peak, peak)
            if have_spin:
                plain, cpu = spin_end_to_end(n, count + 1000)
                assert plain.states == count, (plain.states, count)
                spin_cpu = min(spin_cpu, cpu)
                if pan is None or plain.search_cpu_s < pan.search_cpu_s:
                    pan = plain
        row.update(verify_cpu=verify_cpu, verify_peak_mb=verify_peak / 1e6)
        line = (f"{count:>9,} {int(ours['transitions']):>11,} {ours['explore']:>7.2f} {ours['cpu']:>5.2f} "
                f"{count / ours['explore']:>9,.0f} {ours['checks_cpu']:>6.2f} {row.get('scalar_s', nan):>6.2f} "
                f"{ours['explore_peak'] / 1e6:>5,.0f} | {verify_cpu:>6.2f} {verify_peak / 1e6:>5,.0f}")
        if pan is not None:
            row.update(spin_search_cpu=pan.search_cpu_s, spin_e2e_cpu=spin_cpu, pan_mb=pan.memory_mb,
                       x_search_cpu=ours["cpu"] / pan.search_cpu_s, x_e2e_cpu=verify_cpu / spin_cpu,
                       x_peak=verify_peak / 1e6 / pan.memory_mb)
            line += (f" | {pan.search_cpu_s:>7.2f} {spin_cpu:>5.2f} {pan.memory_mb:>5,.0f}"
                     f" | {row['x_search_cpu']:>5.2f} {row['x_e2e_cpu']:>5.2f} {row['x_peak']:>5.2f}"
                     f" {row.get('x_scalar', nan):>8.1f}")
        rows.append(row)
        print(line, flush=True)
    print("explore: the explorer as shipped (batches once the queue is wide), wall and CPU seconds; checks: every\n"
          "check after it, CPU seconds; scalar: the scalar loop alone (wall); MB ex: peak resident memory of a fresh\n"
          "interpreter (numpy included) after exploring. verify, MB: `agentfsm verify` as a user runs it, process\n"
          "start to exit: CPU seconds and peak resident memory. spin NR: pan's search with -DNOREDUCE, CPU; e2e:\n"
          "spin -a + gcc -O2 + pan, CPU; MB: pan's total memory. x cpu = explore cpu / spin NR, x e2e = verify /\n"
          "spin e2e (CPU), x MB = verify's MB / pan's (below 1: agentfsm is better); x scalar = scalar / explore\n"
          f"(up to {SCALAR_MAX:,} configurations).\n"
          f"verify and spin: the best of {rounds} interleaved rounds each.")
    return rows


def threshold() -> None:
    """Where batches start to pay: microseconds per configuration of the scalar loop and of
    batches of a fixed size, on a wide table (the basis of ``explore.LEVEL_MIN``)."""
    table = load_table(WIDE, {"n": 16})
    saved = explore_module.LEVEL_MIN, batched.BATCH
    costs = []
    try:
        for size in (None, 64, 128, 256, 512, 1024, 4096, 16384):
            explore_module.LEVEL_MIN = None if size is None else 0
            batched.BATCH = size or saved[1]
            best = float("inf")
            for _ in range(3):
                start = time.process_time()
                ex = explore(table)
                best = min(best, time.process_time() - start)
            costs.append(f"{'scalar' if size is None else size}: {best / ex.count * 1e6:.1f}")
    finally:
        explore_module.LEVEL_MIN, batched.BATCH = saved
    print(f"threshold: CPU microseconds per configuration on wide-counters (n=16, {ex.count:,} configurations), "
          "the scalar loop and batches of a given size:\n  " + ", ".join(costs))


PAST_DENSE = 127   # wide-counters' n whose codes need 25 bits: past the 2**24 span of the plain array


def past_dense_one(n: int, hashed: bool) -> None:
    """Explore wide-counters at ``n`` in this (fresh) process, the visited set as shipped or
    (``hashed``) the hash table past 2**24 as before; print CPU seconds and peak memory as JSON."""
    if hashed:
        visited.DENSE_MAX = 0
    table = load_table(WIDE, {"n": n})
    cpu = time.process_time()
    ex = explore(table, max_configurations=100_000_000)
    print(json.dumps({"configurations": ex.count, "cpu": time.process_time() - cpu, "peak": peak_memory(),
                      "moved": isinstance(ex.code_index, visited.DenseIndex) and ex.code_index.hashed is not None,
                      "kind": type(ex.code_index).__name__}))


def past_dense(n: int = PAST_DENSE, rounds: int = 1) -> list[dict[str, float]]:
    """Past 2**24 configurations: the explorer with the visited set as shipped (an array
    while the codes are dense) beside the hash table, each in a fresh interpreter, rounds
    interleaved; CPU and peak resident bytes per configuration. Prints and returns the rows."""
    rows = []
    for _ in range(rounds):
        for hashed in (True, False):
            args = [sys.executable, __file__, "--past-dense", str(n)] + (["--hashed"] if hashed else [])
            got = json.loads(subprocess.run(args, check=True, capture_output=True, text=True).stdout.splitlines()[-1])
            rows.append({"hashed": float(hashed), "configurations": float(got["configurations"]), "cpu": got["cpu"],
                         "peak": float(got["peak"])})
    print(f"past 2^24: wide-counters n={n}, explore only, fresh interpreters")
    for kind in (1.0, 0.0):
        mine = [r for r in rows if r["hashed"] == kind]
        cpu, peak = min(r["cpu"] for r in mine), min(r["peak"] for r in mine)
        count = mine[0]["configurations"]
        print(f"  {'hash table (before)' if kind else 'array (shipped)':>20}: {count:,.0f} configurations, "
              f"{cpu:.1f} CPU s, {cpu / count * 1e6:.2f} µs and {peak / count:.0f} peak bytes per configuration")
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--max", type=int, default=1_000_000, help="largest narrow configuration count (about)")
    parser.add_argument("--wide", type=int, default=2_000_000, help="largest wide configuration count (about)")
    parser.add_argument("--past", type=int, default=PAST_DENSE,
                        help="wide-counters' n for the series past 2**24 configurations (about 4 GB; 0: skip it)")
    parser.add_argument("--one", type=int, help=argparse.SUPPRESS)   # one wide size, in a child process
    parser.add_argument("--scalar", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--only-wide", action="store_true",
                        help="the wide series alone (recorded on its own; the narrow and past-2^24 figures kept)")
    if sys.argv[1:2] == ["--past-dense"]:   # one exploration past 2**24, in a child process
        past_dense_one(int(sys.argv[2]), "--hashed" in sys.argv)
        return
    if sys.argv[1:2] == ["--cli-by-value"]:   # the baseline's `agentfsm verify`, in a child process
        intervals.MIN_SIZE = 1 << 62
        from agentfsm.cli.main import main as cli
        sys.exit(cli(sys.argv[2:]))
    args = parser.parse_args()
    if args.one is not None:
        one(args.one, args.scalar)
        return
    have_spin = spin.available()
    # The wide series first: a child's peak memory (wait4's ru_maxrss) starts from this process's
    # size when it forks, and the narrow series explores in this process. A size of 0 skips a series.
    wide_rows = wide(args.wide, have_spin) if args.wide else []
    if have_spin and wide_rows:
        record_wide(wide_rows)
    if args.only_wide:
        return
    narrow_rows = narrow(args.max, have_spin) if args.max else []
    threshold()
    if have_spin and narrow_rows:
        record_narrow(narrow_rows)
    if args.past:
        record_past_dense(past_dense(args.past), args.past)


def record_narrow(narrow_rows: list[dict[str, float]]) -> None:
    """The docs' narrow table (bench/figures.py): `agentfsm verify` as a user runs it beside Spin
    end to end, and the exploration beside pan's search, in CPU seconds."""
    record("verify-narrow", [{
        "configurations": int(r["configurations"]), "explore CPU-s": r["explore"],
        "scalar loop CPU-s": r["scalar"], "pan -DNOREDUCE CPU-s": r["pan"], "× pan": r["explore"] / r["pan"],
        "verify CPU-s": r["cli"], "Spin end to end CPU-s": r["spin_e2e"], "× Spin": r["cli"] / r["spin_e2e"],
        "verify peak MB": r["cli_peak_mb"], "pan MB": r["pan_mb"], "× pan's memory": r["cli_peak_mb"] / r["pan_mb"]}
        for r in narrow_rows],
        table="spec/loom-agent.yaml grown with --set max_retries=N", note="Least CPU of interleaved rounds "
        "(the largest peak memory); explore: as shipped, exploring ahead; scalar loop: without it (before); "
        "verify: the `agentfsm verify` process, start to exit, and its peak resident memory; Spin end to end: "
        "spin -a, gcc -O2, pan; pan MB: pan's total actual memory usage.")


def record_wide(wide_rows: list[dict[str, float]]) -> None:
    """The docs' wide table: `agentfsm verify` beside Spin end to end, CPU and peak memory."""
    record("verify-wide", [{
        "configurations": int(r["configurations"]), "verify CPU-s": r["verify_cpu"],
        "Spin end to end CPU-s": r["spin_e2e_cpu"], "× Spin": r["x_e2e_cpu"], "verify peak MB": r["verify_peak_mb"],
        "pan MB": r["pan_mb"], "× pan's memory": r["x_peak"]} for r in wide_rows],
        table="tests/tables/wide-counters.yaml grown with --set n=N", note="Best of interleaved rounds; "
        "verify: the `agentfsm verify` process, start to exit, and its peak resident memory; pan MB: pan's "
        "total actual memory usage (-DNOREDUCE).")


def record_past_dense(rows: list[dict[str, float]], n: int) -> None:
    table = []
    for kind, name in ((1.0, "hash table (before)"), (0.0, "array (shipped)")):
        mine = [r for r in rows if r["hashed"] == kind]
        count, cpu, peak = mine[0]["configurations"], min(r["cpu"] for r in mine), min(r["peak"] for r in mine)
        table.append({"visited set": name, "configurations": int(count), "CPU-s": cpu,
                      "µs per configuration": cpu / count * 1e6, "peak bytes per configuration": peak / count})
    record("visited-past-2-24", table, table=f"tests/tables/wide-counters.yaml, n={n} (codes of 25 bits)",
           note="Exploration only, fresh interpreters.")


if __name__ == "__main__":
    main()
