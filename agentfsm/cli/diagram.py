"""``agentfsm diagram``: draw tables as SVG, PNG, DOT or Mermaid, with overlays."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from agentfsm.cli.exits import EXIT_OK, BadInput
from agentfsm.cli.limits import reporting_limits
from agentfsm.cli.systems import load_trace_file
from agentfsm.cli.util import add_set_option, load_systems, load_tables, split_systems
from agentfsm.diagrams.explored import ConfigGraph, TooLarge, config_graph
from agentfsm.diagrams.model import Diagram, build
from agentfsm.diagrams.output import FORMATS, SUFFIXES, committed_pictures, committed_system_pictures, picture
from agentfsm.diagrams.overlay import OverlayError, coverage_overlay, trace_overlay
from agentfsm.diagrams.render import RenderError, run_dot, svg
from agentfsm.diagrams.sequence import sequence_mermaid, sequence_svg, structure_dot, structure_mermaid
from agentfsm.spec.files import Parsed
from agentfsm.spec.model import Table
from agentfsm.spec.system_model import System
from agentfsm.spec.system_trace import SystemTraceError
from agentfsm.verify.system.paths import replay
from agentfsm.verify.table.explore import explore


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "diagram", help="draw a table (Graphviz SVG/PNG/DOT or Mermaid)",
        description="Draw a table's states and rows. States carry initial and final marks, transient "
                    "states are decision points, wildcard rows start from one 'any state' box, and rows "
                    "between the same two states share one edge. Overlays draw a verifier trace or a "
                    "coverage run over the table; --explored draws the configuration graph instead. A system "
                    "file draws its instances and links, with --trace its counterexample as a sequence chart. "
                    "Exit 0, 2 on bad input (Graphviz missing for SVG or PNG included).")
    parser.add_argument("tables", nargs="+", metavar="TABLE",
                        help="tables, or one system file (its instances and links; with --trace a sequence chart)")
    parser.add_argument("--format", choices=FORMATS, help="output format (default: from -o's suffix, else svg)")
    parser.add_argument("-o", "--output", metavar="FILE", help="write here instead of standard output")
    parser.add_argument("--out-dir", metavar="DIR",
                        help="write DIR/<name>.svg and DIR/<name>.mmd for every TABLE and system (as make diagrams)")
    parser.add_argument("--compact", action="store_true",
                        help="number the rows on the edges and list them in a table under the picture: "
                             "a narrow view of a wide table (svg, png, dot)")
    overlays = parser.add_mutually_exclusive_group()
    overlays.add_argument("--trace", metavar="FILE", help="replay a verifier trace (JSON) and highlight its path")
    overlays.add_argument("--coverage", metavar="FILE",
                          help='colour rows by a coverage run: JSON {"machine": ..., "rows": {"N": count}}')
    overlays.add_argument("--explored", action="store_true",
                          help="draw the explored configuration graph, grouped by state (small bounds only)")
    add_set_option(parser)
    parser.set_defaults(func=reporting_limits(run_diagram))


def run_diagram(args: argparse.Namespace) -> int:
    table_paths, system_paths, parsed = split_systems(args.tables)
    if args.out_dir:
        try:
            return _write_all(args, load_tables(table_paths, args.overrides, parsed) if table_paths else [],
                              load_systems(system_paths, parsed))
        except RenderError as exc:
            raise BadInput(str(exc)) from None
    if system_paths:
        if table_paths or len(system_paths) != 1:
            raise BadInput("a system file is drawn alone (no tables beside it), or with others by --out-dir")
        return _draw_system(args, system_paths[0], parsed)
    tables = load_tables(args.tables, args.overrides, parsed)
    try:
        if len(tables) != 1:
            raise BadInput("several tables need --out-dir; -o and standard output take one table")
        fmt = _format(args)
        if args.compact and (fmt == "mermaid" or args.explored):
            raise BadInput("--compact is a Graphviz view of a table: not with --format mermaid or --explored")
        data = picture(_diagram(args, tables[0]), fmt, compact=args.compact)
    except RenderError as exc:
        raise BadInput(str(exc)) from None
    if args.output:
        _write(Path(args.output), data)
    elif fmt == "png" and sys.stdout.isatty():
        raise BadInput("PNG is binary: give -o FILE or redirect standard output")
    else:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    return EXIT_OK


def _draw_system(args: argparse.Namespace, path: str, parsed: Parsed) -> int:
    """A system: its instances and links, or with --trace its counterexample as a sequence chart."""
    [system] = load_systems([path], parsed)
    if args.coverage or args.explored or args.compact:
        raise BadInput("a system takes --trace (a sequence chart) or nothing (its instances and links)")
    fmt = _format(args)
    try:
        if args.trace:
            trace = load_trace_file(system, args.trace)
            try:
                steps = replay(system, trace.steps)
            except SystemTraceError as exc:
                raise BadInput(f"{args.trace}: {exc}") from None
            if fmt == "mermaid":
                data = sequence_mermaid(system, steps, trace).encode()
            elif fmt == "svg":
                data = sequence_svg(system, steps, trace)
            else:
                raise BadInput("a sequence chart is drawn as svg or mermaid")
        elif fmt == "mermaid":
            data = structure_mermaid(system).encode()
        elif fmt == "dot":
            data = structure_dot(system).encode()
        else:
            data = svg(structure_dot(system), system.name) if fmt == "svg" else run_dot(structure_dot(system), fmt)
    except RenderError as exc:
        raise BadInput(str(exc)) from None
    if args.output:
        _write(Path(args.output), data)
    else:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    return EXIT_OK


def _write_all(args: argparse.Namespace, tables: list[Table], systems: list[System]) -> int:
    if args.output or args.format or args.trace or args.coverage or args.explored or args.compact:
        raise BadInput("--out-dir writes the plain pictures and the compact view: it takes no -o, --format, "
                       "--compact or overlay")
    out = Path(args.out_dir)
    drawn = [("machine", table.machine, table.file, committed_pictures(build(table))) for table in tables]
    drawn += [("system", system.name, system.file, committed_system_pictures(system)) for system in systems]
    files: dict[str, str] = {}
    for what, name, source, _ in drawn:
        if name in files:
            raise BadInput(f"{source} and {files[name]} both draw {what} {name!r}: --out-dir would write "
                           f"{out / name}.svg twice; draw them separately with -o")
        files[name] = source
    for _, name, _, pictures in drawn:
        written = []
        for file_name, data in pictures.items():
            _write(out / file_name, data)
            written.append(str(out / file_name))
        print(f"{name}: wrote {', '.join(written)}")
    return EXIT_OK


def _format(args: argparse.Namespace) -> str:
    if args.format:
        return str(args.format)
    if args.output:
        suffix = Path(args.output).suffix.lower()
        if suffix not in SUFFIXES:
            raise BadInput(f"cannot tell the format from {args.output!r}: give --format "
                           f"({', '.join(FORMATS)})")
        return SUFFIXES[suffix]
    return "svg"


def _diagram(args: argparse.Namespace, table: Table) -> Diagram | ConfigGraph:
    try:
        if args.explored:
            return config_graph(table, explore(table))
        if args.trace:
            return build(table, trace_overlay(table, _read(args.trace)))
        if args.coverage:
            return build(table, coverage_overlay(table, _read_json(args.coverage)))
    except (OverlayError, TooLarge) as exc:
        raise BadInput(str(exc)) from None
    return build(table)


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise BadInput(f"{path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise BadInput(f"{path}: not UTF-8 text: {exc}") from None


def _read_json(path: str) -> Any:
    try:
        return json.loads(_read(path))
    except json.JSONDecodeError as exc:
        raise BadInput(f"{path}: not valid JSON: {exc}") from None


def _write(path: Path, data: bytes) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    except OSError as exc:
        raise BadInput(f"{path}: {exc.strerror or exc}") from None
