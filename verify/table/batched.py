"""Breadth-first exploration a batch of configurations at a time, as numpy array operations.

On wide spaces the scalar loop pays the interpreter once per edge. Here a batch (a run
of consecutive configurations of the queue) is split by state; for each (state, label)
plan the compiled guards and updates are evaluated over the batch's unpacked variable
columns with ``kernel.arrays.evaluate`` (the expressions the verifier and the runtime share),
and the successors are packed as arrays.

Same numbering as the scalar loop: that loop numbers a configuration when it first meets
it, taking configurations in order and each one's edges in its plan order (the labels
with candidate rows, then, under ``ignore``, the labels without). A batch's successors
are laid out in a matrix (configuration × edge position) whose row-major order is that
order, so numbering the unseen codes by first occurrence gives the same numbers, parents
and parent labels, and the non-empty cells come out as the CSR edge list.

Only the plain case is computed with arrays: exactly one enabled row (then, through
transient states, one enabled eventless row at each step), updates and emitted arguments
in range. Every other (configuration, plan), and whole tables whose codes or arithmetic
could leave 64 bits, go through the scalar fallback (``step`` itself), in the scalar
loop's order, so errors are recorded alike.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt
from agentfsm.spec.expr import Expr, Ref, Value
from agentfsm.spec.model import Row, Table
from agentfsm.verify.kernel import compiled
from agentfsm.verify.kernel.arrays import SAFE, evaluate, magnitude, variable_bound
from agentfsm.verify.kernel.visited import CodeIndex, DenseIndex, code_index, in_first_occurrence_order

Ints = npt.NDArray[np.int64]
NO_EDGE = -1   # what a step gives instead of a successor code: no edge, ...
STUTTER = -2   # ... or an ignored event's self-loop (the scalar fallback returns these too)
BATCH = 1 << 14   # configurations per batch at most (measured: larger ones leave the caches)
CELLS = 1 << 21   # and matrix cells (configurations × edge positions)
MAX_CHAIN = 64   # eventless steps settled with arrays; longer chains go to the fallback


def applicable(table: Table, labels: int) -> bool:
    """Whether the array path is exact for this table: codes and every value of every
    guard, update and emitted argument (operands summed) fit in 64 bits; and whether its
    (state, edge position) label matrix is small (``labels``: event and parameter values)."""
    if len(table.states) * labels > CELLS:
        return False
    bits = max(1, (len(table.states) - 1).bit_length()) + sum((v.size - 1).bit_length() for v in table.variables)
    if bits > 63:
        return False
    bound = max([1, *(variable_bound(v) for v in table.variables),
                 *(variable_bound(p) for e in table.events for p in e.params)])
    exprs = [e for row in table.rows for e in _exprs(row)]
    return all(magnitude(e, lambda ref: bound) < SAFE for e in exprs) and bound < SAFE


def _exprs(row: Row) -> list[Expr]:
    found = [] if row.guard is None else [row.guard]
    found += [u.expr for u in row.updates]
    found += [a.expr for args in row.emit_args for a in args]
    return found


class Packing(compiled.Packing, Protocol):
    nstates: int
    all: int


@dataclass(frozen=True)
class Arm:
    """One candidate row, compiled for the array path."""

    index: int
    guard: Expr | None
    keep: int   # the bits the row leaves alone (not the state, not the fields it sets)
    add: int    # the target state
    plain: bool   # a stable target: no eventless rows to settle
    updates: tuple[tuple[Expr, int, int, int | None], ...]   # (expr, shift, lo, hi; None: bool)
    bounded: tuple[tuple[Expr, int, int], ...]   # emitted int arguments and their ranges


@dataclass(frozen=True)
class Group:
    """One (state, label) plan: its edge position in the state's order, its rows, and the
    scalar fallback for one configuration (number, state, code), which returns a code,
    ``NO_EDGE`` or ``STUTTER`` and does its own counting."""

    label: int
    params: tuple[Value, ...]
    position: int
    arms: tuple[Arm, ...]
    slow: Callable[[int, int, int], int]


def arm(table: Table, packing: Packing, row: Row, keep: int, add: int, stable: bool) -> Arm:
    """``row`` for the array path; ``keep``, ``add`` and ``stable`` as the scalar path compiled them."""
    updates = []
    for update in row.updates:
        slot = update.slot - 1
        var = table.variables[slot]
        hi = var.hi if var.type == "int" else None
        updates.append((update.expr, packing.shifts[slot], packing.los[slot], hi))
    bounded = []
    for name, args in zip(row.emit, row.emit_args, strict=False):
        for param, argument in zip(table.action_index[name].params, args, strict=True):
            if param.type == "int":
                bounded.append((argument.expr, param.lo, param.hi))
    return Arm(row.index, row.guard, keep, add, stable, tuple(updates), tuple(bounded))


class Levels:
    """The array path over batches: ``groups`` per state, the labels without rows per
    state (edges only under ``ignore``); counts go into ``row_fires`` and ``unhandled``."""

    def __init__(self, packing: Packing, groups: list[list[Group]], unhandled_labels: list[list[int]], ignore: bool,
                 row_fires: dict[int, int], unhandled: dict[tuple[int, int], int],
                 eventless: dict[int, tuple[Arm, ...]], transient: Sequence[bool]) -> None:
        self.packing = packing
        self.groups = groups
        self.eventless = eventless   # per transient state, its eventless rows
        self.transient = np.array(transient, dtype=np.bool_)
        self.unhandled_labels = unhandled_labels
        self.ignore = ignore
        self.row_fires = row_fires
        self.unhandled = unhandled
        self.width = max([1, *(len(g) + (len(u) if ignore else 0)
                               for g, u in zip(groups, unhandled_labels, strict=True))])
        self.labels = np.zeros((packing.nstates, self.width), dtype=np.int32)   # (state, edge position) -> label
        for state, state_groups in enumerate(groups):
            for group in state_groups:
                self.labels[state, group.position] = group.label
            if ignore:
                for k, label in enumerate(unhandled_labels[state]):
                    self.labels[state, len(state_groups) + k] = label

    def batch(self, codes: Ints, first: int) -> tuple[Ints, Ints]:
        """The successor matrix of configurations ``first``, ``first + 1``, ... (``codes``),
        per cell a code, ``NO_EDGE`` or ``STUTTER``; and each configuration's state."""
        target = np.full((len(codes), self.width), NO_EDGE, dtype=np.int64)
        states = codes & self.packing.state_mask
        slow: list[tuple[Ints, int, Group]] = []
        for state, rows in _by_state(states, self.packing.nstates):
            batch = _Columns(self.packing, codes[rows], state)
            for group in self.groups[state]:
                slow += self._group(group, rows, batch, target)
            if self.ignore and self.unhandled_labels[state]:
                base = len(self.groups[state])
                target[rows, base:base + len(self.unhandled_labels[state])] = STUTTER
        if slow:
            self._slow(slow, codes, first, target)
        return target, states

    def _group(self, group: Group, rows: Ints, batch: _Columns, target: Ints) -> list[tuple[Ints, int, Group]]:
        """Fill one plan's column for the configurations ``rows`` of one state; return the
        ones the array path leaves to the fallback."""
        at = group.position
        enabled = [batch.truth(arm.guard, group.params) for arm in group.arms]
        if len(enabled) == 1:
            none, single, slow = ~enabled[0], enabled[0], []
        else:
            count = np.sum(enabled, axis=0, dtype=np.int64)
            none, single, slow = count == 0, count == 1, [rows[count > 1]]
        missed = int(np.count_nonzero(none))
        if missed:
            site = (batch.state, group.label)
            self.unhandled[site] = self.unhandled.get(site, 0) + missed
            if self.ignore:
                target[rows[none], at] = STUTTER
        for one, on in zip(group.arms, enabled, strict=True):
            mine = np.flatnonzero(on & single) if len(enabled) > 1 else np.flatnonzero(on)
            if not len(mine):
                continue
            new, ok = _successors(one, batch if len(mine) == len(rows) else batch.subset(mine), group.params)
            chain: list[tuple[int, Ints]] = []
            if not one.plain:
                new, ok, chain = self._settle(new, ok)
            good = int(np.count_nonzero(ok))
            self.row_fires[one.index] += good
            for index, fired in chain:
                self.row_fires[index] += int(np.count_nonzero(ok[fired]))
            if good == len(ok):
                target[rows[mine], at] = new
            else:
                target[rows[mine[ok]], at] = new[ok]
                slow.append(rows[mine[~ok]])
        return [(part, at, group) for part in slow if len(part)]

    def _settle(self, codes: Ints, ok: npt.NDArray[np.bool_]) -> tuple[Ints, npt.NDArray[np.bool_],
                                                                       list[tuple[int, Ints]]]:
        """Follow eventless rows out of transient states (``semantics.settle``) where ``ok``.

        Returns the settled codes, where they are exact, and which eventless row fired
        where. Anything but one enabled row with values in range, or a chain longer than
        ``MAX_CHAIN``, is marked not exact: the fallback redoes it with ``step``, which
        reports the error (a stuck or cyclic transient state included)."""
        codes, ok = codes.copy(), ok.copy()
        fired: list[tuple[int, Ints]] = []
        smask = self.packing.state_mask
        for _ in range(MAX_CHAIN):
            moving = np.flatnonzero(ok & self.transient[codes & smask])
            if not len(moving):
                return codes, ok, fired
            for state, part in _by_state(codes[moving] & smask, self.packing.nstates):
                where = moving[part]
                arms = self.eventless.get(state, ())
                batch = _Columns(self.packing, codes[where], state)
                enabled = [batch.truth(arm.guard, ()) for arm in arms]
                count = np.sum(enabled, axis=0, dtype=np.int64) if arms else np.zeros(len(where), dtype=np.int64)
                ok[where[count != 1]] = False
                for arm, on in zip(arms, enabled, strict=True):
                    pick = np.flatnonzero(on & (count == 1))
                    if len(pick):
                        new, exact = _successors(arm, batch.subset(pick), ())
                        codes[where[pick]] = new
                        ok[where[pick]] &= exact
                        fired.append((arm.index, where[pick]))
        ok[ok & self.transient[codes & smask]] = False
        return codes, ok, fired

    def _slow(self, slow: list[tuple[Ints, int, Group]], codes: Ints, first: int, target: Ints) -> None:
        """The fallback for the cells the array path left, in the scalar loop's order."""
        cells = [(int(r), at, group) for rows, at, group in slow for r in rows.tolist()]
        cells.sort(key=lambda cell: (cell[0], cell[1]))
        smask = self.packing.state_mask
        for r, at, group in cells:
            code = int(codes[r])
            target[r, at] = group.slow(first + r, code & smask, code)


