"""The engine, the explorer (and its checks), vector generation and the audit, each held to the
naive interpreter of tests/naive_semantics.py on hypothesis-generated tables.

The naive interpreter shares no code with any of them (it reads the table's plain data, not
the compiled table), so a bug in ``spec.semantics``, the expression compiler or the
explorer's fast paths shows up here as a disagreement. Example counts are fixed and runs
are derandomised (tests/conftest.py's hypothesis profile): each planted bug that
docs/testing.md lists is caught by ``make test`` on every run; ``make test-slow`` runs these
tests again on fresh seeds.
"""

from __future__ import annotations

import functools
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from agentfsm.impl.engine import Engine
from agentfsm.spec import Table, bundled_tables, load_table
from agentfsm.spec.semantics import SemanticError
from agentfsm.spec.vectorfile import Expect, vector_labels
from agentfsm.verify.conformance.audit import Record, audit
from agentfsm.verify.conformance.harness import Observation
from agentfsm.verify.conformance.vectors import generate
from agentfsm.verify.table.checks import run_checks
from agentfsm.verify.table.explore import explore
from hypothesis import given, settings
from hypothesis import strategies as st
from naive_semantics import Label, NaiveTable, Outcome, Vars, key
from naive_semantics import explore as naive_explore
from strategies_tables import build, pointed_tables, table_data

EXAMPLES = 250


def pair(data: dict[str, Any]) -> tuple[Table, NaiveTable]:
    return build(data), NaiveTable(data)


def labels(draw: st.DrawFn, oracle: NaiveTable, max_size: int = 25) -> list[Label]:
    return draw(st.lists(st.sampled_from(oracle.labels()), max_size=max_size))


@st.composite
def table_and_events(draw: st.DrawFn) -> tuple[Table, NaiveTable, list[Label]]:
    table, oracle = pair(draw(st.one_of(table_data(), pointed_tables())))
    return table, oracle, labels(draw, oracle)


def engine_agrees(table: Table, oracle: NaiveTable, events: list[Label], engine: Engine | None = None) -> None:
    """Every step: status, acceptance, state, variables, the actions in order, the rows fired."""
    if engine is None:
        engine = Engine(table)
    engine.reset()
    state, current = oracle.initial()
    for number, (event, params) in enumerate(events, start=1):
        want = oracle.step(state, current, event, params)
        where = f"step {number} ({event}{params} in {state} {current})"
        if want.error:
            with pytest.raises(SemanticError) as caught:
                engine.step_values(event, params)
            assert caught.value.kind == want.status, where
            return
        got = engine.step_values(event, params)
        assert got.status == want.status, where
        assert got.accepted == want.accepted, where
        assert got.state == want.state, where
        assert dict(got.vars) == want.vars, where
        assert list(got.actions) == want.actions, where
        assert [r.index for r in engine.last_rows] == (want.rows if want.status == "fired" else []), where
        state, current = want.state, want.vars


@settings(max_examples=EXAMPLES, deadline=None)
@given(case=table_and_events())
def test_engine_follows_the_naive_interpreter(case: tuple[Table, NaiveTable, list[Label]]) -> None:
    engine_agrees(*case)


