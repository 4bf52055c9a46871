"""The table as a Promela model, so Spin can cross-check the explorer.

One process, one ``do`` loop, one ``d_step`` choice per row (and per parameter value
when the row reads its parameters). A ``d_step`` is a single indivisible transition
whose intermediate states are never stored, so Spin's stored states are exactly the
explorer's configurations: the event's row, then the eventless rows of transient states
(a ``do`` loop inside the same ``d_step``), then range and invariant assertions.
``set`` is simultaneous, so right sides go to hidden temporaries first (hidden
variables are not part of Spin's state vector). Actions are not modelled: they do not
change the configuration. Invariants of the initial configuration are asserted by the
never claim, which also checks them after every step.

Spin would silently take both of two enabled rows, where the table's semantics is a
determinism error: every ``d_step`` first asserts that no other row of its event is
enabled, and every eventless choice that exactly one row is. The eventless loop counts
its steps: more than there are transient configurations means one repeated (an
eventless cycle). Spin's own limits are refused with ``PromelaLimit`` rather than
exported wrong: Promela's ``int`` is 32-bit, so every variable, constant and
intermediate value must fit; the state variable is a ``byte``, ``short`` or ``int`` by
the number of states; and a row expanded per parameter value past ``MAX_CHOICES``
alternatives makes pan.c too large for gcc to compile in reasonable time.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping

from agentfsm.spec import Param, Row, State, Table, Variable
from agentfsm.spec.expr import Binary, Expr, InStates, Lit, Ref, Unary, Value

INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1   # Promela's int
MAX_CHOICES = 2000   # d_step alternatives; pan.c grows with each, and gcc's time faster still


class PromelaLimit(ValueError):
    """The table does not fit one of Promela's or Spin's limits (the message names it)."""


def _lit(value: Value | str) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    # Spin reads -2147483648 as -(2147483648), which pan.c's C negates as a 64-bit long
    return f"({INT_MIN + 1} - 1)" if value == INT_MIN else str(value)


def _state(table: Table, index: int) -> str:
    return f"S_{table.states[index].name}"


def expr_to_promela(table: Table, expr: Expr, params: Mapping[str, Value | str]) -> str:
    """Promela text of an expression, event parameters replaced by the given values (or names of
    variables that hold them)."""
    if isinstance(expr, Lit):
        return _lit(expr.value)
    if isinstance(expr, Ref):
        if expr.kind == "var":
            return f"v_{expr.name}"
        return _lit(params[expr.name] if expr.kind == "param" else expr.value)
    if isinstance(expr, InStates):
        test = " || ".join(f"st == {_state(table, i)}" for i in sorted(expr.indices)) or "false"
        return f"!({test})" if expr.negated else f"({test})"
    if isinstance(expr, Unary):
        inner = expr_to_promela(table, expr.operand, params)
        return f"!({inner})" if expr.op == "not" else f"-({inner})"
    op = {"and": "&&", "or": "||"}.get(expr.op, expr.op)
    assert isinstance(expr, Binary)
    return f"({expr_to_promela(table, expr.left, params)} {op} {expr_to_promela(table, expr.right, params)})"


def _effect(table: Table, row: Row, params: Mapping[str, Value | str]) -> list[str]:
    """Statements applying ``row``: simultaneous updates, range assertions, the new state."""
    out = [f"t_{u.var} = {expr_to_promela(table, u.expr, params)}" for u in row.updates]
    out += [f"v_{u.var} = t_{u.var}" for u in row.updates]
    for u in row.updates:
        var = table.variables[u.slot - 1]
        if var.type == "int":
            out.append(f"assert(v_{u.var} >= {_lit(var.lo)} && v_{u.var} <= {_lit(var.hi)})")
    out.append(f"st = {_state(table, table.state_index[row.target])}")
    return out


def _enabled(table: Table, row: Row, params: Mapping[str, Value], stable: list[State]) -> str:
    sources = stable if row.wildcard else [table.state(row.source)]
    where = " || ".join(f"st == {_state(table, s.index)}" for s in sources)
    if row.guard is None:
        return f"({where})"
    return f"({where}) && {expr_to_promela(table, row.guard, params)}"


def _state_type(count: int) -> str:
    if count <= 256:
        return "byte"
    if count <= 1 << 15:
        return "short"
    return "int"


def check_limits(table: Table) -> None:
    """Refuse a table whose values do not fit Promela's 32-bit ``int``."""
    for var in table.variables:
        if var.type == "int" and not (var.lo >= INT_MIN and var.hi <= INT_MAX):
            raise PromelaLimit(f"variable {var.name} ranges over {var.lo}..{var.hi}, outside Promela's 32-bit int "
                               f"({INT_MIN}..{INT_MAX})")
    exprs: list[tuple[str, Expr, Mapping[str, Param]]] = [(f"invariant {inv.name}", inv.expr, {})
                                                          for inv in table.invariants]
    for row in table.rows:
        params = {p.name: p for p in table.event(row.event).params} if row.event is not None else {}
        if row.guard is not None:
            exprs.append((f"row {row.index}'s guard", row.guard, params))
        exprs += [(f"row {row.index}'s set {u.var}", u.expr, params) for u in row.updates]
    for where, expr, read in exprs:
        for part in _parts(expr):
            lo, hi = _interval(table, part, read)
            if lo < INT_MIN or hi > INT_MAX:
                raise PromelaLimit(f"{where} can reach {lo if lo < INT_MIN else hi}, outside Promela's 32-bit int "
                                   f"({INT_MIN}..{INT_MAX})")


