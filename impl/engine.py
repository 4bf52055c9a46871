"""The reference engine: a compiled table run by a shared ``transitions.Machine``.

``transitions`` builds heavy objects per machine (states, events, transition lists), so
one machine is compiled per table and cached; each ``Engine`` is a light model object
(``state`` plus a vars tuple) that the shared machine drives through
``Event.trigger(model)``. The step is synchronous and pure of I/O (Loom's inversion of
control): the caller performs the returned actions and feeds events back.

Exactly the semantics of ``agentfsm.spec.semantics.step``: conditions are the rows'
compiled guards, the ``before`` callback of the row that fires checks the candidates
``transitions`` has not yet tried (so two enabled rows are a determinism error, never
resolved by row order) and applies ``set`` with the reference ``apply_row``; transient
states are left within the step by the reference ``settle``.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentfsm.spec.expr import Value
from agentfsm.spec.model import Row, Table
from agentfsm.spec.semantics import SemanticError, Status, apply_row, emitted_args, settle
from transitions import EventData, Machine, State

__all__ = ["Anomaly", "Engine", "Outcome", "SemanticError", "UnknownEvent", "compiled_machine"]

MAX_ANOMALIES = 1000


class UnknownEvent(ValueError):
    """The table declares no event of this name."""


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one event did: accepted, the stable state reached, variables, actions to perform."""

    accepted: bool
    state: str
    vars: Mapping[str, Value]
    actions: tuple[str, ...]
    status: Status
    args: tuple[tuple[Value, ...], ...] = ()  # per action, its parameter values (declared order)


@dataclass(frozen=True, slots=True)
class Anomaly:
    """A rejected event: the configuration it arrived in, for logs and diagnosis."""

    state: str
    event: str
    params: Mapping[str, Value]
    vars: Mapping[str, Value]


class _Fire:
    """The ``before`` callback of one (state, event, row): determinism check, ``set``, ``emit``."""

    __slots__ = ("later", "row", "table")

    def __init__(self, table: Table, row: Row, later: tuple[Row, ...]) -> None:
        self.table = table
        self.row = row
        self.later = later

    def __call__(self, event_data: EventData) -> None:
        engine: Engine = event_data.model  # type: ignore[assignment]
        env = engine._env
        row = self.row
        if self.later:
            clash = [other for other in self.later if other.enabled(env)]
            if clash:
                rows = ", ".join(str(r.index) for r in (row, *clash))
                raise SemanticError("determinism", f"rows {rows} are all enabled for {row.event} in "
                                    f"{engine.state}", [row, *clash])
        engine._values = apply_row(self.table, row, env)
        engine._fired.append(row)
        engine._actions.extend(row.emit)
        engine._args.extend(emitted_args(self.table, row, env))


def _condition(row: Row) -> Any:
    guard = row.guard_fn
    assert guard is not None

    def check(event_data: EventData) -> bool:
        return bool(guard(event_data.model._env))  # type: ignore[attr-defined]
    return check


def _build_machine(table: Table) -> Machine:
    states = [State(s.name, final=s.final) for s in table.states]
    machine = Machine(model=None, states=states, initial=table.initial.name, auto_transitions=False,
                      send_event=True, ignore_invalid_triggers=True)
    for (index, event), rows in table.rows_by_state_event.items():
        source = table.states[index].name
        for k, row in enumerate(rows):
            conditions = [_condition(row)] if row.guard_fn is not None else None
            machine.add_transition(event, source, row.target, conditions=conditions,
                                   before=[_Fire(table, row, rows[k + 1:])])
    return machine


_MACHINES: weakref.WeakKeyDictionary[Table, Machine] = weakref.WeakKeyDictionary()


def compiled_machine(table: Table) -> Machine:
    """The one ``transitions.Machine`` shared by every engine of ``table``."""
    machine = _MACHINES.get(table)
    if machine is None:
        machine = _MACHINES[table] = _build_machine(table)
    return machine


