"""Counterexample traces: the JSON file ``--trace-out`` writes and ``replay`` and diagrams read.

The format is one JSON object::

    {"machine": str, "check": str | null, "kind": str | null,
     "steps": [{"event": str, "params": {name: value}}], "loop_start": int | null}

``loop_start`` is the index of the step where the cycle of a lasso begins (the steps
from there to the end lead back to the configuration before that step).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentfsm.spec import Table
from agentfsm.spec.expr import Value
from agentfsm.spec.semantics import SemanticError, StepResult, step

Label = tuple[str, tuple[Value, ...]]


class TraceError(ValueError):
    """A trace file that does not fit its table."""


@dataclass(frozen=True)
class Trace:
    machine: str
    check: str | None
    kind: str | None
    steps: tuple[Label, ...]
    loop_start: int | None = None
    _params: tuple[dict[str, Value], ...] = field(default=(), compare=False, repr=False)

    @classmethod
    def of(cls, table: Table, labels: Sequence[Label], check: str | None = None, kind: str | None = None,
           loop_start: int | None = None) -> Trace:
        params = tuple(table.event(event).param_dict(values) for event, values in labels)
        return cls(table.machine, check, kind, tuple(labels), loop_start, params)

    def step_dicts(self) -> list[dict[str, Any]]:
        return [{"event": event, "params": dict(params)} for (event, _), params in zip(self.steps, self._params,
                                                                                          strict=True)]

    def to_json(self) -> dict[str, Any]:
        return {"machine": self.machine, "check": self.check, "kind": self.kind, "steps": self.step_dicts(),
                "loop_start": self.loop_start}


def load_trace(table: Table, text: str) -> Trace:
    """Parse a trace file for ``table``; raise TraceError saying what is wrong."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TraceError(f"not JSON: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("steps"), list):
        raise TraceError("a trace is a JSON object with a 'steps' list")
    if data.get("machine") != table.machine:
        raise TraceError(f"trace is for machine {data.get('machine')!r}, the table is {table.machine!r}")
    labels: list[Label] = []
    for n, item in enumerate(data["steps"]):
        if not isinstance(item, dict) or not isinstance(item.get("event"), str):
            raise TraceError(f"step {n}: expected {{'event': NAME, 'params': {{...}}}}")
        name = item["event"]
        if name not in table.event_index:
            raise TraceError(f"step {n}: unknown event {name!r}")
        params = item.get("params", {})
        if not isinstance(params, dict):
            raise TraceError(f"step {n}: 'params' must be an object")
        try:
            labels.append((name, table.event(name).param_values(params)))
        except ValueError as exc:
            raise TraceError(f"step {n}: {exc}") from None
    loop_start = data.get("loop_start")
    if loop_start is not None and (not isinstance(loop_start, int) or isinstance(loop_start, bool)
                                   or not 0 <= loop_start < len(labels)):
        raise TraceError(f"loop_start must be null or a step index below {len(labels)}")
    check, kind = data.get("check"), data.get("kind")
    return Trace.of(table, labels, check if isinstance(check, str) else None,
                    kind if isinstance(kind, str) else None, loop_start)


@dataclass(frozen=True)
class Walked:
    """One step of a trace under the reference semantics (``error`` when it raised)."""

    label: Label
    before: tuple[int, tuple[Value, ...]]
    result: StepResult | None
    error: SemanticError | None


def walk(table: Table, labels: Sequence[Label]) -> Iterator[Walked]:
    """Run ``labels`` from the initial configuration; stop after a step that raises."""
    state, values = table.initial.index, table.initial_vars()
    for label in labels:
        try:
            result = step(table, state, values, *label)
        except SemanticError as exc:
            yield Walked(label, (state, values), None, exc)
            return
        yield Walked(label, (state, values), result, None)
        state, values = result.state, result.vars


def describe_config(table: Table, state: int, values: Sequence[Value]) -> str:
    text = table.states[state].name
    if values:
        text += " {" + ", ".join(f"{k}: {_value(v)}" for k, v in table.vars_dict(values).items()) + "}"
    return text


def describe_label(table: Table, label: Label) -> str:
    event, values = label
    if not values:
        return event
    return f"{event}(" + ", ".join(f"{k}={_value(v)}" for k, v in table.event(event).param_dict(values).items()) + ")"


def _value(v: Value) -> str:
    return ("true" if v else "false") if isinstance(v, bool) else str(v)


def format_trace(table: Table, trace: Trace, indent: str = "  ") -> list[str]:
    """The trace as readable lines: each event, its outcome and the configuration after it."""
    lines = [f"{indent}   {describe_config(table, table.initial.index, table.initial_vars())}  (initial)"]
    for n, walked in enumerate(walk(table, trace.steps), start=1):
        if trace.loop_start is not None and n - 1 == trace.loop_start:
            lines.append(f"{indent}   -- cycle starts here --")
        head = f"{indent}{n:>2}. {describe_label(table, walked.label)}"
        if walked.error is not None:
            lines.append(f"{head} -> {walked.error.kind} error: {walked.error.message}")
            continue
        result = walked.result
        assert result is not None
        actions = f" / {', '.join(result.actions)}" if result.actions else ""
        status = "" if result.status == "fired" else f" [{result.status}]"
        lines.append(f"{head}{status}{actions} -> {describe_config(table, result.state, result.vars)}")
        broken = [inv.name for inv in table.invariants if not inv.fn((result.state, *result.vars))]
        if broken:
            lines.append(f"{indent}    invariant violated: {', '.join(broken)}")
    if trace.loop_start is not None:
        lines.append(f"{indent}   -- back to the start of the cycle --")
    return lines
