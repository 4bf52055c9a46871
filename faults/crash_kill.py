"""Real crashes: a child process runs a scenario on SQLite and is SIGKILLed at a write boundary.

The child kills itself with SIGKILL from the store's boundary hook (no cleanup, no flush,
exactly as ``kill -9`` from outside), its tools writing to a ledger file that is fsynced
per execution. A second child then recovers the run from the SQLite file (and lets the
event source redeliver) and is itself SIGKILLed at a boundary of that recovery. The parent
finally recovers and judges the result against the crash-free run like a simulated crash.
A child that does not die at its boundary, or hangs, is a reported violation.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from agentfsm.faults.crash import RUN, CrashChecker, compare, describe_scenario, observe
from agentfsm.faults.forking import Forked, ForkTimeout
from agentfsm.impl.durable.ledger import FileLedger, ledger_tools
from agentfsm.impl.durable.run import DurableRun
from agentfsm.impl.stores.sqlite import SqliteStore
from agentfsm.verify.table.explore import Label

CHILD_TIMEOUT = 60.0


@dataclass(frozen=True)
class ChildRun:
    """One child's work: run (``recover`` False) or recover the run in ``db`` and deliver ``events``,
    dying by SIGKILL at boundary ``kill_at`` (0: never)."""

    recover: bool
    db: Path
    ledger: Path
    kill_at: int
    events: Sequence[Label]

    def __call__(self, checker: CrashChecker) -> int:
        """The boundaries passed, unless killed first. Run in the forked child: the table, its
        checked engine and the step cache come warm from the parent, nothing is loaded again."""
        table = checker.table
        count = 0

        def boundary(phase: str, label: str) -> None:
            nonlocal count
            count += 1
            if count == self.kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
        store = SqliteStore(self.db, on_boundary=boundary)
        tools = ledger_tools(table, FileLedger(self.ledger), False)
        opener = DurableRun.open if self.recover else DurableRun.create
        run = opener(store, table, RUN, tools, stepper=checker.stepper, options=checker.options)
        checker.deliver(run, self.events)
        store.close()
        return count


def scratch() -> str | None:
    """Where the children's SQLite files and ledgers go: memory-backed when the system has it.
    A SIGKILL loses what the process held, never what it wrote into the kernel, so a tmpfs
    keeps every write a killed child made exactly as a disk would; only the fsyncs (there for
    power loss, which nothing here simulates) stop costing a disk flush each."""
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK | os.X_OK) else None


def forked(work: ChildRun, checker: CrashChecker, cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    """``work`` in a child forked from this warm process, in ``cwd``: its own SQLite connection
    and ledger file, killed by a real SIGKILL; stdout carries the boundary count, stderr the
    traceback."""
    def child() -> str:
        os.chdir(cwd)
        return f"{work(checker)}\n"
    argv = ["recover" if work.recover else "run", str(work.db), str(work.kill_at)]
    try:
        code, text = Forked(child).wait(timeout)
    except ForkTimeout:
        raise subprocess.TimeoutExpired(argv, timeout) from None
    return subprocess.CompletedProcess(argv, code, text if code == 0 else "", text if code != 0 else "")


def pick(checker: CrashChecker, n: int) -> list[tuple[list[Label], Label, int, int]]:
    """``n`` scenarios (prefix, event, boundary offset before the step, boundary in the step),
    spread evenly over every step boundary, preferring steps that run external effects."""
    ex = checker.exploration
    candidates: list[tuple[list[Label], Label, int, int]] = []
    others: list[tuple[list[Label], Label, int, int]] = []
    for i in range(ex.count):
        prefix = ex.path(i)
        if checker.depth is not None and len(prefix) > checker.depth:
            continue
        base, ledger = checker.prefix(prefix, "plain")
        before = len(base.trace)
        for label in ex.labels:
            store = base.clone()
            run = DurableRun.attach(store, checker.table, RUN, ledger_tools(checker.table, ledger.clone(), False),
                                    stepper=checker.stepper, options=checker.options)
            checker.deliver(run, [*prefix, label], first=len(prefix))
            effects = any("started" in what for _, _, what in store.trace)
            for point in range(1, len(store.trace) + 1):
                (candidates if effects else others).append((prefix, label, before, point))
    pool = candidates or others
    if not pool or n <= 0:
        return []
    return [pool[(k * len(pool)) // n] for k in range(min(n, len(pool)))]


class _Children:
    """Child processes of one kill scenario, in one temporary directory."""

    def __init__(self, checker: CrashChecker, tmp: Path, events: Sequence[Label]) -> None:
        self.checker = checker
        self.events = events
        self.tmp = tmp

    def run(self, mode: str, kill_at: int, where: str, directory: Path | None = None) -> (
            subprocess.CompletedProcess[str] | None):
        place = directory or self.tmp
        work = ChildRun(mode == "recover", place / "journal.db", place / "ledger", kill_at, self.events)
        try:
            proc = forked(work, self.checker, self.tmp, CHILD_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.checker.violate("kill", where, f"the child did not finish within {CHILD_TIMEOUT:.0f} s")
            return None
        if kill_at and proc.returncode != -signal.SIGKILL:
            self.checker.violate("kill", where, f"the child exited with {proc.returncode}, not SIGKILL: "
                                 f"{proc.stderr.strip()[-300:]}")
            return None
        return proc

    def recovery_boundaries(self, where: str) -> int:
        """How many write boundaries recovering the killed run passes (on a copy: nothing runs twice)."""
        dry = self.tmp / "dry"
        dry.mkdir()
        for name in ("journal.db", "journal.db-wal", "ledger"):
            if (self.tmp / name).exists():
                shutil.copy(self.tmp / name, dry / name)
        proc = self.run("recover", 0, where, dry)
        if proc is None or proc.returncode != 0:
            return 0
        return int(proc.stdout.split()[-1])


def kill_scenarios(checker: CrashChecker, n: int, shard: tuple[int, int] = (0, 1)) -> None:
    """Run ``n`` SIGKILL scenarios and add them (and their violations) to the checker's report: each
    kills the run at a boundary of its step, then kills its recovery at one of that recovery's
    boundaries (spread over them), then recovers for good. ``shard`` (K, N): only every Nth
    scenario from the Kth."""
    table = checker.table
    for k, (prefix, label, before, point) in enumerate(pick(checker, n)):
        if k % shard[1] != shard[0]:
            continue
        events = [*prefix, label]
        where = f"{describe_scenario(table, prefix, label)}; SIGKILL at boundary {point} of the step"
        base, ledger = checker.prefix(prefix, "plain")
        ref_run = DurableRun.attach(base, table, RUN, ledger_tools(table, ledger, False), stepper=checker.stepper,
                                   options=checker.options)
        checker.deliver(ref_run, events, first=len(prefix))
        ref = observe(ref_run)
        with tempfile.TemporaryDirectory(prefix="agentfsm-kill-", dir=scratch()) as tmp:
            children = _Children(checker, Path(tmp), events)
            if children.run("run", before + point, where) is None:
                continue
            checker.report.kills += 1
            passes = children.recovery_boundaries(where)
            if passes:
                again = 1 + (k * 7) % passes
                where = f"{where}, then at boundary {again} of {passes} of its recovery"
                if children.run("recover", again, where) is None:
                    continue
                checker.report.recovery_kills += 1
            world = FileLedger(Path(tmp) / "ledger")
            db = Path(tmp) / "journal.db"
            try:
                store = SqliteStore(db)
                run = DurableRun.open(store, table, RUN, ledger_tools(table, world, False), stepper=checker.stepper,
                                      options=checker.options)
                checker.deliver(run, events)
                got = observe(run)
                store.close()
            except Exception as exc:
                checker.violate("recovery-error", where, f"{type(exc).__name__}: {exc}")
                continue
            for kind, message in compare(ref, got, world.executions()):
                checker.violate(kind, where, message)
