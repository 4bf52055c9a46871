"""The explorer against the reference semantics on the bundled tables."""

from __future__ import annotations

from pathlib import Path

import pytest
from agentfsm.spec import Table, load_table, load_table_bytes
from agentfsm.spec.semantics import SemanticError, step
from agentfsm.verify.table import explore as explore_module
from agentfsm.verify.table.explore import Depth, explore
from conftest import SPEC, TABLES
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies_tables import tables


def assert_agrees_with_step(table: Table) -> None:
    """Every explored (configuration, label) edge is exactly what ``step`` says."""
    ex = explore(table)
    assert ex.config(0) == (table.initial.index, table.initial_vars())
    for i in range(ex.count):
        state, values = ex.config(i)
        assert ex.index_of(state, values) == i
        expected = []
        for k, (event, params) in enumerate(ex.labels):
            try:
                result = step(table, state, values, event, params)
            except SemanticError:
                continue
            if result.accepted:
                target = ex.index_of(result.state, result.vars)
                assert target is not None
                expected.append((k, target))
        assert sorted(ex.edges(i)) == sorted(expected)


@pytest.mark.parametrize("path", TABLES, ids=lambda p: p.stem)
def test_bundled_tables_agree_with_step(path: Path) -> None:
    assert_agrees_with_step(load_table(path))


def test_loom_grown_uses_direct_path_and_still_agrees() -> None:
    table = load_table(SPEC / "loom-agent.yaml", {"max_retries": 5000, "max_tools": 3})
    assert_agrees_with_step(table)


def test_paths_are_shortest_and_replay_to_the_configuration(loom: Table) -> None:
    ex = explore(loom)
    depth = [0] * ex.count
    for i in range(ex.count):
        for _, j in ex.edges(i):
            if j > i and depth[j] == 0 and j != 0:
                depth[j] = depth[i] + 1
    for i in range(ex.count):
        path = ex.path(i)
        assert len(path) == depth[i]
        state, values = loom.initial.index, loom.initial_vars()
        for event, params in path:
            result = step(loom, state, values, event, params)
            state, values = result.state, result.vars
        assert (state, values) == ex.config(i)


def test_row_fire_counts_sum_over_edges(loom: Table) -> None:
    ex = explore(loom)
    assert sum(ex.row_fires.values()) == sum(
        len(step(loom, *ex.config(i), *ex.labels[k]).rows) for i in range(ex.count) for k, _ in ex.edges(i))


def test_direct_path_refuses_emitted_arguments_out_of_range(monkeypatch: pytest.MonkeyPatch) -> None:
    """Found by the batch explorer's comparison: the direct path fired rows whose emitted
    argument lay outside the action parameter's range, where ``step`` reports bounds."""
    monkeypatch.setattr(explore_module, "MEMO_LIMIT", 0)
    table = load_table_bytes(b"""format: 1
machine: emitting
variables:
  n: {type: int, min: 0, max: 6, init: 0}
states:
  A: {initial: true}
events:
  Go: {params: {k: {type: int, min: 0, max: 3}}}
actions:
  Tell: {params: {m: {type: int, min: 0, max: 4}}}
transitions:
  - {from: A, on: Go, when: n + k <= 6, to: A, set: {n: n + k}, emit: [{action: Tell, args: {m: n + k - 1}}]}
unhandled: {policy: reject}
""", "emitting.yaml")
    assert_agrees_with_step(table)


@settings(max_examples=60, deadline=None)
@given(table=tables(), data=st.data())
def test_depth_by_levels_is_the_length_of_the_shortest_path(table: Table, data: st.DataObject) -> None:
    """The reported depth of the last configuration explored, kept level by level, is the
    length of its shortest path (what walking the parent chain at every report gave)."""
    ex = explore(table)
    lasts = sorted(data.draw(st.lists(st.integers(0, ex.count - 1), max_size=20)))
    depth = Depth()
    assert [depth.of(last, ex.parent) for last in lasts] == [len(ex.path(last)) for last in lasts]


def test_a_grown_loom_reaches_the_depth_of_its_deepest_configuration() -> None:
    ex = explore(load_table(SPEC / "loom-agent.yaml", {"max_retries": 300, "max_tools": 2}))
    assert ex.reached == (ex.count, ex.transitions, max(len(ex.path(i)) for i in range(ex.count)))


EMITTED_ONLY = b"""format: 1
machine: emit
variables:
  n: {type: int, min: 0, max: 12, init: 0}
states:
  A: {initial: true}
events:
  Up: {}
  Ping: {}
actions:
  Tell: {params: {v: {type: int, min: 0, max: 9}}}
transitions:
  - {from: A, on: Up, when: n < 12, to: A, set: {n: n + 1}}
  - {from: A, on: Ping, to: A, emit: [{action: Tell, args: {v: n}}]}
"""


@pytest.mark.parametrize("level_min", [None, 1], ids=["scalar", "batches"])
def test_a_variable_only_an_emitted_argument_reads_keys_the_memo(level_min: int | None,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """``Ping`` reads ``n`` only through ``Tell``'s argument: its outcome at n = 0 (an edge)
    must not stand for n = 10, where ``Tell(v: 10)`` is past ``v``'s range (a bounds error)."""
    monkeypatch.setattr(explore_module, "LEVEL_MIN", level_min)
    table = load_table_bytes(EMITTED_ONLY, "emit.yaml")
    ex = explore(table)
    assert [(e.kind, ex.config(e.config)[1]) for e in ex.errors] == [("bounds", (10,))]
    assert ex.error_count == 3
    assert_agrees_with_step(table)
