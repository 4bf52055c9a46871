"""``agentfsm verify``, ``agentfsm replay`` and ``agentfsm export``."""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

from agentfsm.spec import Table, TableError, load_table
from agentfsm.spec.suggest import did_you_mean
from agentfsm.spec.system_load import is_system_file
from agentfsm.verify.checks import KINDS, Verdict, run_checks
from agentfsm.verify.explore import ExplorationLimit, explore
from agentfsm.verify.junit import junit_xml
from agentfsm.verify.progress import Progress
from agentfsm.verify.promela import PromelaLimit, export_promela
from agentfsm.verify.replay import print_violations, violations
from agentfsm.verify.report import Unverified, json_report, junit_suites, summary_line, text_report
from agentfsm.verify.system_checks import SysVerdict
from agentfsm.verify.system_commands import junit_suite as system_junit_suite
from agentfsm.verify.system_commands import (
    load_systems,
    run_replay_system,
    split_systems,
    trace_json_text,
    verdict_json,
    verify_system,
)
from agentfsm.verify.system_commands import text_report as system_text_report
from agentfsm.verify.system_promela import ExportError, export_system_promela
from agentfsm.verify.trace import Trace, TraceError, format_trace, load_trace

from agentfsm.cliutil import (
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_OK,
    BadInput,
    add_set_option,
    deprecated,
    load_tables,
    overrides_by_table,
    parse_overrides,
)


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
    parser.add_argument("--trace-out", metavar="FILE|DIR",
                        help="write counterexamples as traces (for replay and diagrams): into a directory (an "
                             "existing one, or a path ending in '/'), one file per failing check; into FILE, the "
                             "check --check names, or else the first failing one")
    parser.add_argument("--check", metavar="NAME",
                        help="with --trace-out FILE: the check whose counterexample to write (a property or "
                             "invariant name, or a kind such as deadlock)")
    parser.add_argument("--max-configurations", type=_positive, metavar="N",
                        help="stop (exit 2) once more than N configurations are found, saying how far it got")
    parser.add_argument("--verbose", action="store_true",
                        help="list every unhandled (state, event) pair, not only the first few")
    parser.add_argument("--summary", action="store_true",
                        help="one line per table or system; the full report only where checks fail")
    parser.add_argument("--no-symmetry", dest="symmetry", action="store_false",
                        help="systems: explore every permutation of identical instances (no symmetry reduction)")
    parser.add_argument("--no-por", dest="por", action="store_false",
                        help="systems: expand every step (no partial-order reduction; it is used only for "
                             "systems without always-reachable or no-cycle-within properties)")
    parser.set_defaults(func=run_verify)

    parser = sub.add_parser("replay", help="step through a counterexample trace",
                            description="Replay a trace written by 'verify --trace-out' against the table, "
                                        "printing each configuration and the actions emitted. Exit 1 when the "
                                        "trace still violates a check (a step raises, an invariant is false, it "
                                        "ends in a deadlock, or it is a counterexample of its own property), "
                                        "0 when it shows no violation, 2 on bad input.")
    parser.add_argument("table", metavar="TABLE")
    parser.add_argument("trace", metavar="TRACE")
    add_set_option(parser)
    parser.set_defaults(func=run_replay)

    parser = sub.add_parser("export", help="export a table to another model checker's language",
                            description="Print the table as a Promela model for Spin (reachable configurations "
                                        "and invariant assertions match the verifier's). Exit 0, 2 on bad input.")
    parser.add_argument("--format", choices=("promela",), help="the output language: promela (Spin)")
    parser.add_argument("--promela", action="store_true", help="deprecated spelling of --format promela")
    parser.add_argument("table", metavar="TABLE")
    add_set_option(parser)
    parser.set_defaults(func=run_export)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def verify_table(table: Table, progress: bool = True, max_configurations: int | None = None) -> tuple[Verdict, float]:
    """Explore and check one table; raise ExplorationLimit when it stops early (the limit,
    or memory running out while exploring or checking)."""
    meter = Progress(f"exploring {table.machine}") if progress else None
    start = time.perf_counter()
    try:
        ex = explore(table, meter, max_configurations)
    finally:
        if meter is not None:
            meter.done()
    try:
        verdict = run_checks(ex)
    except MemoryError:
        count, transitions, depth = ex.count, ex.transitions, ex.reached[2]
        del ex
        raise ExplorationLimit("out of memory while checking", count, transitions, depth) from None
    return verdict, time.perf_counter() - start


def narrowing_hint(table: Table) -> str:
    """How to make the space smaller: the constants to lower, the widest ranges."""
    ranges = sorted((v for v in table.variables if v.type == "int"), key=lambda v: v.lo - v.hi)[:3]
    widest = ", ".join(f"{v.name} {v.lo}..{v.hi}" for v in ranges)
    constants = ", ".join(f"{k}={v}" for k, v in table.constants.items() if not isinstance(v, bool))
    hint = "narrow the bounds with --set NAME=VALUE"
    if constants:
        hint += f" (constants: {constants})"
    if widest:
        hint += f"; the widest ranges: {widest}"
    return hint


def limit_message(table: Table, stop: ExplorationLimit) -> str:
    return (f"{table.file}: {table.machine}: exploration stopped, {stop.reason}: {stop.configurations:,} "
            f"configurations and {stop.transitions:,} transitions explored, to breadth-first depth {stop.depth}; "
            f"{narrowing_hint(table)}")


