"""Real crashes: a child process runs a scenario on SQLite and is SIGKILLed at a write boundary.

The child kills itself with SIGKILL from the store's boundary hook (no cleanup, no flush,
exactly as ``kill -9`` from outside), its tools writing to a ledger file that is fsynced
per execution. A second child then recovers the run from the SQLite file (and lets the
event source redeliver) and is itself SIGKILLed at a boundary of that recovery. The parent
finally recovers and judges the result against the crash-free run like a simulated crash.
A child that does not die at its boundary, or hangs, is a reported violation.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from agentfsm.impl.durable.ledger import FileLedger, ledger_tools
from agentfsm.impl.durable.run import DurableRun, Options
from agentfsm.impl.stores.sqlite import SqliteStore
from agentfsm.spec import load_table
from agentfsm.spec.expr import Value
from agentfsm.verify.crash import RUN, CrashChecker, compare, describe_scenario, observe
from agentfsm.verify.explore import Label, explore
from agentfsm.verify.forking import Forked, ForkTimeout

CHILD_TIMEOUT = 60.0


def _events(table_events: Sequence[Label]) -> str:
    return json.dumps([[name, list(values)] for name, values in table_events])


def child(argv: Sequence[str]) -> int:
    """``MODE TABLE OVERRIDES DB LEDGER KILL_AT EVENTS APPROVALS``: run (MODE ``run``) or recover
    (``recover``) and deliver the events, dying at boundary KILL_AT (0: never); print how many
    boundaries it passed."""
    print(child_run(argv))
    return 0


def child_run(argv: Sequence[str]) -> int:
    """The child's work (see ``child``); returns the boundaries passed, unless killed first."""
    mode, table_path, overrides, db, ledger, kill_at, events, approvals = argv
    table = load_table(table_path, json.loads(overrides))
    count = 0

    def boundary(phase: str, label: str) -> None:
        nonlocal count
        count += 1
        if count == int(kill_at):
            os.kill(os.getpid(), signal.SIGKILL)
    store = SqliteStore(db, on_boundary=boundary)
    tools = ledger_tools(table, FileLedger(Path(ledger)), False)
    options = Options(approvals=json.loads(approvals), clock=lambda: 0.0)
    opener = DurableRun.open if mode == "recover" else DurableRun.create
    run = opener(store, table, RUN, tools, options=options)
    for k, (name, values) in enumerate(json.loads(events)):
        run.deliver(name, table.event(name).param_dict(tuple(values)), event_id=f"e{k + 1}")
    store.close()
    return count


def forked(argv: Sequence[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    """``child_run(argv)`` in a child forked from this warm process, in ``cwd``: its own SQLite
    connection and ledger file, killed by the same real SIGKILL; stdout carries the boundary
    count, stderr the traceback."""
    def work() -> str:
        os.chdir(cwd)
        return f"{child_run(argv)}\n"
    try:
        code, text = Forked(work).wait(timeout)
    except ForkTimeout:
        raise subprocess.TimeoutExpired(list(argv), timeout) from None
    return subprocess.CompletedProcess(list(argv), code, text if code == 0 else "", text if code != 0 else "")


def pick(checker: CrashChecker, n: int) -> list[tuple[list[Label], Label, int, int]]:
    """``n`` scenarios (prefix, event, boundary offset before the step, boundary in the step),
    spread evenly over every step boundary, preferring steps that run external effects."""
    ex = explore(checker.table)
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
                                    options=checker.options)
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

    def __init__(self, checker: CrashChecker, table_path: str, overrides: Mapping[str, Value], tmp: Path,
                 events: Sequence[Label]) -> None:
        self.checker = checker
        self.tail = [str(Path(table_path).resolve()), json.dumps(dict(overrides))]
        self.rest = [_events(events), json.dumps(dict(checker.options.approvals))]
        self.tmp = tmp

    def run(self, mode: str, kill_at: int, where: str, directory: Path | None = None) -> (
            subprocess.CompletedProcess[str] | None):
        place = directory or self.tmp
        argv = [mode, *self.tail, str(place / "journal.db"), str(place / "ledger"), str(kill_at), *self.rest]
        try:
            proc = forked(argv, self.tmp, CHILD_TIMEOUT)
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


def kill_scenarios(checker: CrashChecker, table_path: str, overrides: Mapping[str, Value], n: int,
                   shard: tuple[int, int] = (0, 1)) -> None:
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
        ref_run = DurableRun.attach(base, table, RUN, ledger_tools(table, ledger, False), options=checker.options)
        checker.deliver(ref_run, events, first=len(prefix))
        ref = observe(ref_run)
        with tempfile.TemporaryDirectory(prefix="agentfsm-kill-") as tmp:
            children = _Children(checker, table_path, overrides, Path(tmp), events)
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
                run = DurableRun.open(store, table, RUN, ledger_tools(table, world, False), options=checker.options)
                checker.deliver(run, events)
                got = observe(run)
                store.close()
            except Exception as exc:
                checker.violate("recovery-error", where, f"{type(exc).__name__}: {exc}")
                continue
            for kind, message in compare(ref, got, world.executions()):
                checker.violate(kind, where, message)


if __name__ == "__main__":
    sys.exit(child(sys.argv[1:]))
