"""The vectorised invariant evaluation (``verify.table.columns``) against the compiled closures.

Random typed expression trees over random tables' variables and states, with literals
small and huge (past the 64-bit safe range, which switches to exact Python ints), must
give in every explored configuration what ``compile_expr`` gives; tables whose packed
codes are wider than 63 bits go through the exact path too.
"""

from __future__ import annotations

from typing import Any, cast

from agentfsm.spec import Table
from agentfsm.spec.expr import Binary, Expr, InStates, Lit, Ref, Unary, compile_expr
from agentfsm.verify.table import columns
from agentfsm.verify.table.explore import explore
from hypothesis import given, settings
from hypothesis import strategies as st
from test_verify_differential import tables
from verify_tables import check, steps, verdict


@st.composite
def conditions(draw: st.DrawFn, table: Table) -> Expr:
    return exprs(table, draw, "bool")


def binary(op: str, left: Expr, right: Expr) -> Expr:
    return Binary(cast(Any, op), left, right)


def refs(table: Table, typ: str) -> list[Expr]:
    return [Ref(v.name, "var", v.type, slot=k + 1) for k, v in enumerate(table.variables) if v.type == typ]


def exprs(table: Table, draw: st.DrawFn, want: str, depth: int = 3) -> Expr:
    ints, bools = refs(table, "int"), refs(table, "bool")
    if want == "int":
        leaves: list[Expr] = [*ints, Lit(draw(st.sampled_from([0, 1, 3, -2, 1 << 62, -(1 << 70)])))]
        if depth == 0 or draw(st.booleans()):
            return draw(st.sampled_from(leaves))
        if draw(st.integers(0, 3)) == 0:
            return Unary("-", exprs(table, draw, "int", depth - 1))
        op = draw(st.sampled_from(["+", "-"]))
        return binary(op, exprs(table, draw, "int", depth - 1), exprs(table, draw, "int", depth - 1))
    states = draw(st.sets(st.sampled_from(table.states), min_size=1))
    leaves = [*bools, Lit(draw(st.booleans())),
              InStates(tuple(s.name for s in states), frozenset(s.index for s in states), draw(st.booleans()))]
    if depth == 0 or draw(st.integers(0, 2)) == 0:
        return draw(st.sampled_from(leaves))
    kind = draw(st.sampled_from(["not", "and", "or", "cmp", "cmp"]))
    if kind == "not":
        return Unary("not", exprs(table, draw, "bool", depth - 1))
    if kind in ("and", "or"):
        return binary(kind, exprs(table, draw, "bool", depth - 1), exprs(table, draw, "bool", depth - 1))
    if draw(st.booleans()) and bools:
        return binary(draw(st.sampled_from(["==", "!="])), draw(st.sampled_from(bools)),
                      exprs(table, draw, "bool", depth - 1))
    op = draw(st.sampled_from(["==", "!=", "<", "<=", ">", ">="]))
    return binary(op, exprs(table, draw, "int", depth - 1), exprs(table, draw, "int", depth - 1))


@settings(max_examples=200, deadline=None)
@given(table=tables(), data=st.data())
def test_columns_agree_with_compiled_expressions(table: Table, data: st.DataObject) -> None:
    ex = explore(table)
    for _ in range(3):
        expr = data.draw(conditions(table))
        fn = compile_expr(expr)
        expected = [bool(fn((state, *values))) for state, values in map(ex.config, range(ex.count))]
        assert columns.holds(ex, expr).tolist() == expected


WIDE = "".join(f"  b{k}: {{type: bool, init: false}}\n" for k in range(70))


def test_codes_wider_than_63_bits_and_huge_bounds() -> None:
    v = verdict(f"""
variables:
{WIDE}  big: {{type: int, min: {1 << 62}, max: {(1 << 62) + 3}, init: {1 << 62}}}
states:
  A: {{initial: true}}
  B: {{}}
events: {{flip: {{}}, bump: {{}}, go: {{}}}}
transitions:
  - {{from: A, on: flip, to: A, set: {{b69: not b69}}}}
  - {{from: A, on: bump, when: big < {(1 << 62) + 3}, to: A, set: {{big: big + 1}}}}
  - {{from: A, on: go, to: B}}
  - {{from: B, on: go, to: A}}
invariants:
  - {{name: not-both, expr: not (b69 and big > {(1 << 62) + 1})}}
  - {{name: in-range, expr: big - {1 << 62} <= 3 and big + big > 0}}
""")
    assert v.exploration.packing.all >= 1 << 63
    assert v.exploration.count == 16
    assert steps(check(v, "invariant", "not-both")) == ["flip", "bump", "bump"]
    assert check(v, "invariant", "in-range").ok
