"""The report's table steps against the independent interpreter of tests/naive_semantics.py: for
random tables and event sequences, each step the page would show (state, rows fired, variables,
or the error that ends it) is the naive interpreter's. And the embedded JSON survives any text."""

from __future__ import annotations

import json
from typing import Any

from agentfsm.diagrams.report_data import table_trace
from agentfsm.diagrams.report_page import embedded_json
from agentfsm.spec.trace import Trace
from hypothesis import given, settings
from hypothesis import strategies as st
from naive_semantics import NaiveTable
from strategies_tables import build, pointed_tables, table_data


def _value(v: Any) -> str:
    return ("true" if v else "false") if isinstance(v, bool) else str(v)


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_table_steps_are_the_naive_interpreters(data: st.DataObject) -> None:
    raw = data.draw(st.one_of(table_data(), pointed_tables()))  # pointed: transient states, swaps
    table, oracle = build(raw), NaiveTable(raw)
    labels = data.draw(st.lists(st.sampled_from(oracle.labels()), max_size=20))
    shown = table_trace(table, Trace.of(table, labels))
    state, values = oracle.initial()
    assert shown["initial"] == {"state": state, "vars": [_value(values[v.name]) for v in table.variables]}
    assert len(shown["steps"]) <= len(labels)
    for step, (event, params) in zip(shown["steps"], labels, strict=False):
        outcome = oracle.step(state, values, event, params)
        if outcome.error:
            assert step["status"] == f"{outcome.status} error" and step["error"]
            assert step is shown["steps"][-1]
            break
        state, values = outcome.state, outcome.vars
        assert (step["state"], step["rows"], step["actions"]) == (state, outcome.rows, outcome.actions)
        assert step["vars"] == [_value(values[v.name]) for v in table.variables]
    else:
        assert len(shown["steps"]) == len(labels)


@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(),
                    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
                    max_leaves=20))
def test_embedded_json_round_trips_and_never_closes_its_element(value: Any) -> None:
    text = embedded_json(value)
    assert json.loads(text) == value
    assert "<" not in text
