"""Benchmark of the reference engine against bare `transitions` and a plain dict dispatch.

All figures come from the same run and are printed as ratios to the bare
`transitions.Machine` baseline, so they compare across machines; rates are in CPU time
(``time.process_time``), so the machine's other load does not count. Workload: a fixed cycle
of events through the Loom table that visits every observable state and the transient one.

    .venv/bin/python bench/bench_runtime.py [--events N] [--engines N]
"""

from __future__ import annotations

import argparse
import gc
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

from agentfsm.impl.engine import Engine, compiled_machine
from agentfsm.spec import Table, load_table
from agentfsm.spec.bundled import bundled_tables
from agentfsm.spec.expr import Value
from agentfsm.spec.semantics import step
from figures import record
from transitions import EventData, Machine, State

CYCLE: list[tuple[str, dict[str, Value]]] = [
    ("UserInput", {}), ("TextDelta", {}), ("ToolCallDelta", {}), ("LlmCompleted", {"tool_calls": 2}),
    ("ToolProgress", {}), ("ToolCompleted", {"mutating": False}), ("ToolCompleted", {"mutating": True}),
    ("PostToolsHookCompleted", {"action_taken": True}), ("LlmError", {}), ("RetryTimeoutFired", {}),
    ("LlmCompleted", {"tool_calls": 0}), ("RetryTimeoutFired", {}),  # the last one is rejected
]


class BareModel:
    """What a user writes with `transitions` alone: one Machine per model, guards as conditions."""

    def __init__(self, table: Table) -> None:
        self.table = table
        self.values: tuple[Value, ...] = table.initial_vars()
        self.env: tuple[Value, ...] = ()
        self.actions: list[str] = []
        states = [State(s.name, final=s.final) for s in table.states]
        self.machine = Machine(model=self, states=states, initial=table.initial.name, auto_transitions=False,
                               send_event=True, ignore_invalid_triggers=True)
        for row in table.rows:
            sources: list[Any] = ([s.name for s in table.states if not s.final and not s.transient]
                       if row.wildcard else [row.source])
            conditions = [self._condition(row.guard_fn)] if row.guard_fn else None
            self.machine.add_transition(row.event or "eventless", sources, row.target, conditions=conditions,
                                        after=[self._effect(row)])

    @staticmethod
    def _condition(guard: Callable[[Any], Any]) -> Any:
        return lambda ed: bool(guard(ed.model.env))

    def _effect(self, row: Any) -> Callable[[EventData], None]:
        slots = [(u.slot - 1, u.fn) for u in row.updates]

        def effect(ed: EventData) -> None:
            model: BareModel = ed.model  # type: ignore[assignment]
            values = list(model.values)
            for slot, fn in slots:
                values[slot] = fn(model.env)
            model.values = tuple(values)
            model.actions.extend(row.emit)
        return effect

    def fire(self, event: str, params: tuple[Value, ...]) -> tuple[str, ...]:
        self.actions = []
        self.env = (self.table.state_index[self.state], *self.values, *params)  # type: ignore[attr-defined]
        if not self.trigger(event):  # type: ignore[attr-defined]
            return self.table.unhandled.emit
        while self.table.state(self.state).transient:  # type: ignore[attr-defined]
            self.env = (self.table.state_index[self.state], *self.values)  # type: ignore[attr-defined]
            self.trigger("eventless")  # type: ignore[attr-defined]
        return tuple(self.actions)


class DictDispatch:
    """The floor: a dict from (state, event) to rows, first enabled row wins, no checks at all."""

    def __init__(self, table: Table) -> None:
        self.table = table
        self.state = table.initial.index
        self.values = table.initial_vars()
        self.rows = dict(table.rows_by_state_event)
        self.eventless = dict(table.eventless_rows)
        self.targets = {row: table.state_index[row.target] for row in table.rows}

    def fire(self, event: str, params: tuple[Value, ...]) -> tuple[str, ...]:
        actions: list[str] = []
        rows = self.rows.get((self.state, event))
        if rows is None:
            return self.table.unhandled.emit
        env: tuple[Value, ...] = (self.state, *self.values, *params)
        while rows:
            for row in rows:
                if row.guard_fn is None or row.guard_fn(env):
                    values = list(self.values)
                    for update in row.updates:
                        values[update.slot - 1] = update.fn(env)
                    self.values = tuple(values)
                    self.state = self.targets[row]
                    actions.extend(row.emit)
                    break
            else:
                return tuple(actions) if actions else self.table.unhandled.emit
            rows = self.eventless.get(self.state, ())
            env = (self.state, *self.values)
        return tuple(actions)


