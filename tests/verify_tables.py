"""Small tables with planted violations, written as YAML text for the verifier tests."""

from __future__ import annotations

from agentfsm.spec import Table, load_table_bytes
from agentfsm.verify.table.checks import CheckResult, Verdict, run_checks
from agentfsm.verify.table.explore import Exploration, explore
from agentfsm.verify.table.verify import reads_edges

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


def assert_same_exploration(a: Exploration, b: Exploration) -> None:
    """Two explorations of one table are the same, bit for bit: configurations, numbering,
    parents, edges, stutter edges, row fire and unhandled counts, errors, the reached depth,
    and every check's verdict and counterexample (those that read no edge, when the edges
    were only counted)."""
    assert [a.config(i) for i in range(a.count)] == [b.config(i) for i in range(b.count)]
    for name in ("parent", "parent_label", "offsets", "edge_label", "edge_target", "stutter"):
        assert list(getattr(a, name)) == list(getattr(b, name)), name
    assert a.row_fires == b.row_fires
    assert a.unhandled == b.unhandled
    assert (a.errors, a.error_count) == (b.errors, b.error_count)
    assert a.reached == b.reached
    assert a.kept_edges == b.kept_edges
    if a.kept_edges or not reads_edges(a.table):
        checked = [(c.kind, c.name, c.ok, c.message, c.trace) for c in run_checks(a).checks]
        assert checked == [(c.kind, c.name, c.ok, c.message, c.trace) for c in run_checks(b).checks]
