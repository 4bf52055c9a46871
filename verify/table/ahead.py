"""Exploring a narrow, deep space in batches: guess ahead along its counter, then check the guess.

The batches (``batched``) evaluate a breadth-first level at once, which pays when levels
are wide. Loom's retries grown to a million configurations has about ten a level, so the
scalar loop explored it at the interpreter's speed, a configuration at a time. Yet such a
space is mostly one pattern repeated along a counter: the values in one interval of a
counter keyed by interval (``intervals``) enable the same rows and lead to the same
successors, up to the count. So after a prefix explored by the scalar loop, the
configurations of one value of the counter, repeated at every later value of its
interval, are a good guess of most of the space. The explorer never trusts it
(``explore._ahead``):

1. *close*: explore from the prefix and the guess, in batches, in whatever order, until
   nothing new appears: a set closed under the step that holds every reachable
   configuration;
2. *keep what is reachable*, numbered breadth-first: ``bfs_order``, a breadth-first
   search of that graph from the initial configuration, which takes each configuration's
   edges in the order the explorer does and so numbers configurations as it would;
3. *explore again* in that order as one batch, so that edges, errors and tallies come out
   as the explorer's, and read each configuration's parent off the edges (``parents``:
   the first edge to a configuration is the one the explorer met it by).

A guess that misses configurations costs more closing; one that holds unreachable
configurations costs their evaluation, and step 2 drops them. Either way the result is
the plain exploration's, which tests/verify/test_verify_ahead.py holds it to.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
from agentfsm.verify.table.sparse import breadth_first_order, matrix

Ints = npt.NDArray[np.int64]


def guess(prefix: Ints, initial: int, shift: int, mask: int, classes: Ints, budget: int) -> Ints:
    """Codes around and ahead of an explored ``prefix`` (its counter: the field at ``shift``
    under ``mask``, counted up from the ``initial`` configuration's; ``classes``: each field
    value's interval): every configuration the prefix has in the upper half of its counter's
    values (breadth-first, the newest values are only partly explored), repeated at every
    value from that half's start to the end of its interval, at most ``budget`` codes.
    Empty when the counter has not moved past its start."""
    values = (prefix >> shift) & mask
    start = (initial >> shift) & mask
    top = int(values.max())
    low = (start + top) // 2 + 1
    if low >= top:   # nothing below the newest value (and ``classes[low]`` may not exist)
        return np.empty(0, dtype=np.int64)
    same = (values >= low) & (values < top) & (classes[values] == classes[low])   # a code's field is in range
    rests = np.unique(prefix[same] & ~(mask << shift))
    if not len(rests):
        return np.empty(0, dtype=np.int64)
    other = np.flatnonzero(classes[low:] != classes[low])
    end = low + (int(other[0]) if len(other) else len(classes) - low)
    end = min(end, low + budget // len(rests))
    ahead = np.arange(low, end, dtype=np.int64)
    codes: Ints = (rests[None, :] | (ahead[:, None] << shift)).ravel()
    return codes


def interval_of(size: int, folds: list[tuple[int, ...]]) -> Ints:
    """Each of the counter's ``size`` field values' interval in the common refinement of
    ``folds`` (each a fold's interval numbers by field value)."""
    border = np.zeros(size, dtype=np.bool_)
    for classes in folds:
        each = np.asarray(classes[:size], dtype=np.int64)
        border[1:] |= each[1:] != each[:-1]
    intervals: Ints = np.cumsum(border, dtype=np.int64)
    return intervals


def bfs_order(offsets: Ints, targets: Ints) -> Ints:
    """The configurations reachable from configuration 0 in breadth-first order, each one's
    edges taken in CSR order, as the explorer takes them (scipy's search appends a node's
    unseen targets in the order of its row)."""
    order = breadth_first_order(matrix(len(offsets) - 1, offsets, targets), 0, directed=True,
                                return_predecessors=False)
    found: Ints = order.astype(np.int64)
    return found


def parents(offsets: Ints, targets: Ints, labels: npt.NDArray[Any]) -> tuple[Ints, Ints]:
    """Each configuration's parent and parent label (-1 for configuration 0) read off the
    edges of a breadth-first numbered graph: configuration ``j`` was met by the first edge
    to it. Raises ``AssertionError`` unless the numbering is the one breadth-first search
    over these edges gives (each first met configuration is the next number, met from an
    earlier one)."""
    n = len(offsets) - 1
    seen = np.maximum.accumulate(np.concatenate(([0], targets)))[:-1]   # the highest number met before each edge
    first = np.flatnonzero(targets > seen)
    if not np.array_equal(targets[first], np.arange(1, n, dtype=np.int64)):
        raise AssertionError("not a breadth-first numbering of these edges")
    sources = np.searchsorted(offsets, first, side="right") - 1
    if np.any(sources >= np.arange(1, n, dtype=np.int64)):
        raise AssertionError("a configuration met before its parent was")
    minus = np.array([-1], dtype=np.int64)
    return np.concatenate((minus, sources)), np.concatenate((minus, labels[first].astype(np.int64)))


def renumbered(order: Ints, offsets: Ints, targets: Ints, labels: npt.NDArray[Any],
               stutter: Ints) -> tuple[Ints, Ints, npt.NDArray[Any], Ints]:
    """A CSR graph ``(offsets, targets, labels)`` and its ``stutter`` edge positions with the
    nodes renumbered: ``order[k]`` (every node, once) becomes ``k``; each node's edges keep
    their order."""
    n = len(order)
    inverse = np.empty(n, dtype=np.int64)
    inverse[order] = np.arange(n, dtype=np.int64)
    degree = np.diff(offsets)[order]
    moved = np.concatenate(([0], np.cumsum(degree)))
    take = np.repeat(offsets[order] - moved[:-1], degree) + np.arange(moved[-1], dtype=np.int64)
    marked = np.zeros(len(targets), dtype=np.bool_)
    marked[stutter] = True
    return moved, inverse[targets[take]], labels[take], np.flatnonzero(marked[take])
