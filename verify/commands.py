"""``agentfsm verify``, ``agentfsm replay`` and ``agentfsm export``."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from agentfsm.spec import Table
from agentfsm.spec.system_load import is_system_file
from agentfsm.verify.checks import Verdict, run_checks
from agentfsm.verify.explore import explore
from agentfsm.verify.progress import Progress
from agentfsm.verify.promela import export_promela
from agentfsm.verify.report import json_report, junit_report, text_report
from agentfsm.verify.system_commands import (
    first_trace,
    load_systems,
    run_replay_system,
    split_systems,
    trace_json_text,
    verdict_json,
    verify_system,
)
from agentfsm.verify.system_commands import text_report as system_text_report
from agentfsm.verify.system_promela import ExportError, export_system_promela
from agentfsm.verify.trace import TraceError, format_trace, load_trace

from agentfsm.cliutil import EXIT_FAILED, EXIT_OK, BadInput, add_set_option, load_tables


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "verify", help="explore every reachable configuration and run the named checks",
        description="Explore every reachable configuration of each table under every event and parameter value, "
                    "run the checks (determinism, bounds, invariants, deadlock, transient, unreachable-state, "
                    "dead-row, always-reachable, no-cycle-within) and print shortest counterexamples. "
                    "Exit 0 when every check holds, 1 when one fails, 2 on bad input.")
    parser.add_argument("tables", nargs="+", metavar="TABLE", help="a table or a system file")
    add_set_option(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the summary")
    parser.add_argument("--junit", metavar="FILE", help="also write a JUnit XML report to FILE")
    parser.add_argument("--trace-out", metavar="FILE",
                        help="write the first failing check's counterexample as a trace (for replay and diagrams)")
    parser.add_argument("--verbose", action="store_true", help="list every unhandled (state, event) pair")
    parser.add_argument("--no-symmetry", dest="symmetry", action="store_false",
                        help="systems: explore every permutation of identical instances (no symmetry reduction)")
    parser.set_defaults(func=run_verify)

    parser = sub.add_parser("replay", help="step through a counterexample trace",
                            description="Replay a trace written by 'verify --trace-out' against the table, "
                                        "printing each configuration and the actions emitted.")
    parser.add_argument("table", metavar="TABLE")
    parser.add_argument("trace", metavar="TRACE")
    add_set_option(parser)
    parser.set_defaults(func=run_replay)

    parser = sub.add_parser("export", help="export a table to another model checker's language",
                            description="Print the table as a Promela model for Spin (reachable configurations "
                                        "and invariant assertions match the verifier's).")
    parser.add_argument("--promela", action="store_true", required=True, help="Promela for Spin")
    parser.add_argument("table", metavar="TABLE")
    add_set_option(parser)
    parser.set_defaults(func=run_export)


def verify_table(table: Table, progress: bool = True) -> tuple[Verdict, float]:
    meter = Progress(f"exploring {table.machine}") if progress else None
    start = time.perf_counter()
    ex = explore(table, meter)
    if meter is not None:
        meter.done()
    verdict = run_checks(ex)
    return verdict, time.perf_counter() - start


def run_verify(args: argparse.Namespace) -> int:
    table_paths, system_paths = split_systems(args.tables)
    tables = load_tables(table_paths, args.overrides)
    systems = load_systems(system_paths)
    verdicts, seconds = [], []
    for table in tables:
        verdict, elapsed = verify_table(table)
        verdicts.append(verdict)
        seconds.append(elapsed)
        if not args.json:
            print("\n".join(text_report(verdict, elapsed, args.verbose)), flush=True)
    system_verdicts = []
    for system in systems:
        system_verdict = verify_system(system, args.symmetry)
        system_verdicts.append(system_verdict)
        if not args.json:
            print("\n".join(system_text_report(system_verdict)), flush=True)
    if args.json:
        report = json_report(verdicts)
        if system_verdicts:
            report["systems"] = [verdict_json(v) for v in system_verdicts]
            report["ok"] = report["ok"] and all(v.ok for v in system_verdicts)
        print(json.dumps(report, indent=2))
    if args.junit:
        _write(args.junit, junit_report(verdicts, seconds))
    if args.trace_out:
        failing = [c.trace for v in verdicts for c in v.checks if not c.ok and c.trace is not None]
        system_failing = first_trace(system_verdicts)
        if failing:
            _write(args.trace_out, (json.dumps(failing[0].to_json(), indent=2) + "\n").encode())
        elif system_failing is not None:
            _write(args.trace_out, trace_json_text(*system_failing))
        elif not args.json:
            print(f"no counterexample to write to {args.trace_out}", file=sys.stderr)
    ok = all(v.ok for v in verdicts) and all(v.ok for v in system_verdicts)
    return EXIT_OK if ok else EXIT_FAILED


def _write(path: str, data: bytes) -> None:
    try:
        Path(path).write_bytes(data)
    except OSError as exc:
        raise BadInput(f"cannot write {path}: {exc.strerror}") from None


def run_replay(args: argparse.Namespace) -> int:
    if is_system_file(args.table):
        return run_replay_system(args.table, args.trace)
    [table] = load_tables([args.table], args.overrides)
    try:
        text = Path(args.trace).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"cannot read {args.trace}: {exc}") from None
    try:
        trace = load_trace(table, text)
    except TraceError as exc:
        raise BadInput(f"{args.trace}: {exc}") from None
    title = f"{trace.kind} {trace.check}" if trace.check else (trace.kind or "trace")
    print(f"{table.machine}: replaying {title} ({len(trace.steps)} steps)")
    print("\n".join(format_trace(table, trace)))
    return EXIT_OK


def run_export(args: argparse.Namespace) -> int:
    if is_system_file(args.table):
        [system] = load_systems([args.table])
        try:
            sys.stdout.write(export_system_promela(system))
        except ExportError as exc:
            raise BadInput(f"{args.table}: {exc}") from None
        return EXIT_OK
    [table] = load_tables([args.table], args.overrides)
    sys.stdout.write(export_promela(table))
    return EXIT_OK
