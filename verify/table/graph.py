"""Whole-space passes over the explored graph's CSR arrays, in compiled code.

The configuration graph can hold millions of nodes and edges; a networkx DiGraph of it
costs ten times the exploration, and a pure-Python linear pass over it about as much as
the exploration itself. These passes hand the ``offsets``/``edge_target``/``edge_label``
arrays to numpy and scipy's sparse graph routines (C loops): a breadth-first search of
the reversed graph for ``always-reachable``, strongly connected components of the
allowed-event subgraph for ``no-cycle-within``. Only the counterexample (the shortest
cycle inside one component) is walked in Python; scipy is imported on a routine's first
call (``sparse``). The dead ends (``deadlock``) need no
edges at all: the offsets give each configuration's degree, and only the configurations
with a stutter edge are looked at again.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt
from agentfsm.verify.table import columns
from agentfsm.verify.table.explore import Exploration
from agentfsm.verify.table.sparse import breadth_first_order, connected_components, matrix

Ints = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]

Node = TypeVar("Node", bound=Hashable)
Edge = TypeVar("Edge")


def path_back(parent: Mapping[Node, tuple[Node, Edge] | None], node: Node) -> list[Edge]:
    """The edges from a breadth-first search's root to ``node``, read back through ``parent``."""
    edges: list[Edge] = []
    link = parent[node]
    while link is not None:
        node, edge = link
        edges.append(edge)
        link = parent[node]
    edges.reverse()
    return edges


def csr(ex: Exploration) -> tuple[Ints, Ints, npt.NDArray[np.intc]]:
    """The exploration's ``(offsets, targets, labels)`` as numpy arrays (views, no copy):
    array's ``q`` and ``i`` are C's long long and int."""
    ex.need_edges()
    return (np.frombuffer(ex.offsets, dtype=np.longlong), np.frombuffer(ex.edge_target, dtype=np.longlong),
            np.frombuffer(ex.edge_label, dtype=np.intc))


def dead_ends(ex: Exploration) -> Ints:
    """The configurations with no successor but stutter edges (ignored events, no progress),
    ascending: read from the offsets and the stutter edges alone, without a copy of the edges
    (Spin's "invalid end state" check likewise keeps no graph)."""
    offsets = np.frombuffer(ex.offsets, dtype=np.longlong)
    none = offsets[1:] == offsets[:-1]
    stutter = np.frombuffer(ex.stutter, dtype=np.longlong)
    if len(stutter):
        sources, count = np.unique(np.searchsorted(offsets, stutter, side="right") - 1, return_counts=True)
        none[sources[count == offsets[sources + 1] - offsets[sources]]] = True
    return np.flatnonzero(none)


def states_at(ex: Exploration, rows: Ints) -> Ints:
    """The state index of the configurations ``rows``, without a column of every one."""
    cached = ex.columns.get("states")
    if cached is not None:
        return np.asarray(cached[rows], dtype=np.int64)
    return np.asarray(columns.codes(ex)[rows] & ex.packing.state_mask, dtype=np.int64)


CHUNK = 1 << 20   # configurations per slice when a whole column is only counted


def state_counts(ex: Exploration) -> Ints:
    """How many configurations are in each state: counted a slice at a time, so that no
    column of every configuration's state is made (nor kept) unless one already is."""
    n = ex.packing.nstates
    cached = ex.columns.get("states")
    if cached is not None:
        return np.bincount(cached, minlength=n)
    counts = np.zeros(n, dtype=np.int64)
    every = columns.codes(ex)
    for start in range(0, ex.count, CHUNK):
        counts += np.bincount(np.asarray(every[start:start + CHUNK] & ex.packing.state_mask, dtype=np.int64),
                              minlength=n)
    return counts


def can_reach(ex: Exploration, goal: Bools) -> Bools:
    """For every configuration: True if some configuration with ``goal`` is reachable from it
    (the reversed graph is made once per exploration: ``always-reachable`` properties share it)."""
    reverse = ex.columns.get("reverse")
    if reverse is None:
        offsets, targets, _ = csr(ex)
        reverse = ex.columns["reverse"] = reversed_matrix(offsets, targets)
    return reached_back(reverse, goal)


