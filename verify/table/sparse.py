"""scipy's sparse graph routines over the explorer's CSR arrays, imported on first use.

scipy's import costs about half a CPU-second, more than checking a wide table whose checks
need none of it, so each routine imports it on its first call. ``matrix`` hands the arrays
over in the form the routines take without copying them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt


def csr_matrix(*args: Any, **kwargs: Any) -> Any:
    """scipy.sparse.csr_matrix, imported on first use."""
    from scipy.sparse import csr_matrix as make

    return make(*args, **kwargs)


def breadth_first_order(*args: Any, **kwargs: Any) -> Any:
    """scipy.sparse.csgraph.breadth_first_order, imported on first use."""
    from scipy.sparse.csgraph import breadth_first_order as order

    return order(*args, **kwargs)


def connected_components(*args: Any, **kwargs: Any) -> Any:
    """scipy.sparse.csgraph.connected_components, imported on first use."""
    from scipy.sparse.csgraph import connected_components as components

    return components(*args, **kwargs)


def matrix(n: int, offsets: npt.NDArray[Any], targets: npt.NDArray[Any]) -> Any:
    """An n×n adjacency matrix over the CSR arrays ``(offsets, targets)``, in the form scipy's
    graph routines take without copying: int32 indices (or the constructor scans int64 ones
    to prove they fit) and float64 unit weights as one value of stride 0 (the routines take
    weights without reading them; any other type is converted, which also sorts each row).
    A routine that writes the weights (``sum_duplicates``) needs an array of its own."""
    if max(n, len(targets)) < 1 << 31:
        offsets, targets = offsets.astype(np.int32, copy=False), targets.astype(np.int32, copy=False)
    return csr_matrix((np.broadcast_to(np.float64(1.0), (len(targets),)), targets, offsets), shape=(n, n))
