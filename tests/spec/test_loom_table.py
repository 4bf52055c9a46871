"""The Loom table (seed 000) under the reference semantics."""

from __future__ import annotations

from agentfsm.spec import Table
from agentfsm.spec.expr import Value
from agentfsm.spec.semantics import StepResult, step
from table_runs import Events, run, states


def test_transitions_to_calling_llm_on_user_input(loom: Table) -> None:
    [result] = run(loom, [("UserInput", {})])
    assert result.accepted and result.actions == ("SendLlmRequest",)
    assert loom.states[result.state].name == "CallingLlm"


def test_completes_full_conversation_cycle(loom: Table) -> None:
    results = run(loom, [("UserInput", {}), ("TextDelta", {}), ("LlmCompleted", {"tool_calls": 0})])
    assert states(loom, results) == ["CallingLlm", "CallingLlm", "WaitingForUserInput"]
    assert results[-1].actions == ("WaitForInput",)


def test_mutating_tools_run_the_post_tools_hook(loom: Table) -> None:
    results = run(loom, [("UserInput", {}), ("LlmCompleted", {"tool_calls": 2}),
                         ("ToolCompleted", {"mutating": True}), ("ToolCompleted", {"mutating": False}),
                         ("PostToolsHookCompleted", {"action_taken": True})])
    assert states(loom, results) == ["CallingLlm", "ExecutingTools", "ExecutingTools", "PostToolsHook", "CallingLlm"]
    assert [r.actions for r in results][1:] == [("ExecuteTools",), ("WaitForInput",), ("RunPostToolsHook",),
                                                ("SendLlmRequest",)]


def test_retries_are_bounded(loom: Table) -> None:
    events: list[tuple[str, dict[str, Value]]] = [("UserInput", {})]
    events += [("LlmError", {}), ("RetryTimeoutFired", {})] * 3 + [("LlmError", {})]
    results = run(loom, events)
    assert states(loom, results)[-1] == "WaitingForUserInput"
    assert results[-1].actions == ("DisplayError",)


def test_shutdown_succeeds_from_every_stable_state(loom: Table) -> None:
    for state in loom.states:
        if state.transient or state.final:
            continue
        result = step(loom, state.index, loom.initial_vars(), "ShutdownRequested")
        assert result.accepted and result.actions == ("Shutdown",)
        assert loom.states[result.state].name == "ShuttingDown"


def test_invalid_transition_answers_wait_for_input(loom: Table) -> None:
    [result] = run(loom, [("RetryTimeoutFired", {})])
    assert not result.accepted and result.status == "rejected"
    assert result.actions == ("WaitForInput",)


# Error origins (seed: "The `origin` field (`Llm`, `Tool`, or `Io`) determines retry strategy")

def named(loom: Table, result: StepResult) -> dict[str, Value]:
    return loom.vars_dict(result.vars)


TOOLS_START: Events = [("UserInput", {}), ("LlmCompleted", {"tool_calls": 2})]


def test_llm_errors_are_retried_by_sending_the_request_again(loom: Table) -> None:
    results = run(loom, [("UserInput", {}), ("LlmError", {}), ("RetryTimeoutFired", {})])
    assert named(loom, results[1])["origin"] == loom.constants["Llm"]
    assert states(loom, results)[1:] == ["Error", "CallingLlm"] and results[-1].actions == ("SendLlmRequest",)


def test_tool_executions_that_could_not_run_are_retried_alone_once_the_batch_settles(loom: Table) -> None:
    results = run(loom, [*TOOLS_START, ("ToolExecutionFailed", {}), ("ToolCompleted", {"mutating": True}),
                         ("RetryTimeoutFired", {}), ("ToolCompleted", {"mutating": False})])
    assert states(loom, results)[2:] == ["ExecutingTools", "Error", "ExecutingTools", "PostToolsHook"]
    error, retry = named(loom, results[3]), named(loom, results[4])
    assert (error["origin"], error["failed"], error["mutated"]) == (loom.constants["Tool"], 1, True)
    assert results[4].actions == ("ExecuteTools",) and (retry["pending"], retry["failed"]) == (1, 0)
    assert results[-1].actions == ("RunPostToolsHook",) and named(loom, results[-1])["retries"] == 0


def test_tool_retries_are_bounded_then_the_failures_go_to_the_model(loom: Table) -> None:
    events: Events = [*TOOLS_START, ("ToolCompleted", {"mutating": False})]
    events += [("ToolExecutionFailed", {}), ("RetryTimeoutFired", {})] * 3 + [("ToolExecutionFailed", {})]
    results = run(loom, events)
    assert states(loom, results)[-2:] == ["ExecutingTools", "CallingLlm"]
    assert [named(loom, r)["retries"] for r in results[3::2]] == [1, 2, 3, 0]
    assert results[-1].actions == ("SendLlmRequest",) and named(loom, results[-1])["failed"] == 0


def test_a_failed_post_tools_hook_is_retried_then_skipped_with_an_error(loom: Table) -> None:
    events: Events = [("UserInput", {}), ("LlmCompleted", {"tool_calls": 1}), ("ToolCompleted", {"mutating": True})]
    events += [("PostToolsHookFailed", {}), ("RetryTimeoutFired", {})] * 3
    results = run(loom, [*events, ("PostToolsHookFailed", {})])
    assert states(loom, results)[3:5] == ["Error", "PostToolsHook"] and results[4].actions == ("RunPostToolsHook",)
    assert named(loom, results[3])["origin"] == loom.constants["Io"]
    assert states(loom, results)[-1] == "CallingLlm" and results[-1].actions == ("DisplayError", "SendLlmRequest")
    recovered = run(loom, [*events[:5], ("PostToolsHookCompleted", {"action_taken": True})])
    assert states(loom, recovered)[-1] == "CallingLlm" and named(loom, recovered[-1])["retries"] == 0