def reversed_matrix(offsets: Ints, targets: Ints) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
    """The CSR graph ``(offsets, targets)`` reversed, as its ``(indptr, indices)``: the
    matrix's weights, as many as the edges, are never read, so they are not kept."""
    reverse = matrix(len(offsets) - 1, offsets, targets).T.tocsr()
    return reverse.indptr, reverse.indices


def reached_back(reverse: tuple[npt.NDArray[Any], npt.NDArray[Any]], goal: Bools) -> Bools:
    """The nodes from which some ``goal`` node is reachable, given the graph ``reverse``d: a
    breadth-first search of it from a virtual node ``n`` whose edges lead to every goal node."""
    n = len(goal)
    goals = np.flatnonzero(goal)
    indptr = np.append(reverse[0], reverse[0][-1] + len(goals))
    indices = np.concatenate((reverse[1], goals))
    reached = breadth_first_order(matrix(n + 1, indptr, indices), n, directed=True,
                                  return_predecessors=False)
    marked = np.zeros(n + 1, dtype=np.bool_)
    marked[reached] = True
    return marked[:n]


def kept_matrix(offsets: Ints, targets: Ints, keep: Bools) -> Any:
    """The matrix of the edges ``keep`` marks in the CSR graph ``(offsets, targets)``, read as
    they are (no coordinates to sort), duplicates summed: scipy's strong components loop
    forever on duplicate edges (two events, one target)."""
    kept = np.concatenate(([0], np.cumsum(keep, dtype=np.int64)))[offsets]
    kept_edges = matrix(len(offsets) - 1, kept, targets[keep])
    kept_edges.data = np.ones(kept_edges.nnz)   # summing writes to them
    kept_edges.sum_duplicates()
    return kept_edges


def find_cycle(ex: Exploration, allowed: Sequence[bool]) -> tuple[int, list[int]] | None:
    """A cycle using only edges whose label is ``allowed``: ``(node, labels of the cycle)``.
    Stutter edges (ignored events) are never part of one.

    ``node`` is the lowest-numbered (so shallowest) configuration on any such cycle, and
    the labels are those of a shortest cycle through it. None when the subgraph is acyclic.
    """
    n = ex.count
    offsets, targets, labels = csr(ex)
    keep = np.asarray(allowed, dtype=np.bool_)[labels]
    keep[np.frombuffer(ex.stutter, dtype=np.longlong)] = False   # an ignored event is no progress
    subgraph = kept_matrix(offsets, targets, keep)
    count, component = connected_components(subgraph, directed=True, connection="strong")
    cyclic = np.bincount(component, minlength=count) > 1
    sources = np.repeat(np.arange(n, dtype=np.int64), np.diff(subgraph.indptr))
    cyclic[component[sources[sources == subgraph.indices]]] = True
    on_cycle = cyclic[component]
    if not on_cycle.any():
        return None
    node = int(np.argmax(on_cycle))
    return node, _shortest_cycle(ex, keep, node, component == component[node])


def _shortest_cycle(ex: Exploration, keep: Bools, node: int, inside: Bools) -> list[int]:
    """Labels of a shortest cycle from ``node`` back to itself over the edges ``keep`` marks.

    Every cycle through ``node`` stays in its strongly connected component ``inside``, so
    the search never leaves it (and visits its nodes in the same order as a search of the
    whole graph would)."""
    off, tgt, lab = ex.offsets, ex.edge_target, ex.edge_label
    back: dict[int, tuple[int, int]] = {}
    queue = deque([node])
    while queue:
        i = queue.popleft()
        for e in range(off[i], off[i + 1]):
            if not keep[e]:
                continue
            t = tgt[e]
            if t == node:
                cycle = [lab[e]]
                while i != node:
                    i, label = back[i]
                    cycle.append(label)
                cycle.reverse()
                return cycle
            if t not in back and inside[t]:
                back[t] = (i, lab[e])
                queue.append(t)
    raise AssertionError("node lies on a cycle")
