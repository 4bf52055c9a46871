"""``agentfsm vectors | conform | mutants | audit``: the conformance kit's commands."""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import FrameType
from typing import BinaryIO, TextIO, TypeAlias

from agentfsm.cli.exits import EXIT_FAILED, EXIT_OK, BadInput
from agentfsm.cli.html_report import add_report_options, wanted, write_report
from agentfsm.cli.limits import reporting_limits
from agentfsm.cli.system_audit import run_system_audit
from agentfsm.cli.util import add_set_option, json_envelope, load_tables, split_systems
from agentfsm.diagrams.report_data import conform_entry
from agentfsm.spec.model import Table
from agentfsm.spec.suggest import did_you_mean
from agentfsm.spec.vectorfile import (
    Manifest,
    Vector,
    VectorError,
    read_vectors,
    vector_labels,
    write_vectors,
)
from agentfsm.verify.conformance import mutants as mutation
from agentfsm.verify.conformance import parallel
from agentfsm.verify.conformance import vectors as gen
from agentfsm.verify.conformance.audit import LogError, audit, format_audit, read_log
from agentfsm.verify.conformance.conform import format_report, junit_suite, report_json, row_coverage
from agentfsm.verify.conformance.guided import DEFAULT_BUDGET
from agentfsm.verify.conformance.harness import (
    AdapterDidNotStart,
    ProcessTransport,
    Transport,
    WithoutVars,
    kill_all,
    split_command,
)
from agentfsm.verify.junit import write_junit
from agentfsm.verify.system.audit import DEFAULT_LIMIT, DEFAULT_MAX_SILENT
from agentfsm.verify.table.explore import DEFAULT_MAX_CONFIGURATIONS, explore

Sub: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def register(sub: Sub) -> None:
    _register_vectors(sub)
    _register_conform(sub)
    _register_mutants(sub)
    _register_audit(sub)


def _one_table(args: argparse.Namespace) -> Table:
    [table] = load_tables([args.table], args.overrides)
    return table


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
    return value


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {text!r}")
    return value


def _sets(text: str) -> list[str]:
    names = [s.strip() for s in text.split(",") if s.strip()]
    unknown = [s for s in names if s not in gen.SETS]
    if unknown or not names:
        hint = did_you_mean(unknown[0], gen.SETS) if unknown else ""
        raise argparse.ArgumentTypeError(f"unknown coverage set {unknown[0] if unknown else text!r}{hint}; "
                                         f"choose from {', '.join(gen.SETS)}")
    return names


def _add_generation_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--max-configurations", type=_count, default=None, metavar="N",
                        help="stop when the exploration finds more than N configurations (exit 2; "
                             f"default {DEFAULT_MAX_CONFIGURATIONS:,})")
    parser.add_argument("--walks", type=_count, default=gen.DEFAULT_WALKS, metavar="N",
                        help=f"random walks to add (default {gen.DEFAULT_WALKS})")
    parser.add_argument("--seed", type=int, default=gen.DEFAULT_SEED, metavar="S",
                        help=f"seed of the random walks (default {gen.DEFAULT_SEED})")
    parser.add_argument("--walk-length", type=_count, default=gen.DEFAULT_WALK_LENGTH, metavar="L",
                        help=f"steps in each walk (default {gen.DEFAULT_WALK_LENGTH})")
    parser.add_argument("--sets", type=_sets, default=list(gen.DEFAULT_SETS), metavar="SET,...",
                        help=f"coverage sets to generate (default all: {','.join(gen.DEFAULT_SETS)})")
    parser.add_argument("--budget", type=_count, default=DEFAULT_BUDGET, metavar="STEPS",
                        help=f"steps the guided walks spend (default {DEFAULT_BUDGET})")
    parser.add_argument("--extra-states", type=_count, default=0, metavar="K",
                        help="extend the suffixes set for implementations with up to K more states than the "
                             "table: every event sequence of up to K events before the suffixes (the Wp method; "
                             "the count grows as events^K and is printed first)")


def _register_vectors(sub: Sub) -> None:
    parser = sub.add_parser(
        "vectors", help="generate conformance test vectors from a table",
        description="Write deterministic JSON Lines test vectors: a manifest line, then one vector per line. "
                    "Coverage sets: every row, every (reachable configuration, event) pair including "
                    "rejected ones, every pair of consecutive rows, seeded random walks, and every pair again "
                    "followed by suffixes that tell the configuration reached from its look-alikes. "
                    "See docs/conformance.md. Exit 0, 2 on bad input.")
    parser.add_argument("table", metavar="TABLE")
    parser.add_argument("-o", "--output", metavar="FILE", help="write here instead of standard output")
    _add_generation_options(parser)
    add_set_option(parser)
    parser.set_defaults(func=reporting_limits(run_vectors))


