"""``agentfsm verify``, ``agentfsm replay`` and ``agentfsm export``."""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

from agentfsm.cli.exits import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, BadInput
from agentfsm.cli.html_report import add_report_options, wanted, write_report
from agentfsm.cli.limits import reporting_limits
from agentfsm.cli.systems import junit_suite as system_junit_suite
from agentfsm.cli.systems import (
    load_or_unverified,
    run_replay_system,
    trace_json_text,
    unverified_json,
    unverified_suite,
    verdict_json,
)
from agentfsm.cli.systems import text_report as system_text_report
from agentfsm.cli.util import (
    add_set_option,
    deprecated,
    json_envelope,
    load_systems,
    load_tables,
    overrides_by_table,
    parse_overrides,
    print_violations,
    split_systems,
)
from agentfsm.spec import Table, TableError, load_table
from agentfsm.spec.files import Parsed, parsed_document
from agentfsm.spec.suggest import did_you_mean
from agentfsm.spec.trace import Trace, TraceError, format_trace, load_trace
from agentfsm.verify.junit import junit_xml
from agentfsm.verify.progress import Progress
from agentfsm.verify.report import Unverified, json_report, junit_suites, summary_line, text_report
from agentfsm.verify.spin.promela import PromelaLimit, export_promela
from agentfsm.verify.spin.system_promela import ExportError, export_system_promela
from agentfsm.verify.system.checks import SysVerdict
from agentfsm.verify.system.verify import verify_system
from agentfsm.verify.table.checks import KINDS, Verdict
from agentfsm.verify.table.explore import DEFAULT_MAX_CONFIGURATIONS, DEFAULT_NOTE, ExplorationLimit
from agentfsm.verify.table.replay import violations
from agentfsm.verify.table.verify import verify_table

# What stops an exploration nobody bounded: a few GB at most (docs/verifier.md, "Resource limits").
DEFAULT_MAX_SYSTEM_CONFIGURATIONS = 1_000_000


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
    add_report_options(parser)
    parser.add_argument("--trace-out", metavar="FILE|DIR",
                        help="write counterexamples as traces (for replay and diagrams): into a directory (an "
                             "existing one, or a path ending in '/'), one file per failing check; into FILE, the "
                             "check --check names, or else the first failing one")
    parser.add_argument("--check", metavar="NAME",
                        help="with --trace-out FILE: the check whose counterexample to write (a property or "
                             "invariant name, or a kind such as deadlock)")
    parser.add_argument("--max-configurations", type=_positive, metavar="N",
                        help="stop (exit 2) once more than N configurations are found, saying how far it got "
                             f"(default {DEFAULT_MAX_CONFIGURATIONS:,} for a table, "
                             f"{DEFAULT_MAX_SYSTEM_CONFIGURATIONS:,} for a system)")
    parser.add_argument("--verbose", action="store_true",
                        help="list every unhandled (state, event) pair, not only the first few")
    parser.add_argument("--summary", action="store_true",
                        help="one line per table or system; the full report only where checks fail")
    parser.add_argument("--no-symmetry", dest="symmetry", action="store_false",
                        help="systems: explore every permutation of identical instances (no symmetry reduction)")
    parser.add_argument("--no-por", dest="por", action="store_false",
                        help="systems: expand every step (no partial-order reduction; it is used only for "
                             "systems without always-reachable or no-cycle-within properties)")
    parser.set_defaults(func=reporting_limits(run_verify))

    parser = sub.add_parser("replay", help="step through a counterexample trace",
                            description="Replay a trace written by 'verify --trace-out' against the table, "
                                        "printing each configuration and the actions emitted. Exit 1 when the "
                                        "trace still violates a check (a step raises, an invariant is false, it "
                                        "ends in a deadlock, or it is a counterexample of its own property), "
                                        "0 when it shows no violation, 2 on bad input.")
    parser.add_argument("table", metavar="TABLE")
    parser.add_argument("trace", metavar="TRACE")
    add_set_option(parser)
    parser.set_defaults(func=reporting_limits(run_replay))

    parser = sub.add_parser("export", help="export a table to another model checker's language",
                            description="Print the table as a Promela model for Spin (reachable configurations "
                                        "and invariant assertions match the verifier's). Exit 0, 2 on bad input.")
    parser.add_argument("--format", choices=("promela",), help="the output language: promela (Spin)")
    parser.add_argument("--promela", action="store_true", help="deprecated spelling of --format promela")
    parser.add_argument("table", metavar="TABLE")
    add_set_option(parser)
    parser.set_defaults(func=reporting_limits(run_export))


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


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


def limit_message(table: Table, stop: ExplorationLimit, default: int | None = None) -> str:
    """Where a table's exploration stopped; ``default``: the limit it passed was the default one."""
    return (f"{table.file}: {table.machine}: exploration stopped, {_reason(stop, default)}: "
            f"{stop.configurations:,} configurations and {stop.transitions:,} transitions explored, to "
            f"breadth-first depth {stop.depth}; {narrowing_hint(table)}")


def _reason(stop: ExplorationLimit, default: int | None) -> str:
    if default is None:
        return stop.reason
    return stop.reason.replace(f"(--max-configurations {default})", f"({DEFAULT_NOTE})")


