"""``agentfsm journal`` (a run's records, step by step, and where it stands) and the durable
mode of ``agentfsm run`` (``--store PATH [--resume]``)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path

from agentfsm.impl.driver import StateChange
from agentfsm.impl.durable.journal import (
    JSON,
    Boundary,
    CorruptJournal,
    JournalError,
    Record,
    RunExists,
    Store,
    UnknownRun,
)
from agentfsm.impl.durable.run import DecisionError, DurableRun, EffectCall, StatusReply, Tool
from agentfsm.impl.llm.client import LlmClient
from agentfsm.impl.play import Durability, Reporter, play_agent, report_decisions
from agentfsm.impl.script import AgentScript, EventScript
from agentfsm.impl.stores.urls import is_postgres, open_store, sqlite_path
from agentfsm.spec import Table, bundled_tables, load_table

from agentfsm.cliutil import EXIT_FAILED, EXIT_OK, BadInput, deprecated, load_tables


def add_run_options(run: argparse.ArgumentParser) -> None:
    run.add_argument("--store", metavar="URL", help="journal every step and effect in this store (a durable run): "
                                                    "a SQLite file path, sqlite:///PATH or postgresql://...")
    run.add_argument("--resume", action="store_true", help="with --store: recover the run after a crash and "
                                                           "continue the script where the journal ends")
    run.add_argument("--run-id", default="run", metavar="ID", help="the run's id in the store (default: run)")
    run.add_argument("--decide", action="append", default=[], metavar="ID=DECISION",
                     help="with --resume: settle a pending decision first: an unknown effect's key with "
                          "completed, failed or rerun; an anomaly with continue (repeatable)")
    run.add_argument("--kill-at", type=int, default=None, help=argparse.SUPPRESS)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("journal", help="show a durable run's journal and current state",
                            description="Print every record of each run in a journal store (a time-travel view of "
                                        "every step: previous and next configuration, event, reason, effects) and "
                                        "the run's current state, pending decisions and approvals. Exit 0, 1 when "
                                        "a journal is corrupt or torn, 2 on bad input.")
    parser.add_argument("--store", metavar="URL", help="the store: a SQLite file path, sqlite:///PATH or postgresql://...")
    parser.add_argument("path", nargs="?", metavar="URL", help="deprecated spelling of --store URL")
    parser.add_argument("--run", dest="run_id", metavar="ID", help="only this run")
    parser.add_argument("--table", metavar="TABLE", help="the run's table (default: the bundled one of its machine)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(func=run_journal)


class ReceiptTool:
    """An event script's external action: performing it is journaling a receipt (no status query)."""

    def __init__(self, reporter: Reporter) -> None:
        self.reporter = reporter

    def run(self, call: EffectCall) -> JSON:
        self.reporter.note("effect", f"{call.action} key={call.key} attempt={call.attempt}")
        return {"receipt": call.key}

    def status(self, call: EffectCall) -> StatusReply | None:
        return None


class _ViewOnly:
    """Stands in for tools when only reading a journal: attaching never runs a tool."""

    def run(self, call: EffectCall) -> JSON:
        raise RuntimeError("a journal view runs no tools")

    def status(self, call: EffectCall) -> StatusReply | None:
        return None


def _tools(table: Table, tool: Tool) -> dict[str, Tool]:
    return {a.name: tool for a in table.actions if a.effect == "external"}


def _open_store(url: str, must_exist: bool, on_boundary: Boundary | None = None) -> Store:
    """The store a path or URL names (``sqlite:///...``, ``postgresql://...``, or a plain path)."""
    try:
        if must_exist and not is_postgres(url) and not Path(sqlite_path(url)).is_file():
            raise BadInput(f"{url}: no such store")
        return open_store(url, on_boundary)
    except JournalError as exc:
        raise BadInput(str(exc)) from None


def _open_run_store(args: argparse.Namespace) -> Store:
    """The run's store; ``--kill-at N`` (tests) SIGKILLs this process at its Nth write boundary."""
    if args.decide and not args.resume:
        raise BadInput("--decide needs --resume")
    boundary: Boundary | None = None
    if args.kill_at is not None:
        points = iter(range(1, args.kill_at + 1))

        def boundary(phase: str, label: str) -> None:
            if next(points, None) == args.kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
    return _open_store(args.store, args.resume, boundary)


def _decisions(items: list[str]) -> dict[str, str]:
    decisions: dict[str, str] = {}
    for item in items:
        id, sep, decision = item.rpartition("=")
        if not sep or not id or decision not in ("completed", "failed", "rerun", "continue"):
            raise BadInput(f"--decide {item!r}: expected ID=completed, ID=failed, ID=rerun or ID=continue")
        decisions[id] = decision
    return decisions


@contextlib.contextmanager
def _journal_errors(args: argparse.Namespace) -> Iterator[None]:
    """Opening a run: a run that exists (or not) is bad input; a journal that fails is a failure."""
    try:
        yield
    except RunExists:
        raise BadInput(f"{args.store}: run {args.run_id!r} exists; continue it with --resume") from None
    except UnknownRun:
        raise BadInput(f"{args.store}: no run {args.run_id!r} to resume") from None
    except JournalError as exc:
        raise RunFailed(str(exc)) from None


class RunFailed(Exception):
    """The journal could not be read or written (corrupt, torn): reported, exit 1."""