def _generate(args: argparse.Namespace, table: Table) -> tuple[Manifest, Sequence[Vector]]:
    manifest, vectors = gen.generate_extended(table, args.sets, args.walks, args.seed, args.walk_length,
                                              explore(table, None, args.max_configurations),
                                              budget=args.budget, extra_states=args.extra_states)
    if args.extra_states:
        print(f"{table.machine}: {len(vectors)} vectors, {vectors.extra_count} of them for up to "
              f"{args.extra_states} extra states", file=sys.stderr, flush=True)
    guided = manifest.sets.get("guided")
    if guided:
        reached = ", ".join(f"{kind} {count}" for kind, count in guided["reached"].items())
        print(f"{table.machine}: guided walks: {guided['steps']} steps in {guided['items']} walks reached "
              f"{reached}", file=sys.stderr)
    return manifest, vectors


def run_vectors(args: argparse.Namespace) -> int:
    table = _one_table(args)
    manifest, vectors = _generate(args, table)
    if args.output:
        try:
            with open(args.output, "w", encoding="utf-8") as out:
                write_vectors(out, manifest, vectors)
        except OSError as exc:
            raise BadInput(f"cannot write {args.output}: {exc.strerror}") from None
        sets = ", ".join(f"{name} {info['vectors']}" for name, info in manifest.sets.items())
        print(f"{args.output}: {manifest.vectors} vectors for {table.machine} ({sets})", file=sys.stderr)
    else:
        write_vectors(sys.stdout, manifest, vectors)
        sys.stdout.flush()
    for name, info in manifest.sets.items():
        if info.get("uncovered"):
            print(f"warning: {name}: no vector reaches {info['uncovered']} (dead?)", file=sys.stderr)
        if info.get("unspecified"):
            print(f"warning: {name}: {info['unspecified']} steps break the table's own rules and have no "
                  "expectation; run agentfsm verify", file=sys.stderr)
    return EXIT_OK


def _register_conform(sub: Sub) -> None:
    parser = sub.add_parser(
        "conform", help="run conformance vectors against an implementation's adapter",
        description="Start the adapter COMMAND (split into words, no shell unless --shell), speak the adapter "
                    "protocol of docs/conformance.md on its stdin/stdout, run every vector with a reset before "
                    "each, and compare accepted, state, actions and reported vars. Prints the shortest failing "
                    "vector step by step. Exit 0 when every vector passes, 1 otherwise, 2 on bad input (an adapter "
                    "that cannot start or exits before answering its first reset included).")
    parser.add_argument("table", metavar="TABLE")
    parser.add_argument("--adapter", required=True, metavar="COMMAND", help="the command that starts the adapter")
    parser.add_argument("--shell", action="store_true", help="run COMMAND with /bin/sh -c")
    parser.add_argument("--vectors", metavar="FILE", help="vectors to run (default: generate them now)")
    parser.add_argument("--timeout", type=_positive, default=5.0, metavar="S",
                        help="seconds to wait for each reply (default 5)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the text report")
    parser.add_argument("--junit", metavar="FILE", help="write a JUnit XML report")
    add_report_options(parser)
    parser.add_argument("--coverage-out", metavar="FILE",
                        help="write {machine, rows: {row index: times fired}} for the diagram overlay")
    parser.add_argument("--stop-at-first-failure", action="store_true", help="stop after the first failing vector")
    parser.add_argument("--max-failures", type=_count, default=None, metavar="N",
                        help="stop after N vectors did not pass (default: run every vector)")
    parser.add_argument("--no-vars", dest="with_vars", action="store_false",
                        help="ignore the vars the adapter reports, as if it reported none")
    parser.add_argument("--allow-not-implemented", action="store_true",
                        help="vectors answered {\"ok\": false} do not fail the run")
    parser.add_argument("--jobs", type=_jobs, default=_cpus(), metavar="N",
                        help="run the vectors on N adapter processes at once; the report is the one a single "
                             "process gives (default: the CPU count, here %(default)s)")
    _add_generation_options(parser)
    add_set_option(parser)
    parser.set_defaults(func=reporting_limits(run_conform))


