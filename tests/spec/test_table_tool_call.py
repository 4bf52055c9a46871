"""The durable tool-call trace (seed 003) under the reference semantics."""

from __future__ import annotations

import itertools

import pytest
from agentfsm.spec import Table, load_table
from agentfsm.spec.build import load_table_bytes
from agentfsm.spec.expr import Value
from agentfsm.spec.semantics import step
from agentfsm.verify.table.explore import labels_of
from conftest import SPEC
from hypothesis import given, settings
from hypothesis import strategies as st
from table_runs import Events, accepted_steps, configs, demo_events, problems, run, states

TABLE = SPEC / "tool-call.yaml"
RESOLUTIONS = {"StatusCompleted", "StatusFailed", "StatusNotRun", "StatusUnavailable", "Completed", "Failed",
               "OperatorResolved"}
EXECUTIONS = ("InvokeTool", "RetryWithSameKey")


@pytest.fixture(scope="module")
def table() -> Table:
    return load_table(TABLE)


def ev(name: str, **params: Value) -> tuple[str, dict[str, Value]]:
    return (name, params)


def valid(ask_user: bool = False, takes_key: bool = False) -> Events:
    return [ev("ArgumentsValid", ask_user=ask_user, takes_key=takes_key)]


RUNNING: Events = [*valid(), ev("Started")]
FINISH: Events = [ev("ResultRecorded"), ev("ResultReturned")]


def end(table: Table, events: Events) -> tuple[str, dict[str, Value]]:
    result = run(table, events)[-1]
    return table.states[result.state].name, table.vars_dict(result.vars)


@pytest.mark.parametrize("max_attempts", [2, 3, 4])
def test_verifies_clean(max_attempts: int) -> None:
    assert problems(load_table(TABLE, {"max_attempts": max_attempts})) == []


def test_external_actions_declare_their_effects(table: Table) -> None:
    effects = {a.name: (a.effect, a.idempotent) for a in table.actions if a.effect == "external"}
    assert effects == {"InvokeTool": ("external", False), "RetryWithSameKey": ("external", True),
                       "QueryStatus": ("external", True), "CancelExecution": ("external", True)}


def test_approved_call_runs_records_and_returns(table: Table) -> None:
    events = [*valid(ask_user=True), ev("ApprovalGranted"), ev("Started"), ev("Completed"), *FINISH]
    results = run(table, events)
    assert states(table, results) == ["AwaitingApproval", "Approved", "Running", "Completed", "Recorded", "Returned"]
    assert [r.actions for r in results] == [("RequestApproval",), ("BeginExecution",), ("InvokeTool",),
                                            ("RecordResult",), ("ReturnResultToModel",), ()]


def test_start_is_recorded_before_execution(table: Table) -> None:
    # "The runtime persists tool.started before execution": the step that enters Approved
    # only asks for the record; the tool runs in the step that confirms it.
    [approved, running] = run(table, RUNNING)
    assert approved.actions == ("BeginExecution",) and running.actions == ("InvokeTool",)


@pytest.mark.parametrize(("prefix", "state", "answer"), [
    ([ev("ArgumentsInvalid")], "Invalid", "ReturnValidationError"),
    ([*valid(ask_user=True), ev("ApprovalDenied")], "Denied", "ReturnDenial"),
    ([*valid(ask_user=True), ev("CancelRequested")], "Cancelled", "ReturnCancellation")])
def test_calls_that_never_run_answer_the_model_directly(table: Table, prefix: Events, state: str,
                                                        answer: str) -> None:
    results = run(table, [*prefix, ev("ResultReturned")])
    assert states(table, results)[-2:] == [state, "Returned"] and results[-2].actions == (answer,)
    assert not any(a in r.actions for r in results for a in EXECUTIONS)


# "Illegal transitions produce anomaly events. tool_started after completed, or denied
# directly entering recording, stops automatic progression."

CONFIRMED = {"Completed", "StatusCompleted", "OperatorResolved"}   # the tool's receipt, a status query's, an operator's


