"""Temporal properties and fairness: each kind where it holds and where it fails, with exact
(lasso) counterexamples; and the ``ignore`` policy's stutter, which is never progress."""

from __future__ import annotations

import pytest
from agentfsm.spec import TableError
from verify_tables import check, steps, table, verdict

SUPPORT = """
variables: {tries: {type: int, min: 0, max: 2, init: 0}}
states: {Idle: {initial: true}, Thinking: {}, Tool: {}, Resolved: {final: true}, Cancelled: {final: true},
         Escalated: {final: true}}
events: {ask: {}, reply: {}, call: {}, result: {}, error: {}, cancel: {}, ping: {}}
transitions:
  - {from: Idle, on: ask, to: Thinking}
  - {from: Thinking, on: reply, to: Resolved}
  - {from: Thinking, on: call, to: Tool}
  - {from: Tool, on: result, to: Thinking}
  - {from: Tool, on: error, when: tries < 2, to: Tool, set: {tries: tries + 1}}
  - {from: Tool, on: error, when: tries == 2, to: Escalated}
  - {from: '*', on: cancel, to: Cancelled}
  - {from: Thinking, on: ping, to: Thinking}
properties:
  - {name: ends, eventually: [Resolved, Cancelled, Escalated]}
  - {name: resolves, eventually: Resolved}
  - {name: tool-returns, leads-to: {from: Tool, to: Thinking}}
  - {name: tool-settles, leads-to: {from: Tool, to: [Thinking, Cancelled, Escalated]}}
  - {name: can-end, always-reachable: [Resolved, Cancelled, Escalated]}
  - {name: fresh, always-reachable: tries == 0}
  - {name: bounded, always: tries <= 2}
  - {name: never-escalates, always: state not in (Escalated)}
"""


def test_eventually_without_fairness_fails_on_the_shortest_lasso() -> None:
    result = check(verdict(SUPPORT), "eventually", "ends")
    assert not result.ok and result.trace is not None
    assert steps(result) == ["ask", "ping"] and result.trace.loop_start == 1
    assert "cycles forever through Thinking {tries: 0}" in result.message
    assert "no fairness assumed" in result.message


def test_weak_fairness_needs_the_event_enabled_throughout_the_loop() -> None:
    result = check(verdict(SUPPORT + "fairness: {weak: [reply]}\n"), "eventually", "ends")
    assert not result.ok and result.trace is not None
    assert steps(result) == ["ask", "call", "result"] and result.trace.loop_start == 1
    assert "under fairness weak reply" in result.message


def test_strong_fairness_makes_every_run_end() -> None:
    assert check(verdict(SUPPORT + "fairness: {strong: [reply]}\n"), "eventually", "ends").ok


def test_weak_fairness_on_every_loop_event_makes_every_run_end() -> None:
    v = verdict(SUPPORT.replace("  - {from: Tool, on: result, to: Thinking}\n", "") .replace(
        "{from: Thinking, on: call, to: Tool}", "{from: Thinking, on: call, to: Tool, when: false}")
        + "fairness: {weak: [reply]}\n")
    assert check(v, "eventually", "ends").ok
    assert not check(verdict(SUPPORT.replace("{from: Thinking, on: call, to: Tool}",
                                             "{from: Thinking, on: call, to: Tool, when: false}")),
                     "eventually", "ends").ok


def test_fairness_does_not_hide_a_run_that_ends_elsewhere() -> None:
    result = check(verdict(SUPPORT + "fairness: {strong: [reply]}\n"), "eventually", "resolves")
    assert not result.ok and result.trace is not None
    assert steps(result) == ["cancel"] and result.trace.loop_start is None
    assert "ends in Cancelled {tries: 0} (final) without reaching Resolved" in result.message


def test_leads_to_fails_from_the_shallowest_source_and_holds_for_a_wider_target() -> None:
    v = verdict(SUPPORT)
    result = check(v, "leads-to", "tool-returns")
    assert not result.ok and steps(result) == ["ask", "call", "cancel"]
    assert "from Tool {tries: 0} ends in Cancelled" in result.message
    assert check(v, "leads-to", "tool-settles").ok


def test_leads_to_lasso_stays_out_of_the_target() -> None:
    v = verdict(SUPPORT.replace("to: Escalated}", "to: Tool, set: {tries: 0}}").replace(
        "  - {name: tool-settles, leads-to: {from: Tool, to: [Thinking, Cancelled, Escalated]}}\n",
        "  - {name: tool-settles, leads-to: {from: Tool, to: [Thinking, Cancelled]}}\n"))
    result = check(v, "leads-to", "tool-settles")
    assert not result.ok and result.trace is not None
    assert steps(result) == ["ask", "call", "error", "error", "error"] and result.trace.loop_start == 2
    assert check(verdict(SUPPORT.replace("to: Escalated}", "to: Tool, set: {tries: 0}}").replace(
        "  - {name: tool-settles, leads-to: {from: Tool, to: [Thinking, Cancelled, Escalated]}}\n",
        "  - {name: tool-settles, leads-to: {from: Tool, to: [Thinking, Cancelled]}}\n")
        + "fairness: {weak: [result]}\n"), "leads-to", "tool-settles").ok


def test_always_reachable_of_a_set_and_of_an_expression() -> None:
    v = verdict(SUPPORT)
    assert check(v, "always-reachable", "can-end").ok
    fresh = check(v, "always-reachable", "fresh")
    assert not fresh.ok and steps(fresh) == ["ask", "call", "error"]
    assert "tries == 0 is unreachable from Tool {tries: 1}" in fresh.message


