"""``agentfsm verify``, ``agentfsm replay`` and ``agentfsm export``."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from agentfsm.spec import Table
from agentfsm.verify.checks import Verdict, run_checks
from agentfsm.verify.explore import explore
from agentfsm.verify.progress import Progress
from agentfsm.verify.promela import export_promela
from agentfsm.verify.report import json_report, junit_report, summary_line, text_report
from agentfsm.verify.trace import TraceError, format_trace, load_trace

from agentfsm.cliutil import EXIT_FAILED, EXIT_OK, BadInput, add_set_option, deprecated, load_tables


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "verify", help="explore every reachable configuration and run the named checks",
        description="Explore every reachable configuration of each table under every event and parameter value, "
                    "run the checks (determinism, bounds, invariants, deadlock, transient, unreachable-state, "
                    "dead-row, always-reachable, no-cycle-within) and print shortest counterexamples. "
                    "Exit 0 when every check holds, 1 when one fails, 2 on bad input.")
    parser.add_argument("tables", nargs="+", metavar="TABLE")
    add_set_option(parser)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the summary")
    parser.add_argument("--junit", metavar="FILE", help="also write a JUnit XML report to FILE")
    parser.add_argument("--trace-out", metavar="FILE",
                        help="write the first failing check's counterexample as a trace (for replay and diagrams)")
    parser.add_argument("--verbose", action="store_true",
                        help="list every unhandled (state, event) pair, not only the first few")
    parser.add_argument("--summary", action="store_true",
                        help="one line per table; the full report only for a table whose checks fail")
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
    parser.add_argument("--format", choices=("promela",), help="the output language: promela (Spin)")
    parser.add_argument("--promela", action="store_true", help="deprecated spelling of --format promela")
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
    tables = load_tables(args.tables, args.overrides)
    verdicts, seconds = [], []
    for table in tables:
        verdict, elapsed = verify_table(table)
        verdicts.append(verdict)
        seconds.append(elapsed)
        if args.summary and verdict.ok and not args.json:
            print(summary_line(verdict, elapsed), flush=True)
        elif not args.json:
            print("\n".join(text_report(verdict, elapsed, args.verbose)), flush=True)
    if args.json:
        print(json.dumps(json_report(verdicts), indent=2))
    if args.junit:
        _write(args.junit, junit_report(verdicts, seconds))
    if args.trace_out:
        failing = [c.trace for v in verdicts for c in v.checks if not c.ok and c.trace is not None]
        if failing:
            _write(args.trace_out, (json.dumps(failing[0].to_json(), indent=2) + "\n").encode())
        elif not args.json:
            print(f"no counterexample to write to {args.trace_out}", file=sys.stderr)
    return EXIT_OK if all(v.ok for v in verdicts) else EXIT_FAILED


def _write(path: str, data: bytes) -> None:
    try:
        Path(path).write_bytes(data)
    except OSError as exc:
        raise BadInput(f"cannot write {path}: {exc.strerror}") from None


def run_replay(args: argparse.Namespace) -> int:
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
    if args.promela:
        deprecated("export --promela", "export --format promela")
    elif args.format is None:
        raise BadInput("export needs --format promela (the only format so far)")
    [table] = load_tables([args.table], args.overrides)
    sys.stdout.write(export_promela(table))
    return EXIT_OK