def events_per_second(contenders: dict[str, Callable[[str, tuple[Value, ...]], object]],
                      workload: list[tuple[str, tuple[Value, ...]]], repeat: int,
                      rounds: int = 5) -> dict[str, float]:
    """Best rate in CPU time of each contender over interleaved rounds, so drift in load hits all alike."""
    best = dict.fromkeys(contenders, float("inf"))
    for _ in range(rounds):
        for label, fire in contenders.items():
            start = time.process_time()
            for _ in range(repeat):
                for name, params in workload:
                    fire(name, params)
            best[label] = min(best[label], time.process_time() - start)
    return {label: repeat * len(workload) / seconds for label, seconds in best.items()}


def construction(make: Callable[[], object], count: int, rounds: int) -> tuple[float, float]:
    """Seconds and bytes per instance for ``count`` live instances (best of ``rounds``)."""
    best_time, best_size = float("inf"), float("inf")
    for _ in range(rounds):
        gc.collect()
        tracemalloc.start()
        start = time.perf_counter()
        keep = [make() for _ in range(count)]
        elapsed = time.perf_counter() - start
        size, _ = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        del keep
        best_time, best_size = min(best_time, elapsed / count), min(best_size, size / count)
    return best_time, best_size


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=30_000, help="events per timing run (default 30000)")
    parser.add_argument("--engines", type=int, default=10_000, help="engines for the memory figures")
    args = parser.parse_args()
    loom = load_table(next(p for p in bundled_tables() if p.name == "loom-agent.yaml"))
    workload = [(name, loom.event(name).param_values(params)) for name, params in CYCLE]
    repeat = max(1, args.events // len(workload))

    engine, bare, plain = Engine(loom), BareModel(loom), DictDispatch(loom)
    for name, params in workload:  # the three agree on the workload before they are timed
        assert engine.step_values(name, params).actions == bare.fire(name, params) == plain.fire(name, params)
    ref = [loom.initial.index, loom.initial_vars()]

    def reference(name: str, params: tuple[Value, ...]) -> None:
        result = step(loom, ref[0], ref[1], name, params)  # type: ignore[arg-type]
        ref[0], ref[1] = result.state, result.vars

    named = {(name, params): loom.event(name).param_dict(params) for name, params in workload}

    def engine_step(name: str, params: tuple[Value, ...]) -> None:
        engine.step(name, **named[name, params])

    rates = events_per_second({
        "bare transitions.Machine trigger": bare.fire,
        "Engine.step_values (params tuple)": engine.step_values,
        "Engine.step (named params, validated)": engine_step,
        "semantics.step (reference, no transitions)": reference,
        "plain dict dispatch": plain.fire,
    }, workload, repeat)
    base = rates["bare transitions.Machine trigger"]
    print(f"runtime: events/s (CPU) on the Loom table ({repeat * len(workload)} events per run, best of 5 rounds)")
    for label, rate in rates.items():
        print(f"  {label:44s} {rate:>12,.0f} ev/s   {rate / base:6.2f}x bare transitions")
    ours = rates["Engine.step_values (params tuple)"]
    print(f"  overhead of Engine over bare transitions: {base / ours - 1:+.0%} time per event")
    record("runtime-rates", [{"contender": label, "events/s (CPU)": round(rate), "× bare transitions": rate / base}
                             for label, rate in rates.items()],
           table="spec/loom-agent.yaml", note=f"{repeat * len(workload)} events of a fixed cycle per round, "
           "best of 5 interleaved rounds.")

    print("runtime: construction and memory per engine")
    fresh = load_table(loom.file)
    start = time.perf_counter()
    compiled_machine(fresh)
    print(f"  compiling the shared machine (once per table) {(time.perf_counter() - start) * 1e6:10.1f} us")
    rows = []
    for count in (1, args.engines):
        for label, make in (("Engine (shared machine)", lambda: Engine(loom)),
                            ("bare transitions.Machine", lambda: BareModel(loom))):
            seconds, size = construction(make, count, rounds=20 if count == 1 else 2)
            print(f"  {count:>6} x {label:26s} {seconds * 1e6:10.1f} us  {size / 1024:9.2f} KiB each")
            rows.append({"instances": count, "model": label, "µs each (wall)": seconds * 1e6,
                         "KiB each": size / 1024})
    record("runtime-construction", rows, table="spec/loom-agent.yaml",
           note="Best of 20 rounds for one instance, 2 for many; memory from tracemalloc.")


if __name__ == "__main__":
    main()