def _limit(args: argparse.Namespace, default: int) -> tuple[int, int | None]:
    """(the limit, the default when it is the one in force)."""
    given: int | None = args.max_configurations
    return (given, None) if given is not None else (default, default)


def run_verify(args: argparse.Namespace) -> int:
    if args.check and not args.trace_out:
        raise BadInput(f"--check {args.check}: --check goes with --trace-out FILE (the check whose "
                       "counterexample to write)")
    table_paths, system_paths, parsed = split_systems(args.tables)
    per_table = overrides_by_table(table_paths, parse_overrides(args.overrides), parsed)
    table_limit, table_default = _limit(args, DEFAULT_MAX_CONFIGURATIONS)
    results: list[Verdict | Unverified] = []
    seconds: list[float] = []
    for path in table_paths:
        start = time.perf_counter()
        try:
            table = load_table(path, per_table[path], parsed_document(parsed, path))
        except TableError as exc:
            for diagnostic in exc.diagnostics:
                print(diagnostic, file=sys.stderr)
            results.append(Unverified(path, None, "load", "\n".join(map(str, exc.diagnostics))))
            seconds.append(time.perf_counter() - start)
            continue
        try:
            verdict, elapsed = verify_table(table, Progress(f"exploring {table.machine}"), table_limit)
        except ExplorationLimit as stop:
            message = limit_message(table, stop, table_default)
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
    system_results = [_verify_system_file(args, path, parsed) for path in system_paths]
    system_verdicts = [r for r, _ in system_results if isinstance(r, SysVerdict)]
    if args.json:
        report = json_envelope("verify", json_report(results))
        if system_results:
            report["systems"] = [verdict_json(r) if isinstance(r, SysVerdict) else unverified_json(r)
                                 for r, _ in system_results]
            report["ok"] = report["ok"] and all(isinstance(r, SysVerdict) and r.ok for r, _ in system_results)
        print(json.dumps(report, indent=2))
    if args.junit:
        suites = junit_suites(results, seconds) + [
            system_junit_suite(r) if isinstance(r, SysVerdict) else unverified_suite(r, took)
            for r, took in system_results]
        _write(args.junit, junit_xml("verify", suites))
    verdicts = [r for r in results if isinstance(r, Verdict)]
    if wanted(args):
        _write_report(args, results, [r for r, _ in system_results])
    if args.trace_out:
        _write_traces(args, verdicts, system_verdicts)
    if any(isinstance(r, Unverified) for r in results) or len(system_verdicts) < len(system_results):
        return EXIT_BAD_INPUT
    ok = all(v.ok for v in verdicts) and all(v.ok for v in system_verdicts)
    return EXIT_OK if ok else EXIT_FAILED


def _verify_system_file(args: argparse.Namespace, path: str, parsed: Parsed) -> tuple[SysVerdict | Unverified, float]:
    """One system file verified and its report printed, or why it was not (load, limit); the seconds."""
    start = time.perf_counter()
    system = load_or_unverified(path, parsed)
    if isinstance(system, Unverified):
        return system, time.perf_counter() - start
    limit, default = _limit(args, DEFAULT_MAX_SYSTEM_CONFIGURATIONS)
    try:
        verdict = verify_system(system, args.symmetry, args.por, limit)
    except ExplorationLimit as stop:
        message = (f"{system.file}: {system.name}: exploration stopped, {_reason(stop, default)}: "
                   f"{stop.configurations:,} configurations and {stop.transitions:,} steps explored, to "
                   f"breadth-first depth {stop.depth}")
        print(f"agentfsm: error: {message}", file=sys.stderr)
        return Unverified(system.file, system.name, "limit", message), time.perf_counter() - start
    if not args.json:
        lines = system_text_report(verdict)
        print("\n".join(lines[:1] if args.summary and verdict.ok else lines), flush=True)
    return verdict, verdict.exploration.seconds


def _write_report(args: argparse.Namespace, results: list[Verdict | Unverified],
                  systems: list[SysVerdict | Unverified]) -> None:
    """``--html`` and ``--summary-md``; the diagrams' modules are imported here, as most runs write neither."""
    from agentfsm.diagrams.report_data import system_entry, table_entry, unverified_entry

    entries = [table_entry(r) if isinstance(r, Verdict) else unverified_entry(r) for r in results]
    entries += [system_entry(r) if isinstance(r, SysVerdict) else unverified_entry(r, "system") for r in systems]
    write_report(args, "verify", entries, [r.table for r in results if isinstance(r, Verdict)])


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
    _, systems, parsed = split_systems([args.table])
    if systems:
        return run_replay_system(args.table, args.trace, parsed)
    [table] = load_tables([args.table], args.overrides, parsed)
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
    _, systems, parsed = split_systems([args.table])
    if systems:
        [system] = load_systems(systems, parsed)
        try:
            sys.stdout.write(export_system_promela(system))
        except ExportError as exc:
            raise BadInput(f"{args.table}: {exc}") from None
        return EXIT_OK
    [table] = load_tables([args.table], args.overrides, parsed)
    try:
        sys.stdout.write(export_promela(table))
    except PromelaLimit as exc:
        raise BadInput(f"{table.file}: cannot export to Promela: {exc}") from None
    return EXIT_OK
