"""The Loom seed's own examples (seed 000, "Testing Guidelines") against the engine."""

from __future__ import annotations

import pytest
from agentfsm.impl.engine import Engine, UnknownEvent, compiled_machine
from agentfsm.spec import Table
from agentfsm.spec.semantics import SemanticError
from strategies_tables import build, reachable


def test_agent_always_starts_in_waiting(loom: Table) -> None:
    assert Engine(loom).state == "WaitingForUserInput"


def test_transitions_to_calling_llm_on_user_input(loom: Table) -> None:
    engine = Engine(loom)
    outcome = engine.step("UserInput")
    assert outcome.accepted and outcome.actions == ("SendLlmRequest",)
    assert engine.state == outcome.state == "CallingLlm"


def test_shutdown_succeeds_from_any_state(loom: Table) -> None:
    configurations = reachable(loom)
    assert {loom.states[s].name for s, _ in configurations} >= {
        "WaitingForUserInput", "CallingLlm", "ExecutingTools", "PostToolsHook", "Error"}
    for state, values in configurations:
        engine = Engine(loom, loom.states[state].name, values)
        if engine.is_final:
            continue
        outcome = engine.step("ShutdownRequested")
        assert outcome.accepted and outcome.actions == ("Shutdown",)
        assert engine.state == "ShuttingDown"


def test_completes_full_conversation_cycle(loom: Table) -> None:
    engine = Engine(loom)
    engine.step("UserInput")
    assert engine.step("TextDelta").actions == ("DisplayMessage",)
    outcome = engine.step("LlmCompleted", tool_calls=0)
    assert outcome.state == "WaitingForUserInput" and outcome.actions == ("WaitForInput",)


def test_tool_batch_with_mutation_runs_the_hook(loom: Table) -> None:
    engine = Engine(loom)
    engine.step("UserInput")
    assert engine.step("LlmCompleted", tool_calls=2).actions == ("ExecuteTools",)
    assert engine.step("ToolCompleted", mutating=False).state == "ExecutingTools"
    outcome = engine.step("ToolCompleted", mutating=True)
    assert (outcome.state, outcome.actions) == ("PostToolsHook", ("RunPostToolsHook",))
    outcome = engine.step("PostToolsHookCompleted", action_taken=True)
    assert (outcome.state, outcome.actions, outcome.vars["mutated"]) == ("CallingLlm", ("SendLlmRequest",), False)


def test_retries_then_give_up(loom: Table) -> None:
    engine = Engine(loom)
    engine.step("UserInput")
    for attempt in range(1, 4):
        assert engine.step("LlmError").vars["retries"] == attempt
        assert engine.step("RetryTimeoutFired").state == "CallingLlm"
    outcome = engine.step("LlmError")
    assert (outcome.state, outcome.actions) == ("WaitingForUserInput", ("DisplayError",))


def test_invalid_transition_is_an_anomaly_answered_by_wait_for_input(loom: Table) -> None:
    engine = Engine(loom)
    outcome = engine.step("ToolCompleted", mutating=True)
    assert not outcome.accepted and outcome.status == "rejected" and outcome.actions == ("WaitForInput",)
    [anomaly] = engine.anomalies
    assert (anomaly.state, anomaly.event, dict(anomaly.params)) == ("WaitingForUserInput", "ToolCompleted",
                                                                    {"mutating": True})


def test_final_state_accepts_nothing(loom: Table) -> None:
    engine = Engine(loom)
    engine.step("ShutdownRequested")
    outcome = engine.step("UserInput")
    assert (outcome.accepted, outcome.status, outcome.actions) == (False, "final", ())
    assert engine.anomalies == ()


def test_bad_events_and_params_are_clear_errors(loom: Table) -> None:
    engine = Engine(loom)
    with pytest.raises(UnknownEvent, match="no event 'Nope'"):
        engine.step("Nope")
    engine.step("UserInput")
    with pytest.raises(ValueError, match="tool_calls"):
        engine.step("LlmCompleted", tool_calls=9)
    with pytest.raises(ValueError, match="needs parameter"):
        engine.step("LlmCompleted")
    with pytest.raises(ValueError, match="must be true or false"):
        engine.step("ToolCompleted", mutating=1)
    assert engine.state == "CallingLlm"


