"""The Loom table (seed 000) under the reference semantics."""

from __future__ import annotations

from agentfsm.spec import Table
from agentfsm.spec.expr import Value
from agentfsm.spec.semantics import step
from table_runs import run, states


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
