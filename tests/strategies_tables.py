"""Hypothesis strategies for random format-1 tables and event sequences (reusable by every part).

Tables are drawn as plain data, written as YAML text and loaded by the real loader, so
they are valid by construction; they may still break their own rules at run time (two
enabled rows, a `set` out of range, a stuck transient state), which is exactly what the
engines under test must report alike.
"""

from __future__ import annotations

import json
from itertools import product
from typing import Any

from agentfsm.spec import Table, load_table_bytes
from agentfsm.spec.expr import Value
from agentfsm.spec.semantics import step
from hypothesis import strategies as st

EventSeq = list[tuple[str, tuple[Value, ...]]]
Configuration = tuple[int, tuple[Value, ...]]


@st.composite
def table_data(draw: st.DrawFn, max_states: int = 5, max_rows: int = 12) -> dict[str, Any]:
    """A random table as the plain data a YAML file would hold."""
    n_states = draw(st.integers(2, max_states))
    names = [f"S{i}" for i in range(n_states)]
    final = draw(st.sampled_from([None, *names[1:]]))
    transient = draw(st.sampled_from([None, *[n for n in names[1:] if n != final]]))
    states: dict[str, Any] = {}
    for name in names:
        spec: dict[str, Any] = {}
        if name == "S0":
            spec["initial"] = True
        if name == final:
            spec["final"] = True
        if name == transient:
            spec["transient"] = True
        states[name] = spec

    ints = {f"x{i}": draw(st.integers(1, 3)) for i in range(draw(st.integers(1, 2)))}
    bools = [f"b{i}" for i in range(draw(st.integers(0, 1)))]
    variables: dict[str, Any] = {n: {"type": "int", "min": 0, "max": hi, "init": draw(st.integers(0, hi))}
                                 for n, hi in ints.items()}
    variables.update({n: {"type": "bool", "init": draw(st.booleans())} for n in bools})

    events: dict[str, Any] = {}
    event_params: dict[str, dict[str, str]] = {}
    for i in range(draw(st.integers(1, 3))):
        params: dict[str, Any] = {}
        kinds: dict[str, str] = {}
        if draw(st.booleans()):
            if draw(st.booleans()):
                params[f"p{i}"] = {"type": "int", "min": 0, "max": draw(st.integers(1, 2))}
                kinds[f"p{i}"] = "int"
            else:
                params[f"p{i}"] = {"type": "bool"}
                kinds[f"p{i}"] = "bool"
        events[f"E{i}"] = {"params": params} if params else {}
        event_params[f"E{i}"] = kinds
    actions = [f"A{i}" for i in range(draw(st.integers(1, 3)))]

    def scope(event: str | None) -> tuple[list[str], list[str]]:
        int_names = list(ints)
        bool_names = list(bools)
        for pname, kind in (event_params[event].items() if event else ()):
            (int_names if kind == "int" else bool_names).append(pname)
        return int_names, bool_names

    def atom(event: str | None) -> str:
        int_names, bool_names = scope(event)
        choices = ["int", "state"] + (["bool"] if bool_names else [])
        kind = draw(st.sampled_from(choices))
        if kind == "bool":
            name = draw(st.sampled_from(bool_names))
            return draw(st.sampled_from([name, f"not {name}"]))
        if kind == "state":
            chosen = draw(st.lists(st.sampled_from(names), min_size=1, max_size=2, unique=True))
            neg = draw(st.sampled_from(["in", "not in"]))
            return f"state {neg} ({', '.join(chosen)})"
        left = draw(st.sampled_from(int_names))
        op = draw(st.sampled_from(["<", "<=", "==", "!=", ">", ">="]))
        right = draw(st.sampled_from([*int_names, "0", "1", "2"]))
        return f"{left} {op} {right}"

    def guard(event: str | None) -> str | None:
        if not draw(st.booleans()):
            return None
        text = atom(event)
        if draw(st.booleans()):
            text = f"({text}) {draw(st.sampled_from(['and', 'or']))} ({atom(event)})"
        return text

    def updates(event: str | None) -> dict[str, str]:
        int_names, bool_names = scope(event)
        result: dict[str, str] = {}
        for var in draw(st.lists(st.sampled_from([*ints, *bools]), max_size=2, unique=True)):
            if var in ints:
                other = draw(st.sampled_from(int_names))
                result[var] = draw(st.sampled_from([f"{var} + 1", f"{var} - 1", other, "0", f"{other} + {var}"]))
            else:
                other = draw(st.sampled_from(bool_names))
                result[var] = draw(st.sampled_from([f"not {var}", "true", "false", other, f"{var} or {other}"]))
        return result

    def row(source: str, event: str | None) -> dict[str, Any]:
        result: dict[str, Any] = {"from": source, "to": draw(st.sampled_from(names))}
        if event is not None:
            result["on"] = event
        if (g := guard(event)) is not None:
            result["when"] = g
        if sets := updates(event):
            result["set"] = sets
        result["emit"] = draw(st.lists(st.sampled_from(actions), max_size=2))
        return result

    sources = [n for n in names if n not in (final, transient)]
    rows = [row(transient, None) for _ in range(draw(st.integers(1, 2)))] if transient else []
    # Half the tables keep one row per (state, event), so that runs go long before any
    # determinism error; the other half overlap freely.
    distinct = draw(st.booleans())
    used: set[tuple[str, str]] = set()
    for _ in range(draw(st.integers(1, max_rows))):
        source, event = draw(st.sampled_from([*sources, "*"])), draw(st.sampled_from(list(events)))
        covers = {(s, event) for s in sources} if source == "*" else {(source, event)}
        if distinct and covers & used:
            continue
        used |= covers
        rows.append(row(source, event))

    return {
        "format": 1, "machine": "random", "variables": variables, "states": states, "events": events,
        "actions": {a: {} for a in actions}, "transitions": rows,
        "unhandled": {"policy": draw(st.sampled_from(["reject", "ignore"])),
                      "emit": draw(st.lists(st.sampled_from(actions), max_size=1))},
    }