def test_engines_share_one_compiled_machine(loom: Table) -> None:
    a, b = Engine(loom), Engine(loom)
    assert compiled_machine(loom) is a._machine is b._machine
    a.step("UserInput")
    assert (a.state, b.state) == ("CallingLlm", "WaitingForUserInput")


def test_transitions_executes_the_fired_row_with_the_machines_callbacks() -> None:
    table = rule_table([{"from": "A", "on": "E", "to": "B", "set": {"x": "1"}}])
    machine = compiled_machine(table)
    seen: list[tuple[str, str, str]] = []
    machine.get_state("B").on_enter.append(lambda data: seen.append((data.event.name, data.transition.source,
                                                                     data.model.state)))
    engine = Engine(table)
    assert engine.step("E").state == "B"
    assert seen == [("E", "A", "B")]


def test_a_failing_callback_leaves_the_engine_unchanged() -> None:
    table = rule_table([{"from": "A", "on": "E", "to": "B", "set": {"x": "1"}}])

    def refuse(data: object) -> None:
        raise RuntimeError("refused")
    compiled_machine(table).get_state("B").on_enter.append(refuse)
    engine = Engine(table)
    with pytest.raises(RuntimeError, match="refused"):
        engine.step("E")
    assert (engine.state, engine.values, engine.last_rows) == ("A", (0,), ())


def test_restore_rejects_impossible_configurations(loom: Table) -> None:
    with pytest.raises(ValueError, match="transient"):
        Engine(loom, "ProcessingLlmResponse")
    with pytest.raises(ValueError, match="retries"):
        Engine(loom, "CallingLlm", (9, 0, 0, False, 0))
    with pytest.raises(ValueError, match="no state"):
        Engine(loom, "Nowhere")


def rule_table(rows: list[dict[str, object]], transient: bool = False) -> Table:
    states: dict[str, object] = {"A": {"initial": True}, "B": {}}
    if transient:
        states["T"] = {"transient": True}
    return build({"format": 1, "machine": "t", "variables": {"x": {"type": "int", "min": 0, "max": 1, "init": 0}},
                  "states": states, "events": {"E": {}}, "actions": {}, "transitions": rows})


@pytest.mark.parametrize(("kind", "rows", "transient"), [
    ("determinism", [{"from": "A", "on": "E", "to": "B"}, {"from": "*", "on": "E", "to": "A"}], False),
    ("bounds", [{"from": "A", "on": "E", "to": "B", "set": {"x": "x + 2"}}], False),
    ("transient", [{"from": "A", "on": "E", "to": "T"}, {"from": "T", "when": "x > 0", "to": "B"}], True),
    ("transient", [{"from": "A", "on": "E", "to": "T"}, {"from": "T", "to": "T"}], True),
])
def test_rule_violations_raise_and_leave_the_engine_unchanged(kind: str, rows: list[dict[str, object]],
                                                                transient: bool) -> None:
    engine = Engine(rule_table(rows, transient))
    with pytest.raises(SemanticError) as caught:
        engine.step("E")
    assert caught.value.kind == kind
    assert (engine.state, engine.values) == ("A", (0,))


def test_restore_checks_a_huge_range_by_its_bounds() -> None:
    table = build({"format": 1, "machine": "t", "states": {"A": {"initial": True}}, "events": {"E": {}},
                   "variables": {"n": {"type": "int", "min": 0, "max": 10**15, "init": 0},
                                 "b": {"type": "bool", "init": False}},
                   "actions": {}, "transitions": [{"from": "A", "on": "E", "to": "A"}]})
    engine = Engine(table)
    engine.restore("A", (10**15, True))       # building the range would exhaust memory
    assert engine.values == (10**15, True)
    bad_values: list[tuple[object, object]] = [(10**15 + 1, True), (-1, False), (1, 1), (True, False), (0.0, False)]
    for bad in bad_values:
        with pytest.raises(ValueError, match="outside the domain"):
            engine.restore("A", bad)  # type: ignore[arg-type]
