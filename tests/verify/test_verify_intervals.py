"""The memo keyed by interval against the memo keyed by value: the same exploration, bit for bit.

Every test explores a table twice, with interval keys (``intervals.MIN_SIZE`` lowered so
that small random tables use them too) and with every variable keyed by value.
Configurations, numbering, parents, edges, stutter edges, row fire and unhandled counts,
errors, the reached depth, and every check's verdict and counterexample must be equal.
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from agentfsm.spec import Table, load_table, load_table_bytes
from agentfsm.verify.table import explore as explore_module
from agentfsm.verify.table import intervals
from agentfsm.verify.table.explore import Exploration, Packing, explore, labels_of, reads
from conftest import SPEC, TABLES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies_tables import tables
from test_verify_differential import tables as differential_tables
from verify_tables import assert_same_exploration

WIDE = Path(__file__).parent.parent / "tables" / "wide-counters.yaml"
BUNDLED = [*TABLES, *sorted(WIDE.parent.glob("*.yaml"))]
LENIENT = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
OFF = 1 << 62   # MIN_SIZE past any variable: every memo keyed by value


def explored(table: Table, min_size: int, memo_limit: int = explore_module.MEMO_LIMIT,
             level_min: int | None = None) -> Exploration:
    saved = intervals.MIN_SIZE, explore_module.MEMO_LIMIT, explore_module.LEVEL_MIN
    intervals.MIN_SIZE, explore_module.MEMO_LIMIT, explore_module.LEVEL_MIN = min_size, memo_limit, level_min
    try:
        return explore(table)
    finally:
        intervals.MIN_SIZE, explore_module.MEMO_LIMIT, explore_module.LEVEL_MIN = saved


def assert_same(table: Table, min_size: int = 2, memo_limit: int = explore_module.MEMO_LIMIT,
                level_min: int | None = None) -> Exploration:
    """Explore with interval keys (variables of ``min_size`` values or more) and by value; compare."""
    folded = explored(table, min_size, memo_limit, level_min)
    assert_same_exploration(folded, explored(table, OFF, memo_limit, level_min))
    return folded


def folds(table: Table) -> int:
    """How many (state, label) plans of the table key a variable by interval (as shipped)."""
    packing = Packing(table)
    found = 0
    for state in table.states:
        for event, params in labels_of(table):
            rows = table.candidates(state.index, event)
            if rows and not state.final:
                found += intervals.fold(table, packing, rows, params, reads(table, rows)) is not None
    return found


@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.stem)
def test_bundled_tables_explore_alike(path: Path) -> None:
    assert_same(load_table(path))


@pytest.mark.parametrize("memo_limit", [explore_module.MEMO_LIMIT, 40], ids=["memo", "then-direct"])
def test_grown_loom_explores_alike(memo_limit: int) -> None:
    table = load_table(SPEC / "loom-agent.yaml", {"max_retries": 60, "max_tools": 3})
    assert folds(table) > 0
    assert_same(table, intervals.MIN_SIZE, memo_limit)


def test_grown_loom_explores_alike_through_the_batches() -> None:
    """Handing over to the batches and back keeps the interval memo and its tally exact."""
    assert_same(load_table(SPEC / "loom-agent.yaml", {"max_retries": 40, "max_tools": 2}), level_min=3)


def test_the_memo_of_grown_loom_stays_small() -> None:
    """The point of interval keys: the memo holds a few outcomes per interval, not one per
    retry value, and no plan has to evaluate each configuration directly."""
    table = load_table(SPEC / "loom-agent.yaml", {"max_retries": 3000, "max_tools": 2})
    ex = explored(table, intervals.MIN_SIZE, level_min=explore_module.LEVEL_MIN)
    assert ex.count > 60_000
    assert len(ex._hits) < 1000


@settings(max_examples=30, deadline=None, suppress_health_check=LENIENT)
@given(table=tables())
def test_random_tables_explore_alike(table: Table) -> None:
    assert_same(table)


@settings(max_examples=30, deadline=None, suppress_health_check=LENIENT)
@given(table=differential_tables())
def test_random_tables_with_transient_chains_explore_alike(table: Table) -> None:
    assert_same(table)


@st.composite
def counter_tables(draw: st.DrawFn) -> Table:
    """A wide counter ``n`` (and a small one, ``m``) compared with constants and event
    parameters, counted up and down, set, and read where it cannot be keyed by interval;
    rows may overlap (determinism errors) or count past the range (bounds errors)."""
    hi = draw(st.integers(7, 40))
    lo = draw(st.integers(-3, 0))
    events = {"Up": {}, "Down": {}, "Go": {"params": {"k": {"type": "int", "min": 0, "max": 3}}}}
    const = st.sampled_from(["0", "1", "3", str(hi), str(hi - 1), "top", "top - 2", "k", "k + 2", "-1"])
    ops = st.sampled_from(["<", "<=", "==", "!=", ">", ">="])

    def guard(event: str) -> str:
        def one() -> str:
            c = draw(const)
            if event != "Go":
                c = c.replace("k", "1")
            left, right = ("n", c) if draw(st.booleans()) else (c, "n")
            compared = f"{left} {draw(ops)} {right}"
            return draw(st.sampled_from([compared, compared, f"not ({compared})", "m < 2", "n + m < top"]))
        first = one()
        return first if draw(st.booleans()) else f"{first} {draw(st.sampled_from(['and', 'or']))} {one()}"

    def update(event: str) -> str:
        k = "k" if event == "Go" else "2"
        return draw(st.sampled_from(["n + 1", "n - 1", f"n + {k}", f"{k} + n", "0", "m", "n + m", "top - n"]))

    rows = []
    for _ in range(draw(st.integers(2, 7))):
        event = draw(st.sampled_from(sorted(events)))
        spec: dict[str, Any] = {"from": draw(st.sampled_from(["A", "B"])), "on": event,
                                "to": draw(st.sampled_from(["A", "B", "T"]))}
        if draw(st.integers(0, 4)):
            spec["when"] = guard(event)
        sets: dict[str, str] = {}
        if draw(st.integers(0, 3)):
            sets["n"] = update(event)
        if draw(st.booleans()):
            sets["m"] = draw(st.sampled_from(["m + 1", "0", "m - 1"]))
        if sets:
            spec["set"] = sets
        if draw(st.integers(0, 3)) == 0:
            spec["emit"] = [{"action": "Tell", "args": {"v": draw(st.sampled_from(["n", "n + 1", "0"]))}}]
        rows.append(spec)
    rows.append({"from": "T", "to": draw(st.sampled_from(["A", "B"])), "when": "n < top or true"})
    doc = {"format": 1, "machine": "counter", "constants": {"top": hi},
           "variables": {"n": {"type": "int", "min": lo, "max": "top", "init": 0},
                         "m": {"type": "int", "min": 0, "max": 2, "init": 0}},
           "states": {"A": {"initial": True}, "B": {}, "T": {"transient": True}},
           "events": events, "actions": {"Tell": {"params": {"v": {"type": "int", "min": lo, "max": "top"}}}},
           "transitions": rows, "unhandled": {"policy": draw(st.sampled_from(["reject", "ignore"]))}}
    return load_table_bytes(json.dumps(doc).encode(), "counter.yaml")


@settings(max_examples=80, deadline=None, suppress_health_check=LENIENT)
@given(table=counter_tables(), memo_limit=st.sampled_from([explore_module.MEMO_LIMIT, 5]))
def test_random_counters_explore_alike(table: Table, memo_limit: int) -> None:
    assert_same(table, intervals.MIN_SIZE, memo_limit)


COUNTER = b"""format: 1
machine: counter
variables:
  n: {type: int, min: 0, max: 30, init: 0}
  m: {type: int, min: 0, max: 30, init: 0}
