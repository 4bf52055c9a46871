"""The transitions-based engine agrees step by step with the reference semantics."""

from __future__ import annotations

from itertools import product
from pathlib import Path

import pytest
from agentfsm.impl.engine import Engine
from agentfsm.spec import Table, bundled_tables, load_table
from agentfsm.spec.semantics import SemanticError, step
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies_tables import EventSeq, event_sequences, reachable, tables


def agree(table: Table, events: EventSeq) -> None:
    """Run both on ``events``; compare every step, and the error kind when the table breaks a rule."""
    engine = Engine(table)
    state, values = table.initial.index, table.initial_vars()
    rejected = 0
    for name, params in events:
        try:
            expected = step(table, state, values, name, params)
        except SemanticError as exc:
            before = (engine.state, engine.values)
            with pytest.raises(SemanticError) as caught:
                engine.step_values(name, params)
            assert caught.value.kind == exc.kind
            assert (engine.state, engine.values) == before, "a failed step must leave the engine unchanged"
            return
        outcome = engine.step_values(name, params)
        assert outcome.accepted == expected.accepted
        assert outcome.state == table.states[expected.state].name
        assert tuple(outcome.vars.values()) == expected.vars
        assert outcome.actions == expected.actions
        assert outcome.status == expected.status
        assert engine.last_rows == (expected.rows if expected.status == "fired" else ())
        rejected += expected.status == "rejected"
        state, values = expected.state, expected.vars
    assert len(engine.anomalies) == rejected


@pytest.mark.parametrize("path", bundled_tables(), ids=lambda p: Path(p).stem)
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_bundled_tables_agree(path: Path, data: st.DataObject) -> None:
    table = load_table(path)
    agree(table, data.draw(event_sequences(table, max_size=40)))


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_random_tables_agree(data: st.DataObject) -> None:
    table = data.draw(tables())
    agree(table, data.draw(event_sequences(table)))


def test_every_configuration_of_loom_agrees(loom: Table) -> None:
    """Exhaustively: every reachable configuration of the Loom table, every event and parameter value."""
    engine = Engine(loom)
    for state, values in reachable(loom):
        for event in loom.events:
            for params in product(*(p.domain for p in event.params)):
                expected = step(loom, state, values, event.name, params)
                engine.restore(loom.states[state].name, values)
                outcome = engine.step_values(event.name, params)
                assert (outcome.accepted, outcome.state, tuple(outcome.vars.values()), outcome.actions) == (
                    expected.accepted, loom.states[expected.state].name, expected.vars, expected.actions)
