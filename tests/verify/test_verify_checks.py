"""Every check kind: a planted violation with its exact shortest counterexample, and a table where it holds."""

from __future__ import annotations

import pytest
from agentfsm.spec import Table
from agentfsm.verify.table.checks import KINDS, run_checks
from agentfsm.verify.table.explore import explore
from hypothesis import given, settings
from test_verify_differential import tables
from test_verify_inplace import assert_in_place_agrees
from verify_tables import check, steps, verdict

COUNTER = """
variables: {n: {type: int, min: 0, max: 2, init: 0}}
states: {A: {initial: true}, B: {}, C: {}, Done: {final: true}}
events: {inc: {}, go: {}, stop: {}, pick: {params: {k: {type: int, min: 0, max: 2}}}}
"""


def test_determinism_counterexample_is_shortest() -> None:
    v = verdict(COUNTER + """
transitions:
  - {from: A, on: inc, when: n < 2, to: A, set: {n: n + 1}}
  - {from: A, on: go, to: B}
  - {from: A, on: go, when: n >= 1, to: C}
  - {from: "*", on: stop, to: Done}
  - {from: B, on: pick, to: A, set: {n: k}}
  - {from: C, on: inc, to: A}
""")
    result = check(v, "determinism")
    assert not result.ok and "rows 2, 3" in result.message
    assert steps(result) == ["inc", "go"]


LADDER = """
variables: {n: {type: int, min: 0, max: 1, init: 0}}
states: {A: {initial: true}, B: {}, C: {}, D: {}}
events: {go: {}, x: {}}
"""


def test_several_violations_of_one_kind_report_the_shallowest_and_count_the_others() -> None:
    """Three distinct overlaps, at depths 3, 2 and 1, listed deepest first in the table."""
    v = verdict(LADDER + """
transitions:
  - {from: C, on: x, to: A}
  - {from: C, on: x, to: D}
  - {from: B, on: x, to: A}
  - {from: B, on: x, to: C}
  - {from: A, on: x, to: A}
  - {from: A, on: x, to: B}
  - {from: A, on: go, to: B}
  - {from: B, on: go, to: C}
  - {from: C, on: go, to: D}
  - {from: D, on: go, to: A}
""")
    result = check(v, "determinism")
    assert steps(result) == ["x"]
    assert result.message == ("rows 5, 6 are all enabled for x in A (on x in A {n: 0}); "
                              "2 more distinct violations of this kind")


def test_other_violations_are_counted_in_the_plural_and_the_singular() -> None:
    v = verdict(LADDER + """
transitions:
  - {from: B, on: x, to: A, set: {n: n + 2}}
  - {from: A, on: go, to: B}
  - {from: B, on: go, to: C}
  - {from: C, on: go, to: D}
  - {from: D, on: go, to: A}
  - {from: C, on: x, to: A, set: {n: n - 1}}
  - {from: D, on: x, to: A, set: {n: n - 1}}
""")
    result = check(v, "bounds")
    assert steps(result) == ["go", "x"]
    assert result.message.startswith("row 1 sets n = 2, outside its range 0..1 (on x in B {n: 0})")
    assert result.message.endswith("; 2 more distinct violations of this kind")
    v = verdict(LADDER + """
transitions:
  - {from: A, on: go, to: B}
  - {from: B, on: go, to: C}
  - {from: C, on: go, to: D}
  - {from: D, on: go, to: A}
  - {from: D, on: x, to: A, set: {n: n - 1}}
  - {from: C, on: x, to: A, set: {n: n + 2}}
""")
    result = check(v, "bounds")
    assert steps(result) == ["go", "go", "x"]
    assert result.message == ("row 6 sets n = 2, outside its range 0..1 (on x in C {n: 0}); "
                              "1 more distinct violation of this kind")


def test_determinism_holds_when_guards_are_disjoint() -> None:
    v = verdict(COUNTER + """
transitions:
  - {from: A, on: go, when: n == 0, to: B}
  - {from: A, on: go, when: n >= 1, to: C}
  - {from: "*", on: stop, to: Done}
  - {from: B, on: pick, to: A, set: {n: k}}
  - {from: C, on: inc, to: A}
""")
    assert check(v, "determinism").ok and v.ok


def test_bounds_counterexample_includes_the_offending_event() -> None:
    v = verdict(COUNTER + """
transitions:
  - {from: A, on: inc, to: A, set: {n: n + 1}}
  - {from: "*", on: stop, to: Done}
""")
    result = check(v, "bounds")
    assert not result.ok and "n = 3" in result.message
    assert steps(result) == ["inc", "inc", "inc"]
    assert check(verdict(COUNTER + """
transitions:
  - {from: A, on: inc, when: n < 2, to: A, set: {n: n + 1}}
  - {from: "*", on: stop, to: Done}
"""), "bounds").ok


def test_invariant_counterexample_ends_in_the_bad_configuration() -> None:
    text = COUNTER + """
transitions:
  - {from: A, on: inc, when: n < 2, to: A, set: {n: n + 1}}
  - {from: A, on: pick, to: B, set: {n: k}}
  - {from: B, on: go, to: A}
  - {from: "*", on: stop, to: Done}
invariants:
  - {name: small-in-b, expr: state not in (B) or n <= 1}
  - {name: anything, expr: n <= 2}
"""
    v = verdict(text)
    result = check(v, "invariant", "small-in-b")
    assert not result.ok and steps(result) == ["pick(k=2)"]
    assert check(v, "invariant", "anything").ok


def test_deadlock_is_a_non_final_configuration_accepting_nothing() -> None:
    v = verdict(COUNTER + """
transitions:
  - {from: A, on: inc, when: n < 2, to: A, set: {n: n + 1}}
  - {from: A, on: go, when: n == 2, to: B}
  - {from: A, on: stop, to: Done}
  - {from: C, on: go, to: A}
""")
    result = check(v, "deadlock")
    assert not result.ok and "B {n: 2}" in result.message
    assert steps(result) == ["inc", "inc", "go"]


def test_ignore_policy_does_not_hide_a_deadlock() -> None:
    v = verdict(COUNTER + """
transitions:
  - {from: A, on: go, to: B}
  - {from: A, on: stop, to: Done}
  - {from: C, on: go, to: A}
unhandled: {policy: ignore}
""")
    result = check(v, "deadlock")
    assert not result.ok and steps(result) == ["go"] and "B {n: 0} is not final" in result.message


TRANSIENT = """
variables: {n: {type: int, min: 0, max: 2, init: 0}}
states: {A: {initial: true}, T: {transient: true}, U: {transient: true}, B: {}}
events: {inc: {}, go: {}}
"""


@pytest.mark.parametrize(("rows", "expected", "message"), [
    ("  - {from: T, when: n > 0, to: B}\n  - {from: U, to: B}\n", ["go"], "no enabled eventless row"),
    ("  - {from: T, when: n > 0, to: B}\n  - {from: T, when: n >= 0, to: A}\n  - {from: U, to: B}\n",
     ["inc", "go"], "several"),
    ("  - {from: T, when: n == 1, to: U}\n  - {from: T, when: n != 1, to: B}\n  - {from: U, to: T}\n",
     ["inc", "go"], "eventless cycle"),
])
def test_transient_violations(rows: str, expected: list[str], message: str) -> None:
    v = verdict(TRANSIENT + "transitions:\n  - {from: A, on: inc, when: n < 2, to: A, set: {n: n + 1}}\n"
                "  - {from: A, on: go, to: T}\n  - {from: B, on: go, to: A, set: {n: 0}}\n" + rows)
    result = check(v, "transient")
    assert not result.ok and message in result.message
    assert steps(result) == expected


def test_transient_holds_and_marks_transient_states_reached() -> None:
    v = verdict(TRANSIENT + """
transitions:
  - {from: A, on: inc, when: n < 2, to: A, set: {n: n + 1}}
  - {from: A, on: go, to: T}
  - {from: T, when: n > 0, to: B}
  - {from: T, when: n == 0, to: U}
  - {from: U, to: B, set: {n: 2}}
  - {from: B, on: go, to: A, set: {n: 0}}
""")
    assert check(v, "transient").ok and check(v, "unreachable-state").ok and v.ok


def test_unreachable_state_and_dead_row() -> None:
    v = verdict(COUNTER + """
transitions:
  - {from: A, on: inc, when: n < 2, to: A, set: {n: n + 1}}
  - {from: A, on: go, when: n > 2, to: B}
  - {from: C, on: go, to: A}
  - {from: "*", on: stop, to: Done}
""")
    unreachable = check(v, "unreachable-state")
    assert not unreachable.ok and unreachable.message == "never reached: B, C" and unreachable.trace is None
    dead = check(v, "dead-row")
    assert not dead.ok and "row 2 (line" in dead.message and "row 3 (line" in dead.message
    assert "row 1 " not in dead.message and "row 4 " not in dead.message


ALWAYS = COUNTER + """
transitions:
  - {from: A, on: inc, when: n < 2, to: A, set: {n: n + 1}}
  - {from: A, on: go, when: n < 2, to: B}
  - {from: A, on: go, when: n == 2, to: C}
  - {from: B, on: go, to: A}
  - {from: C, on: inc, to: C}
properties:
  - {name: b-reachable, always-reachable: B}
"""


def test_always_reachable_counterexample_reaches_a_trap() -> None:
    v = verdict(ALWAYS)
    result = check(v, "always-reachable", "b-reachable")
    assert not result.ok and steps(result) == ["inc", "inc"]
    assert "unreachable from A {n: 2}" in result.message


def test_a_final_state_breaks_always_reachable_of_another_state() -> None:
    v = verdict(ALWAYS.replace("properties:", "  - {from: '*', on: stop, to: Done}\nproperties:")
                + "  - {name: can-stop, always-reachable: Done}\n")
    result = check(v, "always-reachable", "b-reachable")
    assert not result.ok and steps(result) == ["stop"] and "from Done" in result.message
    assert check(v, "always-reachable", "can-stop").ok


def test_always_reachable_holds_when_every_configuration_can_get_there() -> None:
    v = verdict(ALWAYS.replace("{from: C, on: inc, to: C}", "{from: C, on: inc, to: B}"))
    assert check(v, "always-reachable", "b-reachable").ok


CYCLE = """
variables: {n: {type: int, min: 0, max: 3, init: 0}}
states: {A: {initial: true}, B: {}, E: {}, Done: {final: true}}
events: {start: {}, fail: {}, retry: {}, ok: {}, stop: {}}
transitions:
  - {from: A, on: start, to: B}
  - {from: B, on: fail, when: n < 3, to: E, set: {n: n + 1}}
  - {from: B, on: fail, when: n == 3, to: A, set: {n: 0}}
  - {from: E, on: retry, to: B}
  - {from: B, on: ok, to: A, set: {n: 0}}
  - {from: "*", on: stop, to: Done}
properties:
  - {name: retries-terminate, no-cycle-within: {events: [fail, retry]}}
  - {name: loop, no-cycle-within: {events: [start, fail, ok]}}
"""


def test_no_cycle_within_holds_for_bounded_retries() -> None:
    v = verdict(CYCLE)
    assert check(v, "no-cycle-within", "retries-terminate").ok


def test_no_cycle_within_gives_a_lasso() -> None:
    v = verdict(CYCLE.replace("n < 3, to: E, set: {n: n + 1}", "n < 3, to: E"))
    result = check(v, "no-cycle-within", "retries-terminate")
    assert not result.ok and result.trace is not None
    assert steps(result) == ["start", "fail", "retry"] and result.trace.loop_start == 1
    loop = check(v, "no-cycle-within", "loop")
    assert not loop.ok and loop.trace is not None
    assert steps(loop) == ["start", "ok"] and loop.trace.loop_start == 0


def test_self_loop_is_a_cycle() -> None:
    v = verdict(CYCLE.replace("{from: E, on: retry, to: B}", "{from: E, on: retry, to: E}"))
    result = check(v, "no-cycle-within", "retries-terminate")
    assert not result.ok and result.trace is not None
    assert steps(result) == ["start", "fail", "retry"] and result.trace.loop_start == 2


def test_loom_holds_every_check_and_reports_every_kind(loom: Table) -> None:
    v = run_checks(explore(loom))
    assert v.ok
    assert {c.kind for c in v.checks} == set(KINDS) - {"eventually", "always"}   # tests/verify/test_verify_liveness.py
    assert sum(p.pairs for p in v.unhandled()) > 0


def test_deadlock_reports_the_shallowest_of_several_dead_ends() -> None:
    v = verdict("""
states: {A: {initial: true}, B: {}, Deep: {}, Shallow: {}, Done: {final: true}}
events: {go: {}, jump: {}, end: {}}
transitions:
  - {from: A, on: go, to: B}
  - {from: B, on: go, to: Deep}
  - {from: A, on: jump, to: Shallow}
  - {from: B, on: end, to: Done}
""")
    found = check(v, "deadlock")
    assert not found.ok and steps(found) == ["jump"] and found.message.startswith("Shallow")


@settings(max_examples=50, deadline=None)
@given(table=tables())
def test_in_place_passes_agree_with_their_whole_graph_forms(table: Table) -> None:
    """Dead ends, states and the progress graph read in place, on random tables (with stutter
    edges under ``ignore``): see test_verify_inplace.py."""
    assert_in_place_agrees(explore(table))