def _by_state(states: Ints, nstates: int) -> list[tuple[int, Ints]]:
    """The positions of each state's configurations, ascending (a mask per state when
    there are few states, one sort otherwise)."""
    if nstates <= 16:
        found = [(state, np.flatnonzero(states == state)) for state in range(nstates)]
        return [(state, rows) for state, rows in found if len(rows)]
    order = np.argsort(states, kind="stable")
    bounds = np.searchsorted(states[order], np.arange(nstates + 1))
    return [(state, order[bounds[state]:bounds[state + 1]]) for state in np.flatnonzero(np.diff(bounds)).tolist()]


def _successors(arm: Arm, batch: _Columns, params: tuple[Any, ...]) -> tuple[Ints, npt.NDArray[np.bool_]]:
    """The successor codes of configurations where ``arm`` is the one enabled row, and
    where they are exact (values in range)."""
    new = (batch.codes & arm.keep) | arm.add
    ok = np.ones(len(new), dtype=np.bool_)
    for expr, shift, lo, hi in arm.updates:
        value = batch.values(expr, params)
        if hi is None:
            new |= value.astype(np.int64) << shift
            continue
        ok &= (value >= lo) & (value <= hi)
        new |= (value - lo) << shift
    for expr, lo, hi in arm.bounded:
        value = batch.values(expr, params)
        ok &= (value >= lo) & (value <= hi)
    return new, ok


