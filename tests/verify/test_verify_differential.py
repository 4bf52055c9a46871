"""Differential test: explorer vs ``semantics.step`` vs a naive interpreter written here.

Hypothesis builds random valid tables (states, transient states, bounded variables,
guards, simultaneous updates, parameters, both unhandled policies) as YAML text through
the real loader. On every table the explorer's edges, errors, row fire counts and
unhandled counts must equal what the naive interpreter computes for every (reachable
configuration, label), and the explored set must equal a brute-force closure.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from agentfsm.spec import Row, Table, TableError, load_table_bytes
from agentfsm.spec.expr import Binary, Expr, InStates, Lit, Ref, Unary, Value
from agentfsm.spec.semantics import SemanticError, step
from agentfsm.verify.table import explore as explore_module
from agentfsm.verify.table.explore import explore, labels_of
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

Config = tuple[int, tuple[Value, ...]]


# --- the naive interpreter: walks the IR and the row list, no compiled closures, no indexes ---

def evaluate(expr: Expr, state: str, env: dict[str, Value]) -> Any:
    if isinstance(expr, Lit):
        return expr.value
    if isinstance(expr, Ref):
        return expr.value if expr.kind == "const" else env[expr.name]
    if isinstance(expr, InStates):
        return (state in expr.states) != expr.negated
    if isinstance(expr, Unary):
        inner = evaluate(expr.operand, state, env)
        return (not inner) if expr.op == "not" else -inner
    assert isinstance(expr, Binary)
    a = evaluate(expr.left, state, env)
    if expr.op == "and":
        return a and evaluate(expr.right, state, env)
    if expr.op == "or":
        return a or evaluate(expr.right, state, env)
    b = evaluate(expr.right, state, env)
    return {"+": lambda: a + b, "-": lambda: a - b, "==": lambda: a == b, "!=": lambda: a != b,
            "<": lambda: a < b, "<=": lambda: a <= b, ">": lambda: a > b, ">=": lambda: a >= b}[expr.op]()


def fire(table: Table, row: Row, state: str, env: dict[str, Value]) -> dict[str, Value]:
    new = {v.name: env[v.name] for v in table.variables}
    for update in row.updates:
        value = evaluate(update.expr, state, env)
        var = next(v for v in table.variables if v.name == update.var)
        if var.type == "int" and not var.lo <= value <= var.hi:
            raise LookupError("bounds")
        new[update.var] = value
    return new


def naive_step(table: Table, config: Config, event: str, params: tuple[Value, ...]
               ) -> tuple[str, Config | None, tuple[int, ...]]:
    """('fired'|'ignored'|'rejected'|'final'|error kind, next configuration or None, rows fired)."""
    state_index, values = config
    state = table.states[state_index]
    if state.final:
        return "final", None, ()
    env = {v.name: x for v, x in zip(table.variables, values, strict=True)}
    env.update(zip((p.name for p in table.event(event).params), params, strict=True))
    rows = [r for r in table.rows if r.event == event and r.source in (state.name, "*")]
    enabled = [r for r in rows if r.guard is None or evaluate(r.guard, state.name, env)]
    if not enabled:
        if table.unhandled.policy == "ignore":
            return "ignored", config, ()
        return "rejected", None, ()
    if len(enabled) > 1:
        return "determinism", None, ()
    try:
        current = fire(table, enabled[0], state.name, env)
    except LookupError:
        return "bounds", None, ()
    fired = [enabled[0].index]
    name = enabled[0].target
    visited = set()
    while next(s for s in table.states if s.name == name).transient:
        if (name, tuple(current.values())) in visited:
            return "transient", None, ()
        visited.add((name, tuple(current.values())))
        out = [r for r in table.rows if r.event is None and r.source == name
               and (r.guard is None or evaluate(r.guard, name, current))]
        if len(out) != 1:
            return "transient", None, ()
        try:
            current = fire(table, out[0], name, current)
        except LookupError:
            return "bounds", None, ()
        fired.append(out[0].index)
        name = out[0].target
    index = next(s.index for s in table.states if s.name == name)
    return "fired", (index, tuple(current[v.name] for v in table.variables)), tuple(fired)


def closure(table: Table) -> set[Config]:
    """Brute force: apply every label to every known configuration until nothing is new."""
    start: Config = (table.initial.index, table.initial_vars())
    known = {start}
    while True:
        new = {nxt for c in known for event, params in labels_of(table)
               for _, nxt, _ in [naive_step(table, c, event, params)] if nxt is not None} - known
        if not new:
            return known
        known |= new


# --- random tables ---

@st.composite
def tables(draw: st.DrawFn) -> Table:
    nvars = draw(st.integers(1, 2))
    variables: dict[str, dict[str, Any]] = {}
    for k in range(nvars):
        if draw(st.booleans()):
            variables[f"v{k}"] = {"type": "bool", "init": draw(st.booleans())}
        else:
            hi = draw(st.integers(1, 3))
            variables[f"v{k}"] = {"type": "int", "min": 0, "max": hi, "init": draw(st.integers(0, hi))}
    stable = [f"S{k}" for k in range(draw(st.integers(2, 4)))]
    transient = [f"T{k}" for k in range(draw(st.integers(0, 2)))]
    final = ["F"] if draw(st.booleans()) else []
    states: dict[str, dict[str, Any]] = {s: {} for s in stable}
    states[stable[0]] = {"initial": True}
    states.update({t: {"transient": True} for t in transient})
    states.update({f: {"final": True} for f in final})
    events: dict[str, dict[str, Any]] = {}
    for k in range(draw(st.integers(1, 3))):
        kind = draw(st.sampled_from(["none", "int", "bool"]))
        params = {} if kind == "none" else {"p": {"type": "int", "min": 0, "max": 2} if kind == "int"
                                             else {"type": "bool"}}
        events[f"e{k}"] = {"params": params} if params else {}

    def int_expr(names: list[str]) -> str:
        ints = [n for n in names if n == "p" or variables.get(n, {}).get("type") == "int"]
        atom = draw(st.sampled_from([*ints, "0", "1", "2"]))
        return draw(st.sampled_from([atom, f"{atom} + 1", f"{atom} - 1"]))

    def bool_expr(names: list[str]) -> str:
        ints = [n for n in names if n == "p" or variables.get(n, {}).get("type") == "int"]
        bools = [n for n in names if n not in ints]
        choices = [f"{int_expr(names)} {draw(st.sampled_from(['<', '<=', '==', '!=', '>']))} "
                   f"{draw(st.integers(0, 3))}", "true", f"state in ({draw(st.sampled_from(stable))})"]
        choices += [f"not {b}" for b in bools] + bools
        first = draw(st.sampled_from(choices))
        if draw(st.booleans()):
            return first
        return f"{first} {draw(st.sampled_from(['and', 'or']))} {draw(st.sampled_from(choices))}"

    def row(source: str, event: str | None) -> dict[str, Any]:
        names = list(variables)
        if event is not None and events[event].get("params"):
            names.append("p")
        spec: dict[str, Any] = {"from": source, "to": draw(st.sampled_from(stable + transient + final))}
        if event is not None:
            spec["on"] = event
        if draw(st.integers(0, 3)):
            spec["when"] = bool_expr(names)
        sets = {}
        for var, decl in variables.items():
            if draw(st.integers(0, 2)) == 0:
                sets[var] = bool_expr(names) if decl["type"] == "bool" else int_expr(names)
        if sets:
            spec["set"] = sets
        return spec

    rows = [row(draw(st.sampled_from([*stable, "*"])), draw(st.sampled_from(sorted(events))))
            for _ in range(draw(st.integers(2, 10)))]
    for t in transient:
        rows += [row(t, None) for _ in range(draw(st.integers(1, 2)))]
    doc = {"format": 1, "machine": "random", "variables": variables, "states": states, "events": events,
           "transitions": rows, "unhandled": {"policy": draw(st.sampled_from(["reject", "ignore"]))}}
    try:
        return load_table_bytes(json.dumps(doc).encode(), "random.yaml")
    except TableError:
        assume(False)
        raise


@pytest.mark.parametrize("memo_limit", [explore_module.MEMO_LIMIT, 0], ids=["memo", "direct"])
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(table=tables())
def test_explorer_matches_step_and_a_naive_interpreter(memo_limit: int, table: Table) -> None:
    saved = explore_module.MEMO_LIMIT
    explore_module.MEMO_LIMIT = memo_limit
    try:
        ex = explore(table)
    finally:
        explore_module.MEMO_LIMIT = saved
    configs = [ex.config(i) for i in range(ex.count)]
    assert set(configs) == closure(table)
    assert len(set(configs)) == ex.count
    fires: Counter[int] = Counter()
    unhandled: Counter[tuple[int, int]] = Counter()
    error_kinds: Counter[str] = Counter()
    for i, config in enumerate(configs):
        expected = []
        for k, (event, params) in enumerate(ex.labels):
            status, nxt, rows = naive_step(table, config, event, params)
            try:
                result = step(table, *config, event, params)
            except SemanticError as exc:
                assert exc.kind == status
                error_kinds[status] += 1
                continue
            assert result.status == status
            assert nxt == ((result.state, result.vars) if result.accepted else None)
            assert tuple(r.index for r in result.rows) == rows
            fires.update(rows)
            if status in ("rejected", "ignored"):
                unhandled[(config[0], k)] += 1
            if nxt is not None:
                expected.append((k, configs.index(nxt)))
        assert sorted(ex.edges(i)) == sorted(expected)
    assert {r: n for r, n in ex.row_fires.items() if n} == dict(fires)
    assert ex.unhandled == dict(unhandled)
    assert ex.error_count == sum(error_kinds.values())
    assert {e.kind for e in ex.errors} == set(error_kinds)
    for err in ex.errors:
        assert naive_step(table, configs[err.config], *ex.labels[err.label])[0] == err.kind


@settings(max_examples=100, deadline=None)
@given(table=tables(), data=st.data())
def test_random_walks_agree(table: Table, data: st.DataObject) -> None:
    """Along random event sequences (also through unexplored corners), step equals the naive interpreter."""
    labels = labels_of(table)
    config: Config = (table.initial.index, table.initial_vars())
    for _ in range(data.draw(st.integers(1, 30))):
        event, params = data.draw(st.sampled_from(labels))
        status, nxt, rows = naive_step(table, config, event, params)
        try:
            result = step(table, *config, event, params)
        except SemanticError as exc:
            assert exc.kind == status
            return
        assert (result.status, tuple(r.index for r in result.rows)) == (status, rows)
        if result.accepted:
            assert nxt == (result.state, result.vars)
            config = nxt