def test_always_is_an_invariant() -> None:
    v = verdict(SUPPORT)
    assert check(v, "always", "bounded").ok
    never = check(v, "always", "never-escalates")
    assert not never.ok and steps(never) == ["ask", "call", "error", "error", "error"]


@pytest.mark.parametrize(("extra", "message"), [
    ("  - {name: x, eventually: Nowhere}\n", "unknown state 'Nowhere'"),
    ("  - {name: x, always-reachable: [Idle, Nowhere]}\n", "unknown state 'Nowhere'"),
    ("  - {name: x, eventually: tries + 1}\n", "bool"),
    ("fairness: {weak: [nope]}\n", "unknown event 'nope'"),
    ("fairness: {weak: [reply], strong: [reply]}\n", "already weakly fair"),
])
def test_bad_properties_are_load_errors(extra: str, message: str) -> None:
    with pytest.raises(TableError) as info:
        table(SUPPORT + extra)
    assert message in str(info.value)


IGNORED = """
states: {Triage: {initial: true}, Work: {}, Stuck: {}, Done: {final: true}}
events: {start: {}, ToolError: {}, finish: {}, park: {}}
transitions:
  - {from: Triage, on: start, to: Work}
  - {from: Work, on: finish, to: Done}
  - {from: Work, on: park, to: Stuck}
unhandled: {policy: ignore}
properties:
  - {name: errors-end, no-cycle-within: {events: [ToolError]}}
  - {name: done, eventually: Done}
fairness: {weak: [finish]}
"""


def test_ignored_events_are_stutter_not_progress() -> None:
    v = verdict(IGNORED)
    assert check(v, "no-cycle-within", "errors-end").ok
    deadlock = check(v, "deadlock")
    assert not deadlock.ok and steps(deadlock) == ["start", "park"]
    assert "an ignored event is no progress" in deadlock.message
    done = check(v, "eventually", "done")
    assert not done.ok and steps(done) == ["start", "park"] and "ends in Stuck {" not in done.message
    assert "ends in Stuck (accepts no event)" in done.message


def test_a_row_that_loops_is_progress_even_under_ignore() -> None:
    v = verdict(IGNORED.replace("  - {from: Work, on: park, to: Stuck}\n",
                                "  - {from: Work, on: ToolError, to: Work}\n"))
    cycle = check(v, "no-cycle-within", "errors-end")
    assert not cycle.ok and steps(cycle) == ["start", "ToolError"]
    assert check(v, "deadlock").ok and check(v, "eventually", "done").ok


LOOPS = """
states: {S: {initial: true}, A: {}, B: {}, X: {}, C: {}, D: {}, Goal: {final: true}}
events: {a: {}, b: {}, c: {}, d: {}, e: {}, f: {}, g: {}, s: {}, finish: {}}
transitions:
  - {from: S, on: a, to: A}
  - {from: S, on: b, to: B}
  - {from: A, on: c, to: X}
  - {from: X, on: g, to: C}
  - {from: B, on: d, to: A}
  - {from: C, on: e, to: D}
  - {from: D, on: f, to: C}
  - {from: D, on: s, to: C}
  - {from: C, on: finish, to: Goal, when: false}
properties:
  - {name: done, eventually: Goal}
"""


def test_the_stem_of_a_lasso_is_a_shortest_path() -> None:
    """S reaches A in one step (a) and again, later, through B (b, d): the stem to the loop is
    a, c, g, whatever the later way to A."""
    result = check(verdict(LOOPS), "eventually", "done")
    assert not result.ok and result.trace is not None
    assert steps(result)[:result.trace.loop_start] == ["a", "c", "g"]


def test_a_fair_loop_walks_to_the_fair_event_takes_it_and_comes_back() -> None:
    """Weakly fair ``s`` leaves D only: from the loop's entry C the loop walks to D (e), takes s
    and is back at C; the same with ``f`` first in the rows and ``s`` strongly fair, where the
    loop must take s, not f, although both lead back."""
    for fairness in ("{weak: [s]}", "{strong: [s]}"):
        result = check(verdict(LOOPS + f"fairness: {fairness}\n"), "eventually", "done")
        assert not result.ok and result.trace is not None
        assert steps(result) == ["a", "c", "g", "e", "s"] and result.trace.loop_start == 3


def test_fair_components_of_a_later_streett_round_keep_ids_of_their_own() -> None:
    """Strongly fair ``s`` is enabled at P in the component {I, R, P} and taken only outside it:
    P is cut and {I, R} is found fair in a second round, beside {U, V}, found fair in the first
    (it takes s inside). The lasso loops through I and R alone, never through U and V."""
    text = """
states: {I: {initial: true}, P: {}, R: {}, U: {}, V: {}, Goal: {final: true}}
events: {a: {}, c: {}, d: {}, e: {}, f: {}, h: {}, s: {}}
transitions:
  - {from: I, on: c, to: R}
  - {from: I, on: h, to: U}
  - {from: P, on: a, to: I}
  - {from: R, on: d, to: I}
  - {from: R, on: e, to: P}
  - {from: P, on: s, to: Goal}
  - {from: U, on: s, to: V}
  - {from: V, on: f, to: U}
properties:
  - {name: done, eventually: Goal}
fairness: {strong: [s]}
"""
    result = check(verdict(text), "eventually", "done")
    assert not result.ok and result.trace is not None
    assert steps(result) == ["c", "d"] and result.trace.loop_start == 0
