"""What the subcommands share: the `--json` envelope, `--set` overrides, loading tables and systems
with their diagnostics printed, reporting a replayed trace."""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from agentfsm.cli.exits import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, BadInput
from agentfsm.spec import Table, TableError, load_table
from agentfsm.spec.expr import Value
from agentfsm.spec.files import Parsed, parse_files, parsed_document
from agentfsm.spec.suggest import did_you_mean
from agentfsm.spec.system_load import is_system_document, load_system
from agentfsm.spec.system_model import System
from agentfsm.spec.yamlio import Document

Loaded = TypeVar("Loaded")
Command = Callable[[argparse.Namespace], int]
JSON_FORMAT = 1
"""Version of every command's ``--json`` envelope (docs/json-envelope.schema.json)."""


def json_envelope(kind: str, payload: Mapping[str, Any]) -> dict[str, Any]:
    """One shape for every command's ``--json``: ``format`` (the version) and ``kind`` (what the
    object is: the command, or a line of a stream), then the payload's own keys, none renamed."""
    if payload.get("format", JSON_FORMAT) != JSON_FORMAT or payload.get("kind", kind) != kind:
        raise ValueError(f"a {kind} payload cannot carry its own format or kind: {payload.get('format')!r}, "
                         f"{payload.get('kind')!r}")
    return {"format": JSON_FORMAT, "kind": kind, **payload}


def reporting(command: Command, *errors: type[Exception]) -> Command:
    """``command``, with the errors of the layers below it that mean bad input (``errors``) reported
    as such: the message as it is, exit 2."""
    @functools.wraps(command)
    def run(args: argparse.Namespace) -> int:
        try:
            return command(args)
        except errors as exc:
            raise BadInput(str(exc)) from None
    return run


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


def overrides_by_table(paths: Sequence[str], values: Mapping[str, Value],
                       parsed: Parsed) -> dict[str, dict[str, Value]]:
    """The ``--set`` values each table gets. With several tables a constant goes to the tables
    that declare it (tables share no constants, so one --set for all of them would fail on all
    but one); a name none of them declares is bad input, suggested from all their constants.
    ``parsed`` holds each table's document, so the constants are read without parsing again."""
    if len(paths) < 2 or not values:
        return {path: dict(values) for path in paths}
    declared = {path: _constant_names(parsed.get(path)) for path in paths}
    if any(names is None for names in declared.values()):
        return {path: dict(values) for path in paths}  # a table that does not read reports itself
    known = set().union(*(names for names in declared.values() if names is not None))
    for name in values:
        if name not in known:
            raise BadInput(f"--set {name}: no table given has a constant {name!r}{did_you_mean(name, known)}")
    return {path: {name: value for name, value in values.items() if name in (declared[path] or ())}
            for path in paths}


def _constant_names(doc: Document | TableError | None) -> set[str] | None:
    """The names under a table's ``constants:`` (None: the file did not read or parse)."""
    if not isinstance(doc, Document):
        return None
    constants = doc.data.get("constants") if isinstance(doc.data, dict) else None
    return {str(name) for name in constants} if isinstance(constants, dict) else set()


def load_tables(paths: Sequence[str], overrides: Sequence[str] = (), parsed: Parsed | None = None) -> list[Table]:
    """Load every table (from its document in ``parsed``, else parsed here, once), printing all
    diagnostics; raise SystemExit(2) if any failed."""
    parsed = parse_files(paths) if parsed is None else parsed
    per_table = overrides_by_table(paths, parse_overrides(overrides), parsed)
    return _load_all(paths, lambda path: load_table(path, per_table[path], parsed_document(parsed, path)))


def split_systems(paths: Sequence[str]) -> tuple[list[str], list[str], Parsed]:
    """(table paths, system paths, every file parsed): a system file has a top-level ``system:``
    key. Loading a table or a system takes its document from the third, so it is parsed once."""
    parsed = parse_files(paths)
    systems = [path for path in paths if _is_system(parsed[path])]
    return [path for path in paths if path not in systems], systems, parsed


def _is_system(doc: Document | TableError) -> bool:
    return isinstance(doc, Document) and is_system_document(doc)


def load_systems(paths: Sequence[str], parsed: Parsed | None = None) -> list[System]:
    """Load every system (from its document in ``parsed``, when there), printing all diagnostics;
    raise SystemExit(2) if any failed."""
    return _load_all(paths, lambda path: load_system(path, parsed_document(parsed or {}, path)))


def _load_all(paths: Sequence[str], load: Callable[[str], Loaded]) -> list[Loaded]:
    loaded: list[Loaded] = []
    failed = False
    for path in paths:
        try:
            loaded.append(load(path))
        except TableError as exc:
            failed = True
            for diagnostic in exc.diagnostics:
                print(diagnostic, file=sys.stderr)
    if failed:
        raise SystemExit(EXIT_BAD_INPUT)
    return loaded


def print_violations(found: list[str]) -> int:
    """Print what a replayed trace violates; exit 1 while it shows a violation, else 0."""
    for line in found:
        print(f"violated: {line}")
    if not found:
        print("no check is violated by this trace")
    return EXIT_FAILED if found else EXIT_OK
