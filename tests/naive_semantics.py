"""A second, deliberately naive interpreter of the table semantics, the oracle the tests hold
the engine, the explorer, vector generation and the audit to.

Written from docs/table-format.md ("Step semantics") alone. It shares nothing with what it
checks: it does not import ``agentfsm`` at all. It reads the table as plain data (the dict a
YAML file holds, parsed here with ``yaml.safe_load`` under YAML 1.2 booleans) and evaluates
expression text with its own evaluator over a whitelisted Python ``ast`` (never ``eval``),
so a bug in the loader, the expression compiler, the row indexes, ``semantics.step`` or
anything built on them shows up as a disagreement. Configurations are dicts, the step is
plain loops, and simultaneous assignment reads every right side before writing any.

It trusts the table to be valid (the real loader checks that, and every table given to it
here was loaded by the real loader first): types and names are not re-checked.
"""

from __future__ import annotations

import ast
import functools
import re
from collections import deque
from dataclasses import dataclass, field
from itertools import product
from pathlib import Path
from typing import Any

import yaml

Value = int | bool
Vars = dict[str, Value]
Label = tuple[str, tuple[Value, ...]]
ERRORS = ("determinism", "bounds", "transient")


class _Yaml12Loader(yaml.SafeLoader):
    """SafeLoader reading booleans as YAML 1.2 does: only true/false, so `on:` stays a string."""


_Yaml12Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
for _first in "tTfF":
    _Yaml12Loader.yaml_implicit_resolvers.setdefault(_first, []).append(
        ("tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")))


def read_yaml(path: str | Path) -> dict[str, Any]:
    data = yaml.load(Path(path).read_text(encoding="utf-8"), Loader=_Yaml12Loader)
    assert isinstance(data, dict)
    return data


# --- expressions: a whitelisted ast, evaluated by hand ---

def evaluate(text: object, names: dict[str, Value], state: str) -> Value:
    """The value of an expression as the table writes it (text, or a bare YAML int/bool)."""
    if isinstance(text, bool | int):
        return text
    assert isinstance(text, str)
    return _eval(_parse(text), names, state)


@functools.lru_cache(maxsize=4096)
def _parse(text: str) -> ast.expr:
    return ast.parse(text.strip(), mode="eval").body


def _eval(node: ast.expr, names: dict[str, Value], state: str) -> Value:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.Name):
        if node.id == "true":
            return True
        if node.id == "false":
            return False
        return names[node.id]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return not _eval(node.operand, names, state)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_int(node.operand, names, state)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.UAdd):
        return _int(node.operand, names, state)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _int(node.left, names, state) + _int(node.right, names, state)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub):
        return _int(node.left, names, state) - _int(node.right, names, state)
    if isinstance(node, ast.BoolOp):
        results = [bool(_eval(v, names, state)) for v in node.values]
        return all(results) if isinstance(node.op, ast.And) else any(results)
    if isinstance(node, ast.Compare):
        left_node = node.left
        for op, right_node in zip(node.ops, node.comparators, strict=True):
            if isinstance(op, ast.In | ast.NotIn):
                assert isinstance(left_node, ast.Name) and left_node.id == "state"
                members = right_node.elts if isinstance(right_node, ast.Tuple) else [right_node]
                listed = [m.id for m in members if isinstance(m, ast.Name)]
                if (state in listed) != isinstance(op, ast.In):
                    return False
            elif not _compare(op, _eval(left_node, names, state), _eval(right_node, names, state)):
                return False
            left_node = right_node
        return True
    raise AssertionError(f"not in the expression language: {ast.dump(node)}")


def _int(node: ast.expr, names: dict[str, Value], state: str) -> int:
    value = _eval(node, names, state)
    assert type(value) is int
    return value


def _compare(op: ast.cmpop, a: Value, b: Value) -> bool:
    if isinstance(op, ast.Eq):
        return a == b
    if isinstance(op, ast.NotEq):
        return a != b
    if isinstance(op, ast.Lt):
        return a < b
    if isinstance(op, ast.LtE):
        return a <= b
    if isinstance(op, ast.Gt):
        return a > b
    assert isinstance(op, ast.GtE)
    return a >= b


# --- the table as plain data ---

