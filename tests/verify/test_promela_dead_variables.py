"""Spin hides a variable that is written and never read (its dead-variable elimination, on by
default): the exports read every variable, so that Spin's stored states stay exactly the
explorer's configurations, for tables and systems."""

from __future__ import annotations

from pathlib import Path

from agentfsm.spec import load_table
from agentfsm.spec.system_load import load_system
from agentfsm.verify.spin import runner as spin
from agentfsm.verify.spin.system_promela import export_system_promela
from agentfsm.verify.system.explore import explore_system
from agentfsm.verify.table.explore import explore
from spin_support import needs_spin

FIXTURES = Path(__file__).resolve().parent.parent / "systems"


@needs_spin
def test_a_variable_nothing_reads_is_counted_by_spin_in_a_table(tmp_path: Path) -> None:
    table = load_table(FIXTURES / "write-only.yaml")
    assert spin.run_spin(table, tmp_path).states == explore(table).count == 4


@needs_spin
def test_a_variable_nothing_reads_is_counted_by_spin_in_a_system(tmp_path: Path) -> None:
    system = load_system(FIXTURES / "write-only-system.yaml")
    run = spin.run_spin_model(export_system_promela(system), tmp_path, pan_flags=("-A",))
    assert run.states == len(explore_system(system, symmetry=False).configs) == 16