def _parts(expr: Expr) -> list[Expr]:
    """The expression and every subexpression, outermost first: Spin computes each one in 32 bits."""
    if isinstance(expr, Unary):
        return [expr, *_parts(expr.operand)]
    if isinstance(expr, Binary):
        return [expr, *_parts(expr.left), *_parts(expr.right)]
    return [expr]


def _interval(table: Table, expr: Expr, params: Mapping[str, Param]) -> tuple[int, int]:
    """Bounds of the values an expression takes (bools as 0..1), with ``params`` the
    parameters of the row's event."""
    if isinstance(expr, Lit):
        return int(expr.value), int(expr.value)
    if isinstance(expr, Ref) and expr.type == "int":
        if expr.kind == "const":
            return int(expr.value), int(expr.value)
        bounds: Variable | Param = table.variables[expr.slot - 1] if expr.kind == "var" else params[expr.name]
        return bounds.lo, bounds.hi
    if isinstance(expr, Unary) and expr.op == "-":
        lo, hi = _interval(table, expr.operand, params)
        return -hi, -lo
    if isinstance(expr, Binary) and expr.op in ("+", "-"):
        (alo, ahi), (blo, bhi) = _interval(table, expr.left, params), _interval(table, expr.right, params)
        return (alo + blo, ahi + bhi) if expr.op == "+" else (alo - bhi, ahi - blo)
    return 0, 1   # a bool: a comparison, a connective, ``not``, ``state in``, a bool name


