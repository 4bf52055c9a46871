"""Exploring ahead along a counter (``verify/table/ahead.py``) against the plain exploration, bit for bit.

The guess is never trusted, so whatever it holds, the result must be the plain
exploration's: configurations, numbering, parents, edges, stutter edges, row fire and
unhandled counts, errors, the reached depth, every verdict and counterexample; the same
``ExplorationLimit`` where the plain exploration stops. ``AHEAD_AT`` is lowered so that small
random tables are explored ahead too; the Loom table grown is explored ahead as shipped.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from agentfsm.spec import Table, load_table, load_table_bytes
from agentfsm.verify.table import ahead
from agentfsm.verify.table import explore as explore_module
from agentfsm.verify.table.explore import Exploration, ExplorationLimit, explore
from conftest import TABLES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_verify_intervals import counter_tables
from verify_tables import assert_same_exploration

LOOM = Path(__file__).parent.parent.parent / "spec" / "loom-agent.yaml"
LENIENT = [HealthCheck.too_slow]


def explored(table: Table, at: int | None, edges: bool = True, limit: int | None = None,
             every: int = explore_module.CHECK_EVERY) -> Exploration:
    """Explore ahead past ``at`` configurations (``None``: never), the scalar loop looking at
    its queue ``every`` so many (as often as it may stop for the ahead path)."""
    saved = explore_module.AHEAD_AT, explore_module.CHECK_EVERY
    explore_module.AHEAD_AT, explore_module.CHECK_EVERY = at, every
    try:
        return explore(table, max_configurations=limit, edges=edges)
    finally:
        explore_module.AHEAD_AT, explore_module.CHECK_EVERY = saved


def ahead_used(table: Table, at: int | None, monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Explore with ``at`` and say whether ``_ahead`` filled the exploration."""
    used: list[bool] = []
    real = explore_module._ahead

    def spy(*args: object, **kwargs: object) -> bool:
        used.append(real(*args, **kwargs))   # type: ignore[arg-type]
        return used[-1]

    monkeypatch.setattr(explore_module, "_ahead", spy)
    explored(table, at)
    return used


def grown(retries: int) -> Table:
    return load_table(LOOM, {"max_retries": retries, "max_tools": 2})