def run_verify(args: argparse.Namespace) -> int:
    if args.check and not args.trace_out:
        raise BadInput(f"--check {args.check}: --check goes with --trace-out FILE (the check whose "
                       "counterexample to write)")
    table_paths, system_paths = split_systems(args.tables)
    systems = load_systems(system_paths)
    per_table = overrides_by_table(table_paths, parse_overrides(args.overrides))
    results: list[Verdict | Unverified] = []
    seconds: list[float] = []
    for path in table_paths:
        start = time.perf_counter()
        try:
            table = load_table(path, per_table[path])
        except TableError as exc:
            for diagnostic in exc.diagnostics:
                print(diagnostic, file=sys.stderr)
            results.append(Unverified(path, None, "load", "\n".join(map(str, exc.diagnostics))))
            seconds.append(time.perf_counter() - start)
            continue
        try:
            verdict, elapsed = verify_table(table, max_configurations=args.max_configurations)
        except ExplorationLimit as stop:
            message = limit_message(table, stop)
            print(f"agentfsm: error: {message}", file=sys.stderr)
            results.append(Unverified(table.file, table.machine, "limit", message))
            seconds.append(time.perf_counter() - start)
            continue
        results.append(verdict)
        seconds.append(elapsed)
        if args.summary and verdict.ok and not args.json:
            print(summary_line(verdict, elapsed), flush=True)
        elif not args.json:
            print("\n".join(text_report(verdict, elapsed, args.verbose)), flush=True)
    system_verdicts = []
    for system in systems:
        system_verdict = verify_system(system, args.symmetry, args.por)
        system_verdicts.append(system_verdict)
        if not args.json:
            lines = system_text_report(system_verdict)
            print("\n".join(lines[:1] if args.summary and system_verdict.ok else lines), flush=True)
    if args.json:
        report = json_report(results)
        if system_verdicts:
            report["systems"] = [verdict_json(v) for v in system_verdicts]
            report["ok"] = report["ok"] and all(v.ok for v in system_verdicts)
        print(json.dumps(report, indent=2))
    if args.junit:
        suites = junit_suites(results, seconds) + [system_junit_suite(v) for v in system_verdicts]
        _write(args.junit, junit_xml("verify", suites))
    verdicts = [r for r in results if isinstance(r, Verdict)]
    if args.trace_out:
        _write_traces(args, verdicts, system_verdicts)
    if any(isinstance(r, Unverified) for r in results):
        return EXIT_BAD_INPUT
    ok = all(v.ok for v in verdicts) and all(v.ok for v in system_verdicts)
    return EXIT_OK if ok else EXIT_FAILED


def _write_traces(args: argparse.Namespace, verdicts: list[Verdict], system_verdicts: list[SysVerdict]) -> None:
    """Tables' counterexamples first, then systems': every one into a directory, or one into a file."""
    failing = [(v.table.machine, c.kind, c.name, _trace_bytes(c.trace))
               for v in verdicts for c in v.checks if not c.ok and c.trace is not None]
    failing += [(v.system.name, c.kind, c.name, trace_json_text(v.system, c.trace))
                for v in system_verdicts for c in v.checks if not c.ok and c.trace is not None]
    target = Path(args.trace_out)
    if args.trace_out.endswith(("/", "\\")) or target.is_dir():
        if args.check:
            raise BadInput("--check picks one trace for --trace-out FILE; a directory gets every failing check's")
        try:
            target.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise BadInput(f"cannot create {target}: {exc.strerror}") from None
        for machine, kind, name, data in failing:
            file_name = f"{machine}.{kind}" + (f".{name}" if name else "")
            _write(str(target / (re.sub(r"[^A-Za-z0-9_.-]", "_", file_name) + ".json")), data)
        if not failing and not args.json:
            print(f"no counterexample to write to {args.trace_out}", file=sys.stderr)
        return
    if args.check:
        known = ({c.name or c.kind for v in verdicts for c in v.checks}
                 | {c.name or c.kind for v in system_verdicts for c in v.checks} | set(KINDS))
        if args.check not in known:
            raise BadInput(f"--check {args.check}: no check of that name{did_you_mean(args.check, known)} "
                           f"(names: {', '.join(sorted(known))})")
        failing = [f for f in failing if args.check in (f[2], f[1])]
    if failing:
        _write(args.trace_out, failing[0][3])
    elif not args.json:
        which = f"check {args.check}" if args.check else "failing check"
        print(f"no counterexample to write to {args.trace_out} (no {which} has one)", file=sys.stderr)


def _trace_bytes(trace: Trace) -> bytes:
    return (json.dumps(trace.to_json(), indent=2) + "\n").encode()


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
    return print_violations(violations(table, trace))


def run_export(args: argparse.Namespace) -> int:
    if args.promela:
        deprecated("export --promela", "export --format promela")
    elif args.format is None:
        raise BadInput("export needs --format promela (the only format so far)")
    if is_system_file(args.table):
        [system] = load_systems([args.table])
        try:
            sys.stdout.write(export_system_promela(system))
        except ExportError as exc:
            raise BadInput(f"{args.table}: {exc}") from None
        return EXIT_OK
    [table] = load_tables([args.table], args.overrides)
    try:
        sys.stdout.write(export_promela(table))
    except PromelaLimit as exc:
        raise BadInput(f"{table.file}: cannot export to Promela: {exc}") from None
    return EXIT_OK