class _Columns:
    """The configurations of one state in a batch, unpacked into variable columns on demand."""

    def __init__(self, packing: Packing, codes: Ints, state: int) -> None:
        self.packing = packing
        self.codes = codes
        self.state = state
        self.cache: dict[int, npt.NDArray[Any]] = {}

    def subset(self, which: Ints) -> _Columns:
        return _Columns(self.packing, self.codes[which], self.state)

    def column(self, slot: int) -> npt.NDArray[Any]:
        found = self.cache.get(slot)
        if found is None:
            p = self.packing
            raw = (self.codes >> p.shifts[slot]) & p.masks[slot]
            found = raw.astype(np.bool_) if p.bools[slot] else raw + p.los[slot]
            self.cache[slot] = found
        return found

    def values(self, expr: Expr, params: Sequence[Any]) -> npt.NDArray[Any]:
        nvars = len(self.packing.shifts)

        def leaf(ref: Ref) -> Any:
            return self.column(ref.slot - 1) if ref.kind == "var" else params[ref.slot - 1 - nvars]

        return np.broadcast_to(np.asarray(evaluate(expr, leaf, lambda: self.state)), (len(self.codes),))

    def truth(self, guard: Expr | None, params: Sequence[Any]) -> npt.NDArray[np.bool_]:
        if guard is None:
            return np.ones(len(self.codes), dtype=np.bool_)
        return self.values(guard, params).astype(np.bool_)


