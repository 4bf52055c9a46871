"""The verifier's graph passes against networkx, an independent oracle, on random tables.

The oracle builds its own graph from the reference semantics (``step``), with networkx:
fired steps are edges, ignored events are not (a stutter is no progress). It then
decides deadlock, ``no-cycle-within`` (cycles), ``always-reachable`` (reachability) and
``eventually``/``leads-to`` under random weak and strong fairness (the condensation and
its strongly connected components, decomposed again where a strong condition fails) and
must agree with every verdict. Every liveness counterexample is replayed: it must be a
real run that never reaches the goal, and its loop must be fair.
"""

from __future__ import annotations

from itertools import product
from typing import Any

import networkx as nx
from agentfsm.spec import Table
from agentfsm.spec.expr import Expr, InStates, Value
from agentfsm.spec.semantics import SemanticError, step
from agentfsm.verify.table.checks import Verdict, run_checks
from agentfsm.verify.table.explore import explore
from agentfsm.verify.table.replay import violations
from hypothesis import HealthCheck, given, settings
from hypothesis import event as note
from hypothesis import strategies as st
from strategies_tables import build, table_data

Config = tuple[int, tuple[Value, ...]]


@st.composite
def tables_with_properties(draw: st.DrawFn) -> Table:
    data: dict[str, Any] = draw(table_data(max_states=5, max_rows=10))
    stable = [n for n, spec in data["states"].items() if not spec.get("transient")]
    events = list(data["events"])

    def states() -> list[str]:
        return draw(st.lists(st.sampled_from(stable), min_size=1, max_size=2, unique=True))

    data["properties"] = [
        {"name": "ev", "eventually": states()},
        {"name": "lt", "leads-to": {"from": states(), "to": states()}},
        {"name": "ar", "always-reachable": states()},
        {"name": "nc", "no-cycle-within": {"events": draw(st.lists(st.sampled_from(events), min_size=1,
                                                                    max_size=2, unique=True))}},
    ]
    fair = draw(st.lists(st.sampled_from(events), max_size=len(events), unique=True))
    split = draw(st.integers(0, len(fair)))
    data["fairness"] = {"weak": fair[:split], "strong": fair[split:]}
    return build(data)


def oracle_graph(table: Table) -> nx.MultiDiGraph:
    """Reachable configurations and their fired steps, labelled with the event."""
    start: Config = (table.initial.index, table.initial_vars())
    g = nx.MultiDiGraph()
    g.add_node(start)
    todo = [start]
    while todo:
        config = todo.pop()
        for event in table.events:
            for params in product(*(p.domain for p in event.params)):
                try:
                    result = step(table, *config, event.name, params)
                except SemanticError:
                    continue
                if result.status != "fired":
                    continue
                target = (result.state, result.vars)
                if target not in g:
                    todo.append(target)
                g.add_edge(config, target, event=event.name)
    return g


def in_states(expr: Expr | None) -> frozenset[int]:
    """The states of a property set written as a list of states (``state in (...)``)."""
    assert isinstance(expr, InStates)
    return expr.indices


def enabled(g: nx.MultiDiGraph, node: Config, event: str) -> bool:
    return any(data["event"] == event for _, _, data in g.out_edges(node, data=True))


def fair_nodes(table: Table, g_full: nx.MultiDiGraph, g: nx.MultiDiGraph) -> set[Config]:
    """Configurations of ``g`` (a subgraph of ``g_full``) on some infinite fair run that
    stays in ``g``; enabledness is judged in the whole graph."""
    fair: set[Config] = set()
    work = [g]
    while work:
        sub = work.pop()
        condensed = nx.condensation(sub)
        for c in condensed.nodes:
            members = set(condensed.nodes[c]["members"])
            inner = sub.subgraph(members)
            if len(members) == 1 and not any(u == v for u, v in inner.edges()):
                continue
            taken = {data["event"] for _, _, data in inner.edges(data=True)}
            weak_ok = all(e in taken or not all(enabled(g_full, n, e) for n in members)
                          for e, kind in table.fairness.items() if kind == "weak")
            if not weak_ok:
                continue
            failed = [e for e, kind in table.fairness.items()
                      if kind == "strong" and e not in taken and any(enabled(g_full, n, e) for n in members)]
            if not failed:
                fair |= members
                continue
            keep = {n for n in members if not any(enabled(g_full, n, e) for e in failed)}
            if keep:
                work.append(sub.subgraph(keep).copy())
    return fair


def leads_to_fails(table: Table, g: nx.MultiDiGraph, sources: set[Config], goal: frozenset[int]) -> bool:
    avoid = {n for n in g if n[0] not in goal}
    sub = g.subgraph(avoid).copy()
    ends = {n for n in avoid if g.out_degree(n) == 0} | fair_nodes(table, g, sub)
    escaping = set(ends)
    for end in ends:
        escaping |= nx.ancestors(sub, end)
    return bool(sources & escaping)


def check_of(v: Verdict, kind: str, name: str | None = None) -> Any:
    return next(c for c in v.checks if c.kind == kind and c.name == name)


def assert_fair_lasso(table: Table, g: nx.MultiDiGraph, trace: Any) -> None:
    """The loop of a lasso: a closed cycle of real steps, fair under the table's fairness."""
    config: Config = (table.initial.index, table.initial_vars())
    visited = []
    for event, params in trace.steps:
        visited.append(config)
        result = step(table, *config, event, params)
        assert result.status == "fired"
        config = (result.state, result.vars)
    loop = trace.loop_start
    assert config == visited[loop]
    loop_configs = visited[loop:]
    loop_events = {event for event, _ in trace.steps[loop:]}
    for event, kind in table.fairness.items():
        on = [enabled(g, c, event) for c in loop_configs]
        if (kind == "weak" and all(on)) or (kind == "strong" and any(on)):
            assert event in loop_events, (event, kind)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(table=tables_with_properties())
def test_verdicts_agree_with_networkx(table: Table) -> None:
    g = oracle_graph(table)
    ex = explore(table)
    v = run_checks(ex)
    assert ex.count == g.number_of_nodes()
    final = {s.index for s in table.states if s.final}
    deadlocked = any(g.out_degree(n) == 0 and n[0] not in final for n in g)
    assert check_of(v, "deadlock").ok == (not deadlocked)

    props = {p.name: p for p in table.properties}
    cyc = props["nc"]
    allowed = nx.MultiDiGraph([(u, w) for u, w, d in g.edges(data=True) if d["event"] in cyc.events])
    assert check_of(v, "no-cycle-within", "nc").ok == nx.is_directed_acyclic_graph(allowed)

    target = {n for n in g if n[0] in in_states(props["ar"].goal)}
    reach = set(target)
    for n in target:
        reach |= nx.ancestors(g, n)
    assert check_of(v, "always-reachable", "ar").ok == (reach == set(g.nodes))

    start = (table.initial.index, table.initial_vars())
    ev = props["ev"]
    ev_fails = leads_to_fails(table, g, {start}, in_states(ev.goal))
    lt = props["lt"]
    lt_sources = {n for n in g if n[0] in in_states(lt.source)}
    lt_fails = leads_to_fails(table, g, lt_sources, in_states(lt.goal))
    for name, kind, fails in (("ev", "eventually", ev_fails), ("lt", "leads-to", lt_fails)):
        result = check_of(v, kind, name)
        assert result.ok == (not fails), result.message
        note(f"{kind} {'fails' if fails else 'holds'}{' under fairness' if table.fairness else ''}")
        if fails:
            judged = violations(table, result.trace)   # replay judges it a counterexample of this property
            assert any(line.startswith(f"{kind} {name}:") for line in judged), (result.message, judged)
            if result.trace.loop_start is not None:
                assert_fair_lasso(table, g, result.trace)
