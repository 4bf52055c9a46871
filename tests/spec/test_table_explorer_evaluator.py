"""The explorer/evaluator table (seed 001) under the reference semantics."""

from __future__ import annotations

import pytest
from agentfsm.spec import Table, load_table
from agentfsm.spec.build import load_table_bytes
from agentfsm.spec.semantics import step
from conftest import SPEC
from hypothesis import given, settings
from hypothesis import strategies as st
from table_runs import Events, accepted_steps, demo_events, longest_run, problems, run, states

TABLE = SPEC / "explorer-evaluator.yaml"


@pytest.fixture(scope="module")
def table() -> Table:
    return load_table(TABLE)


def cycle(verdict: str = "EvaluatorReplied", commands: bool = False) -> Events:
    """One explore -> execute -> evaluate cycle (two turns)."""
    return [("ExplorerReplied", {"has_commands": True, "concludes": False}), ("CommandsExecuted", {}),
            (verdict, {"has_commands": commands})]


def start(plan: bool = False) -> Events:
    return [("TaskReceived", {"plan": plan})]


@pytest.mark.parametrize("max_turns", [2, 3, 6, 12])
def test_verifies_clean(max_turns: int) -> None:
    assert problems(load_table(TABLE, {"max_turns": max_turns})) == []


def test_simple_query_takes_two_turns(table: Table) -> None:
    # "What is the first struct in main.rs?": 2 turns: explore -> evaluate -> done.
    results = run(table, start() + cycle("EvaluatorAnswered"))
    assert states(table, results) == ["Exploring", "ExecutingCommands", "Evaluating", "Answered"]
    assert [r.actions for r in results] == [
        ("CallExplorerLlm_LastOutputs",), ("RunCommands",), ("RecordOutputs", "CallEvaluatorLlm_WorkingMemory"),
        ("ApplyMemoryCommands", "ReturnAnswer")]
    assert table.vars_dict(results[-1].vars)["turns"] == 2


def test_complex_query_takes_four_turns(table: Table) -> None:
    # "How many enum variants does Provider have?": explore -> evaluate (need more) ->
    # explore -> evaluate -> done; the seed's turn 2 concludes with $(done 13).
    results = run(table, start() + cycle() + cycle("EvaluatorDone"))
    assert states(table, results) == ["Exploring", "ExecutingCommands", "Evaluating",
                                      "Exploring", "ExecutingCommands", "Evaluating", "Answered"]
    assert results[3].actions == ("ApplyMemoryCommands", "CallExplorerLlm_LastOutputs")
    assert table.vars_dict(results[-1].vars)["turns"] == 4


def test_runs_out_of_turns_at_max_turns(table: Table) -> None:
    # "V2: 6 turns (3 cycles), ran out of turns": the third evaluation spends turn 6.
    results = run(table, start() + cycle() * 3)
    assert states(table, results) == ["Exploring", "ExecutingCommands", "Evaluating"] * 3 + ["OutOfTurns"]
    assert results[-1].actions == ("ApplyMemoryCommands", "ReportOutOfTurns")
    assert table.vars_dict(results[-1].vars)["turns"] == table.constants["max_turns"] == 6
    assert not step(table, results[-1].state, results[-1].vars, "EvaluatorAnswered", (False,)).accepted


def test_planner_is_turn_one_and_the_explorer_sees_the_plan() -> None:
    # "[agent-v2] Turn 1/12 (planner) ... Turn 2/12 (explorer)".
    table = load_table(TABLE, {"max_turns": 12})
    results = run(table, start(plan=True) + [("PlannerReplied", {})] + cycle() + cycle("EvaluatorAnswered"))
    assert states(table, results)[:3] == ["Planning", "Exploring", "ExecutingCommands"]
    assert results[0].actions == ("CallPlannerLlm_TaskOnly",)
    assert results[1].actions == ("RecordPlan", "CallExplorerLlm_PlanAndLastOutputs")
    assert results[4].actions == ("ApplyMemoryCommands", "CallExplorerLlm_PlanAndLastOutputs")
    assert [table.vars_dict(r.vars)["turns"] for r in results] == [1, 2, 2, 3, 4, 4, 5, 5]
    assert states(table, results)[-1] == "Answered"
    assert all("CallPlannerLlm_TaskOnly" not in r.actions for r in results[1:])


def test_evaluator_commands_are_never_run_and_the_loop_runs_out() -> None:
    # Session zj3y5yu4: "Evaluator kept outputting commands as markdown ... Hit max turns
    # (12) without concluding". The violation is recorded; its commands never run.
    table = load_table(TABLE, {"max_turns": 12})
    results = run(table, start() + cycle(commands=True) * 6)
    assert states(table, results)[-1] == "OutOfTurns"
    evaluator_steps = results[3::3]
    assert all(r.actions[0] == "RejectEvaluatorCommands" for r in evaluator_steps)
    assert sum(r.actions.count("RunCommands") for r in results) == 6  # the explorer's, one per cycle


