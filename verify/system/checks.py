"""The checks of a table, lifted to a system, plus the ones only messages have.

Over one exploration (configurations in breadth-first order, so the first offending one
has a shortest path): ``determinism``/``bounds``/``transient`` (an instance step broke
its table's rules), ``unhandled-message`` (a linked message its target rejects),
``mailbox-overflow``, ``invariant`` (the system's, and each instance's table
invariants), ``deadlock`` (no step at all while some instance is not final),
``always-reachable`` and ``no-cycle-within``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
from agentfsm.spec.system_model import SysProperty, System
from agentfsm.spec.system_trace import Label, SystemTrace
from agentfsm.verify.system.explore import SystemExploration
from agentfsm.verify.system.paths import concrete_path, replay
from agentfsm.verify.system.step import Config, Stepper, canonicalizer, initial_config
from agentfsm.verify.table.sparse import connected_components, csr_matrix

STEP_KINDS = ("determinism", "bounds", "transient", "unhandled-message", "mailbox-overflow")


@dataclass(frozen=True)
class SysCheck:
    kind: str
    name: str | None
    ok: bool
    message: str
    trace: SystemTrace | None = None


@dataclass
class SysVerdict:
    system: System
    exploration: SystemExploration
    checks: list[SysCheck] = field(default_factory=list)
    # Why the counterexamples may not be shortest (a reduced search whose shortening stopped), or None.
    longer: str | None = None

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)


def run_system_checks(ex: SystemExploration) -> SysVerdict:
    verdict = SysVerdict(ex.system, ex)
    verdict.checks.extend(step_checks(ex))
    verdict.checks.extend(invariant_checks(ex))
    verdict.checks.append(deadlock_check(ex))
    for prop in ex.system.properties:
        verdict.checks.append(reachable_check(ex, prop) if prop.kind == "always-reachable" else cycle_check(ex, prop))
    return verdict


def trace_to(ex: SystemExploration, node: int, kind: str, name: str | None, extra: Sequence[Label] = (),
             loop_start: int | None = None) -> SystemTrace:
    """The concrete shortest path to ``node``, then ``extra`` (steps from its representative), as a trace."""
    path = [ex.configs[n] for n in ex.path_to(node)]
    steps = concrete_path(ex.system, ex.symmetry, path)
    labels = [label for label, _, _ in steps]
    concrete = steps[-1][1] if steps else initial_config(ex.system)
    stepper = Stepper(ex.system)
    canonical = canonicalizer(ex.system, ex.symmetry)
    rep = path[-1]
    for label in extra:
        want, found = next((canonical(nxt), [f.kind for f in eff.findings])
                           for got, nxt, eff in stepper.successors(rep) if got == label)
        got = next(got for got, nxt, eff in stepper.successors(concrete)
                   if got[0] == label[0] and canonical(nxt) == want and [f.kind for f in eff.findings] == found)
        labels.append(got)
        concrete = next(nxt for g, nxt, _ in stepper.successors(concrete) if g == got)
        rep = want
    return SystemTrace(ex.system.name, name, kind, tuple(labels), loop_start)


def step_checks(ex: SystemExploration) -> list[SysCheck]:
    results = []
    for kind in STEP_KINDS:
        found = ex.step_findings.get(kind)
        if found is None:
            results.append(SysCheck(kind, None, True, "no step does this"))
            continue
        node, label, finding = found
        results.append(SysCheck(kind, None, False, finding.message, trace_to(ex, node, kind, None, [label])))
    return results


def invariant_tests(system: System) -> list[tuple[str, str, Callable[[Config], bool]]]:
    """(name, text, test) of every invariant: the system's, then each instance's table's, lifted."""
    tests: list[tuple[str, str, Callable[[Config], bool]]] = [
        (inv.name, inv.text, inv.fn) for inv in system.invariants]
    for inst in system.instances:
        for table_inv in inst.table.invariants:
            def lifted(config: Config, i: int = inst.index, fn: object = table_inv.fn) -> bool:
                state, values = config[0][i]
                return bool(fn((state, *values)))  # type: ignore[operator]
            tests.append((f"{inst.name}: {table_inv.name}", table_inv.text, lifted))
    return tests


