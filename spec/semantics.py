"""The step semantics of docs/table-format.md ("Step semantics"), as one pure function over the compiled table.

This is the definition every other part is tested against: the explorer's successor
function, the transitions-based runtime and generated vectors must agree with it.
Violations of the table's own rules (two enabled rows, a value out of range, a transient
state with no way out) are raised as ``SemanticError`` so callers can report them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from agentfsm.spec.expr import Value
from agentfsm.spec.model import Row, Table

Status = Literal["fired", "rejected", "ignored", "final"]


@dataclass(frozen=True)
class StepResult:
    """What one event did: ``rows`` fired in order (the event's row, then eventless ones)."""

    accepted: bool
    state: int
    vars: tuple[Value, ...]
    actions: tuple[str, ...]
    rows: tuple[Row, ...]
    status: Status
    args: tuple[tuple[Value, ...], ...] = ()  # per action, its parameter values (empty: none declared)


class SemanticError(Exception):
    """The table broke its own rules on this step; ``kind`` names the verifier check."""

    def __init__(self, kind: str, message: str, rows: Sequence[Row] = ()) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.rows = tuple(rows)


def enabled_rows(rows: Sequence[Row], env: Sequence[Value]) -> list[Row]:
    return [row for row in rows if row.enabled(env)]


def apply_row(table: Table, row: Row, env: tuple[Value, ...]) -> tuple[Value, ...]:
    """The variables after ``row`` fires: simultaneous assignment, range-checked."""
    nvars = len(table.variables)
    if not row.updates:
        return env[1:nvars + 1]
    values = list(env[1:nvars + 1])
    for update in row.updates:
        value = update.fn(env)
        var = table.variables[update.slot - 1]
        if var.type == "int" and not var.lo <= value <= var.hi:
            raise SemanticError("bounds", f"row {row.index} sets {var.name} = {value}, "
                                f"outside its range {var.lo}..{var.hi}", [row])
        values[update.slot - 1] = value
    return tuple(values)


def emitted_args(table: Table, row: Row, env: tuple[Value, ...]) -> list[tuple[Value, ...]]:
    """The parameter values of each action ``row`` emits, read from the environment before its set."""
    if not row.emit_args:
        return [() for _ in row.emit]
    result = []
    for name, args in zip(row.emit, row.emit_args, strict=True):
        values = tuple(arg.fn(env) for arg in args)
        for param, value in zip(table.action_index[name].params, values, strict=True):
            if not param.admits(value):
                raise SemanticError("bounds", f"row {row.index} emits {name} with {param.name} = {value}, "
                                    f"outside its range {param.lo}..{param.hi}", [row])
        result.append(values)
    return result


def settle(table: Table, state: int, values: tuple[Value, ...],
           fired: list[Row], actions: list[str],
           args: list[tuple[Value, ...]] | None = None) -> tuple[int, tuple[Value, ...]]:
    """Follow eventless rows out of transient states until a stable state is reached."""
    seen: set[tuple[int, tuple[Value, ...]]] = set()
    while table.states[state].transient:
        if (state, values) in seen:
            names = " -> ".join(table.states[s].name for s, _ in seen)
            raise SemanticError("transient", f"eventless cycle through transient states ({names})", fired)
        seen.add((state, values))
        env = (state, *values)
        enabled = enabled_rows(table.eventless_rows.get(state, ()), env)
        name = table.states[state].name
        if not enabled:
            raise SemanticError("transient", f"transient state {name} has no enabled eventless row", fired)
        if len(enabled) > 1:
            rows = ", ".join(str(r.index) for r in enabled)
            raise SemanticError("transient", f"transient state {name} has several enabled eventless rows "
                                f"({rows})", enabled)
        row = enabled[0]
        values = apply_row(table, row, env)
        fired.append(row)
        actions.extend(row.emit)
        if args is not None:
            args.extend(emitted_args(table, row, env))
        state = table.state_index[row.target]
    return state, values


def step(table: Table, state: int, values: tuple[Value, ...], event: str,
         params: tuple[Value, ...] = ()) -> StepResult:
    """Deliver ``event`` (with parameter values in declared order) to a configuration."""
    if table.states[state].final:
        return StepResult(False, state, values, (), (), "final")
    env = (state, *values, *params)
    enabled = enabled_rows(table.candidates(state, event), env)
    if not enabled:
        plain = tuple(() for _ in table.unhandled.emit)
        if table.unhandled.policy == "ignore":
            return StepResult(True, state, values, table.unhandled.emit, (), "ignored", plain)
        return StepResult(False, state, values, table.unhandled.emit, (), "rejected", plain)
    if len(enabled) > 1:
        rows = ", ".join(str(r.index) for r in enabled)
        raise SemanticError("determinism", f"rows {rows} are all enabled for {event} in "
                            f"{table.states[state].name}", enabled)
    row = enabled[0]
    fired = [row]
    actions = list(row.emit)
    args = emitted_args(table, row, env)
    target = table.state_index[row.target]
    target, new_values = settle(table, target, apply_row(table, row, env), fired, actions, args)
    return StepResult(True, target, new_values, tuple(actions), tuple(fired), "fired", tuple(args))
