"""The crash checker's step cache: the same steps as the engine, each derived once."""

from __future__ import annotations

from agentfsm.faults.crash import MemoStepper
from agentfsm.impl.durable.run import EngineStepper
from agentfsm.spec import load_table
from agentfsm.spec.expr import Value
from agentfsm.spec.semantics import StepResult
from agentfsm.verify.table.explore import explore
from conftest import ROOT


class CountingStepper(EngineStepper):
    calls = 0

    def step(self, state: int, values: tuple[Value, ...], event: str, params: tuple[Value, ...]) -> StepResult:
        self.calls += 1
        return super().step(state, values, event, params)


def test_the_cache_gives_the_engine_s_step_and_runs_it_once_per_configuration_and_event() -> None:
    table = load_table(ROOT / "spec" / "loom-agent.yaml")
    ex = explore(table)
    memo, engine, counting = MemoStepper(table), EngineStepper(table), CountingStepper(table)
    memo.engine = counting
    steps = [(*ex.config(i), name, values) for i in range(ex.count) for name, values in ex.labels]
    for _ in range(2):
        for state, values, name, params in steps:
            assert memo.step(state, values, name, params) == engine.step(state, values, name, params)
    assert counting.calls == len(steps) > 100
