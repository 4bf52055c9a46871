"""Differential: the system explorer against an independent interleaving closure, on random
systems of random tables (and Spin's state count on the Promela export, when installed)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from agentfsm.spec.errors import TableError
from agentfsm.verify.system_explore import explore_system
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from system_strategies import closure, random_system, sorted_groups, system_files


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_explorer_reaches_exactly_the_interleaving_closure(data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = data.draw(system_files(Path(tmp)))
        try:
            system = random_system(path)
        except TableError:
            assume(False)
            return
        expected = closure(system)
        full = explore_system(system, symmetry=False)
        assert set(full.configs) == expected
        assert len(full.configs) == len(expected)
        reduced = explore_system(system, symmetry=True)
        assert set(reduced.configs) == {sorted_groups(system, c) for c in expected}
