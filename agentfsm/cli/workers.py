"""``agentfsm submit``, ``agentfsm worker`` and ``agentfsm jobs``: many runs, several workers, one store."""

from __future__ import annotations

import argparse
import importlib
import json
import math
import os
import signal
import socket
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

from agentfsm.cli import durable as durable_commands
from agentfsm.cli.exits import EXIT_OK, BadInput
from agentfsm.cli.util import add_set_option, json_envelope, load_tables
from agentfsm.impl.durable.run import DecisionError, DurableRun, EffectCall, Options, StatusReply, Tool
from agentfsm.impl.script import EventScript, ScriptError, load_script
from agentfsm.impl.stores.journal import JSON, JournalError, RunExists
from agentfsm.impl.stores.leases import LeasingStore
from agentfsm.impl.stores.urls import open_leasing_store
from agentfsm.impl.workers.worker import ToolFactory, check_events, serve, submit
from agentfsm.spec.model import Table

STARTUP_WAIT = 60.0  # seconds a starting worker waits for a server that is down or restarting
UNAVAILABLE = ("Connection refused", "the database system is starting up", "the database system is shutting down",
               "the database system is in recovery mode", "the database system is not yet accepting connections",
               "terminating connection due to unexpected postmaster exit",  # connected as the server was killed
               "server closed the connection unexpectedly")
STORE_HELP = "the shared store: postgresql://USER@HOST:PORT/DATABASE[?schema=NAME]"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("submit", help="queue runs of a table, each with a script of events, for workers",
                       description="Create runs of TABLE in a shared store and queue them for `agentfsm worker`. "
                                   "The event script (YAML: events: [NAME or {NAME: {param: value}}, ...]) lists "
                                   "the events each run receives, in order. Prints the run ids. Exit 0, 2 on bad "
                                   "input.")
    p.add_argument("table", metavar="TABLE")
    p.add_argument("--store", required=True, metavar="URL", help=STORE_HELP)
    p.add_argument("--script", required=True, metavar="FILE", help="an event script: the events to deliver")
    p.add_argument("--count", type=int, default=1, metavar="N", help="queue N runs with this script")
    p.add_argument("--run-id", metavar="ID", help="the run's id (with --count N: ID-1 ... ID-N); default random")
    add_set_option(p)
    p.set_defaults(func=run_submit)

    w = sub.add_parser("worker", help="serve queued runs from a shared store, under leases",
                       description="Claim queued runs of the given tables, recover and run each one's script "
                                   "durably, and mark it done (or blocked on a user decision). Several workers "
                                   "on several machines may share one store; a run belongs to one of them at "
                                   "a time, through a lease with a fencing token. SIGTERM or Ctrl-C stops after "
                                   "the runs in hand. Exit 0 when stopped (or idle with --exit-when-idle), "
                                   "2 on bad input.")
    w.add_argument("tables", nargs="+", metavar="TABLE", help="the tables whose runs this worker serves")
    w.add_argument("--store", required=True, metavar="URL", help=STORE_HELP)
    w.add_argument("--concurrency", type=int, default=1, metavar="N", help="runs served at once (threads)")
    w.add_argument("--lease", type=float, default=30.0, metavar="SECONDS",
                   help="lease length; longer than any tool call takes (default 30)")
    w.add_argument("--snapshot-every", type=int, default=0, metavar="N", help="write a snapshot every N records")
    w.add_argument("--exit-when-idle", action="store_true", help="stop when no run is left queued")
    w.add_argument("--poll", type=float, default=0.2, metavar="SECONDS", help="wait between empty claims")
    w.add_argument("--name", default=None, help="this worker's name in leases (default HOST:PID)")
    w.add_argument("--verbose", action="store_true",
                   help="list every run served with its outcome, not only the summary (problems are always shown)")
    add_tool_options(w)
    add_set_option(w)
    w.set_defaults(func=run_worker)

    j = sub.add_parser("jobs", help="list the runs queued in a shared store and their status",
                       description="List every run queued in a shared store: its machine, status (queued, done, "
                                   "blocked on a user decision, failed), the worker holding its lease, how often "
                                   "it was claimed and its outcome; then the count per status. Exit 0, 2 on bad "
                                   "input.")
    j.add_argument("--store", required=True, metavar="URL", help=STORE_HELP)
    j.add_argument("--json", action="store_true", help="print one JSON object")
    j.add_argument("--run", dest="run_id", metavar="ID", help="with --decide: the blocked run to settle")
    j.add_argument("--decide", action="append", default=[], metavar="KEY=DECISION",
                   help="settle a blocked run's unknown effect (completed, failed or rerun; an anomaly's id with "
                        "continue) and queue the run again: a worker performs a rerun with its real tools")
    j.add_argument("--table", metavar="TABLE", help="with --decide: the run's table (default: the bundled one)")
    j.set_defaults(func=run_jobs)


def add_tool_options(w: argparse.ArgumentParser) -> None:
    """A worker's tools (``tool_factory`` reads them): a factory, or the demonstration ledger."""
    tools = w.add_mutually_exclusive_group()
    tools.add_argument("--tools", metavar="MODULE:FACTORY",
                       help="the tools: FACTORY(table) returns a mapping of external action name to Tool")
    tools.add_argument("--ledger", metavar="FILE",
                       help="demonstration tools: each external effect appends its idempotency key to FILE")
    w.add_argument("--status-query", action="store_true", help="with --ledger: the tools answer status queries")


def _open(url: str) -> LeasingStore:
    try:
        return open_leasing_store(url)
    except JournalError as exc:
        raise BadInput(str(exc)) from None


