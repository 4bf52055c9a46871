"""The vibework agent table (seed 002) under the reference semantics."""

from __future__ import annotations

import pytest
from agentfsm.spec import Table, load_table
from agentfsm.spec.expr import Value
from agentfsm.spec.semantics import StepResult, step
from conftest import SPEC
from table_runs import Events, configs, demo_events, problems, run, states

TABLE = SPEC / "vibework-agent.yaml"
INPUT: Events = [("UserInput", {})]


@pytest.fixture(scope="module")
def table() -> Table:
    return load_table(TABLE)


def tool_use(tools: int = 1, allowed: bool = True) -> tuple[str, dict[str, Value]]:
    return ("ToolUse", {"tools": tools, "rule_allows": allowed})


def completed(next_allowed: bool = True, event: str = "ToolCompleted") -> tuple[str, dict[str, Value]]:
    return (event, {"next_rule_allows": next_allowed})


def flow(table: Table, events: Events) -> list[str]:
    """The seed's notation: the initial state, then the state after each event."""
    return [table.initial.name, *states(table, run(table, events))]


def last(table: Table, events: Events) -> StepResult:
    return run(table, events)[-1]


@pytest.mark.parametrize("max_tools", [2, 3, 5])
def test_verifies_clean(max_tools: int) -> None:
    assert problems(load_table(TABLE, {"max_tools": max_tools})) == []


# "Typical Flow Examples", exactly.

def test_simple_text_response(table: Table) -> None:
    assert flow(table, INPUT + [("TextResponse", {})]) == ["Idle", "Processing", "Idle"]


def test_tool_execution(table: Table) -> None:
    events = INPUT + [tool_use(allowed=False), ("PermissionGranted", {}), completed(), ("TextResponse", {})]
    assert flow(table, events) == ["Idle", "Processing", "WaitingForPermission", "ExecutingTool", "Processing", "Idle"]
    assert [r.actions for r in run(table, events)] == [
        ("CallLlm",), ("RequestPermission",), ("ExecuteTool",), ("CallLlm",), ()]


def test_multiple_tools(table: Table) -> None:
    events = INPUT + [tool_use(), completed(), tool_use(), completed(), ("TextResponse", {})]
    assert flow(table, events) == ["Idle", "Processing", "ExecutingTool", "Processing",
                                   "ExecutingTool", "Processing", "Idle"]


def test_with_subagent(table: Table) -> None:
    events = INPUT + [tool_use(), ("SubAgentSpawned", {}), completed(event="SubAgentCompleted"), ("TextResponse", {})]
    assert flow(table, events) == ["Idle", "Processing", "ExecutingTool", "WaitingForSubAgent", "Processing", "Idle"]


def test_with_questions(table: Table) -> None:
    events = INPUT + [("QuestionsAsked", {}), ("QuestionsAnswered", {}), ("TextResponse", {})]
    assert flow(table, events) == ["Idle", "Processing", "WaitingForUserInput", "Processing", "Idle"]


# The transitions each state lists.

def test_a_batch_asks_permission_per_call(table: Table) -> None:
    events = INPUT + [tool_use(3, allowed=True), completed(next_allowed=False), ("PermissionGranted", {}),
                      completed(next_allowed=True), completed()]
    results = run(table, events)
    assert states(table, results) == ["Processing", "ExecutingTool", "WaitingForPermission", "ExecutingTool",
                                      "ExecutingTool", "Processing"]
    assert [table.vars_dict(r.vars)["queued"] for r in results] == [0, 2, 1, 1, 0, 0]


def test_permission_denied_ends_the_task(table: Table) -> None:
    result = last(table, INPUT + [tool_use(2, allowed=False), ("PermissionDenied", {})])
    assert table.states[result.state].name == "Done"
    assert result.actions == ("AnswerToolDenied", "AnswerRemainingToolsInterrupted")


def test_permission_handling_error_returns_to_processing(table: Table) -> None:
    result = last(table, INPUT + [tool_use(allowed=False), completed(event="PermissionFailed")])
    assert table.states[result.state].name == "Processing"
    assert result.actions == ("AnswerToolError", "CallLlm")


def test_processing_outcomes(table: Table) -> None:
    for event, state in [("TaskFinished", "Done"), ("LlmFailed", "Error"), ("SubAgentSpawned", "WaitingForSubAgent")]:
        assert flow(table, INPUT + [(event, {})])[-1] == state


@pytest.mark.parametrize(("event", "state"), [("ToolCompleted", "Processing"), ("ToolFailed", "Error"),
                                              ("TaskFinished", "Done")])
def test_executing_tool_outcomes(table: Table, event: str, state: str) -> None:
    params: dict[str, Value] = {"next_rule_allows": True} if event == "ToolCompleted" else {}
    assert flow(table, INPUT + [tool_use(), (event, params)])[-1] == state


def test_a_task_cannot_finish_with_calls_unanswered(table: Table) -> None:
    result = last(table, INPUT + [tool_use(2), ("TaskFinished", {})])
    assert not result.accepted and table.states[result.state].name == "ExecutingTool"


