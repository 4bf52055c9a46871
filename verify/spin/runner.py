"""Running Spin on an exported model: generate, compile, search, parse the counts.

Used by the cross-check test and the benchmark. Spin is an external process: every run
has a timeout, and a failure is reported as ``SpinError``, never a hang.
"""

from __future__ import annotations

import re
import resource
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from agentfsm.spec import Table
from agentfsm.verify.spin.promela import export_promela


class SpinError(RuntimeError):
    pass


@dataclass(frozen=True)
class SpinRun:
    states: int
    errors: int
    generate_s: float
    compile_s: float
    search_s: float
    output: str
    search_cpu_s: float = 0.0   # pan's user + system time: comparable on a loaded machine

    @property
    def total_s(self) -> float:
        return self.generate_s + self.compile_s + self.search_s

    @property
    def memory_mb(self) -> float:
        """pan's "total actual memory usage" in megabytes (pan prints MiB), NaN when absent."""
        found = re.search(r"([\d.]+)\s+total actual memory usage", self.output)
        return float(found.group(1)) * 1.048576 if found else float("nan")


def available() -> bool:
    return shutil.which("spin") is not None and shutil.which("gcc") is not None


def _run(cmd: list[str], cwd: Path, timeout: float, check: bool = True) -> tuple[str, float]:
    start = time.perf_counter()
    try:
        done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise SpinError(f"{cmd[0]} timed out after {timeout:.0f}s") from None
    elapsed = time.perf_counter() - start
    if check and done.returncode != 0:
        raise SpinError(f"{' '.join(cmd)} exited {done.returncode}: {(done.stderr or done.stdout)[-2000:]}")
    return done.stdout, elapsed


def run_spin(table: Table, workdir: Path, depth: int = 10_000_000, timeout: float = 600,
             reduce: bool = False, optimise: bool = True) -> SpinRun:
    """Exhaustive safety search, without partial-order reduction (``-DNOREDUCE``) unless
    ``reduce``; the depth bound must exceed the longest path, which for a counter is the
    counter's range."""
    return run_spin_model(export_promela(table), workdir, depth, timeout, reduce, optimise=optimise)


def run_spin_model(model: str, workdir: Path, depth: int = 10_000_000, timeout: float = 600,
                   reduce: bool = False, pan_flags: tuple[str, ...] = (), optimise: bool = True) -> SpinRun:
    """Generate, compile and search a Promela ``model`` (a table's or a system's export).
    ``optimise=False`` compiles pan with ``-O0``, in about a quarter of gcc's time: for the
    tests' small models, whose search takes no time, that is most of the run."""
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "model.pml").write_text(model, encoding="utf-8")
    _, generate = _run(["spin", "-a", "model.pml"], workdir, timeout)
    flags = ["-DSAFETY", "-DMEMLIM=16000"] + ([] if reduce else ["-DNOREDUCE"])
    _, compile_s = _run(["gcc", "-O2" if optimise else "-O0", *flags, "-o", "pan", "pan.c"], workdir, timeout)
    before = _children_cpu()
    out, search = _run(["./pan", f"-m{depth}", "-w24", *pan_flags], workdir, timeout, check=False)
    search_cpu = _children_cpu() - before
    states = re.search(r"(\d+) states, stored", out)
    errors = re.search(r"errors: (\d+)", out)
    if states is None or errors is None:
        raise SpinError(f"unexpected pan output: {out[-2000:]}")
    if "max search depth too small" in out:
        raise SpinError("pan: max search depth too small; raise depth")
    return SpinRun(int(states.group(1)), int(errors.group(1)), generate, compile_s, search, out, search_cpu)


def _children_cpu() -> float:
    """User + system seconds of this process's waited-for children so far."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime
