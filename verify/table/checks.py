"""The named checks over one exploration, each with its shortest counterexample.

Configurations are numbered in breadth-first order, so the lowest-numbered offending
configuration has a shortest path from the initial one: every "first" below is a
shortest counterexample. Checks run on the graph the exploration found; a step that
raised a ``SemanticError`` has no successor and is reported by its own check.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import numpy as np
from agentfsm.spec import Property, Table
from agentfsm.spec.expr import Expr
from agentfsm.spec.trace import Trace, describe_config, describe_label
from agentfsm.verify.table import columns, graph, liveness
from agentfsm.verify.table.explore import Exploration, StepError

KINDS = ("determinism", "bounds", "invariant", "deadlock", "transient", "unreachable-state", "dead-row",
         "always-reachable", "no-cycle-within", "eventually", "leads-to", "always")


@dataclass(frozen=True)
class CheckResult:
    kind: str
    name: str | None
    ok: bool
    message: str
    trace: Trace | None = None


@dataclass(frozen=True)
class UnhandledPair:
    """How many (configuration, event with parameter values) pairs of a state no row handles."""

    state: str
    event: str
    pairs: int


@dataclass
class Verdict:
    """Everything ``verify`` reports about one table."""

    table: Table
    exploration: Exploration
    checks: list[CheckResult] = field(default_factory=list)
    seconds: list[float] = field(default_factory=list)   # per check, same order: for the benchmark

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def unhandled(self) -> list[UnhandledPair]:
        """Unhandled pairs grouped by (state, event), in table order."""
        ex, table = self.exploration, self.table
        grouped: dict[tuple[int, int], int] = {}
        events = {e.name: n for n, e in enumerate(table.events)}
        for (s, k), n in ex.unhandled.items():
            key = (s, events[ex.labels[k][0]])
            grouped[key] = grouped.get(key, 0) + n
        return [UnhandledPair(table.states[s].name, table.events[e].name, n) for (s, e), n in sorted(grouped.items())]


def run_checks(ex: Exploration) -> Verdict:
    verdict = Verdict(ex.table, ex)
    table = ex.table
    runs: list[Callable[[], CheckResult]] = [partial(_step_errors, ex, k) for k in ("determinism", "bounds")]
    runs += [partial(_invariant, ex, k) for k in range(len(table.invariants))]
    runs += [partial(_deadlock, ex), partial(_step_errors, ex, "transient"), partial(_unreachable_states, ex),
             partial(_dead_rows, ex)]
    runs += [partial(_PROPERTY_CHECKS[p.kind], ex, p) for p in table.properties]
    for run in runs:
        start = time.perf_counter()
        verdict.checks.append(run())
        verdict.seconds.append(time.perf_counter() - start)
    return verdict


def _step_trace(ex: Exploration, error: StepError, name: str | None = None) -> Trace:
    return Trace.of(ex.table, [*ex.path(error.config), ex.labels[error.label]], name, error.kind)


def _step_errors(ex: Exploration, kind: str) -> CheckResult:
    found = [e for e in ex.errors if e.kind == kind]
    if not found:
        return CheckResult(kind, None, True, _HOLDS[kind])
    first = found[0]   # errors are recorded in breadth-first order
    where = describe_config(ex.table, *ex.config(first.config))
    message = f"{first.message} (on {describe_label(ex.table, ex.labels[first.label])} in {where})"
    others = len({(e.kind, e.rows) for e in found}) - 1
    if others:
        message += f"; {others} more distinct violation{'s' if others > 1 else ''} of this kind"
    return CheckResult(kind, None, False, message, _step_trace(ex, first))


_HOLDS = {
    "determinism": "at most one row is enabled for every reachable configuration and event",
    "bounds": "every assignment stays within its variable's range",
    "transient": "every transient state reached is left by exactly one eventless row",
}


def _invariant(ex: Exploration, k: int) -> CheckResult:
    inv = ex.table.invariants[k]
    return _everywhere(ex, "invariant", inv.name, inv.expr, inv.text)


def _everywhere(ex: Exploration, kind: str, name: str, expr: Expr, text: str) -> CheckResult:
    """An expression that must hold in every reachable configuration (``invariant``, ``always``)."""
    bad = columns.first(~columns.holds(ex, expr))
    if bad is None:
        return CheckResult(kind, name, True, f"{text} holds in all {ex.count} configurations")
    where = describe_config(ex.table, *ex.config(bad))
    return CheckResult(kind, name, False, f"{text} is false in {where}", Trace.of(ex.table, ex.path(bad), name, kind))


def _deadlock(ex: Exploration) -> CheckResult:
    table = ex.table
    final = np.array([s.final for s in table.states], dtype=np.bool_)
    ends = graph.dead_ends(ex)
    stuck = ends[~final[graph.states_at(ex, ends)]]
    if not len(stuck):
        return CheckResult("deadlock", None, True, "every non-final configuration accepts some event")
    bad = int(stuck[0])   # dead ends are ascending: the first is a shallowest
    where = describe_config(table, *ex.config(bad))
    ignored = " (the ignore policy accepts events there, but an ignored event is no progress)" \
        if table.unhandled.policy == "ignore" else ""
    return CheckResult("deadlock", None, False, f"{where} is not final and accepts no event{ignored}",
                       Trace.of(table, ex.path(bad), None, "deadlock"))


def reached_states(ex: Exploration) -> set[int]:
    """States some configuration is in, plus transient states some fired row entered."""
    table = ex.table
    reached = {int(s) for s in np.flatnonzero(graph.state_counts(ex))}
    reached |= {table.state_index[r.target] for r in table.rows if ex.row_fires[r.index]}
    return reached


def _unreachable_states(ex: Exploration) -> CheckResult:
    reached = reached_states(ex)
    missing = [s.name for s in ex.table.states if s.index not in reached]
    if not missing:
        return CheckResult("unreachable-state", None, True, "every state is reachable")
    return CheckResult("unreachable-state", None, False, f"never reached: {', '.join(missing)}")


def _dead_rows(ex: Exploration) -> CheckResult:
    dead = [r for r in ex.table.rows if not ex.row_fires[r.index]]
    if not dead:
        return CheckResult("dead-row", None, True, f"all {len(ex.table.rows)} rows fire")
    listed = "; ".join(f"row {r.index} (line {r.mark.line}: {r.source} --{r.label() or '(eventless)'}--> {r.target})"
                       for r in dead)
    return CheckResult("dead-row", None, False, f"never fire: {listed}")


def _always_reachable(ex: Exploration, prop: Property) -> CheckResult:
    table = ex.table
    assert prop.goal is not None
    marked = graph.can_reach(ex, columns.holds(ex, prop.goal))
    bad = columns.first(~marked)
    goal = prop.target or prop.goal_text
    if bad is None:
        return CheckResult("always-reachable", prop.name, True,
                           f"{goal} is reachable from all {ex.count} configurations")
    where = describe_config(table, *ex.config(bad))
    return CheckResult("always-reachable", prop.name, False, f"{goal} is unreachable from {where}",
                       Trace.of(table, ex.path(bad), prop.name, "always-reachable"))


def _always(ex: Exploration, prop: Property) -> CheckResult:
    assert prop.goal is not None
    return _everywhere(ex, "always", prop.name, prop.goal, prop.goal_text)


def _fairness_note(table: Table) -> str:
    if not table.fairness:
        return "no fairness assumed: declare 'fairness' for the events that are eventually taken"
    return "under fairness " + ", ".join(f"{kind} {event}" for event, kind in table.fairness.items())


def _leads_to(ex: Exploration, prop: Property) -> CheckResult:
    """``eventually Q`` is ``leads-to`` from the initial configuration alone."""
    table = ex.table
    assert prop.goal is not None
    goal = columns.holds(ex, prop.goal)
    if prop.kind == "eventually":
        source = np.zeros(ex.count, dtype=np.bool_)
        source[0] = True
        claim = f"every maximal run reaches {prop.goal_text}"
    else:
        assert prop.source is not None
        source = columns.holds(ex, prop.source)
        claim = f"every maximal run from {prop.source_text} reaches {prop.goal_text}"
    avoid = ~goal
    escapes, ends, fair = liveness.avoiders(ex, avoid)
    start = columns.first(source & escapes)
    if start is None:
        return CheckResult(prop.kind, prop.name, True, f"{claim} ({_fairness_note(table)})")
    way = liveness.escape(ex, avoid, ends, fair, start)
    stem = [*ex.path(start), *(ex.labels[k] for k in way.path)]
    end = describe_config(table, *ex.config(way.end))
    origin = "" if prop.kind == "eventually" else f" from {describe_config(table, *ex.config(start))}"
    if way.loop is None:
        what = "final" if table.states[ex.config(way.end)[0]].final else "accepts no event"
        return CheckResult(prop.kind, prop.name, False,
                           f"a run{origin} ends in {end} ({what}) without reaching {prop.goal_text}",
                           Trace.of(table, stem, prop.name, prop.kind))
    loop = [ex.labels[k] for k in way.loop]
    return CheckResult(prop.kind, prop.name, False,
                       f"a run{origin} cycles forever through {end} ({len(loop)} step{'s' if len(loop) > 1 else ''})"
                       f" without reaching {prop.goal_text}; {_fairness_note(table)}",
                       Trace.of(table, [*stem, *loop], prop.name, prop.kind, loop_start=len(stem)))


def _no_cycle_within(ex: Exploration, prop: Property) -> CheckResult:
    table = ex.table
    listed = set(prop.events)
    allowed = [event in listed for event, _ in ex.labels]
    events = ", ".join(prop.events)
    found = graph.find_cycle(ex, allowed)
    if found is None:
        return CheckResult("no-cycle-within", prop.name, True, f"no cycle uses only {events}")
    node, cycle = found
    stem = ex.path(node)
    where = describe_config(table, *ex.config(node))
    return CheckResult("no-cycle-within", prop.name, False,
                       f"a cycle of {len(cycle)} step{'s' if len(cycle) > 1 else ''} uses only {events}, "
                       f"from {where}",
                       Trace.of(table, [*stem, *(ex.labels[k] for k in cycle)], prop.name, "no-cycle-within",
                                loop_start=len(stem)))


_PROPERTY_CHECKS: dict[str, Callable[[Exploration, Property], CheckResult]] = {
    "always-reachable": _always_reachable, "no-cycle-within": _no_cycle_within, "eventually": _leads_to,
    "leads-to": _leads_to, "always": _always,
}
