"""What the system's Promela export means: Spin (pan built without optimisation) counts the
configurations the system explorer finds without symmetry, on the fixture systems and on random
ones, and fails an assertion exactly where the explorer finds an invariant broken."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from agentfsm.spec.system_load import load_system
from agentfsm.verify.system.checks import run_system_checks
from agentfsm.verify.system.explore import explore_system
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from spin_support import needs_spin, spin_system
from system_strategies import drawn_system

FIXTURES = Path(__file__).resolve().parent.parent / "systems"


@needs_spin
@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*-system.yaml")) + [FIXTURES / "counter-race.yaml"],
                         ids=lambda p: p.stem)
def test_spin_agrees_on_the_fixture_systems(path: Path, tmp_path: Path) -> None:
    system = load_system(path)
    ex = explore_system(system, symmetry=False)
    broken = {c.kind for c in run_system_checks(ex).checks if not c.ok} & {"invariant", "bounds"}
    if "bounds" not in broken:   # past a value out of range the explorer stops, pan goes on
        assert spin_system(system, tmp_path / "count").states == len(ex.configs)
    if broken:
        run = spin_system(system, tmp_path / "assert", assertions=True)
        assert run.errors == 1 and "assertion violated" in run.output


@needs_spin
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(st.data())
def test_spin_counts_random_systems_alike(data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        system = drawn_system(data, Path(tmp), checks=False)
        ex = explore_system(system, symmetry=False)
        assume(not set(ex.step_findings) & {"determinism", "bounds", "transient"})
        assert spin_system(system, Path(tmp) / "spin").states == len(ex.configs)