def test_a_conclusion_beside_commands_still_concludes(table: Table) -> None:
    results = run(table, start() + cycle("EvaluatorDone", commands=True))
    assert states(table, results)[-1] == "Answered"
    assert results[-1].actions == ("RejectEvaluatorCommands", "ApplyMemoryCommands", "ReturnAnswer")


@pytest.mark.parametrize("has_commands", [True, False])
def test_the_explorer_cannot_conclude(table: Table, has_commands: bool) -> None:
    [_, reply] = run(table, start() + [("ExplorerReplied", {"has_commands": has_commands, "concludes": True})])
    assert reply.actions[0] == "DiscardExplorerConclusion"
    assert table.states[reply.state].name == ("ExecutingCommands" if has_commands else "Evaluating")
    for event in ("EvaluatorAnswered", "EvaluatorDone"):
        assert not step(table, table.state_index["Exploring"], reply.vars, event, (False,)).accepted


def test_explorer_without_commands_goes_straight_to_the_evaluator(table: Table) -> None:
    results = run(table, start() + [("ExplorerReplied", {"has_commands": False, "concludes": False})])
    assert states(table, results) == ["Exploring", "Evaluating"]
    assert results[-1].actions == ("CallEvaluatorLlm_WorkingMemory",)


@pytest.mark.parametrize("max_turns", [2, 6, 12])
def test_every_run_ends_within_the_budget(max_turns: int) -> None:
    # At most two events per turn (the LLM reply, the commands' completion) plus the task.
    table = load_table(TABLE, {"max_turns": max_turns})
    assert longest_run(table) <= 1 + 2 * max_turns


LLM_CALLS = {"CallPlannerLlm_TaskOnly", "CallExplorerLlm_LastOutputs", "CallExplorerLlm_PlanAndLastOutputs",
             "CallEvaluatorLlm_WorkingMemory"}
CALLING = {"Planning", "Exploring", "Evaluating"}


def calls_off_by_state(table: Table) -> list[str]:
    """Every accepted step, from every reachable configuration, that breaks "One LLM call per
    state (not 2 per turn)": a step into Planning, Exploring or Evaluating makes exactly one
    LLM call, spending one turn; any other step makes none."""
    found = []
    start = (table.initial.index, table.initial_vars())
    seen, frontier = {start}, [start]
    while frontier:
        config = frontier.pop()
        for result in accepted_steps(table, config):
            calls = [a for a in result.actions if a in LLM_CALLS]
            target = table.states[result.state].name
            spent = table.vars_dict(result.vars)["turns"] - table.vars_dict(config[1])["turns"]
            if (len(calls), spent if calls else 0) != ((1, 1) if target in CALLING else (0, 0)):
                found.append(f"{table.states[config[0]].name} -> {target}: {calls}, {spent} turn(s)")
            if (result.state, result.vars) not in seen:
                seen.add((result.state, result.vars))
                frontier.append((result.state, result.vars))
    return found


def test_one_llm_call_per_state(table: Table) -> None:
    assert calls_off_by_state(table) == []
    # A row that calls the model twice, or calls it without spending a turn, is caught.
    row = "set: {turns: turns + 1}, emit: [CallEvaluatorLlm_WorkingMemory]}"
    text = TABLE.read_text()
    assert text.count(row) == 1
    twice = text.replace(row, row.replace("]}", ", CallEvaluatorLlm_WorkingMemory]}"))
    free = text.replace(row, "emit: [CallEvaluatorLlm_WorkingMemory]}")
    for planted, problem in ((twice, "['CallEvaluatorLlm_WorkingMemory', 'CallEvaluatorLlm_WorkingMemory'], 1 turn(s)"),
                             (free, "['CallEvaluatorLlm_WorkingMemory'], 0 turn(s)")):
        found = calls_off_by_state(load_table_bytes(planted.encode(), str(TABLE)))
        assert found and all(f.endswith(f"-> Evaluating: {problem}") for f in found)


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_random_runs_end_answered_or_out_of_turns(table: Table, data: st.DataObject) -> None:
    config = (table.initial.index, table.initial_vars())
    while not table.states[config[0]].final:
        outcome = data.draw(st.sampled_from(accepted_steps(table, config)))
        config = (outcome.state, outcome.vars)
    assert table.states[config[0]].name in ("Answered", "OutOfTurns")


def test_demo_concludes_on_turn_five(table: Table) -> None:
    results = run(table, demo_events(table.machine))
    assert all(r.accepted for r in results)
    assert states(table, results)[-1] == "Answered" and table.vars_dict(results[-1].vars)["turns"] == 5