@pytest.mark.parametrize("edges", [True, False], ids=["edges", "counted"])
def test_grown_loom_explores_alike(edges: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    table = grown(1500)
    assert ahead_used(table, explore_module.AHEAD_AT, monkeypatch) == [True]
    assert_same_exploration(explored(table, explore_module.AHEAD_AT, edges), explored(table, None, edges))


@pytest.mark.parametrize("path", TABLES, ids=lambda p: p.stem)
def test_bundled_tables_explore_alike(path: Path) -> None:
    table = load_table(path)
    assert_same_exploration(explored(table, 8, every=4), explored(table, None, every=4))


@st.composite
def ahead_tables(draw: st.DrawFn) -> Table:
    """A counter ``n`` that every row reads only as the explorer can key by interval (compared
    with constants and parameters, counted by a constant or a parameter, set to a constant),
    beside a small ``m``; rows may overlap (determinism errors) or count past the range
    (bounds errors), and a transient state's row may read ``n``: guesses too short, too long
    (past what is reachable), and wrong."""
    hi = draw(st.integers(20, 90))
    const = st.sampled_from(["0", "1", "3", "top", "top - 1", "top - 5", "k", "k + 2", "9"])
    ops = st.sampled_from(["<", "<=", "==", "!=", ">", ">="])

    def guard(event: str) -> str:
        def one() -> str:
            c = draw(const)
            c = c if event == "Go" else c.replace("k", "1")
            compared = f"n {draw(ops)} {c}" if draw(st.booleans()) else f"{c} {draw(ops)} n"
            return draw(st.sampled_from([compared, compared, f"not ({compared})", "m < 2", "m == 0"]))
        first = one()
        return first if draw(st.booleans()) else f"{first} {draw(st.sampled_from(['and', 'or']))} {one()}"

    rows: list[dict[str, Any]] = [{"from": "A", "on": "Up", "to": draw(st.sampled_from(["A", "B"])),
                                   "when": draw(st.sampled_from(["n < top", "n < top - 5", "n != 40", "true"])),
                                   "set": {"n": "n + 1"}},
                                  {"from": "B", "on": "Down", "to": "A"}]   # the counter does count
    for _ in range(draw(st.integers(1, 6))):
        event = draw(st.sampled_from(["Up", "Down", "Go", "Reset"]))
        spec: dict[str, Any] = {"from": draw(st.sampled_from(["A", "B"])), "on": event,
                                "to": draw(st.sampled_from(["A", "B", "A", "B", "T"]))}
        if draw(st.integers(0, 4)):
            spec["when"] = guard(event)
        sets: dict[str, str] = {}
        if draw(st.integers(0, 3)):
            k = "k" if event == "Go" else "2"
            sets["n"] = draw(st.sampled_from(["n + 1", "n + 1", "n - 1", f"n + {k}", f"{k} + n", "0", "3"]))
        if draw(st.booleans()):
            sets["m"] = draw(st.sampled_from(["m + 1", "0", "m - 1"]))
        if sets:
            spec["set"] = sets
        rows.append(spec)
    rows.append({"from": "T", "to": draw(st.sampled_from(["A", "B"])),
                 "when": draw(st.sampled_from(["true", "n < top or true"]))})
    doc = {"format": 1, "machine": "ahead", "constants": {"top": hi},
           "variables": {"n": {"type": "int", "min": 0, "max": "top", "init": 0},
                         "m": {"type": "int", "min": 0, "max": 2, "init": 0}},
           "states": {"A": {"initial": True}, "B": {}, "T": {"transient": True}},
           "events": {"Up": {}, "Down": {}, "Reset": {}, "Go": {"params": {"k": {"type": "int", "min": 0, "max": 3}}}},
           "transitions": rows, "unhandled": {"policy": draw(st.sampled_from(["reject", "ignore"]))}}
    return load_table_bytes(json.dumps(doc).encode(), "ahead.yaml")


@settings(max_examples=150, deadline=None, suppress_health_check=LENIENT)
@given(table=st.one_of(ahead_tables(), counter_tables()), at=st.sampled_from([10, 30, 60]), edges=st.booleans())
def test_random_counters_explore_alike(table: Table, at: int, edges: bool) -> None:
    assert_same_exploration(explored(table, at, edges, every=2), explored(table, None, edges, every=2))


def test_random_counters_are_explored_ahead() -> None:
    """The generated tables do reach the ahead path, with guesses that hold unreachable
    configurations and guesses that miss some: the test above tests something."""
    used, wrong, short = 0, 0, 0
    real = ahead.guess
    guessed: list[tuple[np.ndarray, np.ndarray]] = []

    def spy_guess(prefix: np.ndarray, *args: Any) -> np.ndarray:
        guessed.append((prefix, real(prefix, *args)))
        return guessed[-1][1]

    @settings(max_examples=150, deadline=None, suppress_health_check=LENIENT, database=None)
    @given(table=ahead_tables())
    def count(table: Table) -> None:
        nonlocal used, wrong, short
        guessed.clear()
        codes = explored(table, 30, every=2).code_array()
        if guessed and len(guessed[0][1]):
            prefix, guess = guessed[0]
            used += 1
            wrong += not np.isin(guess, codes).all()
            short += not np.isin(codes, np.concatenate((prefix, guess))).all()

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ahead, "guess", spy_guess)
        count()
    assert used >= 15 and wrong >= 1 and short >= 1, (used, wrong, short)


@pytest.mark.parametrize("limit", [30_000, 61_000, 62_980])
def test_the_limit_stops_it_where_the_plain_exploration_stops(limit: int) -> None:
    """Past the limit while closing the guess, or with more reachable configurations than
    the limit: the plain exploration goes on, and stops with the same numbers."""
    table = grown(3000)
    with pytest.raises(ExplorationLimit) as plain:
        explored(table, None, limit=limit)
    with pytest.raises(ExplorationLimit) as fast:
        explored(table, explore_module.AHEAD_AT, limit=limit)
    assert (str(fast.value), fast.value.args) == (str(plain.value), plain.value.args)
    assert (fast.value.configurations, fast.value.transitions, fast.value.depth) == \
        (plain.value.configurations, plain.value.transitions, plain.value.depth)