@dataclass
class Outcome:
    """One step: ``status`` is fired/rejected/ignored/final, or an error kind (then
    ``error_rows`` holds the rows the docs' error names: the enabled ones, the one out of range)."""

    status: str
    accepted: bool = False
    state: str = ""
    vars: Vars = field(default_factory=dict)
    actions: list[str] = field(default_factory=list)
    rows: list[int] = field(default_factory=list)
    error_rows: list[int] = field(default_factory=list)

    @property
    def error(self) -> bool:
        return self.status in ERRORS


class NaiveTable:
    """A table's plain data with the few derived facts the step needs, computed by loops."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data
        self.constants: Vars = dict(data.get("constants") or {})
        self.states: dict[str, dict[str, Any]] = {n: dict(s or {}) for n, s in data["states"].items()}
        self.state_names = list(self.states)
        self.variables: dict[str, dict[str, Any]] = {}
        for name, spec in (data.get("variables") or {}).items():
            decl = {"type": spec["type"], "init": evaluate(spec["init"], self.constants, "")}
            if spec["type"] == "int":
                decl["min"] = evaluate(spec["min"], self.constants, "")
                decl["max"] = evaluate(spec["max"], self.constants, "")
            self.variables[name] = decl
        self.events: dict[str, list[tuple[str, dict[str, Any]]]] = {}
        for name, spec in (data.get("events") or {}).items():
            params = []
            for pname, p in ((spec or {}).get("params") or {}).items():
                decl = {"type": p["type"]}
                if p["type"] == "int":
                    decl["min"] = evaluate(p["min"], self.constants, "")
                    decl["max"] = evaluate(p["max"], self.constants, "")
                params.append((pname, decl))
            self.events[name] = params
        self.rows: list[dict[str, Any]] = list(data["transitions"])
        unhandled = data.get("unhandled") or {}
        self.policy: str = unhandled.get("policy", "reject")
        self.unhandled_emit: list[str] = list(unhandled.get("emit") or [])

    @classmethod
    def from_file(cls, path: str | Path) -> NaiveTable:
        return cls(read_yaml(path))

    def is_final(self, state: str) -> bool:
        return bool(self.states[state].get("final"))

    def is_transient(self, state: str) -> bool:
        return bool(self.states[state].get("transient"))

    def initial(self) -> tuple[str, Vars]:
        initial = [name for name, spec in self.states.items() if spec.get("initial")]
        assert len(initial) == 1
        return initial[0], {name: decl["init"] for name, decl in self.variables.items()}

    def parse_params(self, event: object, given: object) -> tuple[Value, ...] | str:
        """The event's parameter values in declaration order, or why the request is invalid
        (unknown event, a missing, extra, ill-typed or out-of-range parameter)."""
        if not isinstance(event, str) or event not in self.events:
            return f"unknown event {event!r}"
        if not isinstance(given, dict):
            return "params must be an object"
        declared = self.events[event]
        names = [name for name, _ in declared]
        extra = sorted(set(given) - set(names))
        if extra:
            return f"unknown parameter {extra[0]!r}"
        values: list[Value] = []
        for name, decl in declared:
            if name not in given:
                return f"missing parameter {name!r}"
            value = given[name]
            if decl["type"] == "bool":
                if not isinstance(value, bool):
                    return f"parameter {name!r} must be a boolean"
            elif isinstance(value, bool) or not isinstance(value, int):
                return f"parameter {name!r} must be an integer"
            elif not decl["min"] <= value <= decl["max"]:
                return f"parameter {name!r} out of range {decl['min']}..{decl['max']}"
            values.append(value)
        return tuple(values)

    def labels(self) -> list[Label]:
        """Every event with every combination of parameter values, in declaration order."""
        result: list[Label] = []
        for event, params in self.events.items():
            domains = [[False, True] if p["type"] == "bool" else list(range(p["min"], p["max"] + 1))
                       for _, p in params]
            for values in product(*domains):
                result.append((event, tuple(values)))
        return result

    def _guard(self, row: dict[str, Any], names: dict[str, Value], state: str) -> bool:
        return "when" not in row or bool(evaluate(row["when"], names, state))

    def _fire(self, number: int, row: dict[str, Any], names: dict[str, Value], state: str,
              current: Vars) -> Vars | None:
        """The variables after the row: every right side read from ``names`` first, then all
        written at once. None when a value leaves its range."""
        computed = {}
        for var, expr in (row.get("set") or {}).items():
            computed[var] = evaluate(expr, names, state)
        new = dict(current)
        for var, value in computed.items():
            decl = self.variables[var]
            if decl["type"] == "int" and not decl["min"] <= value <= decl["max"]:
                return None
            new[var] = value
        return new

    def step(self, state: str, current: Vars, event: str, params: tuple[Value, ...] = ()) -> Outcome:
        """Deliver an event to the configuration (``state``, ``current``); never mutates them."""
        if self.is_final(state):
            return Outcome("final", False, state, dict(current))
        names: dict[str, Value] = dict(self.constants)
        names.update(current)
        for (pname, _), value in zip(self.events[event], params, strict=True):
            names[pname] = value
        candidates = [n for n, row in enumerate(self.rows, start=1)
                      if row.get("on") == event and row["from"] == state]
        candidates += [n for n, row in enumerate(self.rows, start=1)
                       if row.get("on") == event and row["from"] == "*"]
        enabled = [n for n in candidates if self._guard(self.rows[n - 1], names, state)]
        if not enabled:
            accepted = self.policy == "ignore"
            return Outcome("ignored" if accepted else "rejected", accepted, state, dict(current),
                           list(self.unhandled_emit))
        if len(enabled) > 1:
            return Outcome("determinism", error_rows=enabled)
        number = enabled[0]
        row = self.rows[number - 1]
        new = self._fire(number, row, names, state, current)
        if new is None:
            return Outcome("bounds", error_rows=[number])
        fired, actions = [number], list(row.get("emit") or [])
        here = row["to"]
        visited: list[tuple[str, Vars]] = []
        while self.is_transient(here):
            if (here, new) in visited:
                return Outcome("transient", error_rows=fired)
            visited.append((here, dict(new)))
            names = dict(self.constants)
            names.update(new)
            out = [n for n, r in enumerate(self.rows, start=1)
                   if "on" not in r and r["from"] == here and self._guard(r, names, here)]
            if len(out) != 1:
                return Outcome("transient", error_rows=out or fired)
            number = out[0]
            row = self.rows[number - 1]
            after = self._fire(number, row, names, here, new)
            if after is None:
                return Outcome("bounds", error_rows=[number])
            new = after
            fired.append(number)
            actions.extend(row.get("emit") or [])
            here = row["to"]
        return Outcome("fired", True, here, new, actions, fired)

    def run(self, labels: list[Label]) -> list[Outcome]:
        """Each event from the initial configuration; stops after a step that breaks the table."""
        state, current = self.initial()
        outcomes = []
        for event, params in labels:
            outcome = self.step(state, current, event, params)
            outcomes.append(outcome)
            if outcome.error:
                break
            state, current = outcome.state, outcome.vars
        return outcomes


def key(state: str, current: Vars) -> tuple[str, tuple[tuple[str, Value], ...]]:
    """A hashable form of a dict configuration."""
    return state, tuple(sorted(current.items()))


@dataclass
class Space:
    """Breadth-first exploration by the naive step: each configuration's depth, every error."""

    depth: dict[tuple[str, tuple[tuple[str, Value], ...]], int]
    edges: dict[tuple[Any, Label], Outcome]
    errors: list[tuple[int, str, tuple[int, ...]]]   # (depth of the step, kind, rows)

    def shortest_error(self, kind: str) -> int | None:
        """Steps in the shortest event sequence ending in an error of ``kind``."""
        return min((d for d, k, _ in self.errors if k == kind), default=None)

    def distinct(self, kind: str) -> set[tuple[int, ...]]:
        return {rows for _, k, rows in self.errors if k == kind}


def explore(table: NaiveTable) -> Space:
    state, current = table.initial()
    start = key(state, current)
    depth = {start: 0}
    configs = {start: (state, current)}
    queue = deque([start])
    edges: dict[tuple[Any, Label], Outcome] = {}
    errors = []
    labels = table.labels()
    while queue:
        here = queue.popleft()
        state, current = configs[here]
        for label in labels:
            outcome = table.step(state, current, *label)
            edges[(here, label)] = outcome
            if outcome.error:
                errors.append((depth[here] + 1, outcome.status, tuple(outcome.error_rows)))
                continue
            there = key(outcome.state, outcome.vars)
            if there not in depth:
                depth[there] = depth[here] + 1
                configs[there] = (outcome.state, outcome.vars)
                queue.append(there)
    return Space(depth, edges, errors)
