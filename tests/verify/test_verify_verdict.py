"""What ``verify`` reports beside pass/fail, each value worked out by hand: the unhandled pairs
(grouped by state and event, counted per configuration and parameter value), a deadlock under
the ignore policy, a dead eventless row, one timing per check. The mutation run
(tests/mutation_run.py) found these reports pinned down by no other fast test."""

from __future__ import annotations

import pytest
from agentfsm.spec import load_table_bytes
from agentfsm.verify.table.checks import UnhandledPair, Verdict, run_checks
from agentfsm.verify.table.explore import explore

TABLE = """format: 1
machine: counts
variables:
  n: {type: int, min: 0, max: 1, init: 0}
states:
  A: {initial: true}
  B: {}
  T: {transient: true}
events:
  Go: {params: {k: {type: int, min: 0, max: 2}}}
  Back: {}
transitions:
  - {from: A, on: Go, to: B, when: k == 0}
  - {from: B, on: Back, to: A, when: n == 0, set: {n: 1}}
  - {from: T, to: A}
unhandled: {policy: POLICY}
"""


def verdict(policy: str = "reject") -> Verdict:
    return run_checks(explore(load_table_bytes(TABLE.replace("POLICY", policy).encode(), "counts.yaml")))


def check(v: Verdict, kind: str) -> str:
    (result,) = [c for c in v.checks if c.kind == kind]
    assert not result.ok
    return result.message


def test_unhandled_pairs_are_grouped_by_state_and_event_in_table_order() -> None:
    # Reachable: A n=0, B n=0, A n=1, B n=1. Go with k = 1, 2 is unhandled in A (2 configurations x 2 values),
    # every Go in B (2 x 3); Back in A (2 configurations) and in B with n = 1 (1).
    assert verdict().unhandled() == [UnhandledPair("A", "Go", 4), UnhandledPair("A", "Back", 2),
                                     UnhandledPair("B", "Go", 6), UnhandledPair("B", "Back", 1)]


def test_one_timing_per_check() -> None:
    v = verdict()
    assert len(v.seconds) == len(v.checks) > 0 and all(s >= 0 for s in v.seconds)


def test_a_deadlock_under_the_ignore_policy_says_ignored_events_are_no_progress() -> None:
    note = "(the ignore policy accepts events there, but an ignored event is no progress)"
    assert check(verdict("ignore"), "deadlock") == "B {n: 1} is not final and accepts no event " + note
    assert check(verdict("reject"), "deadlock") == "B {n: 1} is not final and accepts no event"


def test_a_dead_eventless_row_is_named_as_eventless() -> None:
    assert check(verdict(), "dead-row") == "never fire: row 3 (line 15: T --(eventless)--> A)"


LOOPS = """format: 1
machine: loops
states: {A: {initial: true}, B: {}}
events: {a: {}, b: {}}
transitions:
  - {from: A, on: a, to: A}
  - {from: A, on: b, to: B}
  - {from: B, on: b, to: A}
properties:
  - {name: one, no-cycle-within: {events: [a]}}
  - {name: two, no-cycle-within: {events: [b]}}
"""


def test_a_cycle_is_counted_in_steps_singular_and_plural() -> None:
    v = run_checks(explore(load_table_bytes(LOOPS.encode(), "loops.yaml")))
    messages = {c.name: c.message for c in v.checks if c.kind == "no-cycle-within"}
    assert messages == {"one": "a cycle of 1 step uses only a, from A", "two": "a cycle of 2 steps uses only b, from A"}


LASSO = """format: 1
machine: lasso
states: {A: {initial: true}, B: {}, C: {final: true}}
events: {a: {}, b: {}}
transitions:
ROWS
properties:
  - {name: end, eventually: [C]}
"""


@pytest.mark.parametrize(("rows", "lasso"), [
    ("  - {from: A, on: a, to: A}", "A (1 step)"),
    ("  - {from: A, on: b, to: B}\n  - {from: B, on: b, to: A}", "A (2 steps)"),
])
def test_a_lasso_is_counted_in_steps_singular_and_plural(rows: str, lasso: str) -> None:
    table = load_table_bytes(LASSO.replace("ROWS", rows).encode(), "lasso.yaml")
    (result,) = [c for c in run_checks(explore(table)).checks if c.kind == "eventually"]
    assert not result.ok and f"cycles forever through {lasso} without reaching" in result.message, result.message