def test_a_guess_is_the_upper_half_repeated_to_the_end_of_its_interval() -> None:
    """Counter in bits 2..5 (field values 0..15); the prefix reached value 6 from 0: values
    4 and 5 hold rests 1 and 2 (value 6 is the newest, partly explored); intervals split at 9."""
    def code(rest: int, value: int) -> int:
        return rest | value << 2

    prefix = np.array([code(0, 0), code(1, 1), code(1, 4), code(2, 5), code(1, 6)], dtype=np.int64)
    classes = np.array([0] * 9 + [1] * 7, dtype=np.int64)
    got = ahead.guess(prefix, code(0, 0), 2, 15, classes, 1000)
    assert sorted(got.tolist()) == sorted(code(r, v) for r in (1, 2) for v in range(4, 9))
    assert len(ahead.guess(prefix, code(0, 0), 2, 15, classes, 5)) == 4   # the budget, in whole values
    assert not len(ahead.guess(prefix, code(0, 0), 2, 15, classes, 0))
    assert not len(ahead.guess(prefix[:2], code(0, 0), 2, 15, classes, 1000))   # not moved past its start
    newest = np.append(prefix, code(3, 6))   # a rest only the newest value holds is not repeated
    assert sorted(ahead.guess(newest, code(0, 0), 2, 15, classes, 1000).tolist()) == sorted(got.tolist())
    gap = np.array([code(0, 0), code(1, 1), code(2, 5), code(1, 6)], dtype=np.int64)   # nothing at value 4, ...
    split = np.array([0] * 5 + [1] * 11, dtype=np.int64)   # ... whose interval ends there: nothing to repeat
    assert not len(ahead.guess(gap, code(0, 0), 2, 15, split, 1000))
    last = np.array([0] * 15 + [1], dtype=np.int64)   # the prefix reaches the last value, an interval of its own
    upto = np.array([code(0, 0), *(code(1, v) for v in range(1, 16))], dtype=np.int64)
    assert sorted(ahead.guess(upto, code(0, 0), 2, 15, last, 1000).tolist()) == [code(1, v) for v in range(8, 15)]


def test_intervals_are_the_common_refinement_of_the_folds() -> None:
    assert ahead.interval_of(6, [(0, 0, 1, 1, 2, 2, 9)]).tolist() == [0, 0, 1, 1, 2, 2]
    assert ahead.interval_of(6, [(0, 0, 1, 1, 2, 2), (5, 6, 6, 6, 6, 7)]).tolist() == [0, 1, 2, 2, 3, 4]


def test_parents_are_read_off_a_breadth_first_numbering_and_refuse_any_other() -> None:
    offsets = np.array([0, 2, 3, 4, 4], dtype=np.int64)
    labels = np.array([5, 6, 7, 8], dtype=np.int32)
    parent, label = ahead.parents(offsets, np.array([1, 2, 3, 0], dtype=np.int64), labels)
    assert (parent.tolist(), label.tolist()) == ([-1, 0, 0, 1], [-1, 5, 6, 7])
    loop = ahead.parents(np.array([0, 2, 2], dtype=np.int64), np.array([0, 1], dtype=np.int64), labels[:2])
    assert [x.tolist() for x in loop] == [[-1, 0], [-1, 6]]   # a first edge back to 0 meets nothing new
    with pytest.raises(AssertionError):   # 2 met before 1
        ahead.parents(offsets, np.array([2, 1, 3, 0], dtype=np.int64), labels)
    with pytest.raises(AssertionError):   # 3 met from 3 itself, never from an earlier one
        ahead.parents(np.array([0, 1, 2, 3, 4], dtype=np.int64), np.array([1, 2, 2, 3], dtype=np.int64), labels)


def test_closing_a_guess_stops_at_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    """A guess whose closed set passes the limit is dropped as soon as it does: its closing
    stops there, rather than closing the whole guess first."""
    stopped_closings = 0
    real = explore_module._run

    def spy(ex: Exploration, progress: object, limit: int | None, seeds: object = None) -> None:
        nonlocal stopped_closings
        try:
            real(ex, progress, limit, seeds)   # type: ignore[arg-type]
        except ExplorationLimit:
            stopped_closings += seeds is not None
            raise

    monkeypatch.setattr(explore_module, "_run", spy)
    with pytest.raises(ExplorationLimit):
        explored(grown(3000), explore_module.AHEAD_AT, limit=30_000)
    assert stopped_closings
