"""Helpers for the seed tables' tests: run event sequences, and ask the verifier about them.

Exhaustive questions (does every check hold, what can happen in every reachable
configuration, how long can a run be) go to ``agentfsm.verify``; single runs go through
``semantics.step``, the reference semantics.
"""

from __future__ import annotations

from pathlib import Path

from agentfsm.spec import Table
from agentfsm.spec.expr import Value
from agentfsm.spec.semantics import StepResult, step
from agentfsm.spec.yamlio import load_document
from agentfsm.verify.table.checks import run_checks
from agentfsm.verify.table.explore import Exploration, explore, labels_of

Config = tuple[int, tuple[Value, ...]]
Events = list[tuple[str, dict[str, Value]]]
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def problems(table: Table) -> list[str]:
    """Every failing verifier check of ``table``, one line each (empty when it verifies clean)."""
    return [f"{c.kind} {c.name or ''}: {c.message}" for c in run_checks(explore(table)).checks if not c.ok]


def configs(table: Table) -> list[Config]:
    """Every reachable configuration."""
    ex = explore(table)
    return [ex.config(i) for i in range(ex.count)]


def accepted_steps(table: Table, config: Config) -> list[StepResult]:
    """What every accepted event (with every parameter value) does in ``config``."""
    results = (step(table, config[0], config[1], name, params) for name, params in labels_of(table))
    return [r for r in results if r.accepted]


def run(table: Table, events: Events) -> list[StepResult]:
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


def longest_run(table: Table) -> int:
    """The most accepted events any run can take (the configuration graph must be acyclic)."""
    ex: Exploration = explore(table)
    depth: dict[int, int] = {}
    for i in _post_order(ex):
        depth[i] = max((1 + depth[t] for _, t in ex.edges(i)), default=0)
    return depth[0]


def _post_order(ex: Exploration) -> list[int]:
    order: list[int] = []
    seen = {0}
    stack = [(0, iter(ex.edges(0)))]
    while stack:
        node, successors = stack[-1]
        for _, target in successors:
            if target not in seen:
                seen.add(target)
                stack.append((target, iter(ex.edges(target))))
                break
        else:
            stack.pop()
            order.append(node)
    return order


def demo_events(machine: str) -> Events:
    """The events of ``examples/MACHINE-demo.yaml``, an event script for ``agentfsm run``."""
    path = EXAMPLES / f"{machine}-demo.yaml"
    data = load_document(path.read_bytes(), str(path)).data
    events: Events = []
    for entry in data["events"]:
        if isinstance(entry, str):
            events.append((entry, {}))
        else:
            [(name, params)] = entry.items()
            events.append((name, dict(params)))
    return events
