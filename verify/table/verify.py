"""Verifying one table: explore it and run its checks, what ``agentfsm verify`` does with a table
file (``verify/system/verify.py`` is the same for a system)."""

from __future__ import annotations

import time
from typing import Protocol

from agentfsm.spec import Table
from agentfsm.verify.table.checks import Verdict, run_checks
from agentfsm.verify.table.explore import ExplorationLimit, explore

# The property kinds whose checks walk the edges (graph.can_reach, graph.find_cycle, liveness);
# every other check reads the configurations, the offsets, the stutter positions and the parents.
EDGE_KINDS = frozenset({"always-reachable", "no-cycle-within", "eventually", "leads-to"})


def reads_edges(table: Table) -> bool:
    """Whether ``run_checks`` on this table reads the explored edges: if not, ``explore`` need
    only count them (``edges=False``), which saves 12 bytes a transition."""
    return any(p.kind in EDGE_KINDS for p in table.properties)


class Meter(Protocol):
    """Told the configurations found while exploring, and when the exploration is done (the
    command line's progress line)."""

    def __call__(self, count: int) -> None: ...

    def done(self) -> None: ...


def verify_table(table: Table, meter: Meter | None = None,
                 max_configurations: int | None = None) -> tuple[Verdict, float]:
    """The verdict and the seconds it took; raise ExplorationLimit when the exploration stops
    early (the limit, or memory running out while exploring or checking)."""
    start = time.perf_counter()
    try:
        ex = explore(table, meter, max_configurations, edges=reads_edges(table))
    finally:
        if meter is not None:
            meter.done()
    ex.compact()
    try:
        verdict = run_checks(ex)
    except MemoryError:
        count, transitions, depth = ex.count, ex.transitions, ex.reached[2]
        del ex
        raise ExplorationLimit("out of memory while checking", count, transitions, depth) from None
    return verdict, time.perf_counter() - start
