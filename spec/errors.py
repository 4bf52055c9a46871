"""Diagnostics for tables: every problem carries the place in the file it came from.

Errors are collected, not raised one at a time, so that independent mistakes in a table
are all reported in one run, each as ``FILE:LINE:COL: error: MESSAGE``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Mark:
    """A 1-based line and column in a table file."""

    file: str
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"

    def shifted(self, columns: int) -> Mark:
        return Mark(self.file, self.line, self.col + columns)


@dataclass(frozen=True, order=True)
class Diagnostic:
    mark: Mark
    message: str

    def __str__(self) -> str:
        return f"{self.mark}: error: {self.message}"


SHOWN_MAX = 60


def shown(value: object) -> str:
    """``repr`` of a value from the table, cut short so hostile input cannot flood a message."""
    text = repr(value)
    return text if len(text) <= SHOWN_MAX else text[: SHOWN_MAX - 3] + "..."


class TableError(Exception):
    """A table could not be loaded; ``diagnostics`` says every reason found."""

    def __init__(self, diagnostics: list[Diagnostic]) -> None:
        self.diagnostics = sorted(set(diagnostics))
        super().__init__("\n".join(str(d) for d in self.diagnostics))


class Collector:
    """Accumulates diagnostics during one phase of loading."""

    def __init__(self) -> None:
        self.diagnostics: list[Diagnostic] = []

    def error(self, mark: Mark, message: str) -> None:
        self.diagnostics.append(Diagnostic(mark, message))

    def raise_if_any(self) -> None:
        if self.diagnostics:
            raise TableError(self.diagnostics)