def completions(table: Table) -> set[tuple[str, str]]:
    """(state, event) of every accepted step, from every reachable configuration, into Completed."""
    found = set()
    for config in configs(table):
        for name, params in labels_of(table):
            result = step(table, config[0], config[1], name, params)
            if result.accepted and table.states[result.state].name == "Completed":
                found.add((table.states[config[0]].name, name))
    return found


def test_only_a_confirmed_outcome_completes_a_call(table: Table) -> None:
    # "A model can revise a plan; it cannot declare tool_running to be completed. The runtime
    # advances state from confirmed events": what the model's side reports (a result
    # recorded, an answer returned) never completes a running call, it halts.
    assert completions(table) == {("Running", "Completed"), ("Cancelling", "Completed"), ("Unknown", "Completed"),
                                  ("Unknown", "StatusCompleted"), ("Halted", "OperatorResolved")}
    assert {event for _, event in completions(table)} <= CONFIRMED
    for event in ("ResultRecorded", "ResultReturned"):
        assert end(table, [*RUNNING, ev(event)])[0] == "Halted"
    row = "  - {from: Running, on: Completed, to: Completed, set: {outcome_known: true}, emit: [RecordResult]}\n"
    text = TABLE.read_text()
    assert text.count(row) == 1
    guard = "on: ResultReturned, when: \"state not in (Recorded, "
    assert text.count(guard) == 1
    declared = text.replace(row, row + row.replace("on: Completed", "on: ResultReturned")).replace(
        guard, guard + "Running, ")
    assert ("Running", "ResultReturned") in completions(load_table_bytes(declared.encode(), str(TABLE)))


def test_started_after_completed_halts(table: Table) -> None:
    result = run(table, [*RUNNING, ev("Completed"), ev("Started")])[-1]
    assert table.states[result.state].name == "Halted"
    assert result.actions == ("RecordAnomaly", "AlertOperator")


def test_denied_then_recording_halts(table: Table) -> None:
    state, _ = end(table, [*valid(ask_user=True), ev("ApprovalDenied"), ev("ResultRecorded")])
    assert state == "Halted"


def test_no_start_after_denial(table: Table) -> None:
    results = run(table, [*valid(ask_user=True), ev("ApprovalDenied"), ev("Started")])
    assert table.states[results[-1].state].name == "Halted"
    assert "InvokeTool" not in results[-1].actions


def test_halted_refuses_everything_but_an_operator(table: Table) -> None:
    halted = run(table, [*RUNNING, ev("Completed"), ev("Started")])[-1]
    for name, params in labels_of(table):
        outcome = step(table, halted.state, halted.vars, name, params)
        assert outcome.accepted == (name == "OperatorResolved"), name
    assert end(table, [*RUNNING, ev("Completed"), ev("Started"), ev("OperatorResolved", succeeded=True), *FINISH])[0] \
        == "Returned"


# "Three interruption points": before start, between start and outcome, after the outcome.

def test_crash_before_start_resumes_without_unknown(table: Table) -> None:
    [*_, interrupted] = run(table, [*valid(), ev("Interrupted")])
    assert not interrupted.accepted and table.states[interrupted.state].name == "Approved"


def test_crash_between_start_and_outcome_is_unknown(table: Table) -> None:
    result = run(table, [*RUNNING, ev("Interrupted")])[-1]
    assert table.states[result.state].name == "Unknown" and result.actions == ("QueryStatus",)
    assert table.vars_dict(result.vars)["unresolved"]


def test_crash_after_the_outcome_never_reruns(table: Table) -> None:
    for event in ("Interrupted", "TimedOut", "CancelRequested"):
        result = run(table, [*RUNNING, ev("Completed"), ev(event)])[-1]
        assert not result.accepted and table.states[result.state].name == "Completed"


@pytest.mark.parametrize(("resolution", "state"), [("StatusCompleted", "Completed"), ("StatusFailed", "Failed"),
                                                   ("Completed", "Completed"), ("Failed", "Failed")])
