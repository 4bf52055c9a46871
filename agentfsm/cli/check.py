"""``agentfsm check`` (load and statically check tables) and ``agentfsm tables`` (where the
bundled tables and systems are, so an installed package's files can be named from anywhere)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from agentfsm.cli.exits import EXIT_BAD_INPUT, EXIT_OK, BadInput
from agentfsm.cli.util import (
    add_set_option,
    json_envelope,
    load_systems,
    load_tables,
    overrides_by_table,
    parse_overrides,
    split_systems,
)
from agentfsm.spec.build import load_table
from agentfsm.spec.bundled import bundled_systems, bundled_tables
from agentfsm.spec.errors import TableError
from agentfsm.spec.files import parsed_document
from agentfsm.spec.suggest import did_you_mean
from agentfsm.spec.system_load import load_system


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("check", help="load and statically check tables",
                            description="Load each table, check its schema, names, types and structural "
                                        "rules, and print a one-line summary. Exit 0 when all load, 2 otherwise.")
    parser.add_argument("tables", nargs="+", metavar="TABLE", help="a table or a system file (top-level 'system:')")
    parser.add_argument("--json", action="store_true",
                        help="print one JSON object: each file's summary or its diagnostics with line and column")
    add_set_option(parser)
    parser.set_defaults(func=run_check)

    parser = sub.add_parser("tables", help="print the paths of the bundled tables and systems",
                            description="Print the path of each table bundled with agentfsm, then of each "
                                        "bundled system of them (all of them, or the NAMEs given, e.g. "
                                        "loom-agent or loom-with-tools), one a line, so that an installed "
                                        "package's tables and systems can be used from any directory: "
                                        "agentfsm verify $(agentfsm tables loom-agent). The systems named "
                                        "durable-run-as-it-was-* fail verify by design (their counterexamples "
                                        "are the defects). Exit 0, 2 for an unknown NAME.")
    parser.add_argument("names", nargs="*", metavar="NAME", help="a bundled table's or system's name (its file "
                                                                  "name without .yaml)")
    parser.set_defaults(func=run_tables)


def run_check(args: argparse.Namespace) -> int:
    if args.json:
        return _check_json(args)
    table_paths, system_paths, parsed = split_systems(args.tables)
    tables = load_tables(table_paths, args.overrides, parsed)
    systems = load_systems(system_paths, parsed)
    for table in tables:
        print(f"{table.file}: ok: {table.summary()}")
    for system in systems:
        print(f"{system.file}: ok: system {system.summary()}")
    return EXIT_OK


def _check_json(args: argparse.Namespace) -> int:
    """``check --json``: every file checked, in order; exit 2 when any did not load."""
    table_paths, system_paths, parsed = split_systems(args.tables)
    per_table = overrides_by_table(table_paths, parse_overrides(args.overrides), parsed)
    files: list[dict[str, Any]] = []
    for path in args.tables:
        system = path in system_paths
        entry: dict[str, Any] = {"file": path, "kind": "system" if system else "table"}
        try:
            doc = parsed_document(parsed, path)
            loaded = load_system(path, doc) if system else load_table(path, per_table[path], doc)
        except TableError as exc:
            entry.update(ok=False, summary=None, diagnostics=[
                {"file": d.mark.file, "line": d.mark.line, "col": d.mark.col, "message": d.message}
                for d in exc.diagnostics])
        else:
            entry.update(ok=True, summary=loaded.summary(), diagnostics=[])
        files.append(entry)
    ok = all(entry["ok"] for entry in files)
    print(json.dumps(json_envelope("check", {"command": "check", "ok": ok, "files": files}), indent=1))
    return EXIT_OK if ok else EXIT_BAD_INPUT


def run_tables(args: argparse.Namespace) -> int:
    paths = {path.stem: path for path in bundled_tables()}
    systems = {path.stem: path for path in bundled_systems()}
    paths.update((name, path) for name, path in systems.items() if name not in paths)
    for name in args.names:
        if name.removesuffix(".yaml") not in paths:
            tables = [known for known in paths if known not in systems]
            wanted = name.removesuffix(".yaml")
            hint = did_you_mean(wanted, tables) or did_you_mean(wanted, systems)
            raise BadInput(f"no bundled table or system {name!r}{hint} "
                           f"(the bundled tables: {', '.join(tables)}; systems: {', '.join(systems)})")
    for name in args.names or list(paths):
        print(paths[name.removesuffix(".yaml")])
    return EXIT_OK
