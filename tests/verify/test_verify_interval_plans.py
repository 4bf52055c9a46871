"""Which counter a plan keys by interval, and where its intervals break: ``intervals.fold``
held to its rules, one test each, on tables small enough to read.

test_verify_intervals.py checks that interval keys never change an exploration. A fold that
keys too finely, or not at all, changes none: only the memo's size. So these tests read the
plan itself: the variable chosen, the first value of each interval, the count of each row.
"""

from __future__ import annotations

import itertools

import pytest
from agentfsm.spec import Table, load_table_bytes
from agentfsm.verify.table import intervals
from agentfsm.verify.table.explore import Packing, explore, reads
from agentfsm.verify.table.intervals import Fold
from test_verify_intervals import assert_same


def table(variables: dict[str, tuple[int, int]], *rows: str) -> Table:
    """A one-state table over int variables ``{name: (lo, hi)}`` whose rows (YAML flow maps
    without ``from``) all leave and enter ``A``."""
    declared = "\n".join(f"  {name}: {{type: int, min: {lo}, max: {hi}, init: {lo}}}"
                         for name, (lo, hi) in variables.items())
    listed = "\n".join(f"  - {{from: A, to: A, {row}}}" for row in rows)
    text = f"""format: 1
machine: plan
variables:
{declared}
states:
  A: {{initial: true}}
events:
  Up: {{}}
  Ping: {{}}
actions:
  Tell: {{params: {{v: {{type: int, min: 0, max: 9}}}}}}
transitions:
{listed}
"""
    return load_table_bytes(text.encode(), "plan.yaml")


def plan(t: Table, event: str = "Up") -> Fold | None:
    """``fold`` for the rows of ``event`` in ``A``, over the variables they read (as the explorer calls it)."""
    rows = t.candidates(t.state_index["A"], event)
    return intervals.fold(t, Packing(t), rows, (), reads(t, rows))


def starts(t: Table, f: Fold) -> list[int]:
    """The first value of each interval of the folded variable; the intervals are numbered 0, 1, ...
    in the order of their values."""
    numbers = [c >> f.shift for c in f.classes]
    runs = [k for k, _ in itertools.groupby(numbers)]
    assert runs == list(range(len(runs)))
    return [t.variables[f.slot].lo + numbers.index(k) for k in runs]


@pytest.mark.parametrize(("size", "keyed"), [(7, False), (8, True), (1 << 20, True), ((1 << 20) + 1, False)])
def test_a_counter_of_8_to_2_to_the_20_values_is_keyed_by_interval(size: int, keyed: bool) -> None:
    """Narrower counters fill the memo at once anyway; a wider one's table of intervals, one
    entry per value, would outweigh the memo it saves (docs/verifier.md)."""
    t = table({"n": (0, size - 1)}, "on: Up, when: n < 3, set: {n: n + 1}")
    f = plan(t)
    assert (f is not None) == keyed
    if f is not None:
        assert starts(t, f) == [0, 3, 4, size - 1]


def test_a_counter_whose_every_value_is_an_interval_is_keyed_by_value() -> None:
    """Eight values, seven breakpoints: nothing would merge, so the plan keys by value."""
    t = table({"n": (0, 7)}, "on: Up, when: " + " or ".join(f"n == {c}" for c in range(1, 7)) + " or n == 7")
    assert plan(t) is None


def test_one_merged_value_is_enough_to_key_by_interval() -> None:
    t = table({"n": (0, 7)}, "on: Up, when: " + " or ".join(f"n == {c}" for c in range(1, 6)))
    f = plan(t)
    assert f is not None
    assert starts(t, f) == [0, 1, 2, 3, 4, 5, 6]


def test_a_breakpoint_at_the_lowest_value_opens_no_interval() -> None:
    """``n == -1`` (breakpoints -1 and 0) and ``n >= 0`` (0 and 1): no interval starts below or
    at the range's first value, so the first interval is still number 0."""
    t = table({"n": (0, 9)}, "on: Up, when: n == -1 or n >= 0")
    f = plan(t)
    assert f is not None and starts(t, f) == [0, 1]


@pytest.mark.parametrize(("guard", "chosen"), [
    ("n < 3 and m < 5", "n"),    # n and m each merge 10 values into 3: the first of equals
    ("n < 3 and m == 0", "m"),   # m merges into 2 intervals, one fewer than n
    ("n == 0 and m < 3", "n"),
])
def test_the_counter_whose_intervals_merge_the_most_is_chosen(guard: str, chosen: str) -> None:
    t = table({"n": (0, 9), "m": (0, 9)}, f"on: Up, when: {guard}")
    f = plan(t)
    assert f is not None and t.variables[f.slot].name == chosen


@pytest.mark.parametrize("other", ["m", "-m", "m + 1", "1 + m", "3 - m"])
def test_a_counter_compared_with_another_variable_is_keyed_by_value(other: str) -> None:
    """``n < m`` is no comparison with a constant: where it flips depends on ``m``."""
    t = table({"n": (0, 9), "m": (-3, 9)}, f"on: Up, when: n < {other}, set: {{n: n + 1}}")
    assert plan(t) is None
    assert_same(t)


@pytest.mark.parametrize(("update", "count"), [("n + 2", 2), ("2 + n", 2), ("n - 2", -2), ("2 - n", None),
                                               ("n + m", None)])
def test_a_counter_is_counted_only_by_a_constant_step(update: str, count: int | None) -> None:
    """``n + k``, ``k + n`` and ``n - k`` count ``n`` by ``k`` from any value of an interval;
    ``k - n`` or ``n + m`` do not, so their plan keys ``n`` by value."""
    t = table({"n": (0, 9), "m": (0, 1)}, f"on: Up, when: n > 1 and n < 5, set: {{n: {update}}}")
    f = plan(t)
    if count is None:
        assert f is None
    else:
        assert f is not None and f.counts == {1: count}
    assert_same(t)


def test_a_counter_in_an_emitted_argument_is_keyed_by_value() -> None:
    """An action argument past its range is a bounds error at that value only: ``Tell(v: n)``
    breaks ``v``'s 0..9 from n = 10 on, a breakpoint no guard or count names."""
    t = table({"n": (0, 12)}, "on: Up, when: n < 12, set: {n: n + 1}",
              "on: Ping, when: n < 12, emit: [{action: Tell, args: {v: n}}]")
    assert plan(t, "Ping") is None
    ex = explore(t)
    assert [(ex.config(e.config)[1], e.kind) for e in ex.errors] == [((10,), "bounds")]
