"""Overlays: a trace replayed over the table, or a coverage run, turned into row marks.

Both read already-parsed JSON (the caller does the file I/O). A trace is replayed with the
reference semantics, so the highlighted path is the one the table really takes, not one
the trace's author claims; a step the table rejects, or one that breaks the table's own
rules, is noted on the picture instead of being dropped.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from agentfsm.diagrams.model import Overlay, RowMark
from agentfsm.spec.model import Table
from agentfsm.spec.semantics import SemanticError, step


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


def trace_overlay(table: Table, data: object) -> Overlay:
    """Replay a verifier trace (``{"machine", "check", "kind", "steps", "loop_start"}``)."""
    trace = _object(data, "trace")
    _check_machine(table, trace, "the trace")
    steps = trace.get("steps")
    if not isinstance(steps, list):
        raise OverlayError("trace: 'steps' must be a list")
    loop_start = trace.get("loop_start")
    if loop_start is not None and (not isinstance(loop_start, int) or not 0 <= loop_start < max(len(steps), 1)):
        raise OverlayError(f"trace: 'loop_start' must be null or a step index in 0..{len(steps) - 1}")
    fired: dict[int, list[int]] = {}
    faulty: set[int] = set()
    visited: dict[str, list[int]] = {table.initial.name: [0]}
    notes: list[str] = []
    state, values = table.initial.index, table.initial_vars()
    for number, item in enumerate(steps, start=1):
        event_name, params = _step_item(table, item, number)
        try:
            result = step(table, state, values, event_name, params)
        except SemanticError as exc:
            faulty.update(row.index for row in exc.rows)
            for row in exc.rows:
                fired.setdefault(row.index, []).append(number)
            notes.append(f"step {number}: {event_name}: {exc.kind} violation: {exc.message}")
            break
        for row in result.rows:
            fired.setdefault(row.index, []).append(number)
            if table.state(row.target).transient:
                visited.setdefault(row.target, []).append(number)
        if result.status != "fired":
            notes.append(f"step {number}: {event_name} {result.status} in {table.states[state].name}")
        state, values = result.state, result.vars
        visited.setdefault(table.states[state].name, []).append(number)
    check, kind = trace.get("check"), trace.get("kind")
    head = f"trace of {len(steps)} step{'s' * (len(steps) != 1)}"
    if check:
        head += f": {check}" + (f" ({kind})" if kind else "")
    notes.insert(0, head)
    if loop_start is not None:
        notes.append(f"steps {loop_start + 1}..{len(steps)} repeat forever")
    marks = {row: RowMark(steps=tuple(numbers), faulty=row in faulty) for row, numbers in fired.items()}
    return Overlay("trace", marks, {name: tuple(n) for name, n in visited.items()}, tuple(notes))


def _step_item(table: Table, item: object, number: int) -> tuple[str, tuple[Any, ...]]:
    entry = _object(item, f"trace step {number}")
    name = entry.get("event")
    if not isinstance(name, str) or name not in table.event_index:
        raise OverlayError(f"trace step {number}: unknown event {name!r}")
    params = entry.get("params", {})
    if not isinstance(params, dict):
        raise OverlayError(f"trace step {number}: 'params' must be an object")
    try:
        return name, table.event(name).param_values(params)
    except ValueError as exc:
        raise OverlayError(f"trace step {number}: {exc}") from None


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
