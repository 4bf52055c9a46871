"""The step semantics' rule breaks and action arguments, each value worked out by hand from
docs/table-format.md ("Step semantics", "Action parameters"): the cases the mutation run
(tests/mutation_run.py) found no other fast test pinning down."""

from __future__ import annotations

import pytest
from agentfsm.spec import Table, load_table_bytes
from agentfsm.spec.semantics import SemanticError, step

ARGS = """format: 1
machine: args
variables:
  v: {type: int, min: 0, max: 3, init: 1}
states:
  A: {initial: true}
  T: {transient: true}
  B: {}
  Done: {final: true}
events:
  Go: {params: {by: {type: int, min: 0, max: 2}}}
  Stop: {}
actions:
  Plain: {}
  Report: {params: {n: {type: int, min: 1, max: 2}, odd: {type: bool}}}
transitions:
  - {from: A, on: Go, to: T, set: {v: by}, emit: [Plain, {action: Report, args: {n: v + by, odd: by == 1}}]}
  - {from: T, to: B, emit: [{action: Report, args: {n: v, odd: v == 1}}, Plain]}
  - {from: B, on: Stop, to: Done}
"""


def table(text: str = ARGS) -> Table:
    return load_table_bytes(text.encode(), "t.yaml")


def test_action_args_of_the_event_row_and_the_eventless_row() -> None:
    t = table()
    result = step(t, 0, (1,), "Go", (1,))
    assert result.actions == ("Plain", "Report", "Report", "Plain")
    assert result.args == ((), (2, True), (1, True), ())     # before the set: 1 + 1; after it: v = 1
    assert (t.states[result.state].name, result.vars, result.status) == ("B", (1,), "fired")
    assert [r.index for r in result.rows] == [1, 2]


@pytest.mark.parametrize(("v", "by", "row", "message"), [
    (2, 1, 1, "row 1 emits Report with n = 3, outside its range 1..2"),      # the event row's arg
    (1, 0, 2, "row 2 emits Report with n = 0, outside its range 1..2"),      # the eventless row's arg
])
def test_an_action_arg_out_of_range_is_a_bounds_error(v: int, by: int, row: int, message: str) -> None:
    t = table()
    with pytest.raises(SemanticError) as caught:
        step(t, 0, (v,), "Go", (by,))
    assert (caught.value.kind, caught.value.message, str(caught.value)) == ("bounds", message, message)
    assert [r.index for r in caught.value.rows] == [row]


def test_a_final_state_takes_no_event() -> None:
    t = table()
    result = step(t, t.state_index["Done"], (1,), "Stop")
    assert (result.accepted, result.status, result.actions, result.rows) == (False, "final", (), ())


def transient(rows: str) -> Table:
    return table(f"""format: 1
machine: loops
variables:
  v: {{type: int, min: 0, max: 1, init: 0}}
states:
  A: {{initial: true}}
  T: {{transient: true}}
  U: {{transient: true}}
events:
  Go: {{}}
transitions:
  - {{from: A, on: Go, to: T}}
{rows}""")


@pytest.mark.parametrize(("rows", "message", "fired"), [
    ("  - {from: T, to: U}\n  - {from: U, to: T}\n",
     "eventless cycle through transient states (T -> U)", [1, 2, 3]),
    ("  - {from: T, to: A, when: v == 1}\n  - {from: U, to: A}\n",
     "transient state T has no enabled eventless row", [1]),
    ("  - {from: T, to: A}\n  - {from: T, to: U, when: v == 0}\n  - {from: U, to: A}\n",
     "transient state T has several enabled eventless rows (2, 3)", [2, 3]),
])
def test_transient_states_that_break_the_rules(rows: str, message: str, fired: list[int]) -> None:
    with pytest.raises(SemanticError) as caught:
        step(transient(rows), 0, (0,), "Go")
    assert (caught.value.kind, caught.value.message) == ("transient", message)
    assert [r.index for r in caught.value.rows] == fired


def test_two_enabled_rows_name_both() -> None:
    t = transient("  - {from: T, to: A}\n  - {from: U, to: A}\n  - {from: A, on: Go, to: A}\n")
    with pytest.raises(SemanticError) as caught:
        step(t, 0, (0,), "Go")
    assert (caught.value.kind, caught.value.message) == ("determinism", "rows 1, 4 are all enabled for Go in A")
    assert [r.index for r in caught.value.rows] == [1, 4]


@pytest.mark.parametrize(("policy", "accepted"), [("ignore", True), ("reject", False)])
def test_an_unhandled_event_follows_the_policy(policy: str, accepted: bool) -> None:
    t = table(ARGS + f"unhandled: {{policy: {policy}, emit: [Plain]}}\n")
    result = step(t, t.state_index["B"], (2,), "Go", (0,))
    assert (result.accepted, result.status) == (accepted, "ignored" if accepted else "rejected")
    assert (t.states[result.state].name, result.vars, result.actions, result.rows, result.args) == (
        "B", (2,), ("Plain",), (), ((),))