def test_status_query_resolves_unknown(table: Table, resolution: str, state: str) -> None:
    results = run(table, [*RUNNING, ev("Interrupted"), ev(resolution), *FINISH])
    assert states(table, results)[-3:] == [state, "Recorded", "Returned"]
    assert sum(r.actions.count("InvokeTool") for r in results) == 1


def test_keyed_retry_resolves_unknown(table: Table) -> None:
    results = run(table, [*valid(takes_key=True), ev("Started"), ev("TimedOut"), ev("StatusUnavailable")])
    assert states(table, results)[-2:] == ["Unknown", "Running"]
    assert results[-2].actions == ("CancelExecution", "QueryStatus")
    assert results[-1].actions == ("RetryWithSameKey",)


def test_unkeyed_unknown_without_status_halts(table: Table) -> None:
    assert end(table, [*RUNNING, ev("Interrupted"), ev("StatusUnavailable")])[0] == "Halted"


def test_never_run_is_restarted_after_revalidating_approval(table: Table) -> None:
    events = [*valid(ask_user=True), ev("ApprovalGranted"), ev("Started"), ev("Interrupted"), ev("StatusNotRun"),
              ev("ApprovalExpired"), ev("ApprovalGranted"), ev("Started")]
    results = run(table, events)
    assert states(table, results)[3:] == ["Unknown", "Approved", "AwaitingApproval", "Approved", "Running"]
    assert table.vars_dict(results[-1].vars)["attempts"] == 2


def test_attempts_are_bounded(table: Table) -> None:
    events = [*RUNNING, ev("Interrupted"), ev("StatusNotRun"), ev("Started"), ev("Interrupted"), ev("StatusNotRun")]
    assert end(table, events)[0] == "Halted"


@pytest.mark.parametrize("order", list(itertools.permutations(["Completed", "CancelRequested", "TimedOut"])))
def test_completion_cancel_and_timeout_race_without_losing_the_receipt(table: Table, order: tuple[str, ...]) -> None:
    # "Tool completion, user cancellation, and timeout can arrive together": whatever the
    # order, the completion is never erased, nothing runs twice, and nothing is anomalous.
    results = run(table, [*RUNNING, *[ev(name) for name in order]])
    assert table.states[results[-1].state].name == "Completed"
    actions = [a for r in results for a in r.actions]
    assert actions.count("InvokeTool") == 1 and actions.count("RecordResult") == 1
    assert "RecordAnomaly" not in actions


def test_cancellation_confirmed_before_completion(table: Table) -> None:
    results = run(table, [*RUNNING, ev("CancelRequested"), ev("CancelConfirmed"), ev("Completed")])
    assert states(table, results)[-3:] == ["Cancelling", "Cancelled", "Halted"]


def test_only_resolution_events_leave_unknown(table: Table) -> None:
    unknown = table.state_index["Unknown"]
    halted = table.state_index["Halted"]
    in_unknown = [c for c in configs(table) if c[0] == unknown]
    assert in_unknown
    for config in in_unknown:
        for name, params in labels_of(table):
            outcome = step(table, config[0], config[1], name, params)
            if outcome.accepted and outcome.state not in (unknown, halted):
                assert name in RESOLUTIONS, name


@settings(max_examples=50, deadline=None)
@given(st.data())
def test_random_traces_never_execute_more_than_the_budget(table: Table, data: st.DataObject) -> None:
    config = (table.initial.index, table.initial_vars())
    executions = 0
    for _ in range(40):
        if table.states[config[0]].final:
            break
        outcome = data.draw(st.sampled_from(accepted_steps(table, config)))
        executions += sum(outcome.actions.count(a) for a in EXECUTIONS)
        config = (outcome.state, outcome.vars)
    assert executions <= table.constants["max_attempts"]


def test_demo_trace(table: Table) -> None:
    events = demo_events(table.machine)
    results = run(table, events)
    assert [name for (name, _), r in zip(events, results, strict=True) if not r.accepted] == ["TimedOut"]
    assert states(table, results)[-1] == "Returned"
    actions = [a for r in results for a in r.actions]
    assert actions.count("InvokeTool") + actions.count("RetryWithSameKey") == 2