def _cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _jobs(text: str) -> int:
    value = _count(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {text!r}")
    return value


def _load_vectors(args: argparse.Namespace, table: Table) -> Sequence[Vector]:
    if not args.vectors:
        return _generate(args, table)[1]
    try:
        manifest, vectors = read_vectors(args.vectors)
        for vector in vectors:
            if vector.machine != table.machine:
                raise VectorError(f"{args.vectors}: vector {vector.id} is for machine {vector.machine!r}, "
                                  f"not {table.machine!r}")
            vector_labels(table, vector)
    except VectorError as exc:
        raise BadInput(str(exc)) from None
    if manifest is not None and manifest.machine and manifest.machine != table.machine:
        raise BadInput(f"{args.vectors}: vectors are for machine {manifest.machine!r}, not {table.machine!r}")
    if not vectors:
        raise BadInput(f"{args.vectors}: no vectors")
    return vectors


def run_conform(args: argparse.Namespace) -> int:
    table = _one_table(args)
    vectors = _load_vectors(args, table)
    try:
        argv = split_command(args.adapter, args.shell)
    except ValueError as exc:
        raise BadInput(str(exc)) from None

    def connect() -> Transport:
        transport = ProcessTransport(argv, args.timeout)
        return transport if args.with_vars else WithoutVars(transport)

    if args.max_failures == 0:
        raise BadInput("--max-failures must be at least 1")
    with ending_adapters():
        try:
            report = parallel.run(table, connect, vectors, args.jobs, args.stop_at_first_failure,
                                  Progress(len(vectors), sys.stderr), args.max_failures, must_start=True,
                                  keep_passing=bool(args.coverage_out) or wanted(args), timed=bool(args.junit))
        except AdapterDidNotStart as exc:
            raise BadInput(f"{shlex.join(argv)}: {exc.describe()}") from None
    print(json.dumps(json_envelope("conform", report_json(report)), indent=1) if args.json else format_report(report))
    if args.junit:
        _write(args.junit, lambda out: write_junit(out, "conform", [junit_suite(report)]))
    write_report(args, "conform", [conform_entry(table, report)] if wanted(args) else [], [table])
    if args.coverage_out:
        coverage = {"machine": table.machine, "rows": row_coverage(table, report.results)}
        _write(args.coverage_out, (json.dumps(coverage, indent=1) + "\n").encode())
    passed = report.ok or (args.allow_not_implemented and not report.stopped
                           and all(r.status == "not-implemented" for r in report.not_passed()))
    return EXIT_OK if passed else EXIT_FAILED


@contextlib.contextmanager
def ending_adapters() -> Iterator[None]:
    """SIGTERM and SIGHUP end the harness as SIGINT does: by an exception, so the adapters are killed on the way out."""
    def stop(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(128 + signum)

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        kill_all()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


class Progress:
    """A one-line progress count on a terminal, at most a few times a second."""

    def __init__(self, total: int, stream: TextIO, what: str = "vectors") -> None:
        self.total = total
        self.what = what
        self.stream = stream
        self.shown = 0.0
        self.enabled = stream.isatty()

    def __call__(self, done: int) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self.shown > 0.25 or done == self.total:
            self.shown = now
            end = "\n" if done == self.total else ""
            of = f"/{self.total}" if self.total else ""
            self.stream.write(f"\r{done}{of} {self.what}{end}")
            self.stream.flush()


def _write(path: str | None, data: bytes | Callable[[BinaryIO], None]) -> None:
    """Write ``data`` (bytes, or a writer that makes them as it goes) to ``path``; one not writable is bad input."""
    if not path:
        return
    try:
        with open(path, "wb") as out:
            if isinstance(data, bytes):
                out.write(data)
            else:
                data(out)
    except OSError as exc:
        raise BadInput(f"cannot write {path}: {exc.strerror}") from None


def _register_mutants(sub: Sub) -> None:
    parser = sub.add_parser(
        "mutants", help="measure the vectors: run mutants of the table as implementations",
        description="Make mutants of the table (row dropped, target moved, guard negated, comparison bound off by "
                    "one, action swapped or dropped, a row's actions reordered, update dropped or changed, "
                    "unhandled policy flipped), check each for observational equivalence by a product "
                    "exploration, and run the others through the reference adapter against the original table's "
                    "vectors. Exit 0 when no mutant survives, 1 otherwise, 2 on bad input.")
    parser.add_argument("table", metavar="TABLE")
    parser.add_argument("--vectors", metavar="FILE", help="vectors to judge (default: generate them now)")
    parser.add_argument("--json", action="store_true",
                        help='print {"mutants", "killed", "equivalent", "survived", "survivors", ...}')
    parser.add_argument("--processes", action="store_true",
                        help="run each mutant as a real `agentfsm adapter` process (slower; default in-process)")
    parser.add_argument("--timeout", type=_positive, default=10.0, metavar="S",
                        help="seconds to wait for each reply with --processes (default 10)")
    parser.add_argument("--no-vars", dest="with_vars", action="store_false",
                        help="hide the mutants' vars, as an implementation that does not report them; "
                             "equivalence then compares only accepted, state and actions")
    parser.add_argument("-v", "--verbose", action="store_true", help="list every mutant with its verdict")
    _add_generation_options(parser)
    add_set_option(parser)
    parser.set_defaults(func=reporting_limits(run_mutants_command))


def run_mutants_command(args: argparse.Namespace) -> int:
    table = _one_table(args)
    vectors = _load_vectors(args, table)
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="agentfsm-mutants-") as workdir:
        connect = mutation.reference_process(Path(workdir), args.timeout) if args.processes else mutation.reference
        results = mutation.run_mutants(table, vectors, connect, Progress(0, sys.stderr, "mutants"), args.with_vars)
    seconds = time.monotonic() - start
    data = mutation.summary(results, args.with_vars)
    if args.json:
        print(json.dumps(json_envelope("mutants", data)))
    else:
        for result in results:
            if args.verbose or result.verdict == "survived":
                detail = f" ({result.detail})" if result.detail else ""
                print(f"{result.verdict:<10} {result.name}{detail}")
        hidden = "" if args.with_vars else " (vars hidden)"
        print(f"mutants {table.machine}{hidden}: {data['mutants']} mutants against {len(vectors)} vectors: "
              f"{data['killed']} killed, {data['equivalent']} equivalent, {data['survived']} survived; "
              f"score {data['score']:.1%} ({seconds:.2f} s)")
    return EXIT_OK if not data["survived"] else EXIT_FAILED


def _register_audit(sub: Sub) -> None:
    parser = sub.add_parser(
        "audit", help="check a recorded JSON Lines log of steps against a table",
        description="Observational conformance: replay a log of {event, params, state, actions[, accepted, vars]} "
                    "steps ({\"reset\": true} starts a new session; the output of run --json is read as it is) "
                    "through the table and report, for each session that parts from it, the first step where it "
                    "does. Given a system, check that some interleaving of its steps explains the logs of its "
                    "processes (one per process as INSTANCE=FILE, or one naming each record's instance; "
                    "docs/systems.md), or the durable runtime's own protocol logs (FILE.protocol.jsonl beside a "
                    "SQLite store, the state folder's file for PostgreSQL or a Temporal server's workers, audited "
                    "against temporal-run.yaml), one effect's window at a time through audit/NAME-runtime.yaml "
                    "beside the system (docs/durability.md, docs/temporal.md). Exit 0 when the log follows "
                    "the table, 1 when it does not, 2 on bad input.")
    parser.add_argument("table", metavar="TABLE|SYSTEM")
    parser.add_argument("log", metavar="LOG", nargs="+")
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.add_argument("--mapping", metavar="FILE",
                        help="a system's audit mapping (default: audit/NAME.yaml in the system's folder, when there, "
                             "or for a runtime's protocol log audit/NAME-runtime.yaml; none: the records are steps as "
                             "they are)")
    parser.add_argument("--max-silent", type=int, default=DEFAULT_MAX_SILENT, metavar="N",
                        help=f"unlogged steps searched between two records (default {DEFAULT_MAX_SILENT})")
    parser.add_argument("--max-configurations", type=int, default=DEFAULT_LIMIT, metavar="N",
                        help=f"configurations searched at one position of the logs (default {DEFAULT_LIMIT:,})")
    parser.add_argument("--chart", metavar="FILE.svg|FILE.mmd",
                        help="a system's logs that part from it: draw the explained prefix as a sequence chart")
    add_set_option(parser)
    parser.set_defaults(func=reporting_limits(run_audit))


def run_audit(args: argparse.Namespace) -> int:
    _, systems, parsed = split_systems([args.table])
    if systems:
        return run_system_audit(args, args.table, parsed)
    if len(args.log) != 1 or args.mapping or args.chart:
        raise BadInput("a table's audit reads one log (several logs, --mapping and --chart are for a system)")
    args.log = args.log[0]
    table = _one_table(args)
    try:
        result = audit(table, read_log(args.log))
    except LogError as exc:
        raise BadInput(str(exc)) from None
    if args.json:
        d = result.divergence
        print(json.dumps(json_envelope("audit", {"machine": table.machine, "steps": result.steps, "runs": result.runs,
                          "ok": d is None, "line": d.record.line if d else None,
                          "problems": list(d.problems) if d else [],
                          "diverging": [{"line": x.record.line, "session_line": x.run_start, "step": x.run_steps,
                                         "problems": list(x.problems)} for x in result.divergences]})))
    else:
        print(format_audit(table, args.log, result))
    return EXIT_OK if result.divergence is None else EXIT_FAILED
