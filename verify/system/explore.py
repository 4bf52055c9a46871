"""Exploration of a system: every interleaving of instance steps, breadth-first.

A system configuration is ``(insts, mailboxes, stalled, spent)``: per instance its
(state, vars), per instance its FIFO mailbox of (event, params) messages, per instance
whether it is stalled, and per declared fault how many were spent. A system step is one
of: an environment event delivered to one instance, an instance taking the message at
the head of its mailbox, or a fault (crash, lose, duplicate, stall; and waking a stalled
instance, which is free). Each instance step is ``agentfsm.spec.semantics.step`` itself,
atomic; the actions it emits are routed by the links, in emission order, to the target
mailboxes.

Identical instances (a ``count`` group nothing tells apart) are interchangeable: with
symmetry on, the explorer stores one representative per permutation, the configuration
with the group's members sorted. Breadth-first order with parents gives shortest
counterexamples; a trace is turned back into concrete steps by re-finding, from the
concrete configuration, the successor whose representative is the next one on the path.
Wide frontiers are explored a batch at a time by ``batched``, with the same result; the step
function both drive is in ``step``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from functools import partial

from agentfsm.spec.system_model import System
from agentfsm.spec.system_trace import Label
from agentfsm.verify.system import batched
from agentfsm.verify.system.reduction import Reducer
from agentfsm.verify.system.step import Config, Finding, Stepper, canonicalizer, initial_config, past_limit


@dataclass
class SystemExploration:
    """The reachable system graph (representatives under symmetry) and what its steps did."""

    system: System
    symmetry: bool
    configs: list[Config]
    parent: list[int]
    reduction: bool = False      # partial-order reduction: a subset of the configurations, safety checks only
    edges_src: list[int] = field(default_factory=list)
    edges_dst: list[int] = field(default_factory=list)
    edges_label: list[Label] = field(default_factory=list)
    out_degree: list[int] = field(default_factory=list)
    # First occurrence of each finding kind (per invariant name): (configuration, its step) in BFS order.
    step_findings: dict[str, tuple[int, Label, Finding]] = field(default_factory=dict)
    seconds: float = 0.0

    def path_to(self, node: int) -> list[int]:
        """The configurations from the initial one to ``node``. The walk up the parents takes at
        most one step per configuration, so parents that loop are an error, never a hang."""
        path = [node]
        for _ in self.parent:
            if self.parent[path[-1]] < 0:
                return path[::-1]
            path.append(self.parent[path[-1]])
        raise ValueError(f"the parents of configuration {node} loop")


def explore_system(system: System, symmetry: bool = True, limit: int | None = None,
                   reduction: bool = False, depth: int | None = None) -> SystemExploration:
    """Breadth-first exploration from the initial configuration; past ``limit`` configurations it
    raises ExplorationLimit. With ``reduction``, partial-order reduction (verify/system/reduction.py)
    expands fewer steps where that cannot change a safety verdict. With ``depth``, only the
    configurations at most that many steps deep are expanded (``out_degree`` covers just them)."""
    start = time.perf_counter()
    wide = batched.LEVEL_MIN
    batches = batched.batches(system, symmetry) if wide is not None and depth is None else None
    stepper = Stepper(system)
    canonical = canonicalizer(system, symmetry)
    first = canonical(initial_config(system))
    index: dict[Config, int] = {first: 0}
    ex = SystemExploration(system, symmetry, [first], [-1], reduction)
    reducer = Reducer(system) if reduction else None
    level_end = 1   # configurations before this index are on the current level or earlier
    level = 0       # the current level, exact while no batch ran
    # The batches expand every step. Full expansion is always allowed, so a reduced exploration
    # takes them only while the reduction has not pruned anything: on a system it cannot reduce
    # (the Loom system) it then costs what the full exploration does, and elsewhere it stays reduced.
    pruned = False

    def deeper(nxt: Config) -> bool:
        return index.get(canonical(nxt), level_end) >= level_end

    head = 0
    while head < len(ex.configs):
        if batches is not None and wide is not None and len(ex.configs) - head >= wide and not pruned:
            known = len(ex.configs)   # a wide frontier: batches while it stays wide
            head = batches.run(ex, head, limit, ex.step_findings, partial(first_findings, stepper, ex))
            index.update(zip(ex.configs[known:], range(known, len(ex.configs)), strict=True))
            continue
        if head >= level_end:   # a new level (or later: then the proviso only gets stricter)
            level_end = len(ex.configs)
            level += 1
            if depth is not None and level > depth:
                break
        config = ex.configs[head]
        degree = 0
        successors = list(stepper.successors(config))
        for label, _, effect in successors:
            for finding in effect.findings:
                ex.step_findings.setdefault(finding.kind, (head, label, finding))
        if reducer is not None:
            kept = reducer.reduce(config, successors, deeper)
            pruned = pruned or len(kept) < len(successors)
            successors = kept
        for label, nxt, _ in successors:
            if nxt is config:
                continue  # a step that failed (semantic error): no successor
            target = canonical(nxt)
            node = index.get(target)
            if node is None:
                node = index[target] = len(ex.configs)
                ex.configs.append(target)
                ex.parent.append(head)
            ex.edges_src.append(head)
            ex.edges_dst.append(node)
            ex.edges_label.append(label)
            degree += 1
        ex.out_degree.append(degree)
        head += 1
        if limit is not None and len(ex.configs) > limit:
            raise past_limit(ex, limit)
    ex.seconds = time.perf_counter() - start
    return ex


def first_findings(stepper: Stepper, ex: SystemExploration, nodes: list[int]) -> None:
    """The findings of the steps from ``nodes``, in order, each kind's first kept (as the loop keeps them)."""
    for node in nodes:
        for label, _, effect in stepper.successors(ex.configs[node]):
            for finding in effect.findings:
                ex.step_findings.setdefault(finding.kind, (node, label, finding))
