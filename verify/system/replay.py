"""What a replayed system trace shows: the checks it violates, so a kept interleaved
counterexample serves as a regression test (``replay SYSTEM TRACE`` exits 1 while the system
still has the defect), as a table's trace does.

Judged on the trace with the system's own step semantics: a finding of a step (determinism,
bounds, an unhandled message, a mailbox overflow) breaks that check; a configuration where an
invariant is false breaks it; a trace that ends with no step possible while an active instance
is not final shows a deadlock; and the trace's own property, when it names one, is judged as a
counterexample of it: for ``no-cycle-within`` a lasso whose cycle closes using only the listed
steps, for ``always-reachable`` an end from which the goal can no longer be reached.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from agentfsm.spec.system_model import SysProperty, System
from agentfsm.spec.system_trace import Label, SystemTrace, describe_config
from agentfsm.verify.system.checks import invariant_tests, live, matches
from agentfsm.verify.system.step import Config, Effect, Stepper, initial_config


def system_violations(system: System, trace: SystemTrace, steps: Sequence[tuple[Label, Config, Effect]]) -> list[str]:
    """One line per check the replayed ``steps`` of ``trace`` violate (empty: none)."""
    found: list[str] = []
    for n, (_, _, effect) in enumerate(steps, start=1):
        found.extend(f"{finding.kind}: step {n}: {finding.message}" for finding in effect.findings)
    configs = [initial_config(system), *(config for _, config, _ in steps)]
    for name, text, test in invariant_tests(system):
        bad = next((c for c in configs if not test(c)), None)
        if bad is not None:
            found.append(f"invariant {name}: {text} is false in\n  " + "\n  ".join(describe_config(system, bad)))
    stepper = Stepper(system)
    last = configs[-1]
    active = live(system, last)
    if trace.loop_start is None and active and next(stepper.successors(last), None) is None:
        names = ", ".join(system.instances[i].name for i in active)
        found.append(f"deadlock: no step is possible while {names} not final")
    prop = next((p for p in system.properties if p.name == trace.check and p.kind == trace.kind), None)
    if prop is not None:
        verdict = _judge(stepper, prop, trace, configs)
        if verdict:
            found.append(f"{prop.kind} {prop.name}: {verdict}")
    return found


def _judge(stepper: Stepper, prop: SysProperty, trace: SystemTrace, configs: list[Config]) -> str | None:
    """Why the trace is a counterexample of ``prop``, or None when it is not one."""
    if prop.kind == "no-cycle-within":
        loop = trace.loop_start
        if (loop is not None and loop < len(trace.steps) and configs[-1] == configs[loop]
                and all(matches(prop, label) for label in trace.steps[loop:])):
            return f"the cycle from step {loop + 1} uses only {prop.text}"
        return None
    assert prop.goal is not None
    seen = {configs[-1]}
    queue = deque(seen)
    while queue:
        config = queue.popleft()
        if prop.goal(config):
            return None
        for _, successor, _ in stepper.successors(config):
            if successor not in seen:
                seen.add(successor)
                queue.append(successor)
    return f"{prop.text} can no longer become true after the last step"
