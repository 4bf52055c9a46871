"""The system explorer against the independent checker (tests/system_checker.py, written from
docs/systems.md on the naive table interpreter) on random systems with self-sends, rows that
fire and change nothing, environment self-loops, passive instances, invariants and
``no-cycle-within`` properties: the same configurations and steps, the same verdicts, and
shortest counterexamples of the checker's length, with and without symmetry and reduction."""

from __future__ import annotations

import tempfile
from pathlib import Path

from agentfsm.spec.system_load import load_system
from agentfsm.spec.system_model import System
from agentfsm.verify.system.checks import SysVerdict, run_system_checks
from agentfsm.verify.system.explore import explore_system
from agentfsm.verify.system.verify import verify_system
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from system_checker import SystemChecker, Verdicts
from system_strategies import drawn_system

FIXTURES = Path(__file__).resolve().parent.parent / "systems"


def lengths(verdict: SysVerdict) -> dict[str, int | None]:
    """Each safety check's counterexample length (None where it holds), as the checker names them."""
    return {(c.name or c.kind): (len(c.trace.steps) if c.trace is not None else 0) if not c.ok else None
            for c in verdict.checks if c.kind != "no-cycle-within"}


def cycles(verdict: SysVerdict) -> dict[str, bool]:
    return {str(c.name): not c.ok for c in verdict.checks if c.kind == "no-cycle-within"}


def assert_agree(system: System, expected: Verdicts) -> None:
    full = explore_system(system, symmetry=False)
    assert set(full.configs) == set(expected.depth)
    assert len(full.edges_src) == expected.graph.number_of_edges()
    for symmetry in (False, True):
        verdict = run_system_checks(explore_system(system, symmetry))
        assert lengths(verdict) == expected.lengths()
        assert cycles(verdict) == expected.cycles()
        shape = expected.checker.representative if symmetry else (lambda c: c)
        assert set(verdict.exploration.configs) == {shape(c) for c in expected.depth}
        shown = verify_system(system, symmetry)   # reduction where the system has no properties
        assert shown.longer is None
        assert lengths(shown) == expected.lengths()
        assert cycles(shown) == expected.cycles()


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(st.data())
def test_the_explorer_agrees_with_the_independent_checker(data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        system = drawn_system(data, Path(tmp))
        assert_agree(system, SystemChecker(system.file).explore())


def test_the_checker_on_steps_that_change_nothing() -> None:
    for name, cycle in (("heartbeat-system", "ticks-end"), ("self-ping-system", "pings-end")):
        expected = SystemChecker(FIXTURES / f"{name}.yaml").explore()
        assert expected.lengths()["deadlock"] is None and expected.cycles() == {cycle: True}
        assert_agree(load_system(FIXTURES / f"{name}.yaml"), expected)
