"""A small exhaustive check of a table over ``semantics.step``, for the seed tables' tests.

It stands in until ``agentfsm.verify`` lands: breadth-first over every reachable
configuration and every event with every parameter value, then the checks DESIGN.md
names (determinism, bounds and transient errors surface as ``SemanticError``).
"""

from __future__ import annotations

import itertools
from collections import deque
from dataclasses import dataclass, field

from agentfsm.spec import Table
from agentfsm.spec.expr import Value
from agentfsm.spec.semantics import StepResult, step

Config = tuple[int, tuple[Value, ...]]


@dataclass
class Edge:
    source: Config
    event: str
    params: tuple[Value, ...]
    target: Config


@dataclass
class Exploration:
    table: Table
    parent: dict[Config, Edge | None] = field(default_factory=dict)
    edges: list[Edge] = field(default_factory=list)
    accepting: set[Config] = field(default_factory=set)
    fired_rows: set[int] = field(default_factory=set)

    def path(self, config: Config) -> list[str]:
        """The shortest event sequence reaching ``config``, as ``Event(params)`` strings."""
        steps: list[str] = []
        edge = self.parent[config]
        while edge is not None:
            params = self.table.event(edge.event).param_dict(edge.params)
            steps.append(f"{edge.event}{params if params else ''}")
            edge = self.parent[edge.source]
        return steps[::-1]


def inputs(table: Table) -> list[tuple[str, tuple[Value, ...]]]:
    """Every event with every combination of parameter values."""
    return [(e.name, values) for e in table.events for values in itertools.product(*(p.domain for p in e.params))]


def accepted_steps(table: Table, config: Config) -> list[StepResult]:
    """What every accepted input does in ``config`` (for random walks)."""
    results = (step(table, config[0], config[1], name, params) for name, params in inputs(table))
    return [r for r in results if r.accepted]


def explore(table: Table) -> Exploration:
    """Every configuration reachable from the initial one; accepted steps are the edges."""
    result = Exploration(table)
    start: Config = (table.initial.index, table.initial_vars())
    result.parent[start] = None
    queue = deque([start])
    every_input = inputs(table)
    while queue:
        config = queue.popleft()
        for name, params in every_input:
            outcome = step(table, config[0], config[1], name, params)
            if not outcome.accepted:
                continue
            result.accepting.add(config)
            result.fired_rows.update(r.index for r in outcome.rows)
            target: Config = (outcome.state, outcome.vars)
            edge = Edge(config, name, params, target)
            result.edges.append(edge)
            if target not in result.parent:
                result.parent[target] = edge
                queue.append(target)
    return result


def problems(exploration: Exploration) -> list[str]:
    """Invariant violations, deadlocks, dead rows and property failures, one line each."""
    table = exploration.table
    found: list[str] = []
    for config in exploration.parent:
        env = (config[0], *config[1])
        for inv in table.invariants:
            if not inv.fn(env):
                found.append(f"invariant {inv.name} fails after {exploration.path(config)}")
        if not table.states[config[0]].final and config not in exploration.accepting:
            found.append(f"deadlock in {table.states[config[0]].name} after {exploration.path(config)}")
    found += [f"dead row {row.index} ({row.source} {row.label()})"
              for row in table.rows if row.index not in exploration.fired_rows]
    for prop in table.properties:
        if prop.kind == "always-reachable":
            bad = _cannot_reach(exploration, table.state_index[prop.target or ""])
            found += [f"{prop.name}: {prop.target} unreachable after {exploration.path(c)}" for c in bad[:1]]
        elif _has_cycle(exploration, set(prop.events)):
            found.append(f"{prop.name}: a cycle uses only {', '.join(prop.events)}")
    return found


def _cannot_reach(exploration: Exploration, state: int) -> list[Config]:
    preds: dict[Config, list[Config]] = {}
    for edge in exploration.edges:
        preds.setdefault(edge.target, []).append(edge.source)
    good = {c for c in exploration.parent if c[0] == state}
    queue = deque(good)
    while queue:
        for pred in preds.get(queue.popleft(), []):
            if pred not in good:
                good.add(pred)
                queue.append(pred)
    return [c for c in exploration.parent if c not in good]


def _has_cycle(exploration: Exploration, events: set[str]) -> bool:
    succ: dict[Config, set[Config]] = {}
    for edge in exploration.edges:
        if edge.event in events and edge.target != edge.source:
            succ.setdefault(edge.source, set()).add(edge.target)
        elif edge.event in events:
            return True
    indegree = {c: 0 for c in exploration.parent}
    for targets in succ.values():
        for target in targets:
            indegree[target] += 1
    queue = deque(c for c, d in indegree.items() if d == 0)
    removed = 0
    while queue:
        config = queue.popleft()
        removed += 1
        for target in succ.get(config, ()):
            indegree[target] -= 1
            if indegree[target] == 0:
                queue.append(target)
    return removed != len(indegree)


def run(table: Table, events: list[tuple[str, dict[str, Value]]]) -> list[StepResult]:
    """Deliver ``events`` from the initial configuration; one result per event."""
    state, values = table.initial.index, table.initial_vars()
    results = []
    for name, params in events:
        result = step(table, state, values, name, table.event(name).param_values(params))
        results.append(result)
        state, values = result.state, result.vars
    return results


def states(table: Table, results: list[StepResult]) -> list[str]:
    return [table.states[r.state].name for r in results]


def longest_path(exploration: Exploration) -> int:
    """The most accepted events any run can take (the graph must be acyclic)."""
    succ: dict[Config, list[Config]] = {}
    for edge in exploration.edges:
        succ.setdefault(edge.source, []).append(edge.target)
    memo: dict[Config, int] = {}

    def depth(config: Config) -> int:
        if config not in memo:
            memo[config] = max((1 + depth(t) for t in succ.get(config, ())), default=0)
        return memo[config]

    start: Config = (exploration.table.initial.index, exploration.table.initial_vars())
    return depth(start)
