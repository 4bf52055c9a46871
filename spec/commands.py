"""``agentfsm check``: load and statically check tables."""

from __future__ import annotations

import argparse

from agentfsm.cliutil import EXIT_OK, add_set_option, load_tables


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("check", help="load and statically check tables",
                            description="Load each table, check its schema, names, types and structural "
                                        "rules, and print a one-line summary. Exit 0 when all load, 2 otherwise.")
    parser.add_argument("tables", nargs="+", metavar="TABLE", help="a table or a system file (top-level 'system:')")
    add_set_option(parser)
    parser.set_defaults(func=run_check)


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
