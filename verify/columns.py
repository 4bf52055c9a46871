"""Configurations as numpy columns, and the table's expressions evaluated over them.

The explorer numbers configurations breadth-first and packs each into an integer; as a
numpy array those codes unpack into one column per field (the state, each variable) in a
few vectorised operations, and an invariant over a million configurations becomes a
handful of array operations instead of a million closure calls. The expression language
(``+``, ``-``, comparisons, ``and``/``or``/``not``, ``state in (...)``) has no division or
side effects, so evaluating both sides of ``and``/``or`` eagerly gives Python's result.
Codes wider than 63 bits, or values that could overflow 64-bit arithmetic, use object
arrays of Python ints: the same operations, slower, exact. The level-at-a-time explorer
evaluates guards and updates with the same ``evaluate``, over one batch's columns.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
from agentfsm.spec.expr import MAX_NODES, Binary, Expr, InStates, Lit, Ref, Unary

if TYPE_CHECKING:
    from agentfsm.verify.explore import Exploration

Column = npt.NDArray[Any]
SAFE = (1 << 63) // MAX_NODES   # below it, no sum of an expression's leaves overflows 64 bits

_BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add, "-": operator.sub, "==": operator.eq, "!=": operator.ne, "<": operator.lt,
    "<=": operator.le, ">": operator.gt, ">=": operator.ge, "and": np.logical_and, "or": np.logical_or,
}


def codes(ex: Exploration) -> Column:
    """The packed codes in configuration order."""
    return ex.code_array()


def states(ex: Exploration) -> npt.NDArray[np.int64]:
    """Each configuration's state index."""
    cached = ex.columns.get("states")
    if cached is None:
        cached = (codes(ex) & ex.packing.state_mask).astype(np.int64)
        ex.columns["states"] = cached
    return cached


def variable(ex: Exploration, slot: int, exact: bool) -> Column:
    """Variable ``slot``'s value in each configuration (Python ints when ``exact``)."""
    key = f"var{slot}{'x' if exact else ''}"
    cached = ex.columns.get(key)
    if cached is None:
        p = ex.packing
        raw = (codes(ex) >> p.shifts[slot]) & p.masks[slot]
        if p.bools[slot]:
            cached = (raw == 1).astype(np.bool_)
        else:
            cached = raw.astype(object) + p.los[slot] if exact else raw.astype(np.int64) + p.los[slot]
        ex.columns[key] = cached
    return cached


def first(mask: npt.NDArray[np.bool_]) -> int | None:
    """The lowest configuration where ``mask`` holds (breadth-first order: a shallowest one)."""
    return int(mask.argmax()) if mask.any() else None


def holds(ex: Exploration, expr: Expr) -> npt.NDArray[np.bool_]:
    """A state-and-variables expression (an invariant) evaluated in every configuration."""
    bound = magnitude(expr, lambda ref: variable_bound(ex.table.variables[ref.slot - 1]))
    exact = ex.packing.all >= 1 << 63 or bound >= SAFE

    def leaf(ref: Ref) -> Column:
        assert ref.kind != "param", "invariants read no event parameters"
        return variable(ex, ref.slot - 1, exact)

    value = evaluate(expr, leaf, lambda: states(ex))
    return np.broadcast_to(np.asarray(value, dtype=np.bool_), (ex.count,))


def evaluate(expr: Expr, leaf: Callable[[Ref], Any], state: Callable[[], Any]) -> Any:
    """``expr`` over columns: ``leaf`` gives a variable's or parameter's column (or value),
    ``state`` the state column (or the one state). A constant expression gives a scalar."""
    if isinstance(expr, Lit):
        return expr.value
    if isinstance(expr, Ref):
        return expr.value if expr.kind == "const" else leaf(expr)
    if isinstance(expr, InStates):
        inside = np.isin(state(), sorted(expr.indices))
        return ~inside if expr.negated else inside
    if isinstance(expr, Unary):
        operand = evaluate(expr.operand, leaf, state)
        return np.logical_not(operand) if expr.op == "not" else -operand
    assert isinstance(expr, Binary)
    return _BINARY[expr.op](evaluate(expr.left, leaf, state), evaluate(expr.right, leaf, state))


def variable_bound(var: Any) -> int:
    """The largest absolute value a variable (or parameter) of type bool or int can take."""
    return 1 if var.type == "bool" else max(abs(var.lo), abs(var.hi))


def magnitude(expr: Expr, bound: Callable[[Ref], int]) -> int:
    """The largest absolute value the expression's leaves can take (``bound`` for a
    variable or parameter)."""
    if isinstance(expr, Lit):
        return abs(int(expr.value))
    if isinstance(expr, Ref):
        return abs(int(expr.value)) if expr.kind == "const" else bound(expr)
    if isinstance(expr, InStates):
        return 1
    if isinstance(expr, Unary):
        return magnitude(expr.operand, bound)
    assert isinstance(expr, Binary)
    return max(magnitude(expr.left, bound), magnitude(expr.right, bound))
