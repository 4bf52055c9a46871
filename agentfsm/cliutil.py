"""What every subcommand shares: exit codes, loading tables, reporting bad input."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from agentfsm.spec import Table, TableError, load_table
from agentfsm.spec.expr import Value

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_BAD_INPUT = 2


class BadInput(Exception):
    """Raised by a subcommand for input it cannot use; the CLI prints it and exits 2."""


def parse_overrides(items: Sequence[str]) -> dict[str, Value]:
    """``--set NAME=VALUE`` pairs: VALUE is an integer or true/false."""
    result: dict[str, Value] = {}
    for item in items:
        name, sep, text = item.partition("=")
        if not sep or not name:
            raise BadInput(f"--set {item!r}: expected NAME=VALUE")
        if text in ("true", "false"):
            result[name] = text == "true"
            continue
        try:
            result[name] = int(text)
        except ValueError:
            raise BadInput(f"--set {item!r}: VALUE must be an integer or true/false") from None
    return result


def deprecated(old: str, new: str) -> None:
    """Warn once per use about a spelling kept for one version only."""
    print(f"agentfsm: warning: '{old}' is deprecated and will be removed in the next version; use '{new}'",
          file=sys.stderr)


def add_set_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="NAME=VALUE",
                        help="override a constant of the table (repeatable)")


def load_tables(paths: Sequence[str], overrides: Sequence[str] = ()) -> list[Table]:
    """Load every table, printing all diagnostics; raise SystemExit(2) if any failed."""
    values = parse_overrides(overrides)
    tables: list[Table] = []
    failed = False
    for path in paths:
        try:
            tables.append(load_table(path, values))
        except TableError as exc:
            failed = True
            for diagnostic in exc.diagnostics:
                print(diagnostic, file=sys.stderr)
    if failed:
        raise SystemExit(EXIT_BAD_INPUT)
    return tables