def run_durable_agent(table: Table, script: AgentScript, args: argparse.Namespace, reporter: Reporter,
                      workdir: Path, model: LlmClient | None) -> int:
    """Play an agent script through a durable run of the async driver; ``--resume`` recovers it first."""
    store = _open_run_store(args)
    durable = Durability(store, args.run_id, args.resume, _decisions(args.decide))
    try:
        with _journal_errors(args):
            return asyncio.run(play_agent(table, script, workdir, reporter, args.timeout, model, durable))
    except RunFailed as exc:
        reporter.note("error", str(exc))
        return EXIT_FAILED
    except DecisionError as exc:
        raise BadInput(str(exc)) from None
    finally:
        store.close()


def run_durable(table: Table, script: EventScript, args: argparse.Namespace, reporter: Reporter) -> int:
    """Deliver an event script through a durable run; with ``--resume`` recover it first."""
    store = _open_run_store(args)
    tools = _tools(table, ReceiptTool(reporter))
    try:
        with _journal_errors(args):
            if args.resume:
                run = DurableRun.open(store, table, args.run_id, tools)
                reporter.note("resume", f"run {args.run_id} recovered at version {run.version} in {run.state}")
                for id, answer in _decisions(args.decide).items():
                    run.decide(id, answer)
            else:
                run = DurableRun.create(store, table, args.run_id, tools)
    except RunFailed as exc:
        reporter.note("error", str(exc))
        return EXIT_FAILED
    except DecisionError as exc:
        raise BadInput(str(exc)) from None
    for seq, (event, params) in enumerate(script.events, 1):
        previous = run.state
        try:
            delivery = run.deliver(event, params, event_id=f"script-{seq}")
        except ValueError as exc:
            reporter.note("error", f"event {seq}: {exc}")
            return EXIT_FAILED
        if delivery.status == "duplicate":
            continue
        if delivery.status == "halted":
            reporter.note("halted", f"event {seq} not applied: an anomaly stopped automatic progress")
            break
        reporter.step(StateChange(delivery.seq, previous, delivery.state, event, dict(params), delivery.accepted,
                                  delivery.status, delivery.actions, run.vars))
    pending = report_decisions(run, reporter)
    # "blocked", as a worker calls the same run: it waits for a user decision, it is not done.
    final = table.states[table.state_index[run.state]].final
    reporter.note("blocked" if pending else "done", f"{'final state' if final else 'state'} {run.state}, "
                  f"version {run.version}, {len(run.decisions())} decision(s) pending")
    store.close()
    return EXIT_FAILED if pending else EXIT_OK


def _table_for(machine: str, path: str | None) -> Table | None:
    if path is not None:
        [table] = load_tables([path])
        return table
    for candidate in bundled_tables():
        table = load_table(candidate)
        if table.machine == machine:
            return table
    return None


def describe(record: Record) -> str:
    b = record.body
    if record.kind == "step":
        prev, nxt = b["prev"], b["next"]
        params = f"({', '.join(f'{k}={json.dumps(v)}' for k, v in b['params'].items())})" if b["params"] else ""
        return (f"{prev['state']} {json.dumps(prev['vars'])} --{b['event']}{params}--> {nxt['state']} "
                f"{json.dumps(nxt['vars'])} [{' '.join(b['actions']) or '-'}] {b['reason']}")
    if record.kind == "created":
        return f"{b['machine']} in {b['config']['state']} {json.dumps(b['config']['vars'])}"
    if record.kind in ("anomaly", "stale"):
        return f"{b['event']} in {b['state']}: {b['reason']}"
    return " ".join(f"{k}={json.dumps(v)}" for k, v in sorted(b.items()))


def run_journal(args: argparse.Namespace) -> int:
    if args.path is not None:
        if args.store is not None:
            raise BadInput("give the store once: --store URL")
        deprecated("journal URL", "journal --store URL")
    url = args.store or args.path
    if url is None:
        raise BadInput("journal needs --store URL")
    store = _open_store(url, must_exist=True)
    runs = store.runs() if args.run_id is None else [args.run_id]
    status = EXIT_OK
    out: list[dict[str, JSON]] = []
    for run_id in runs:
        try:
            machine = store.machine(run_id)
        except UnknownRun as exc:
            raise BadInput(str(exc)) from None
        entry: dict[str, JSON] = {"run_id": run_id, "machine": machine}
        try:
            records = store.records(run_id)
            entry["records"] = [r.to_json() for r in records]
            table = _table_for(machine, args.table)
            if table is not None:
                run = DurableRun.attach(store, table, run_id, _tools(table, _ViewOnly()))
                entry["current"] = run.st.to_json(table)
                entry["decisions"] = [{"kind": d.kind, "id": d.id, "message": d.message} for d in run.decisions()]
        except (CorruptJournal, JournalError) as exc:
            entry["error"] = str(exc)
            status = EXIT_FAILED
            records = []
        out.append(entry)
        if not args.json:
            _print_run(entry, records)
    if args.json:
        print(json.dumps({"ok": status == EXIT_OK, "runs": out}, indent=2))
    store.close()
    return status


def _print_run(entry: dict[str, JSON], records: list[Record]) -> None:
    print(f"run {entry['run_id']} ({entry['machine']})")
    for record in records:
        print(f"  {record.seq:4d}  {record.kind:<16} {describe(record)}")
    if "error" in entry:
        print(f"  error: {entry['error']}")
        return
    current = entry.get("current")
    if isinstance(current, dict):
        print(f"  now: {current['state']} {json.dumps(current['vars'])} at version {current['version']}")
        for effect in current["effects"]:
            if effect["status"] not in ("completed",):
                print(f"  effect {effect['key']} ({effect['action']}): {effect['status']}")
        for approval in current["approvals"]:
            print(f"  pending approval {approval['id']} ({approval['action']})")
    for decision in entry.get("decisions") or []:
        print(f"  decision needed: {decision['message']}")
