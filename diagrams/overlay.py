"""Overlays: a trace replayed over the table, or a coverage run, turned into row marks.

Both read file contents (the caller does the file I/O); traces are parsed by the
verifier's own reader, so the two cannot disagree on the format. A trace is replayed with the
reference semantics, so the highlighted path is the one the table really takes, not one
the trace's author claims; a step the table rejects, or one that breaks the table's own
rules, is noted on the picture instead of being dropped.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentfsm.diagrams.model import Overlay, RowMark
from agentfsm.spec.model import Table
from agentfsm.spec.trace import TraceError, load_trace, walk


class OverlayError(ValueError):
    """The trace or coverage file does not fit the table."""


def _object(data: object, what: str) -> Mapping[str, Any]:
    if not isinstance(data, dict):
        raise OverlayError(f"{what}: expected a JSON object")
    return data


def _check_machine(table: Table, data: Mapping[str, Any], what: str) -> None:
    machine = data.get("machine")
    if machine != table.machine:
        raise OverlayError(f"{what} is for machine {machine!r}, the table is {table.machine!r}")


def trace_overlay(table: Table, text: str) -> Overlay:
    """Replay a verifier trace file (the format of ``agentfsm.spec.trace``) over ``table``."""
    try:
        trace = load_trace(table, text)
    except TraceError as exc:
        raise OverlayError(f"trace: {exc}") from None
    fired: dict[int, list[int]] = {}
    faulty: set[int] = set()
    visited: dict[str, list[int]] = {table.initial.name: [0]}
    notes: list[str] = []
    for number, walked in enumerate(walk(table, trace.steps), start=1):
        event = walked.label[0]
        if walked.error is not None:
            faulty.update(row.index for row in walked.error.rows)
            for row in walked.error.rows:
                fired.setdefault(row.index, []).append(number)
            notes.append(f"step {number}: {event}: {walked.error.kind} violation: {walked.error.message}")
            break
        result = walked.result
        assert result is not None
        for row in result.rows:
            fired.setdefault(row.index, []).append(number)
            if table.state(row.target).transient:
                visited.setdefault(row.target, []).append(number)
        if result.status != "fired":
            notes.append(f"step {number}: {event} {result.status} in {table.states[walked.before[0]].name}")
        visited.setdefault(table.states[result.state].name, []).append(number)
    count = len(trace.steps)
    head = f"trace of {count} step{'s' * (count != 1)}"
    if trace.check:
        head += f": {trace.check}" + (f" ({trace.kind})" if trace.kind else "")
    notes.insert(0, head)
    if trace.loop_start is not None:
        notes.append(f"steps {trace.loop_start + 1}..{count} repeat forever")
    marks = {row: RowMark(steps=tuple(numbers), faulty=row in faulty) for row, numbers in fired.items()}
    return Overlay("trace", marks, {name: tuple(n) for name, n in visited.items()}, tuple(notes))


def coverage_overlay(table: Table, data: object) -> Overlay:
    """Read ``{"machine", "rows": {"<row index>": count}}``; rows not listed count zero."""
    coverage = _object(data, "coverage")
    _check_machine(table, coverage, "the coverage file")
    rows = _object(coverage.get("rows"), "coverage: 'rows'")
    counts = dict.fromkeys((row.index for row in table.rows), 0)
    for key, count in rows.items():
        if not key.isdigit() or int(key) not in counts:
            raise OverlayError(f"coverage: no row {key!r} in the table (rows are 1..{len(table.rows)})")
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            raise OverlayError(f"coverage: row {key}: count must be a non-negative integer")
        counts[int(key)] = count
    dead = sorted(index for index, count in counts.items() if count == 0)
    notes = [f"coverage: {len(counts) - len(dead)} of {len(counts)} rows exercised, "
             f"{sum(counts.values())} firings"]
    if dead:
        rows_text = ("rows " if len(dead) > 1 else "row ") + ", ".join(map(str, dead))
        notes.append(f"never exercised (grey, marked never): {rows_text}")
    return Overlay("coverage", {index: RowMark(count=count) for index, count in counts.items()}, {}, tuple(notes))
