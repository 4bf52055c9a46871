"""Observational conformance: does a recorded log follow the table?

Like P's PObserve for service logs, this needs no adapter and no control over the
implementation: it replays the events a log recorded through the reference semantics
and compares each recorded outcome with the prescribed one. A log is JSON Lines, one
step per line::

    {"event": "LlmCompleted", "params": {"tool_calls": 1}, "state": "ExecutingTools",
     "actions": ["ExecuteTools"], "accepted": true, "vars": {"pending": 1}}

``state`` (the state after the step) and ``actions`` are required, ``accepted`` and
``vars`` are compared when present (vars one by one, as in the harness), and a line
``{"reset": true}`` starts a new session from the initial configuration (the log starts
one implicitly; a reset before any step, or right after another, adds no empty one).
The output of ``agentfsm run --json`` is such a log as it is: its ``"kind": "step"``
lines are the steps, its other lines (text shown, tool results, notes) are skipped.
The audit reports, for every session that parts from the table, the first step where
it does, and then goes on with the next session.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentfsm.spec.expr import Value
from agentfsm.spec.model import Table
from agentfsm.spec.semantics import SemanticError, step
from agentfsm.spec.vectorfile import Expect
from agentfsm.verify.conformance.conform import compare, format_observed, format_params
from agentfsm.verify.conformance.harness import Observation


class LogError(Exception):
    """A log line that is not a step record; the message names ``FILE:LINE``."""


@dataclass(frozen=True)
class Record:
    line: int
    event: str
    params: Mapping[str, Value]
    observed: Observation


@dataclass(frozen=True)
class Divergence:
    """The first step where the log leaves the table, with the run that led there."""

    record: Record
    expect: Expect | None
    problems: tuple[str, ...]
    run_start: int
    run_steps: int


@dataclass(frozen=True)
class AuditResult:
    """Steps and sessions read, and the first divergence of each session that has one."""

    steps: int
    runs: int
    divergences: tuple[Divergence, ...] = ()

    @property
    def divergence(self) -> Divergence | None:
        return self.divergences[0] if self.divergences else None


def read_log(path: str | Path) -> Iterator[Record | None]:
    """Step records in order; ``None`` marks a reset."""
    name = str(path)
    try:
        handle = open(path, encoding="utf-8")  # noqa: SIM115 (closed by the generator)
    except OSError as exc:
        raise LogError(f"{name}: cannot read log: {exc.strerror}") from None
    with handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
            except json.JSONDecodeError as exc:
                raise LogError(f"{name}:{number}: error: not JSON: {exc.msg}") from None
            except UnicodeDecodeError:
                raise LogError(f"{name}:{number}: error: not UTF-8") from None
            if isinstance(data, dict) and data.get("reset") is True:
                yield None
                continue
            if isinstance(data, dict) and "kind" in data and data["kind"] != "step":
                continue   # run --json: what the agent showed, not a step
            try:
                yield _record(number, data)
            except (KeyError, TypeError) as exc:
                raise LogError(f"{name}:{number}: error: not a step record: {exc}") from None


def _record(number: int, data: Any) -> Record:
    if not isinstance(data, dict):
        raise TypeError("a line must be a JSON object")
    event, params, state, actions = data["event"], data.get("params", {}), data["state"], data["actions"]
    accepted, values = data.get("accepted"), data.get("vars")
    if not isinstance(event, str) or not isinstance(state, str):
        raise TypeError("'event' and 'state' must be strings")
    if not isinstance(params, dict) or not all(isinstance(v, int) for v in params.values()):
        raise TypeError("'params' must be an object of integers and booleans")
    if not isinstance(actions, list) or not all(isinstance(a, str) for a in actions):
        raise TypeError("'actions' must be a list of strings")
    if accepted is not None and not isinstance(accepted, bool):
        raise TypeError("'accepted' must be a boolean")
    if values is not None and not (isinstance(values, dict) and all(isinstance(v, int) for v in values.values())):
        raise TypeError("'vars' must be an object of integers and booleans")
    return Record(number, event, params, Observation(state, accepted, tuple(actions), values))


def audit(table: Table, records: Iterator[Record | None]) -> AuditResult:
    """Replay the log through the table's semantics, session by session; skip the rest of a session that parted."""
    state, values = table.initial.index, table.initial_vars()
    steps, runs, run_start, run_steps = 0, 0, 0, 0
    parted = False
    found: list[Divergence] = []
    for record in records:
        if record is None:
            state, values = table.initial.index, table.initial_vars()
            run_start, run_steps, parted = 0, 0, False
            continue
        if run_start == 0:
            run_start = record.line
            runs += 1
        steps += 1
        run_steps += 1
        if parted:
            continue
        divergence, after = _replay(table, state, values, record, run_start, run_steps)
        if divergence is not None:
            found.append(divergence)
            parted = True
        elif after is not None:
            state, values = after
    return AuditResult(steps, runs, tuple(found))


def _replay(table: Table, state: int, values: tuple[Value, ...], record: Record, run_start: int,
            run_steps: int) -> tuple[Divergence | None, tuple[int, tuple[Value, ...]] | None]:
    """One recorded step against the table: where it parts, or the configuration after it."""
    problem = _unknown(table, record)
    if problem:
        return Divergence(record, None, (problem,), run_start, run_steps), None
    params = table.event(record.event).param_values(record.params)
    try:
        result = step(table, state, values, record.event, params)
    except SemanticError as exc:
        return Divergence(record, None, (f"the table itself fails here: {exc.message}",), run_start, run_steps), None
    expect = Expect(result.accepted, table.states[result.state].name, result.actions, table.vars_dict(result.vars))
    observed = record.observed
    if observed.accepted is None:
        observed = Observation(observed.state, expect.accepted, observed.actions, observed.vars)
    problems = compare(expect, observed)
    if problems:
        return Divergence(record, expect, problems, run_start, run_steps), None
    return None, (result.state, result.vars)


def _unknown(table: Table, record: Record) -> str:
    if record.event not in table.event_index:
        return f"event {record.event!r} is not in table {table.machine}"
    try:
        table.event(record.event).param_values(record.params)
    except ValueError as exc:
        return str(exc)
    return ""


def format_audit(table: Table, log: str, result: AuditResult) -> str:
    if not result.divergences:
        return f"audit {table.machine}: {log}: {result.steps} steps in {result.runs} sessions follow the table"
    lines = []
    for d in result.divergences:
        r = d.record
        lines.append(f"{log}:{r.line}: step {d.run_steps} of the session starting at line {d.run_start}: "
                     f"{r.event}{format_params(r.params)}")
        if d.expect is not None:
            e = d.expect
            lines.append(f"  table prescribes {format_observed(e.accepted, e.state, e.actions, e.vars)}")
        o = r.observed
        lines.append(f"  log recorded     {format_observed(o.accepted, o.state, o.actions, o.vars)}")
        lines.extend(f"  {problem}" for problem in d.problems)
    first = result.divergences[0].record.line
    lines.append(f"audit {table.machine}: {log}: {len(result.divergences)} of {result.runs} sessions part from "
                 f"the table; the log parts from the table at line {first} (first)")
    return "\n".join(lines)
