"""Linear passes over the explored graph's CSR arrays (no graph objects for the whole space).

The configuration graph can hold millions of nodes and edges; a networkx DiGraph of it
costs ten times the exploration. These passes read ``offsets``/``edge_target``/
``edge_label`` as they are: a reverse breadth-first search for ``always-reachable`` and
a peel-then-Tarjan cycle search for ``no-cycle-within``.
"""

from __future__ import annotations

from array import array
from collections import deque
from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar

from agentfsm.verify.explore import Exploration

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


def reverse_csr(ex: Exploration) -> tuple[array[int], array[int]]:
    """Predecessor lists in CSR form: ``(offsets, sources)``."""
    n = ex.count
    counts = [0] * (n + 1)
    for t in ex.edge_target:
        counts[t + 1] += 1
    total = 0
    for k in range(n + 1):
        total += counts[k]
        counts[k] = total
    offsets = array("q", counts)
    pos = counts[:-1]
    sources = array("q", bytes(8 * total))
    off, tgt = ex.offsets, ex.edge_target
    for i in range(n):
        for e in range(off[i], off[i + 1]):
            t = tgt[e]
            sources[pos[t]] = i
            pos[t] += 1
    return offsets, sources


def can_reach(ex: Exploration, goal: Sequence[bool]) -> bytearray:
    """For every configuration: 1 if some configuration with ``goal`` is reachable from it."""
    offsets, sources = reverse_csr(ex)
    marked = bytearray(ex.count)
    queue = deque(i for i in range(ex.count) if goal[i])
    for i in queue:
        marked[i] = 1
    while queue:
        i = queue.popleft()
        for e in range(offsets[i], offsets[i + 1]):
            s = sources[e]
            if not marked[s]:
                marked[s] = 1
                queue.append(s)
    return marked


def find_cycle(ex: Exploration, allowed: Sequence[bool]) -> tuple[int, list[int]] | None:
    """A cycle using only edges whose label is ``allowed``: ``(node, labels of the cycle)``.

    ``node`` is the lowest-numbered (so shallowest) configuration on any such cycle, and
    the labels are those of a shortest cycle through it. None when the subgraph is acyclic.
    """
    n = ex.count
    off, tgt, lab = ex.offsets, ex.edge_target, ex.edge_label
    indeg = [0] * n
    for i in range(n):
        for e in range(off[i], off[i + 1]):
            if allowed[lab[e]]:
                indeg[tgt[e]] += 1
    queue = [i for i in range(n) if indeg[i] == 0]
    removed = bytearray(n)
    while queue:
        i = queue.pop()
        removed[i] = 1
        for e in range(off[i], off[i + 1]):
            if allowed[lab[e]]:
                t = tgt[e]
                indeg[t] -= 1
                if indeg[t] == 0:
                    queue.append(t)
    rest = [i for i in range(n) if not removed[i]]
    if not rest:
        return None
    node = _lowest_on_cycle(ex, allowed, rest, removed)
    return node, _shortest_cycle(ex, allowed, node)


def _successors(ex: Exploration, allowed: Sequence[bool], i: int) -> list[int]:
    off, tgt, lab = ex.offsets, ex.edge_target, ex.edge_label
    return [tgt[e] for e in range(off[i], off[i + 1]) if allowed[lab[e]]]


def _lowest_on_cycle(ex: Exploration, allowed: Sequence[bool], rest: list[int], removed: bytearray) -> int:
    """Iterative Tarjan over the nodes the peel left; the lowest node of a cyclic component."""
    number: dict[int, int] = {}
    low: dict[int, int] = {}
    stack: list[int] = []
    on_stack: set[int] = set()
    best = -1
    for root in rest:
        if root in number:
            continue
        work = [(root, iter(t for t in _successors(ex, allowed, root) if not removed[t]))]
        number[root] = low[root] = len(number)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, it = work[-1]
            child = next(it, None)
            if child is not None:
                if child not in number:
                    number[child] = low[child] = len(number)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(t for t in _successors(ex, allowed, child) if not removed[t])))
                elif child in on_stack:
                    low[node] = min(low[node], number[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == number[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                cyclic = len(component) > 1 or node in _successors(ex, allowed, node)
                if cyclic:
                    lowest = min(component)
                    best = lowest if best < 0 else min(best, lowest)
    assert best >= 0, "the peel leaves only nodes reachable from a cycle"
    return best


def _shortest_cycle(ex: Exploration, allowed: Sequence[bool], node: int) -> list[int]:
    """Labels of a shortest cycle from ``node`` back to itself over allowed edges."""
    off, tgt, lab = ex.offsets, ex.edge_target, ex.edge_label
    back: dict[int, tuple[int, int]] = {}
    queue = deque([node])
    while queue:
        i = queue.popleft()
        for e in range(off[i], off[i + 1]):
            if not allowed[lab[e]]:
                continue
            t = tgt[e]
            if t == node:
                labels = [lab[e]]
                while i != node:
                    i, label = back[i]
                    labels.append(label)
                labels.reverse()
                return labels
            if t not in back:
                back[t] = (i, lab[e])
                queue.append(t)
    raise AssertionError("node lies on a cycle")
