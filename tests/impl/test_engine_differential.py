"""The transitions-based engine, restored to every reachable configuration and given every event,
agrees with the naive interpreter (tests/naive_semantics.py), which shares no code with it.

The engine calls ``apply_row`` and ``settle`` of ``spec/semantics.py``, so holding it to
``step`` would pass a bug in either. tests/verify/test_oracle.py holds the engine to the naive
interpreter along event sequences from the initial configuration; this file covers every edge
of the space instead (every bundled table whole, and random tables whole), through
``Engine.restore`` as recovery and the verifier use it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agentfsm.impl.engine import Engine
from agentfsm.spec import Table, bundled_tables, load_table
from agentfsm.spec.semantics import SemanticError
from hypothesis import given, settings
from naive_semantics import NaiveTable, explore
from strategies_tables import build, table_data


def agree_everywhere(table: Table, oracle: NaiveTable) -> int:
    """Every edge the naive interpreter's exploration finds, replayed on the engine; the edge count."""
    engine = Engine(table)
    space = explore(oracle)
    for ((state, items), (event, params)), want in space.edges.items():
        current = dict(items)
        engine.restore(state, tuple(current[var.name] for var in table.variables))
        where = f"{event}{params} in {state} {current}"
        if want.error:
            with pytest.raises(SemanticError) as caught:
                engine.step_values(event, params)
            assert caught.value.kind == want.status, where
            assert (engine.state, engine.vars) == (state, current), f"{where}: a failed step moved the engine"
            continue
        got = engine.step_values(event, params)
        assert (got.status, got.accepted, got.state) == (want.status, want.accepted, want.state), where
        assert dict(got.vars) == want.vars, where
        assert list(got.actions) == want.actions, where
        assert [r.index for r in engine.last_rows] == (want.rows if want.status == "fired" else []), where
    return len(space.edges)


@pytest.mark.parametrize("path", bundled_tables(), ids=lambda p: Path(p).stem)
def test_every_edge_of_every_bundled_table_agrees(path: Path) -> None:
    assert agree_everywhere(load_table(path), NaiveTable.from_file(path)) > 0


@settings(max_examples=80, deadline=None)
@given(data=table_data())
def test_every_edge_of_random_tables_agrees(data: dict[str, Any]) -> None:
    agree_everywhere(build(data), NaiveTable(data))