def test_subagent_failure_is_an_error(table: Table) -> None:
    result = last(table, INPUT + [tool_use(2), ("SubAgentSpawned", {}), ("SubAgentFailed", {})])
    assert table.states[result.state].name == "Error"
    assert result.actions == ("AnswerRemainingToolsInterrupted", "ReportError")


@pytest.mark.parametrize(("ending", "actions"), [
    ([("TaskFinished", {})], ("ProcessInput",)),
    ([("LlmFailed", {})], ("ClearError", "ProcessInput")),
    ([("Interrupt", {})], ("ProcessInput",))])
def test_new_input_leaves_done_and_error(table: Table, ending: Events, actions: tuple[str, ...]) -> None:
    """Done and Error "Transitions to: Idle (if new input sent / clears error)"; Idle then
    takes the same input (ProcessInput delivers it again) to Processing."""
    result = last(table, INPUT + ending + INPUT)
    assert table.states[result.state].name == "Idle" and result.actions == actions
    assert not table.vars_dict(result.vars)["interrupted"]
    again = last(table, INPUT + ending + INPUT + INPUT)
    assert table.states[again.state].name == "Processing" and again.actions == ("CallLlm",)


def test_shutdown_from_idle(table: Table) -> None:
    result = last(table, [("Shutdown", {})])
    assert table.states[result.state].name == "Done"
    assert result.actions == ("AnswerRemainingToolsInterrupted", "ReleaseAgent")


def test_shutdown_reaches_done_from_every_state(table: Table) -> None:
    """Done "When: ... Shutdown requested", whatever the agent was doing."""
    seen = set()
    for config in configs(table):
        result = step(table, config[0], config[1], "Shutdown", ())
        assert result.accepted and table.states[result.state].name == "Done", config
        assert table.vars_dict(result.vars)["queued"] == 0
        seen.add(table.states[config[0]].name)
    assert seen == {s.name for s in table.states if not s.transient}


# "State and Interrupts", per state.

def test_interrupt_during_processing_keeps_partial_text(table: Table) -> None:
    result = last(table, INPUT + [("Interrupt", {})])
    assert table.states[result.state].name == "Done"
    assert result.actions == ("CancelLlmRequest", "KeepPartialText", "DiscardThinkingAndToolCalls")


@pytest.mark.parametrize(("tools", "actions"), [(1, ("AnswerToolInterrupted",)),
                                                (3, ("AnswerToolInterrupted", "AnswerRemainingToolsInterrupted"))])
def test_interrupt_during_permission_answers_interrupted(table: Table, tools: int, actions: tuple[str, ...]) -> None:
    result = last(table, INPUT + [tool_use(tools, allowed=False), ("Interrupt", {})])
    assert table.states[result.state].name == "Done" and result.actions == actions
    assert table.vars_dict(result.vars)["queued"] == 0


@pytest.mark.parametrize(("tools", "actions"), [(1, ()), (3, ("AnswerRemainingToolsInterrupted",))])
def test_interrupt_during_a_tool_lets_it_complete(table: Table, tools: int, actions: tuple[str, ...]) -> None:
    results = run(table, INPUT + [tool_use(tools), ("Interrupt", {}), completed()])
    assert states(table, results) == ["Processing", "ExecutingTool", "ExecutingTool", "Done"]
    assert results[2].actions == () and results[3].actions == actions


def test_interrupt_during_a_subagent_waits_for_it(table: Table) -> None:
    results = run(table, INPUT + [tool_use(2), ("SubAgentSpawned", {}), ("Interrupt", {}),
                                  completed(event="SubAgentCompleted")])
    assert states(table, results)[2:] == ["WaitingForSubAgent", "WaitingForSubAgent", "Done"]
    assert results[-1].actions == ("AnswerRemainingToolsInterrupted",)


def test_a_second_interrupt_is_refused(table: Table) -> None:
    result = last(table, INPUT + [tool_use(), ("Interrupt", {}), ("Interrupt", {})])
    assert not result.accepted and result.status == "rejected"


def test_interrupt_during_questions_cancels_them(table: Table) -> None:
    result = last(table, INPUT + [("QuestionsAsked", {}), ("Interrupt", {})])
    assert table.states[result.state].name == "Done" and result.actions == ("CancelQuestions",)


@pytest.mark.parametrize("prefix", [[], [("Shutdown", {})], INPUT + [("LlmFailed", {})]])
def test_nothing_to_interrupt_when_idle_done_or_failed(table: Table, prefix: Events) -> None:
    result = last(table, [*prefix, ("Interrupt", {})])
    assert not result.accepted


def test_internal_errors_enter_error_from_every_state(table: Table) -> None:
    error = table.state_index["Error"]
    for state, values in configs(table):
        result = step(table, state, values, "InternalError")
        assert result.accepted == (state != error)
        if result.accepted:
            assert result.state == error and table.vars_dict(result.vars)["queued"] == 0


def test_demo_session(table: Table) -> None:
    results = run(table, demo_events(table.machine))
    assert all(r.accepted for r in results)
    names = states(table, results)
    assert [i + 1 for i, name in enumerate(names) if name in ("Idle", "Done")] == [6, 11, 12, 15, 16, 20]
    assert results[-1].actions == ("AnswerRemainingToolsInterrupted",)
