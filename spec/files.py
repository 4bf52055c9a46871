"""Table and system files read and parsed once: the command line parses every file it is given
here, tells systems from tables by the parsed document, and hands each loader its document."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from agentfsm.spec.errors import Diagnostic, Mark, TableError
from agentfsm.spec.yamlio import Document, load_document

Parsed = Mapping[str, Document | TableError]
"""Each file's document, or why it could not be read or parsed (reported when it is loaded)."""


def read_document(path: str | Path) -> Document:
    """Read and parse one file; raise TableError when it cannot be read or does not parse."""
    name = str(path)
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise TableError([Diagnostic(Mark(name, 1, 1), f"cannot read file: {exc.strerror}")]) from None
    return load_document(raw, name)


def parse_files(paths: Sequence[str]) -> dict[str, Document | TableError]:
    """Every file parsed once (a path named twice is parsed once too)."""
    parsed: dict[str, Document | TableError] = {}
    for path in paths:
        if path not in parsed:
            try:
                parsed[path] = read_document(path)
            except TableError as exc:
                parsed[path] = exc
    return parsed


def parsed_document(parsed: Parsed, path: str) -> Document | None:
    """``path``'s document from ``parsed`` (None: not parsed yet); raise its error when it did not parse."""
    found = parsed.get(path)
    if isinstance(found, TableError):
        raise found
    return found