def export_promela(table: Table) -> str:
    check_limits(table)
    states = table.states
    stable = [s for s in states if not s.final and not s.transient]
    transient = [s for s in states if s.transient]
    lines = [f"/* {table.machine}: generated by agentfsm export --format promela from {table.file}. */"]
    lines += [f"#define {_state(table, s.index)} {s.index}" for s in states]
    lines.append(f"{_state_type(len(states))} st = {_state(table, table.initial.index)};")
    for var in table.variables:
        kind = "bool" if var.type == "bool" else "int"
        lines.append(f"{kind} v_{var.name} = {_lit(var.init)};")
    for var in table.variables:
        lines.append(f"hidden {'byte' if var.type == 'bool' else 'int'} t_{var.name};")
    if transient:
        lines.append("hidden int settle;")
    invariants = [expr_to_promela(table, inv.expr, {}) for inv in table.invariants]
    check = " && ".join(invariants) if invariants else "true"
    lines.append(f"#define INVARIANTS ({check})")
    lines.append("")
    lines.append("active proctype machine() {")
    lines.append("end:")
    lines.append("  do")
    choices = 0
    for row in table.rows:
        if row.event is None:
            continue
        event = table.event(row.event)
        combos: list[dict[str, Value]] = [{}]
        rivals = [r for r in table.rows if r.event == row.event and r is not row
                  and (r.wildcard or row.wildcard or r.source == row.source)]
        if _row_reads_params(row) or any(_row_reads_params(r) for r in rivals):
            count = 1
            for p in event.params:
                count *= 2 if p.type == "bool" else p.hi - p.lo + 1
            choices += count
            if choices > MAX_CHOICES:
                raise PromelaLimit(f"row {row.index} ({row.event}) needs one d_step per parameter value: more than "
                                   f"{MAX_CHOICES} alternatives in all, and pan.c that size takes gcc minutes to "
                                   f"compile; narrow the parameter ranges with --set")
            combos = [dict(zip((p.name for p in event.params), values, strict=True))
                      for values in itertools.product(*(p.domain for p in event.params))]
        else:
            choices += 1
        for params in combos:
            guard = _enabled(table, row, params, stable)
            body = [f"assert(!({_enabled(table, r, params, stable)}))" for r in rivals]
            body += _effect(table, row, params)
            if table.states[table.state_index[row.target]].transient:
                body += _settle(table, transient)
            body.append("assert(INVARIANTS)")
            tag = f"row {row.index}: {row.source} {row.event}"
            if params:
                tag += "(" + ", ".join(f"{k}={_lit(v)}" for k, v in params.items()) + ")"
            lines.append(f"  :: d_step {{ /* {tag} */ {guard} -> {'; '.join(body)} }}")
    if choices == 0:
        lines.append("  :: false -> skip   /* no row: the initial configuration is the only one */")
    lines.append("  od")
    lines.append("}")
    lines.append("")
    lines.append(never_claim([f"v_{var.name}" for var in table.variables]))
    return "\n".join(lines) + "\n"


def never_claim(variables: list[str]) -> str:
    """The never claim: the invariants in every state, and a read of every variable, so that
    Spin's dead-variable elimination does not hide one nothing else reads (Spin's stored
    states then stay the explorer's configurations)."""
    reads = "".join(f" && {name} == {name}" for name in variables)
    return f"never {{ do :: assert(INVARIANTS{reads}) od }}"


def _params_read(expr: Expr | None) -> set[str]:
    if isinstance(expr, Ref):
        return {expr.name} if expr.kind == "param" else set()
    if isinstance(expr, Unary):
        return _params_read(expr.operand)
    if isinstance(expr, Binary):
        return _params_read(expr.left) | _params_read(expr.right)
    return set()


def _row_reads_params(row: Row) -> bool:
    return bool(_params_read(row.guard)) or any(_params_read(u.expr) for u in row.updates)


def settle_bound(table: Table) -> int:
    """The number of transient configurations (at most ``INT_MAX - 1``, an ``int`` to count up
    to): an eventless chain longer than that repeats one of them, a cycle."""
    bound = sum(1 for state in table.states if state.transient)
    for var in table.variables:
        bound *= 2 if var.type == "bool" else var.hi - var.lo + 1
    return min(bound, INT_MAX - 1)


def _settle(table: Table, transient: list[State]) -> list[str]:
    """Eventless rows out of transient states, as a loop: each round asserts that exactly
    one eventless row is enabled, and that the chain is no longer than the number of
    transient configurations (a longer one repeats a configuration: an eventless cycle)."""
    bound = settle_bound(table)
    options, guards = [], []
    for state in transient:
        for row in table.eventless_rows.get(state.index, ()):
            guard = f"st == {_state(table, state.index)}"
            if row.guard is not None:
                guard += f" && {expr_to_promela(table, row.guard, {})}"
            guards.append(f"(({guard}) -> 1 : 0)")
            options.append(f":: {guard} -> {'; '.join(_effect(table, row, {}))}")
    stuck = " || ".join(f"st == {_state(table, s.index)}" for s in transient)
    enabled = " + ".join(guards) or "0"
    return ["settle = 0",
            f"do :: !({stuck}) -> break :: else -> assert({enabled} == 1); settle = settle + 1; "
            f"assert(settle <= {bound}); if {' '.join(options)} fi od",
            "settle = 0"]