def number(index: CodeIndex | DenseIndex, target: Ints, states: Ints, labels: npt.NDArray[np.int32], first: int,
           count: int, bits: int) -> tuple[Ints, Ints, Ints, Ints, Ints, npt.NDArray[np.int32], Ints]:
    """Number a batch's successors (``labels``: by state and edge position; codes of
    ``bits`` bits; ``count`` configurations numbered before): returns the
    new codes (in number order), their parents and parent labels, then per configuration
    its edge count, the edges' targets and labels (CSR order), and the positions of the
    stutter edges among them."""
    n, width = target.shape
    present = target != NO_EDGE
    degree = np.count_nonzero(present, axis=1).astype(np.int64)
    cells = np.flatnonzero(present)
    source = np.repeat(np.arange(n, dtype=np.int64), degree)
    codes = target.ravel()[cells]
    edge_labels = labels[states[source], cells - source * width]
    stutter = np.flatnonzero(codes == STUTTER)
    targets = codes.copy()
    targets[stutter] = first + source[stutter]
    real = np.flatnonzero(codes != STUTTER) if len(stutter) else np.arange(len(codes))
    if isinstance(index, DenseIndex):   # a lookup is one gather: look every edge up, sort the unseen
        found = index.lookup(codes[real])
        missing = np.flatnonzero(found < 0)
        fresh, born = np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
        if len(missing):
            wanted = real[missing]
            fresh, at, rank = in_first_occurrence_order(codes[wanted], bits)
            born = wanted[at]
            index.insert(fresh, count + np.arange(len(fresh)))
            found[missing] = count + rank
    else:   # a lookup probes: sort first, look each distinct code up once
        distinct, at, rank = in_first_occurrence_order(codes[real], bits)
        known = index.lookup(distinct)
        new = np.flatnonzero(known < 0)
        known[new] = count + np.arange(len(new))
        fresh, born = distinct[new], real[at[new]]
        index.insert(fresh, known[new])
        found = known[rank]
    targets[real] = found
    return fresh, first + source[born], edge_labels[born].astype(np.int64), degree, targets, edge_labels, stutter


@dataclass
class Graph:
    """What the scalar loop had built, as the typed arrays the analyses read, continued
    in place by ``run`` (so no second copy is ever made)."""

    codes: array[int]
    parent: array[int]
    parent_label: array[int]
    offsets: array[int]
    edge_label: array[int]
    edge_target: array[int]
    stutter: array[int]

    def view(self, name: str) -> Ints:
        """A numpy view of one of the int64 arrays (to be dropped before it grows again)."""
        return np.frombuffer(getattr(self, name), dtype=np.int64)


def extend(typed: array[int], values: npt.NDArray[Any]) -> None:
    """Append numpy values to a typed array (``q``: int64, ``i``: int32)."""
    flat: npt.NDArray[Any] = np.ascontiguousarray(values, dtype=np.int64 if typed.typecode == "q" else np.int32)
    typed.frombytes(flat.data.cast("B"))


def visited_set(packing: Packing, graph: Graph) -> CodeIndex | DenseIndex:
    """The batches' visited set, holding every code found so far."""
    index = code_index(packing.all + 1, len(graph.codes))
    index.insert(graph.view("codes").copy(), np.arange(len(graph.codes), dtype=np.int64))
    return index


def run(levels: Levels, start: int, graph: Graph, index: CodeIndex | DenseIndex,
        report: Callable[[int, int, int, bool], None], low: int, keep_edges: bool = True) -> int:
    """Explore from configuration ``start`` on, batch by batch, until nothing is left or
    fewer than ``low`` wait; ``report(configurations, transitions, last explored,
    finished)`` after each batch. Returns where it stopped. Without ``keep_edges`` the
    edges are only counted (in the offsets and the stutter positions)."""
    count = len(graph.codes)
    i = start
    while i < count:
        n = min(count - i, BATCH, max(1, CELLS // levels.width))
        target, states = levels.batch(graph.view("codes")[i:i + n].copy(), i)
        edges = graph.offsets[-1]
        fresh, parents, plabels, degree, targets, labels, stutter = number(index, target, states, levels.labels, i,
                                                                           count, levels.packing.all.bit_length())
        extend(graph.codes, fresh)
        extend(graph.parent, parents)
        extend(graph.parent_label, plabels)
        extend(graph.offsets, edges + np.cumsum(degree))
        extend(graph.stutter, edges + stutter)
        if keep_edges:
            extend(graph.edge_label, labels)
            extend(graph.edge_target, targets)
        count += len(fresh)
        i += n
        report(count, graph.offsets[-1], i - 1, i == count)
        if count - i < low:
            break
    return i
