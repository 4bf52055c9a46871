"""Liveness over the explored graph: fair strongly connected components, in numpy/scipy.

A maximal run either ends (in a configuration with no successor: a final state, or a
dead end the ``deadlock`` check reports) or goes on forever, and a run that goes on
forever ends up inside one strongly connected component. Stutter edges (events the
``ignore`` policy accepted) are no progress: they are left out, so a configuration that
only stutters ends its runs.

Fairness is declared per event. An event is *enabled* in a configuration when some
non-stutter edge of it leaves that configuration. A run that stays in a component ``C``
forever can visit every configuration and take every edge of ``C`` infinitely often, so
``C`` holds a fair run exactly when, for each weakly fair event that is enabled in every
configuration of ``C``, some edge of it lies inside ``C``; and for each strongly fair event
enabled somewhere in ``C``, some edge of it lies inside ``C``. A component that fails only
a strong condition may still hold a fair run that never visits the configurations
enabling the event: those are removed and the rest decomposed again (the classical
Streett emptiness check; at most one round per strongly fair event). Each round is a
handful of array operations and one scipy strong-components pass.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import numpy.typing as npt
from agentfsm.verify.table import regions
from agentfsm.verify.table.explore import Exploration
from agentfsm.verify.table.graph import kept_matrix, reached_back, reversed_matrix
from agentfsm.verify.table.sparse import connected_components

Ints = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]


@dataclass(frozen=True)
class Progress:
    """The explored graph without its stutter edges, as CSR arrays plus each edge's source
    and event index."""

    offsets: Ints
    targets: Ints
    labels: npt.NDArray[np.intc]
    sources: npt.NDArray[np.signedinteger[Any]]   # the smallest signed type for the count
    events: npt.NDArray[np.signedinteger[Any]]

    @property
    def out_degree(self) -> Ints:
        return np.diff(self.offsets)


def progress(ex: Exploration) -> Progress:
    """The progress graph of ``ex`` (computed once). Without stutter edges it is the explored
    graph itself: its offsets, targets and labels are views of the exploration's arrays, and
    only each edge's source and event are made."""
    cached = ex.columns.get("progress")
    if cached is not None:
        assert isinstance(cached, Progress)
        return cached
    offsets = np.frombuffer(ex.offsets, dtype=np.int64)
    targets = np.frombuffer(ex.edge_target, dtype=np.int64)
    labels = np.frombuffer(ex.edge_label, dtype=np.intc)
    sources = np.repeat(np.arange(ex.count, dtype=np.min_scalar_type(-ex.count)), np.diff(offsets))
    stutter = np.frombuffer(ex.stutter, dtype=np.int64)
    if len(stutter):
        keep = np.ones(len(targets), dtype=np.bool_)
        keep[stutter] = False
        offsets = np.concatenate(([0], np.cumsum(keep, dtype=np.int64)))[offsets]
        targets, labels, sources = targets[keep], labels[keep], sources[keep]
    event_of_label = np.array([ex.table.events.index(ex.table.event(name)) for name, _ in ex.labels] or [0],
                              dtype=np.min_scalar_type(-len(ex.table.events)))
    result = Progress(offsets, targets, labels, sources, event_of_label[labels])
    ex.columns["progress"] = result
    return result


def enabled(ex: Exploration, event: int) -> Bools:
    """Configurations where ``event`` (its index in the table) is enabled (computed once per
    exploration: each liveness property reads it)."""
    cached: dict[int, Bools] = ex.columns.setdefault("enabled", {})
    mask = cached.get(event)
    if mask is None:
        g = progress(ex)
        mask = cached[event] = np.zeros(ex.count, dtype=np.bool_)
        mask[g.sources[g.events == event]] = True
    return mask


def _fair(ex: Exploration, part: regions.Region) -> Ints:
    """For each configuration of the region ``part`` (by its local number), the id of the fair
    component it lies in (-1: none): a strongly connected set of the region's configurations,
    joined by edges inside it, that holds an infinite fair run (see the module docstring)."""
    m, g = part.size, progress(ex)
    fairness = [(ex.table.events.index(ex.table.event(name)), kind) for name, kind in ex.table.fairness.items()]
    enabled_by = {e: enabled(ex, e)[part.nodes] for e, _ in fairness}
    events = g.events[part.edges]
    alive = np.ones(m, dtype=np.bool_)
    fair = np.full(m, -1, dtype=np.int64)
    next_id = 0
    while alive.any():
        inside = alive[part.sources] & alive[part.targets]
        s, t, ev = part.sources[inside], part.targets[inside], events[inside]
        count, comp = connected_components(kept_matrix(part.offsets, part.targets, inside), directed=True,
                                           connection="strong")
        internal = comp[s] == comp[t]
        size = np.bincount(comp[alive], minlength=count)
        nontrivial = size > 1
        nontrivial[comp[s[s == t]]] = True
        weak_ok, strong_bad = nontrivial, np.zeros(count, dtype=np.bool_)
        cut = np.zeros(m, dtype=np.bool_)
        for e, kind in fairness:
            taken = np.zeros(count, dtype=np.bool_)
            taken[comp[s[internal & (ev == e)]]] = True
            where = np.bincount(comp[alive & enabled_by[e]], minlength=count)
            if kind == "weak":
                weak_ok = weak_ok & ~((where == size) & ~taken)
            else:
                bad = (where > 0) & ~taken
                strong_bad |= bad
                cut |= enabled_by[e] & bad[comp]
        good = alive & (weak_ok & ~strong_bad)[comp]
        fair[good] = comp[good] + next_id
        next_id += count
        # A component that failed only strong conditions keeps the configurations that
        # enable none of the events it failed on; they are decomposed again.
        alive = alive & (weak_ok & strong_bad)[comp] & ~cut
    return fair