def invariant_checks(ex: SystemExploration) -> list[SysCheck]:
    results = []
    for name, text, fn in invariant_tests(ex.system):
        bad = next((n for n, config in enumerate(ex.configs) if not fn(config)), None)
        if bad is None:
            results.append(SysCheck("invariant", name, True, f"holds in all {len(ex.configs):,} configurations"))
        else:
            results.append(SysCheck("invariant", name, False, f"{text} is false",
                                    trace_to(ex, bad, "invariant", name)))
    return results


def deadlock_check(ex: SystemExploration) -> SysCheck:
    for n, degree in enumerate(ex.out_degree):   # the expanded configurations (all but past a depth bound)
        if degree:
            continue
        config = ex.configs[n]
        if live(ex.system, config):
            trace = trace_to(ex, n, "deadlock", None)
            steps = replay(ex.system, trace.steps)
            concrete = steps[-1][1] if steps else config
            names = ", ".join(ex.system.instances[i].name for i in live(ex.system, concrete))
            return SysCheck("deadlock", None, False, f"no step is possible while {names} not final", trace)
    return SysCheck("deadlock", None, True, "every configuration has a step or every active instance is final")


def live(system: System, config: Config) -> list[int]:
    """The active (not passive) instances not in a final state."""
    return [i for i, inst in enumerate(system.instances)
            if not inst.passive and not inst.table.states[config[0][i][0]].final]


def reachable_check(ex: SystemExploration, prop: SysProperty) -> SysCheck:
    assert prop.goal is not None
    reverse: list[list[int]] = [[] for _ in ex.configs]
    for src, dst in zip(ex.edges_src, ex.edges_dst, strict=True):
        reverse[dst].append(src)
    reached = [False] * len(ex.configs)
    queue = deque(n for n, config in enumerate(ex.configs) if prop.goal(config))
    for n in queue:
        reached[n] = True
    while queue:
        n = queue.popleft()
        for m in reverse[n]:
            if not reached[m]:
                reached[m] = True
                queue.append(m)
    bad = next((n for n, ok in enumerate(reached) if not ok), None)
    if bad is None:
        return SysCheck("always-reachable", prop.name, True, f"{prop.text} is reachable from every configuration")
    return SysCheck("always-reachable", prop.name, False, f"{prop.text} can no longer become true",
                    trace_to(ex, bad, "always-reachable", prop.name))


def matches(prop: SysProperty, label: Label) -> bool:
    kind, i, event, _, _ = label
    name = event if kind in ("env", "deliver") else kind
    return any(i in p.instances and p.name == name for p in prop.steps)


def cycle_check(ex: SystemExploration, prop: SysProperty) -> SysCheck:
    n = len(ex.configs)
    keep = [k for k, label in enumerate(ex.edges_label) if matches(prop, label)]
    src = np.array([ex.edges_src[k] for k in keep], dtype=np.int64)
    dst = np.array([ex.edges_dst[k] for k in keep], dtype=np.int64)
    matrix = csr_matrix((np.ones(len(keep)), (src, dst)), shape=(n, n))
    count, component = connected_components(matrix, directed=True, connection="strong")
    cyclic = np.bincount(component, minlength=count) > 1
    cyclic[component[src[src == dst]]] = True
    on_cycle = cyclic[component]
    if not on_cycle.any():
        return SysCheck("no-cycle-within", prop.name, True, f"no cycle uses only {prop.text}")
    node = int(np.argmax(on_cycle))
    inside = component == component[node]
    out: dict[int, list[int]] = {}
    for k in keep:
        out.setdefault(ex.edges_src[k], []).append(k)
    back: dict[int, tuple[int, int]] = {}
    queue = deque([node])
    cycle: list[Label] = []
    while queue and not cycle:
        i = queue.popleft()
        for k in out.get(i, []):
            t = ex.edges_dst[k]
            if t == node:
                edges = [k]
                while i != node:
                    i, e = back[i]
                    edges.append(e)
                cycle = [ex.edges_label[e] for e in reversed(edges)]
                break
            if t not in back and inside[t]:
                back[t] = (i, k)
                queue.append(t)
    prefix = len(ex.path_to(node)) - 1
    return SysCheck("no-cycle-within", prop.name, False, f"a cycle uses only {prop.text}",
                    trace_to(ex, node, "no-cycle-within", prop.name, cycle, loop_start=prefix))
