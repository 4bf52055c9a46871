"""Configurations as numpy columns, and the table's expressions evaluated over them.

The explorer numbers configurations breadth-first and packs each into an integer; as a
numpy array those codes unpack into one column per field (the state, each variable) in a
few vectorised operations, and an invariant over a million configurations becomes a
handful of array operations instead of a million closure calls. The expression language
(``+``, ``-``, comparisons, ``and``/``or``/``not``, ``state in (...)``) has no division or
side effects, so evaluating both sides of ``and``/``or`` eagerly gives Python's result.
Codes wider than 63 bits, or values that could overflow 64-bit arithmetic, use object
arrays of Python ints: the same operations, slower, exact.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
from agentfsm.spec.expr import MAX_NODES, Binary, Expr, InStates, Lit, Ref, Unary
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
    exact = ex.packing.all >= 1 << 63 or _magnitude(ex, expr) >= SAFE

    def value(e: Expr) -> Any:
        if isinstance(e, Lit):
            return e.value
        if isinstance(e, Ref):
            assert e.kind != "param", "invariants read no event parameters"
            return e.value if e.kind == "const" else variable(ex, e.slot - 1, exact)
        if isinstance(e, InStates):
            inside = np.isin(states(ex), sorted(e.indices))
            return ~inside if e.negated else inside
        if isinstance(e, Unary):
            return np.logical_not(value(e.operand)) if e.op == "not" else -value(e.operand)
        return _BINARY[e.op](value(e.left), value(e.right))

    return np.broadcast_to(np.asarray(value(expr), dtype=np.bool_), (ex.count,))


def _magnitude(ex: Exploration, expr: Expr) -> int:
    """The largest absolute value the expression's leaves can take."""
    if isinstance(expr, Lit):
        return abs(int(expr.value))
    if isinstance(expr, Ref):
        if expr.kind == "const":
            return abs(int(expr.value))
        var = ex.table.variables[expr.slot - 1]
        return 1 if var.type == "bool" else max(abs(var.lo), abs(var.hi))
    if isinstance(expr, InStates):
        return 1
    if isinstance(expr, Unary):
        return _magnitude(ex, expr.operand)
    assert isinstance(expr, Binary)
    return max(_magnitude(ex, expr.left), _magnitude(ex, expr.right))

