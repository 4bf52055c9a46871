"""``agentfsm check`` (load and statically check tables) and ``agentfsm tables`` (where the
bundled tables are, so an installed package's tables can be named from anywhere)."""

from __future__ import annotations

import argparse

from agentfsm.spec.bundled import bundled_tables
from agentfsm.spec.suggest import did_you_mean

from agentfsm.cliutil import EXIT_OK, BadInput, add_set_option, load_tables


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("check", help="load and statically check tables",
                            description="Load each table, check its schema, names, types and structural "
                                        "rules, and print a one-line summary. Exit 0 when all load, 2 otherwise.")
    parser.add_argument("tables", nargs="+", metavar="TABLE", help="a table or a system file (top-level 'system:')")
    add_set_option(parser)
    parser.set_defaults(func=run_check)

    parser = sub.add_parser("tables", help="print the paths of the bundled tables",
                            description="Print the path of each table bundled with agentfsm (all of them, or "
                                        "the NAMEs given, e.g. loom-agent), one a line, so that an installed "
                                        "package's tables can be used from any directory: "
                                        "agentfsm verify $(agentfsm tables loom-agent). Exit 0, 2 for an "
                                        "unknown NAME.")
    parser.add_argument("names", nargs="*", metavar="NAME", help="a bundled table's name (its file name "
                                                                  "without .yaml)")
    parser.set_defaults(func=run_tables)


def run_check(args: argparse.Namespace) -> int:
    from agentfsm.verify.system_commands import load_systems, split_systems
    table_paths, system_paths = split_systems(args.tables)
    tables = load_tables(table_paths, args.overrides)
    systems = load_systems(system_paths)
    for table in tables:
        print(f"{table.file}: ok: {table.summary()}")
    for system in systems:
        print(f"{system.file}: ok: system {system.summary()}")
    return EXIT_OK


def run_tables(args: argparse.Namespace) -> int:
    paths = {path.stem: path for path in bundled_tables()}
    for name in args.names:
        if name.removesuffix(".yaml") not in paths:
            raise BadInput(f"no bundled table {name!r}{did_you_mean(name, paths)} "
                           f"(the bundled tables: {', '.join(paths)})")
    for name in args.names or list(paths):
        print(paths[name.removesuffix(".yaml")])
    return EXIT_OK