@settings(max_examples=EXAMPLES // 2, deadline=None)
@given(data=pointed_tables(), choice=st.data())
def test_engine_follows_the_naive_interpreter_on_pointed_tables(data: dict[str, Any],
                                                                      choice: st.DataObject) -> None:
    table, oracle = pair(data)
    engine_agrees(table, oracle, choice.draw(st.lists(st.sampled_from(oracle.labels()), max_size=30)))


@functools.cache
def bundled(path: Path) -> tuple[Table, NaiveTable, Engine]:
    table = load_table(path)
    return table, NaiveTable.from_file(path), Engine(table)


@pytest.mark.parametrize("path", bundled_tables(), ids=lambda p: Path(p).stem)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_engine_follows_the_naive_interpreter_on_bundled_tables(path: Path, data: st.DataObject) -> None:
    table, oracle, engine = bundled(path)
    engine_agrees(table, oracle, data.draw(st.lists(st.sampled_from(oracle.labels()), max_size=40)), engine)


def as_dict(table: Table, config: tuple[int, tuple[Any, ...]]) -> tuple[str, Vars]:
    return table.states[config[0]].name, table.vars_dict(config[1])


@settings(max_examples=EXAMPLES, deadline=None)
@given(data=st.one_of(table_data(), pointed_tables()))
def test_explorer_and_its_checks_follow_the_naive_interpreter(data: dict[str, Any]) -> None:
    """The reachable set, every edge, error, fire and unhandled count, and the step-error
    checks: the shortest counterexample of each kind and the count of distinct others."""
    table, oracle = pair(data)
    space = naive_explore(oracle)
    ex = explore(table)
    configs = [as_dict(table, ex.config(i)) for i in range(ex.count)]
    assert {key(*c) for c in configs} == set(space.depth)
    labels = [(e, tuple(p)) for e, p in ex.labels]
    assert labels == oracle.labels()
    fires: Counter[int] = Counter()
    unhandled: Counter[tuple[int, int]] = Counter()
    for i, (state, current) in enumerate(configs):
        assert len(ex.path(i)) == space.depth[key(state, current)], "a path that is not a shortest one"
        expected = []
        for k, label in enumerate(labels):
            want = space.edges[(key(state, current), label)]
            fires.update(want.rows)
            if want.status in ("rejected", "ignored"):
                unhandled[(ex.config(i)[0], k)] += 1
            if want.accepted:
                expected.append((k, configs.index((want.state, want.vars))))
        assert sorted(ex.edges(i)) == sorted(expected)
    assert {r: n for r, n in ex.row_fires.items() if n} == dict(fires)
    assert ex.unhandled == dict(unhandled)
    assert ex.error_count == len(space.errors)
    verdict = run_checks(ex)
    for kind in ("determinism", "bounds", "transient"):
        [check] = [c for c in verdict.checks if c.kind == kind]
        shortest = space.shortest_error(kind)
        assert check.ok == (shortest is None), kind
        if shortest is None:
            continue
        assert check.trace is not None and len(check.trace.steps) == shortest, f"{kind}: not the shortest"
        walked = oracle.run(list(check.trace.steps))
        assert walked[-1].status == kind and all(not o.error for o in walked[:-1])
        others = len(space.distinct(kind)) - 1
        if kind != "transient":   # which rows a transient error names is the runtime's choice
            assert (f"; {others} more distinct violation" in check.message) == (others > 0), check.message
            if others:
                assert f"; {others} more distinct violation{'s' if others > 1 else ''} of this kind" in check.message


@settings(max_examples=EXAMPLES // 2, deadline=None)
@given(data=table_data(max_states=4, max_rows=8))
def test_every_generated_vector_replays_through_the_naive_interpreter(data: dict[str, Any]) -> None:
    table, oracle = pair(data)
    manifest, vectors = generate(table, walks=3, walk_length=15)
    fired: set[int] = set()
    for vector in vectors:
        # A refused step (the invalid set) must be invalid to the oracle too, and changes nothing.
        for s in vector.steps:
            if not isinstance(s.expect, Expect):
                assert isinstance(oracle.parse_params(s.event, dict(s.params)), str), vector.id
        valid = [s for s in vector.steps if isinstance(s.expect, Expect)]
        outcomes = oracle.run(vector_labels(table, vector))
        assert len(outcomes) == len(valid) and not any(o.error for o in outcomes), vector.id
        for number, (s, want) in enumerate(zip(valid, outcomes, strict=True), start=1):
            where = f"{vector.id} step {number}"
            assert isinstance(s.expect, Expect), where
            assert s.expect.accepted == want.accepted, where
            assert s.expect.state == want.state, where
            assert list(s.expect.actions) == want.actions, where
            assert dict(s.expect.vars) == want.vars, where
            fired.update(want.rows)
    space = naive_explore(oracle)
    reachable_rows = {n for o in space.edges.values() if not o.error for n in o.rows}
    assert fired == reachable_rows
    assert manifest.sets["rows"]["covered"] == len(reachable_rows)


def log_of(table: Table, oracle: NaiveTable, events: list[Label]) -> list[Record]:
    """The log a faithful implementation writes, computed by the naive interpreter."""
    records = []
    for line, (outcome, (event, params)) in enumerate(zip(oracle.run(events), events, strict=False), start=1):
        if outcome.error:
            break
        names = table.event(event).param_dict(params)
        records.append(Record(line, event, names, Observation(outcome.state, outcome.accepted,
                                                              tuple(outcome.actions), outcome.vars)))
    return records


def perturbed(outcome: Outcome, table: Table) -> Observation:
    """The observation with one thing wrong: actions out of order, else a wrong state."""
    if outcome.actions[::-1] != outcome.actions:
        return Observation(outcome.state, outcome.accepted, tuple(reversed(outcome.actions)), outcome.vars)
    other = next(s.name for s in table.states if s.name != outcome.state)
    return Observation(other, outcome.accepted, tuple(outcome.actions), outcome.vars)


@settings(max_examples=EXAMPLES, deadline=None)
@given(case=table_and_events(), data=st.data())
def test_the_audit_passes_the_naive_interpreters_log_and_finds_one_wrong_step(
        case: tuple[Table, NaiveTable, list[Label]], data: st.DataObject) -> None:
    table, oracle, events = case
    records = log_of(table, oracle, events)
    result = audit(table, iter(records))
    assert result.divergence is None, result.divergence
    assert result.steps == len(records)
    if not records:
        return
    at = data.draw(st.integers(0, len(records) - 1))
    outcome = oracle.run(events[:at + 1])[-1]
    bad = perturbed(outcome, table)
    wrong = [*records[:at], Record(records[at].line, records[at].event, records[at].params, bad)]
    found = audit(table, iter(wrong)).divergence
    assert found is not None and found.record.line == records[at].line