class Engine:
    """One running instance of a table: ``step(event, **params) -> Outcome``.

    ``state`` is the name of the current state (the attribute ``transitions`` drives);
    ``values`` the variables in declared order. A ``SemanticError`` (determinism, bounds,
    transient) leaves the engine in the configuration it had before the step.
    """

    __slots__ = ("_actions", "_anomalies", "_args", "_env", "_events", "_fired", "_machine", "_values", "state",
                 "table")

    def __init__(self, table: Table, state: str | None = None,
                 values: Sequence[Value] | None = None) -> None:
        self.table = table
        self._machine = compiled_machine(table)
        self._events = self._machine.events
        self.state = table.initial.name
        self._values: tuple[Value, ...] = table.initial_vars()
        self._anomalies: list[Anomaly] | None = None
        self._env: tuple[Value, ...] = ()
        self._actions: list[str] = []
        self._args: list[tuple[Value, ...]] = []
        self._fired: list[Row] = []
        if state is not None or values is not None:
            self.restore(state or self.state, values if values is not None else self._values)

    # -- configuration -------------------------------------------------------------------

    @property
    def values(self) -> tuple[Value, ...]:
        return self._values

    @property
    def vars(self) -> dict[str, Value]:
        return self.table.vars_dict(self._values)

    @property
    def state_index(self) -> int:
        return self.table.state_index[self.state]

    @property
    def is_final(self) -> bool:
        return self.table.states[self.state_index].final

    @property
    def anomalies(self) -> tuple[Anomaly, ...]:
        """Rejected events, oldest first (the most recent ``MAX_ANOMALIES``)."""
        return tuple(self._anomalies or ())

    def reset(self) -> None:
        self.state = self.table.initial.name
        self._values = self.table.initial_vars()
        self._anomalies = None

    def restore(self, state: str, values: Sequence[Value]) -> None:
        """Put the engine in a given stable configuration (recovery, tests, the verifier)."""
        if state not in self.table.state_index:
            raise ValueError(f"{self.table.machine} has no state {state!r}")
        if self.table.state(state).transient:
            raise ValueError(f"state {state} is transient: a configuration never rests there")
        if len(values) != len(self.table.variables):
            raise ValueError(f"expected {len(self.table.variables)} variable values, got {len(values)}")
        for var, value in zip(self.table.variables, values, strict=True):
            if not var.admits(value):
                raise ValueError(f"value {value!r} is outside the domain of {var.name}")
        self.state = state
        self._values = tuple(values)

    # -- stepping ------------------------------------------------------------------------

    def step(self, event: str, /, **params: Value) -> Outcome:
        """Deliver an event with named parameters (validated against the table)."""
        try:
            decl = self.table.event_index[event]
        except KeyError:
            raise UnknownEvent(f"{self.table.machine} has no event {event!r}") from None
        return self.step_values(event, decl.param_values(params))

    def step_values(self, event: str, params: tuple[Value, ...] = ()) -> Outcome:
        """Deliver an event with parameter values already validated, in declared order."""
        table = self.table
        state = self.state
        index = table.state_index[state]
        actions = self._actions = []
        args = self._args = []
        fired = self._fired = []
        if table.states[index].final:
            return Outcome(False, state, self.vars, (), "final")
        values = self._values
        self._env = (index, *values, *params)
        fired_ok = False
        try:
            fired_ok = self._events[event].trigger(self) if (index, event) in table.rows_by_state_event else False
            if fired_ok:
                target = table.state_index[self.state]
                if table.states[target].transient:
                    target, self._values = settle(table, target, self._values, fired, actions, args)
                    self.state = table.states[target].name
        except BaseException:
            self.state, self._values = state, values
            raise
        finally:
            self._env = ()
        if fired_ok:
            return Outcome(True, self.state, self.vars, tuple(actions), "fired", tuple(args))
        unhandled = table.unhandled
        plain = tuple(() for _ in unhandled.emit)
        if unhandled.policy == "ignore":
            return Outcome(True, state, self.vars, unhandled.emit, "ignored", plain)
        self._record(state, event, params)
        return Outcome(False, state, self.vars, unhandled.emit, "rejected", plain)

    def _record(self, state: str, event: str, params: tuple[Value, ...]) -> None:
        if self._anomalies is None:
            self._anomalies = []
        elif len(self._anomalies) >= MAX_ANOMALIES:
            del self._anomalies[0]
        self._anomalies.append(Anomaly(state, event, self.table.event(event).param_dict(params), self.vars))

    @property
    def last_rows(self) -> tuple[Row, ...]:
        """The rows fired by the latest step, in order (for logs and coverage)."""
        return tuple(self._fired)
