"""What a replayed trace shows: the checks it violates, so a kept counterexample can serve
as a regression test (``replay`` exits 1 while the table still has the defect).

Judged on the trace alone, with the reference semantics: a step that raises breaks the
check its error names; a configuration where an invariant or an ``always`` property is
false breaks it; a trace that ends in a non-final configuration accepting no event (an
ignored event is no progress) shows a deadlock; and the trace's own property, when it
names one, is judged as a counterexample of it: a lasso whose cycle closes, or a run
that ends, without reaching the property's goal (``eventually``, ``leads-to``), or a
closed cycle of the listed events only (``no-cycle-within``).
"""

from __future__ import annotations

import itertools

from agentfsm.spec import Table
from agentfsm.spec.expr import Value, compile_expr
from agentfsm.spec.model import Property
from agentfsm.spec.semantics import SemanticError, step
from agentfsm.spec.trace import Trace, describe_config, walk

Config = tuple[int, tuple[Value, ...]]


def violations(table: Table, trace: Trace) -> list[str]:
    """One line per check the trace violates (empty when it shows no violation)."""
    found: list[str] = []
    configs: list[Config] = [(table.initial.index, table.initial_vars())]
    for n, walked in enumerate(walk(table, trace.steps), start=1):
        if walked.error is not None:
            found.append(f"{walked.error.kind}: step {n} raises: {walked.error.message}")
            return found
        assert walked.result is not None
        configs.append((walked.result.state, walked.result.vars))
    always = [(inv.name, inv.fn, "invariant") for inv in table.invariants]
    always += [(p.name, compile_expr(p.goal), "always") for p in table.properties if p.kind == "always" and p.goal]
    for name, fn, kind in always:
        bad = next((c for c in configs if not fn((c[0], *c[1]))), None)
        if bad is not None:
            found.append(f"{kind} {name}: false in {describe_config(table, *bad)}")
    if trace.loop_start is None and _stuck(table, configs[-1]) and not table.states[configs[-1][0]].final:
        found.append(f"deadlock: {describe_config(table, *configs[-1])} is not final and accepts no event")
    prop = next((p for p in table.properties if p.name == trace.check and p.kind == trace.kind), None)
    if prop is not None and prop.kind in ("eventually", "leads-to", "no-cycle-within"):
        verdict = _judge(table, prop, trace, configs)
        if verdict:
            found.append(f"{prop.kind} {prop.name}: {verdict}")
    return found


def _stuck(table: Table, config: Config) -> bool:
    """No event makes progress from ``config`` (every one is rejected, ignored or raises)."""
    state, values = config
    for event in table.events:
        for params in itertools.product(*(p.domain for p in event.params)):
            try:
                if step(table, state, values, event.name, params).status == "fired":
                    return False
            except SemanticError:
                continue
    return True


def _judge(table: Table, prop: Property, trace: Trace, configs: list[Config]) -> str | None:
    """Why the trace is a counterexample of ``prop``, or None when it is not one."""
    loop = trace.loop_start
    closes = loop is not None and configs[-1] == configs[loop] and loop < len(trace.steps)
    if prop.kind == "no-cycle-within":
        if closes and loop is not None and all(event in prop.events for event, _ in trace.steps[loop:]):
            return f"the cycle from step {loop + 1} uses only {', '.join(prop.events)}"
        return None
    assert prop.goal is not None
    goal = compile_expr(prop.goal)
    reached = [i for i, c in enumerate(configs) if goal((c[0], *c[1]))]
    last_goal = reached[-1] if reached else -1
    if prop.kind == "eventually" and reached:
        return None
    if prop.kind == "leads-to":
        assert prop.source is not None
        source = compile_expr(prop.source)
        if not any(source((c[0], *c[1])) for c in configs[last_goal + 1:]):
            return None   # every source configuration is followed by the goal
    if closes and loop is not None:
        if last_goal >= loop:
            return None
        return f"the cycle from step {loop + 1} repeats forever without reaching {prop.goal_text}"
    if loop is None and _stuck(table, configs[-1]):
        return f"the run ends in {describe_config(table, *configs[-1])} without reaching {prop.goal_text}"
    return None