@dataclass(frozen=True)
class Escape:
    """How a maximal fair run avoids a set: from ``start`` along ``path`` (labels) to
    ``end``, then either stops there (``loop`` is None: no successor) or repeats ``loop``."""

    start: int
    path: list[int]
    end: int
    loop: list[int] | None


def avoiders(ex: Exploration, avoid: Bools) -> tuple[Bools, Bools, Ints]:
    """Configurations of ``avoid`` from which some maximal fair run never leaves ``avoid``:
    ``(from where, the ends such runs reach, the fair component ids)``; worked out on the
    region's own graph (``regions``). The last answer is kept: properties with one goal and
    different sources (on the Loom table, three pairs of ``leads-to``) come one after the
    other, and share it."""
    last = ex.columns.get("avoiders")
    if last is not None and np.array_equal(last[0], avoid):
        return cast("tuple[Bools, Bools, Ints]", last[1])
    g, n = progress(ex), ex.count
    part = regions.region(g.offsets, g.targets, avoid)
    fair = _fair(ex, part)
    ends = (part.degree == 0) | (fair >= 0)
    escapes = reached_back(reversed_matrix(part.offsets, part.targets), ends)
    found = part.spread(escapes, False, n), part.spread(ends, False, n), part.spread(fair, -1, n)
    ex.columns["avoiders"] = (avoid, found)
    return found


def escape(ex: Exploration, avoid: Bools, ends: Bools, fair: Ints, start: int) -> Escape:
    """The shortest way from ``start`` (an avoider) to an end, and the fair loop there."""
    g = progress(ex)
    steps = _bfs(g, avoid, start, lambda node: bool(ends[node]))
    end = steps[-1][1] if steps else start
    path = [label for label, _ in steps]
    if fair[end] < 0:
        return Escape(start, path, end, None)
    return Escape(start, path, end, fair_loop(ex, fair == fair[end], end))


def fair_loop(ex: Exploration, component: Bools, entry: int) -> list[int]:
    """Labels of a cycle from ``entry`` through ``component`` that is fair: it takes an
    edge of every fair event with an edge inside the component, and visits a configuration
    where each weakly fair event without one is disabled."""
    g = progress(ex)
    labels: list[int] = []
    here = entry
    for name, kind in ex.table.fairness.items():
        e = ex.table.events.index(ex.table.event(name))
        inner = component[g.sources] & component[g.targets] & (g.events == e)
        if inner.any():
            firing = np.zeros(ex.count, dtype=np.bool_)
            firing[g.sources[inner]] = True
            steps = _bfs(g, component, here, lambda node, f=firing: bool(f[node]))
            here = steps[-1][1] if steps else here
            labels += [label for label, _ in steps]
            edge = next(k for k in range(g.offsets[here], g.offsets[here + 1]) if inner[k])
            labels.append(int(g.labels[edge]))
            here = int(g.targets[edge])
        elif kind == "weak":
            off = component & ~enabled(ex, e)
            steps = _bfs(g, component, here, lambda node, f=off: bool(f[node]))
            here = steps[-1][1] if steps else here
            labels += [label for label, _ in steps]
    back = _bfs(g, component, here, lambda node: node == entry, at_least_one=not labels)
    return labels + [label for label, _ in back]


def _bfs(g: Progress, inside: Bools, start: int, goal: Any, at_least_one: bool = False) -> list[tuple[int, int]]:
    """A shortest path of ``(label, node)`` steps inside ``inside`` from ``start`` to a node
    meeting ``goal`` (``start`` itself counts unless ``at_least_one``). Edges are tried in
    exploration order, so the result is deterministic."""
    if not at_least_one and goal(start):
        return []
    back: dict[int, tuple[int, int]] = {}
    queue = deque([start])
    seen = {start}
    while queue:
        node = queue.popleft()
        for k in range(int(g.offsets[node]), int(g.offsets[node + 1])):
            target = int(g.targets[k])
            if not inside[target]:
                continue
            if goal(target):
                steps = [(int(g.labels[k]), target)]
                while node != start:
                    previous, label = back[node]
                    steps.append((label, node))
                    node = previous
                steps.reverse()
                return steps
            if target not in seen:
                seen.add(target)
                back[target] = (node, int(g.labels[k]))
                queue.append(target)
    raise AssertionError("the goal is reachable")