def _wait_for_store(url: str, bound: float) -> None:
    """A worker started while its server is down or restarting waits for it (up to ``bound``
    seconds), as a running worker reconnects; any other failure is reported at once."""
    deadline = time.monotonic() + bound
    while True:
        try:
            _open(url).close()
            return
        except BadInput as exc:
            if time.monotonic() >= deadline or not any(reason in str(exc) for reason in UNAVAILABLE):
                raise
        time.sleep(1.0)


def run_submit(args: argparse.Namespace) -> int:
    if args.count < 1:
        raise BadInput("--count must be 1 or more")
    [table] = load_tables([args.table], args.overrides)
    try:
        script = load_script(args.script)
    except ScriptError as exc:
        raise BadInput(str(exc)) from None
    if not isinstance(script, EventScript):
        raise BadInput(f"{args.script}: workers run event scripts ('events'), not agent scripts")
    try:
        check_events(table, script.events)
    except ValueError as exc:
        raise BadInput(f"{args.script}: {exc}") from None
    base = args.run_id or f"{table.machine}-{uuid.uuid4().hex[:12]}"
    ids = [base] if args.count == 1 else [f"{base}-{k}" for k in range(1, args.count + 1)]
    store = _open(args.store)
    try:
        for run_id in ids:
            submit(store, table, run_id, script.events)
            print(run_id)
    except RunExists as exc:
        raise BadInput(str(exc)) from None
    finally:
        store.close()
    return EXIT_OK


def tool_factory(args: argparse.Namespace) -> ToolFactory:
    if args.ledger:
        from agentfsm.impl.durable.ledger import FileLedger, ledger_tools
        ledger = FileLedger(Path(args.ledger))
        return lambda table: ledger_tools(table, ledger, args.status_query)
    if args.status_query:
        raise BadInput("--status-query goes with --ledger")
    if not args.tools:
        return lambda table: {}
    module_name, _, attr = args.tools.partition(":")
    try:
        factory = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError, ValueError) as exc:
        raise BadInput(f"--tools {args.tools}: {exc}") from None
    if not callable(factory):
        raise BadInput(f"--tools {args.tools}: not callable")

    def tools(table: Table) -> Mapping[str, Tool]:
        made: Mapping[str, Tool] = factory(table)
        return made
    return tools


def run_worker(args: argparse.Namespace) -> int:
    if args.concurrency < 1 or not 0 < args.lease < math.inf or not 0 < args.poll < math.inf \
            or args.snapshot_every < 0:   # NaN too; an endless lease would hold a dead worker's runs for ever
        raise BadInput("--concurrency must be 1 or more; --lease and --poll positive (and finite); "
                       "--snapshot-every 0 or more")
    tables = {t.machine: t for t in load_tables(args.tables, args.overrides)}
    factory = tool_factory(args)
    for table in tables.values():
        missing = sorted(a.name for a in table.actions if a.effect == "external" and a.name not in factory(table))
        if missing:
            raise BadInput(f"{table.machine}: no tool for the external action(s) {', '.join(missing)} "
                           "(give --tools or --ledger)")
    _wait_for_store(args.store, STARTUP_WAIT)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda signum, frame: stop.set())
    name = args.name or f"{socket.gethostname()}:{os.getpid()}"

    def log(message: str) -> None:
        if args.verbose:
            print(message, flush=True)

    def warn(message: str) -> None:
        print(message, file=sys.stderr, flush=True)
    tally = serve(lambda: open_leasing_store(args.store), tables, factory, name, args.concurrency, args.lease,
                  Options(snapshot_every=args.snapshot_every), args.exit_when_idle, args.poll, stop, log, warn,
                  beat_url=args.store)
    print(f"worker {name}: {tally.summary()}")
    return EXIT_OK


def decide_job(store: LeasingStore, args: argparse.Namespace) -> None:
    """``jobs --run ID --decide KEY=DECISION``: the decisions journaled and the job queued again."""
    if not args.run_id:
        raise BadInput("--decide needs --run ID (the blocked run)")
    decisions = durable_commands.parse_decisions(args.decide)
    try:
        machine = store.machine(args.run_id)
        table = durable_commands.table_for(machine, args.table)
        if table is None:
            raise BadInput(f"no bundled table runs machine {machine!r}: name it with --table")
        run = DurableRun.attach(store, table, args.run_id, {a.name: _NoTool() for a in table.actions
                                                            if a.effect == "external"})
        store.requeue(args.run_id, run.version, [run.decision_entry(id, d) for id, d in decisions.items()])
    except (DecisionError, JournalError) as exc:
        raise BadInput(f"{args.store}: {exc}") from None
    print(f"run {args.run_id}: {len(decisions)} decision(s) journaled; queued again for a worker")


class _NoTool:
    """Deciding runs no tool: the worker that takes the run again performs a rerun."""

    def run(self, call: EffectCall) -> JSON:
        raise RuntimeError("deciding a job runs no tool")

    def status(self, call: EffectCall) -> StatusReply | None:
        return None


def run_jobs(args: argparse.Namespace) -> int:
    store = _open(args.store)
    try:
        if args.decide:
            decide_job(store, args)
        jobs = store.jobs()
    finally:
        store.close()
    counts = Counter(j.status for j in jobs)
    if args.json:
        print(json.dumps(json_envelope("jobs", {"counts": dict(counts), "jobs": [
            {"run_id": j.run_id, "machine": j.machine, "status": j.status, "owner": j.owner, "token": j.token,
             "claims": j.claims, "outcome": j.outcome} for j in jobs]}), indent=2))
        return EXIT_OK
    for j in jobs:
        holder = f" held by {j.owner} (lease {j.token})" if j.owner and j.status == "queued" else ""
        print(f"{j.run_id}  {j.machine}  {j.status}{holder}  claims {j.claims}  {j.outcome or ''}".rstrip())
    print(", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "no jobs")
    return EXIT_OK
