"""Expressions compiled to closures over a packed configuration code.

The explorer's direct path (a (state, event) whose memo would miss on every
configuration) evaluates guards and updates for each configuration. Compiled over the
environment tuple they need the code decoded into every variable first; compiled here
they read only the bit fields they use, with the event's parameter values (fixed per
(state, label) plan) and the constants folded in. Built from the checked IR by
composing closures, as ``spec.expr.compile_expr`` does: no source text, no eval.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any, Protocol

from agentfsm.spec.expr import Binary, Expr, InStates, Lit, Ref, Unary, Value


class Packing(Protocol):
    """Where the state and each variable live in a code (``explore.Packing``)."""

    state_mask: int
    shifts: list[int]
    masks: list[int]
    los: list[int]
    bools: list[bool]

Fn = Callable[[int], Any]
_OPS: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add, "-": operator.sub, "==": operator.eq, "!=": operator.ne,
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
}


class Const:
    """A folded value (kept apart from closures so that operators can specialise on it)."""

    __slots__ = ("value",)

    def __init__(self, value: Value) -> None:
        self.value = value


def compile_packed(expr: Expr, packing: Packing, params: tuple[Value, ...]) -> Fn:
    """``expr`` as a function of the packed code, with ``params`` (the event's values) bound."""
    built = _build(expr, packing, params)
    if isinstance(built, Const):
        value = built.value
        return lambda code: value
    return built


def _build(expr: Expr, f: Packing, params: tuple[Value, ...]) -> Const | Fn:
    if isinstance(expr, Lit):
        return Const(expr.value)
    if isinstance(expr, Ref):
        if expr.kind == "const":
            return Const(expr.value)
        nvars = len(f.shifts)
        if expr.kind == "param":
            return Const(params[expr.slot - 1 - nvars])
        return _field(f, expr.slot - 1)
    if isinstance(expr, InStates):
        members, smask, negated = expr.indices, f.state_mask, expr.negated
        if negated:
            return lambda code: code & smask not in members
        return lambda code: code & smask in members
    if isinstance(expr, Unary):
        inner = _build(expr.operand, f, params)
        if expr.op == "not":
            if isinstance(inner, Const):
                return Const(not inner.value)
            return lambda code: not inner(code)
        if isinstance(inner, Const):
            return Const(-inner.value)
        return lambda code: -inner(code)
    assert isinstance(expr, Binary)
    a, b = _build(expr.left, f, params), _build(expr.right, f, params)
    if expr.op in ("and", "or"):
        return _logic(expr.op, a, b)
    op = _OPS[expr.op]
    if isinstance(a, Const) and isinstance(b, Const):
        return Const(op(a.value, b.value))
    if isinstance(b, Const):
        fa, right = a, b.value
        assert not isinstance(fa, Const)
        return lambda code: op(fa(code), right)
    fb = b
    if isinstance(a, Const):
        left = a.value
        return lambda code: op(left, fb(code))
    fa2 = a
    return lambda code: op(fa2(code), fb(code))


def _field(f: Packing, slot: int) -> Fn:
    shift, mask, lo = f.shifts[slot], f.masks[slot], f.los[slot]
    if f.bools[slot]:
        bit = 1 << shift
        return lambda code: code & bit != 0
    if lo:
        return lambda code: (code >> shift & mask) + lo
    return lambda code: code >> shift & mask


def _logic(op: str, a: Const | Fn, b: Const | Fn) -> Const | Fn:
    """Python's short-circuit ``and``/``or``, folding a constant side."""
    if isinstance(a, Const):
        if (op == "and") != bool(a.value):   # False and ..., True or ...
            return a
        return b
    fa = a
    if isinstance(b, Const):
        value = b.value
        if op == "and":
            return lambda code: fa(code) and value
        return lambda code: fa(code) or value
    fb = b
    if op == "and":
        return lambda code: fa(code) and fb(code)
    return lambda code: fa(code) or fb(code)