def build(data: dict[str, Any]) -> Table:
    """Load table data through the real loader (JSON is YAML 1.2)."""
    return load_table_bytes(json.dumps(data).encode(), "random.yaml")


@st.composite
def tables(draw: st.DrawFn, max_states: int = 5, max_rows: int = 12) -> Table:
    return build(draw(table_data(max_states, max_rows)))


@st.composite
def event_sequences(draw: st.DrawFn, table: Table, max_size: int = 25) -> EventSeq:
    """Events of ``table`` with valid parameter values, in declared order."""
    result: EventSeq = []
    for _ in range(draw(st.integers(0, max_size))):
        event = draw(st.sampled_from(table.events))
        params = tuple(draw(st.sampled_from(p.domain)) for p in event.params)
        result.append((event.name, params))
    return result


def reachable(table: Table) -> set[Configuration]:
    """Every configuration the reference semantics reaches from the initial one (small tables only)."""
    start = (table.initial.index, table.initial_vars())
    seen, frontier = {start}, [start]
    while frontier:
        state, values = frontier.pop()
        for event in table.events:
            for params in product(*(p.domain for p in event.params)):
                result = step(table, state, values, event.name, params)
                if (result.state, result.vars) not in seen:
                    seen.add((result.state, result.vars))
                    frontier.append((result.state, result.vars))
    return seen


@st.composite
def pointed_tables(draw: st.DrawFn) -> dict[str, Any]:
    """Random tables made pointed where implementations part: two counters that rows swap and
    copy within one ``set`` (sequential and simultaneous assignment differ), and a transient
    state that some rows enter, whose eventless row emits actions after the event row's."""
    data = draw(table_data())
    stable = [n for n, spec in data["states"].items() if not spec.get("final") and not spec.get("transient")]
    data["states"]["T"] = {"transient": True}
    data["transitions"].append({"from": "T", "to": draw(st.sampled_from(stable)),
                                "emit": draw(st.lists(st.sampled_from(list(data["actions"])), min_size=1,
                                                      max_size=2))})
    for row in data["transitions"][:-1]:
        if draw(st.integers(0, 2)) == 0:
            row["to"] = "T"
    data["variables"].update({y: {"type": "int", "min": 0, "max": 3, "init": draw(st.integers(0, 3))}
                              for y in ("y0", "y1")})
    patterns = [None, {"y0": "y1", "y1": "y0"}, {"y0": "3", "y1": "y0"}, {"y1": "0"}]
    for row in data["transitions"]:
        extra = draw(st.sampled_from(patterns))
        if extra is not None:
            row["set"] = {**row.get("set", {}), **extra}
    return data
