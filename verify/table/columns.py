"""An exploration's configurations as numpy columns, and an invariant evaluated over them.

The explorer numbers configurations breadth-first and packs each into an integer; as a
numpy array those codes unpack into one column per field (the state, each variable) in a
few vectorised operations, and an invariant over a million configurations becomes a
handful of array operations (``agentfsm.verify.kernel.arrays``) instead of a million
closure calls. Codes wider than 63 bits, or values that could overflow 64-bit arithmetic,
use object arrays of Python ints: the same operations, slower, exact.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
from agentfsm.spec.expr import Expr, Ref
from agentfsm.verify.kernel.arrays import SAFE, Column, evaluate, magnitude, variable_bound

if TYPE_CHECKING:
    from agentfsm.verify.table.explore import Exploration


def codes(ex: Exploration) -> Column:
    """The packed codes in configuration order."""
    return ex.code_array()


def states(ex: Exploration) -> npt.NDArray[np.integer[Any]]:
    """Each configuration's state index, in the smallest unsigned type that holds it (a byte
    a configuration on any table of up to 256 states)."""
    cached = ex.columns.get("states")
    if cached is None:
        cached = (codes(ex) & ex.packing.state_mask).astype(np.min_scalar_type(ex.packing.nstates - 1))
        ex.columns["states"] = cached
    return cached


def variable(ex: Exploration, slot: int, exact: bool) -> Column:
    """Variable ``slot``'s value in each configuration (Python ints when ``exact``). An int
    column is kept in the smallest integer type that holds the variable's range and widened
    to int64 at each use: kept for every check that reads it, it costs a byte or two a
    configuration rather than eight."""
    key = f"var{slot}{'x' if exact else ''}"
    cached = ex.columns.get(key)
    if cached is None:
        p = ex.packing
        raw = (codes(ex) >> p.shifts[slot]) & p.masks[slot]
        if p.bools[slot]:
            cached = (raw == 1).astype(np.bool_)
        elif exact:
            cached = raw.astype(object) + p.los[slot]
        else:
            lo, hi = p.los[slot], p.los[slot] + p.masks[slot]
            cached = (raw + lo).astype(np.promote_types(np.min_scalar_type(lo), np.min_scalar_type(hi)))
        ex.columns[key] = cached
    if cached.dtype == np.bool_ or cached.dtype == object:
        return cached
    return cached.astype(np.int64)


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
