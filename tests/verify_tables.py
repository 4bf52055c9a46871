"""Small tables with planted violations, written as YAML text for the verifier tests."""

from __future__ import annotations

from agentfsm.spec import Table, load_table_bytes
from agentfsm.verify.table.checks import CheckResult, Verdict, run_checks
from agentfsm.verify.table.explore import explore

HEADER = "format: 1\nmachine: {machine}\n"


def table(text: str, machine: str = "planted") -> Table:
    return load_table_bytes((HEADER.format(machine=machine) + text).encode(), f"{machine}.yaml")


def verdict(text: str) -> Verdict:
    return run_checks(explore(table(text)))


def check(v: Verdict, kind: str, name: str | None = None) -> CheckResult:
    [found] = [c for c in v.checks if c.kind == kind and c.name == name]
    return found


def steps(result: CheckResult) -> list[str]:
    """The counterexample as ``Event`` or ``Event(p=v)`` strings."""
    assert result.trace is not None
    return [event + ("(" + ",".join(f"{k}={v}" for k, v in params.items()) + ")" if params else "")
            for event, params in ((s["event"], s["params"]) for s in result.trace.step_dicts())]