states:
  A: {initial: true}
  B: {}
  T: {transient: true}
events:
  Up: {}
  Down: {}
  Hop: {}
  Mix: {}
transitions:
  - {from: A, on: Up, when: n < 20 and not (n == 7), to: A, set: {n: n + 2}}
  - {from: A, on: Up, when: n >= 20, to: B, set: {n: 0}}
  - {from: A, on: Down, when: 3 <= n, to: A, set: {n: n - 3}}
  - {from: A, on: Hop, to: T, set: {n: n + 1}}
  - {from: T, to: A}
  - {from: A, on: Mix, when: n + 1 < 5, to: A, set: {m: m + 1}}
"""


def test_the_intervals_of_a_plan() -> None:
    """Breakpoints at the constants compared with (and one past) and where the count
    leaves the range; no key by interval through a transient target or an arithmetic read."""
    table = load_table_bytes(COUNTER, "counter.yaml")
    packing = Packing(table)
    a = table.state_index["A"]
    up = intervals.fold(table, packing, table.candidates(a, "Up"), (), {0})
    assert up is not None and up.slot == 0 and up.counts == {1: 2}
    values = [c >> up.shift for c in up.classes]
    # 7, 8 (== 7), 20, 21 (< 20, >= 20), 29 (n + 2 <= 30) split 0..30 into runs
    runs = [k for k, _ in itertools.groupby(values)]
    assert runs == list(range(6))
    assert [values.index(k) for k in range(6)] == [0, 7, 8, 20, 21, 29]
    down = intervals.fold(table, packing, table.candidates(a, "Down"), (), {0})
    assert down is not None and down.counts == {3: -3}
    assert intervals.fold(table, packing, table.candidates(a, "Hop"), (), {0}) is None
    mix = intervals.fold(table, packing, table.candidates(a, "Mix"), (), {0, 1})
    assert mix is not None and mix.slot == 1   # n is read in arithmetic; m is only counted
    assert_same(table)
