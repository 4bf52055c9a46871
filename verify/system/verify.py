"""Verifying a system: explore it (reduced where the checks allow) and run its checks, with the
shortest counterexamples; what ``agentfsm verify`` does with a system file and what the tests and
diagrams call."""

from __future__ import annotations

from agentfsm.spec.system_model import System
from agentfsm.verify.system.checks import SysVerdict, run_system_checks
from agentfsm.verify.system.explore import explore_system
from agentfsm.verify.table.explore import ExplorationLimit


def verify_system(system: System, symmetry: bool = True, reduction: bool = True,
                  limit: int | None = None) -> SysVerdict:
    """Partial-order reduction serves the safety checks only: a system with liveness properties
    (always-reachable, no-cycle-within) is explored in full. Past ``limit`` configurations the
    exploration stops with ``ExplorationLimit``."""
    reduced = reduction and not system.properties
    verdict = run_system_checks(explore_system(system, symmetry, limit, reduced))
    if reduced:
        shorten(verdict, limit)
    return verdict


def shorten(verdict: SysVerdict, limit: int | None) -> None:
    """Replace the counterexamples of a reduced exploration with shortest ones: a search without
    reduction to the depth of the longest finds every violation at most that deep, first the
    shallowest. Past ``limit`` it gives up and the verdict says its traces may not be shortest."""
    failing = [c for c in verdict.checks if not c.ok and c.trace is not None]
    depth = max((len(c.trace.steps) for c in failing if c.trace is not None), default=0)
    if not depth:
        return
    system, symmetry = verdict.system, verdict.exploration.symmetry
    try:
        bounded = run_system_checks(explore_system(system, symmetry, limit, depth=depth))
    except ExplorationLimit:
        verdict.longer = (f"counterexamples may be longer than the shortest: the search without partial-order "
                          f"reduction to depth {depth} stopped past --max-configurations {limit}")
        return
    found = {(c.kind, c.name): c for c in bounded.checks if not c.ok and c.trace is not None}
    verdict.checks = [found.get((c.kind, c.name), c) if not c.ok else c for c in verdict.checks]
