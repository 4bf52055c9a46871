"""Real crashes: a child process runs a scenario on SQLite and is SIGKILLed at a write boundary.

The child kills itself with SIGKILL from the store's boundary hook (no cleanup, no flush,
exactly as ``kill -9`` from outside), its tools writing to a ledger file that is fsynced
per execution. The parent then recovers the run from the SQLite file, lets the event
source redeliver, and judges the result against the crash-free run like a simulated crash.
A child that does not die at its boundary, or hangs, is a reported violation.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from agentfsm.impl.durable import DurableRun, Options
from agentfsm.impl.store_sqlite import SqliteStore
from agentfsm.spec import load_table
from agentfsm.spec.expr import Value
from agentfsm.verify.crash import RUN, CrashChecker, compare, describe_scenario, observe
from agentfsm.verify.explore import Label, explore
from agentfsm.verify.ledger import FileLedger, ledger_tools

CHILD_TIMEOUT = 60.0


def _events(table_events: Sequence[Label]) -> str:
    return json.dumps([[name, list(values)] for name, values in table_events])


def child(argv: Sequence[str]) -> int:
    """``TABLE OVERRIDES DB LEDGER KILL_AT EVENTS APPROVALS``: run, and die at boundary KILL_AT."""
    table_path, overrides, db, ledger, kill_at, events, approvals = argv
    table = load_table(table_path, json.loads(overrides))
    count = 0

    def boundary(phase: str, label: str) -> None:
        nonlocal count
        count += 1
        if count == int(kill_at):
            os.kill(os.getpid(), signal.SIGKILL)
    store = SqliteStore(db, on_boundary=boundary)
    tools = ledger_tools(table, FileLedger(Path(ledger)), False)
    run = DurableRun.create(store, table, RUN, tools, options=Options(approvals=json.loads(approvals),
                                                                     clock=lambda: 0.0))
    for k, (name, values) in enumerate(json.loads(events)):
        run.deliver(name, table.event(name).param_dict(tuple(values)), event_id=f"e{k + 1}")
    return 0


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


def kill_scenarios(checker: CrashChecker, table_path: str, overrides: Mapping[str, Value], n: int) -> None:
    """Run ``n`` SIGKILL scenarios and add them (and their violations) to the checker's report."""
    table = checker.table
    for prefix, label, before, point in pick(checker, n):
        events = [*prefix, label]
        where = f"{describe_scenario(table, prefix, label)}; SIGKILL at boundary {point} of the step"
        base, ledger = checker.prefix(prefix, "plain")
        ref_run = DurableRun.attach(base, table, RUN, ledger_tools(table, ledger, False), options=checker.options)
        checker.deliver(ref_run, events, first=len(prefix))
        ref = observe(ref_run)
        with tempfile.TemporaryDirectory(prefix="agentfsm-kill-") as tmp:
            db, ledger_path = Path(tmp) / "journal.db", Path(tmp) / "ledger"
            argv = [sys.executable, "-m", "agentfsm.verify.crash_kill", str(Path(table_path).resolve()),
                    json.dumps(dict(overrides)), str(db), str(ledger_path), str(before + point), _events(events),
                    json.dumps(dict(checker.options.approvals))]
            try:
                proc = subprocess.run(argv, capture_output=True, text=True, timeout=CHILD_TIMEOUT, cwd=tmp)
            except subprocess.TimeoutExpired:
                checker.violate("kill", where, f"the child did not finish within {CHILD_TIMEOUT:.0f} s")
                continue
            if proc.returncode != -signal.SIGKILL:
                checker.violate("kill", where, f"the child exited with {proc.returncode}, not SIGKILL: "
                                 f"{proc.stderr.strip()[-300:]}")
                continue
            checker.report.kills += 1
            world = FileLedger(ledger_path)
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
