"""A region of the explored graph (the configurations a mask selects) as a graph of its own.

Each liveness property decomposes its region (the configurations that avoid its goal) into
strong components and searches it backwards. Over the whole graph that is a pass over every
edge and an n-long array per step, six times on the Loom table; the region is often a small
part of it. ``region`` renumbers the region's configurations ``0..m-1`` (in ascending order,
so local order is the graph's order) and keeps only the edges between them, in CSR order:
every later pass costs what the region holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

Ints = npt.NDArray[np.int64]
Index = npt.NDArray[np.signedinteger[Any]]   # int32 where the numbers fit, else int64
Bools = npt.NDArray[np.bool_]
Item = TypeVar("Item", bound=np.generic)


@dataclass(frozen=True)
class Region:
    """The configurations ``nodes`` (ascending; local node ``k`` is ``nodes[k]``) and the
    edges between them: local ``sources`` (ascending) and ``targets``, CSR ``offsets``, and
    each one's index ``edges`` in the whole graph."""

    nodes: Index
    offsets: Index
    sources: Index
    targets: Index
    edges: Index
    degree: Index   # each node's out-degree in the whole graph

    @property
    def size(self) -> int:
        return len(self.nodes)

    def spread(self, local: npt.NDArray[Item], fill: object, n: int) -> npt.NDArray[Item]:
        """A per-node array over the region as one over all ``n`` configurations (``fill`` elsewhere)."""
        whole = np.full(n, fill, dtype=local.dtype)
        whole[self.nodes] = local
        return whole


def region(offsets: Ints, targets: Ints, mask: Bools) -> Region:
    """The subgraph of the CSR graph ``(offsets, targets)`` induced by the configurations
    ``mask`` marks; its arrays are int32 where the graph's numbers fit (half the memory
    traffic of each later pass)."""
    kind: np.dtype[np.signedinteger[Any]] = np.dtype(np.int32 if max(len(mask), len(targets)) < 1 << 31
                                                     else np.int64)
    nodes = np.flatnonzero(mask).astype(kind)
    starts = offsets[nodes].astype(kind)
    degree = offsets[nodes + 1].astype(kind) - starts
    runs = np.cumsum(degree, dtype=kind) - degree   # where each node's edges begin among the region's out-edges
    edges = np.arange(int(degree.sum()), dtype=kind) + np.repeat(starts - runs, degree)
    whole_targets = targets[edges]
    inside = mask[whole_targets]
    sources = np.repeat(np.arange(len(nodes), dtype=kind), degree)[inside]
    csr = np.concatenate(([0], np.cumsum(np.bincount(sources, minlength=len(nodes)), dtype=kind)))
    local = np.cumsum(mask, dtype=kind) - 1   # each marked configuration's local number
    return Region(nodes, csr, sources, local[whole_targets[inside]], edges[inside], degree)
