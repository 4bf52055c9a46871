"""The table's expressions evaluated over numpy columns, for a whole batch of configurations.

The expression language (``+``, ``-``, comparisons, ``and``/``or``/``not``, ``state in (...)``)
has no division or side effects, so evaluating both sides of ``and``/``or`` eagerly gives
Python's result. The batched explorer evaluates guards and updates over one batch's columns, the
checks an invariant over every configuration; ``magnitude`` says when 64-bit arithmetic could
overflow, so that the caller uses object arrays of Python ints instead.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt
from agentfsm.spec.expr import MAX_NODES, Binary, Expr, InStates, Lit, Ref, Unary

Column = npt.NDArray[Any]
SAFE = (1 << 63) // MAX_NODES   # below it, no sum of an expression's leaves overflows 64 bits

_BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add, "-": operator.sub, "==": operator.eq, "!=": operator.ne, "<": operator.lt,
    "<=": operator.le, ">": operator.gt, ">=": operator.ge, "and": np.logical_and, "or": np.logical_or,
}


def evaluate(expr: Expr, leaf: Callable[[Ref], Any], state: Callable[[], Any]) -> Any:
    """``expr`` over columns: ``leaf`` gives a variable's or parameter's column (or value),
    ``state`` the state column (or the one state). A constant expression gives a scalar."""
    if isinstance(expr, Lit):
        return expr.value
    if isinstance(expr, Ref):
        return expr.value if expr.kind == "const" else leaf(expr)
    if isinstance(expr, InStates):
        inside = _in_states(state(), expr.indices)
        return ~inside if expr.negated else inside
    if isinstance(expr, Unary):
        operand = evaluate(expr.operand, leaf, state)
        return np.logical_not(operand) if expr.op == "not" else -operand
    assert isinstance(expr, Binary)
    return _BINARY[expr.op](evaluate(expr.left, leaf, state), evaluate(expr.right, leaf, state))


def _in_states(states: Any, indices: frozenset[int]) -> Any:
    """Whether each state index is one of ``indices``: one lookup in a table of the states
    (``np.isin`` makes several passes over a column of every configuration). Indices past the
    table's end read its last entry, which is never a member."""
    member = np.zeros(max(indices, default=0) + 2, dtype=np.bool_)
    member[sorted(indices)] = True
    return np.take(member, states, mode="clip")


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
