"""Test vectors: the JSON Lines format of docs/conformance.md, read strictly and written canonically.

A vector is a sequence of events from a reset, each with the outcome the table's
semantics prescribes. Expectations are never computed here by any other route than
``agentfsm.spec.semantics.step``: ``expected_steps`` replays an event sequence through
it. Files from elsewhere are validated line by line, with ``FILE:LINE`` in each error.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from agentfsm.spec.expr import Value
from agentfsm.spec.model import Row, Table
from agentfsm.spec.semantics import step

Label = tuple[str, tuple[Value, ...]]
# A step from a configuration (state index, values) by a label: the Step, its fired rows and where it leads.
StepMemo = dict[tuple[int, tuple[Value, ...], Label], tuple["Step", tuple[Row, ...], int, tuple[Value, ...]]]


class VectorError(Exception):
    """A vectors file that cannot be used; the message names the file and line."""


@dataclass(frozen=True)
class Expect:
    accepted: bool
    state: str
    actions: tuple[str, ...]
    vars: Mapping[str, Value]


@dataclass(frozen=True)
class Refused:
    """The expectation of an invalid request: ``{"ok": false}``, the configuration unchanged."""


REFUSED = Refused()


@dataclass(frozen=True)
class Step:
    """One request of a vector; ``params`` are any JSON values when the request is invalid."""

    event: str
    params: Mapping[str, Any]
    expect: Expect | Refused


@dataclass(frozen=True)
class Vector:
    id: str
    machine: str
    covers: tuple[str, ...]
    steps: tuple[Step, ...]


@dataclass(frozen=True)
class Manifest:
    """The first line of a vectors file: which coverage sets it holds, and how complete they are."""

    machine: str
    sets: Mapping[str, Mapping[str, Any]]
    vectors: int
    options: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {"manifest": 1, "machine": self.machine, "vectors": self.vectors,
                "sets": {name: dict(info) for name, info in self.sets.items()}, "options": dict(self.options)}


def describe_label(table: Table, label: Label) -> str:
    """``Event`` or ``Event{p=v,...}`` as cover tags and reports print an event."""
    name, params = label
    if not params:
        return name
    pairs = table.event(name).param_dict(params)
    return name + "{" + ",".join(f"{k}={_text(v)}" for k, v in pairs.items()) + "}"


def describe_config(table: Table, state: int, values: Sequence[Value]) -> str:
    pairs = ",".join(f"{k}={_text(v)}" for k, v in table.vars_dict(values).items())
    return f"{table.states[state].name}{{{pairs}}}" if pairs else table.states[state].name


def _text(value: Value) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def expected_run(table: Table, labels: Iterable[Label],
                 memo: StepMemo | None = None) -> Iterator[tuple[Step, tuple[Row, ...]]]:
    """Each event of a sequence from the initial configuration, with its expectation and fired rows.

    Runs given one ``memo`` share one ``Step`` wherever they take the same event from the
    same configuration: the semantics is asked once, and a harness learns the step's
    request and expected reply once (it knows steps by identity)."""
    state, values = table.initial.index, table.initial_vars()
    for label in labels:
        key = (state, values, label)
        found = None if memo is None else memo.get(key)
        if found is None:
            name, params = label
            result = step(table, state, values, name, params)
            expect = Expect(result.accepted, table.states[result.state].name, result.actions,
                            table.vars_dict(result.vars))
            found = Step(name, table.event(name).param_dict(params), expect), result.rows, result.state, result.vars
            if memo is not None:
                memo[key] = found
        made, rows, state, values = found
        yield made, rows


def make_vector(table: Table, vid: str, covers: Sequence[str], labels: Sequence[Label],
                memo: StepMemo | None = None) -> Vector:
    steps = tuple(s for s, _ in expected_run(table, labels, memo))
    return Vector(f"{table.machine}/{vid}", table.machine, tuple(covers), steps)


def vector_labels(table: Table, vector: Vector) -> list[Label]:
    """The vector's valid events as (name, parameter tuple), validated against the table.

    A step expecting a refusal leaves the configuration as it is, so it has no label; it
    must really be invalid for the table.
    """
    labels = []
    for number, s in enumerate(vector.steps, start=1):
        if isinstance(s.expect, Refused):
            if invalid_request(table, s.event, s.params) is None:
                raise VectorError(f"{vector.id}: step {number}: expects a refusal of a valid request")
            continue
        if s.event not in table.event_index:
            raise VectorError(f"{vector.id}: step {number}: event {s.event!r} is not in table {table.machine}")
        try:
            labels.append((s.event, table.event(s.event).param_values(s.params)))
        except ValueError as exc:
            raise VectorError(f"{vector.id}: step {number}: {exc}") from None
    return labels


def invalid_request(table: Table, event: str, params: Mapping[str, Any]) -> str | None:
    """Why an event request is invalid for the table (unknown event, bad parameters), or None."""
    if event not in table.event_index:
        return f"event {event!r} is not in table {table.machine}"
    try:
        table.event(event).param_values(params)
    except ValueError as exc:
        return str(exc)
    return None


def _expect_json(expect: Expect | Refused) -> dict[str, Any]:
    if isinstance(expect, Refused):
        return {"ok": False}
    return {"accepted": expect.accepted, "state": expect.state, "actions": list(expect.actions),
            "vars": dict(expect.vars)}


def to_json(vector: Vector) -> dict[str, Any]:
    return {
        "id": vector.id, "machine": vector.machine, "covers": list(vector.covers),
        "steps": [{"event": s.event, "params": dict(s.params), "expect": _expect_json(s.expect)}
                  for s in vector.steps],
    }


def write_vectors(out: TextIO, manifest: Manifest, vectors: Iterable[Vector]) -> None:
    """Manifest line first, then one vector per line; keys in a fixed order, so output is stable."""
    out.write(json.dumps(manifest.to_json(), separators=(",", ":")) + "\n")
    for vector in vectors:
        out.write(json.dumps(to_json(vector), separators=(",", ":")) + "\n")


def read_vectors(path: str | Path) -> tuple[Manifest | None, list[Vector]]:
    """Read a vectors file; raise VectorError naming ``FILE:LINE`` for anything malformed."""
    name = str(path)
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise VectorError(f"{name}: cannot read vectors: {getattr(exc, 'strerror', None) or exc}") from None
    manifest: Manifest | None = None
    vectors: list[Vector] = []
    seen: set[str] = set()
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{name}:{number}"
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            raise VectorError(f"{where}: error: not JSON: {exc.msg}") from None
        if not isinstance(data, dict):
            raise VectorError(f"{where}: error: a line must be a JSON object")
        if "manifest" in data:
            manifest = Manifest(str(data.get("machine", "")), data.get("sets") or {}, int(data.get("vectors", 0)),
                                data.get("options") or {})
            continue
        try:
            vector = vector_from_json(data)
        except (KeyError, TypeError, ValueError) as exc:
            raise VectorError(f"{where}: error: malformed vector: {exc}") from None
        if vector.id in seen:
            raise VectorError(f"{where}: error: duplicate vector id {vector.id!r}")
        seen.add(vector.id)
        vectors.append(vector)
    return manifest, vectors


def vector_from_json(data: Mapping[str, Any]) -> Vector:
    vid, machine, covers, steps = data["id"], data["machine"], data.get("covers", []), data["steps"]
    if not isinstance(vid, str) or not isinstance(machine, str):
        raise TypeError("'id' and 'machine' must be strings")
    if not isinstance(covers, list) or not all(isinstance(c, str) for c in covers):
        raise TypeError("'covers' must be a list of strings")
    if not isinstance(steps, list) or not steps:
        raise TypeError("'steps' must be a non-empty list")
    return Vector(vid, machine, tuple(covers), tuple(_step(s, i) for i, s in enumerate(steps, start=1)))


def _step(data: Any, number: int) -> Step:
    if not isinstance(data, dict):
        raise TypeError(f"step {number} must be an object")
    event, params, expect = data["event"], data.get("params", {}), data["expect"]
    if not isinstance(event, str):
        raise TypeError(f"step {number}: 'event' must be a string")
    if not isinstance(expect, dict):
        raise TypeError(f"step {number}: 'expect' must be an object")
    if expect.get("ok") is False:
        if not isinstance(params, dict):
            raise TypeError(f"step {number}: 'params' must be an object")
        return Step(event, params, REFUSED)
    if not isinstance(params, dict) or not all(_is_value(v) for v in params.values()):
        raise TypeError(f"step {number}: 'params' must be an object of integers and booleans")
    accepted, state = expect["accepted"], expect["state"]
    actions, values = expect.get("actions", []), expect.get("vars", {})
    if not isinstance(accepted, bool) or not isinstance(state, str):
        raise TypeError(f"step {number}: 'expect' needs boolean 'accepted' and string 'state'")
    if not isinstance(actions, list) or not all(isinstance(a, str) for a in actions):
        raise TypeError(f"step {number}: 'expect.actions' must be a list of strings")
    if not isinstance(values, dict) or not all(_is_value(v) for v in values.values()):
        raise TypeError(f"step {number}: 'expect.vars' must be an object of integers and booleans")
    return Step(event, params, Expect(accepted, state, tuple(actions), values))


def _is_value(value: object) -> bool:
    return isinstance(value, int)
