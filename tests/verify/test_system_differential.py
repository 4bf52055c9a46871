"""Differential: the system explorer against the independent checker's closure, on random
systems of random tables (and Spin's state count on the Promela export, when installed)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from agentfsm.spec.system_load import load_system
from agentfsm.spec.system_model import System
from agentfsm.verify.spin import runner as spin
from agentfsm.verify.spin.system_promela import export_system_promela
from agentfsm.verify.system.explore import explore_system
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from spin_support import needs_spin
from system_checker import SystemChecker
from system_strategies import drawn_system

ROOT = Path(__file__).resolve().parent.parent.parent


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_explorer_reaches_exactly_the_interleaving_closure(data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        system = drawn_system(data, Path(tmp))
        checker = SystemChecker(system.file)
        expected = set(checker.explore().depth)
        full = explore_system(system, symmetry=False)
        assert set(full.configs) == expected
        assert len(full.configs) == len(expected)
        reduced = explore_system(system, symmetry=True)
        assert set(reduced.configs) == {checker.representative(c) for c in expected}




def _spin_states(system: System, tmp: Path) -> int:
    run = spin.run_spin_model(export_system_promela(system), tmp, timeout=300, pan_flags=("-A",))
    return run.states


@needs_spin
@pytest.mark.parametrize("name", ["loom-with-tools", "vibework-with-user", "durable-run-fixed",
                                  "durable-run-as-it-was-sqlite"])
def test_spin_counts_the_bundled_systems_alike(tmp_path: Path, name: str) -> None:
    system = load_system(ROOT / "spec" / "systems" / f"{name}.yaml")
    assert _spin_states(system, tmp_path) == len(explore_system(system, symmetry=False).configs)


@needs_spin
def test_spin_finds_the_invariant_violation(tmp_path: Path) -> None:
    system = load_system(ROOT / "tests" / "systems" / "counter-race.yaml")
    run = spin.run_spin_model(export_system_promela(system), tmp_path, timeout=300)
    assert run.errors == 1 and "assertion violated" in run.output


@needs_spin
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(st.data())
def test_spin_counts_random_systems_alike(data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        system = drawn_system(data, Path(tmp), checks=False)   # the never claim only slows Spin down
        ex = explore_system(system, symmetry=False)
        assume(not set(ex.step_findings) & {"determinism", "bounds", "transient"})
        assert _spin_states(system, Path(tmp) / "spin") == len(ex.configs)
