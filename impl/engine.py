"""The reference engine: a compiled table run by a shared ``transitions.Machine``.

``transitions`` builds heavy objects per machine (states, events, transition lists), so
one machine is compiled per table and cached; each ``Engine`` is a light model object
(``state`` plus a vars tuple) that the shared machine drives. The step is synchronous and
pure of I/O (Loom's inversion of control): the caller performs the returned actions and
feeds events back.

Exactly the semantics of ``agentfsm.spec.semantics.step``: the engine evaluates the
candidate rows' compiled guards (two enabled rows are a determinism error, never resolved
by row order), computes the chosen row's ``set`` with the reference ``apply_row`` and its
actions' arguments, leaves transient states with the reference ``settle``, and then has
``transitions`` execute the row's ``Transition`` on the engine (the state change and the
machine's callbacks). A step that fails changes nothing.
"""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from agentfsm.spec.expr import Value
from agentfsm.spec.model import Row, Table
from agentfsm.spec.semantics import SemanticError, Status, apply_row, emitted_args, enabled_rows, settle
from transitions import Event, EventData, Machine, State, Transition

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


@dataclass(frozen=True, slots=True)
class Candidate:
    """One row of a (state, event), with what firing it needs: its transition, the source
    state and event ``transitions`` reports to callbacks, the target (index, transient)."""

    row: Row
    transition: Transition
    source: State
    event: Event
    target: int
    transient: bool


class Compiled:
    """A table's shared ``transitions.Machine`` and, per (state, event), its rows beside their transitions.

    The engine chooses the row itself (every candidate's guard evaluated once, so two
    enabled rows are a determinism error, never resolved by row order) and hands the
    chosen ``Transition`` to ``transitions`` to execute: the state change and any callbacks
    registered on the machine. Selecting in ``Event.trigger`` instead cost each step the
    event queue, a partial, and per candidate its callback lists and conditions resolved
    through the machine (bench/bench_runtime.py measures the engine against a bare
    ``transitions.Machine``).
    """

    __slots__ = ("candidates", "machine", "names")

    def __init__(self, table: Table) -> None:
        states = [State(s.name, final=s.final) for s in table.states]
        self.machine = machine = Machine(model=None, states=states, initial=table.initial.name,
                                         auto_transitions=False, send_event=True, ignore_invalid_triggers=True)
        self.names = tuple(v.name for v in table.variables)
        self.candidates: dict[tuple[int, str], tuple[Candidate, ...]] = {}
        for (index, event), rows in table.rows_by_state_event.items():
            source = table.states[index].name
            for row in rows:
                machine.add_transition(event, source, row.target)
            transitions = machine.events[event].transitions[source]
            self.candidates[index, event] = tuple(
                Candidate(row, transition, machine.get_state(source), machine.events[event],
                          table.state_index[row.target], table.state(row.target).transient)
                for row, transition in zip(rows, transitions, strict=True))


_COMPILED: weakref.WeakKeyDictionary[Table, Compiled] = weakref.WeakKeyDictionary()


def compiled(table: Table) -> Compiled:
    """The one compiled form of ``table`` shared by every engine of it."""
    found = _COMPILED.get(table)
    if found is None:
        found = _COMPILED[table] = Compiled(table)
    return found


def compiled_machine(table: Table) -> Machine:
    """The one ``transitions.Machine`` shared by every engine of ``table``."""
    return compiled(table).machine


class Engine:
    """One running instance of a table: ``step(event, **params) -> Outcome``.

    ``state`` is the name of the current state (the attribute ``transitions`` drives);
    ``values`` the variables in declared order. A ``SemanticError`` (determinism, bounds,
    transient) leaves the engine in the configuration it had before the step.
    """

    __slots__ = ("_anomalies", "_compiled", "_fired", "_values", "state", "table")

    def __init__(self, table: Table, state: str | None = None,
                 values: Sequence[Value] | None = None) -> None:
        self.table = table
        self._compiled = compiled(table)
        self.state = table.initial.name
        self._values: tuple[Value, ...] = table.initial_vars()
        self._anomalies: list[Anomaly] | None = None
        self._fired: tuple[Row, ...] = ()
        if state is not None or values is not None:
            self.restore(state or self.state, values if values is not None else self._values)

    @property
    def _machine(self) -> Machine:
        return self._compiled.machine

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
        self._fired = ()
        if table.states[index].final:
            return Outcome(False, state, self.vars, (), "final")
        candidates = self._compiled.candidates.get((index, event))
        if candidates is not None:
            values = self._values
            env = (index, *values, *params)
            chosen: Candidate | None = None
            for candidate in candidates:
                guard = candidate.row.guard_fn
                if guard is None or guard(env):
                    if chosen is not None:
                        enabled = enabled_rows([c.row for c in candidates], env)
                        rows = ", ".join(str(r.index) for r in enabled)
                        raise SemanticError("determinism", f"rows {rows} are all enabled for {event} in {state}",
                                            enabled)
                    chosen = candidate
            if chosen is not None:
                return self._fire(chosen, env)
        unhandled = table.unhandled
        plain = tuple(() for _ in unhandled.emit)
        if unhandled.policy == "ignore":
            return Outcome(True, state, self.vars, unhandled.emit, "ignored", plain)
        self._record(state, event, params)
        return Outcome(False, state, self.vars, unhandled.emit, "rejected", plain)

    def _fire(self, chosen: Candidate, env: tuple[Value, ...]) -> Outcome:
        """The chosen row's effects, computed first (a failed step changes nothing), then its transition."""
        table = self.table
        row = chosen.row
        args = emitted_args(table, row, env)
        values = apply_row(table, row, env)
        fired = [row]
        actions = list(row.emit)
        target = chosen.target
        if chosen.transient:
            target, values = settle(table, target, values, fired, actions, args)
        state = self.state
        try:
            data = EventData(chosen.source, chosen.event, self._compiled.machine, self, (), {})
            data.transition = chosen.transition
            data.result = chosen.transition.execute(data)
        except BaseException:
            self.state = state
            raise
        if chosen.transient:
            self.state = table.states[target].name
        self._values = values
        self._fired = tuple(fired)
        return Outcome(True, self.state, dict(zip(self._compiled.names, values, strict=True)), tuple(actions),
                       "fired", tuple(args))

    def _record(self, state: str, event: str, params: tuple[Value, ...]) -> None:
        if self._anomalies is None:
            self._anomalies = []
        elif len(self._anomalies) >= MAX_ANOMALIES:
            del self._anomalies[0]
        self._anomalies.append(Anomaly(state, event, self.table.event(event).param_dict(params), self.vars))

    @property
    def last_rows(self) -> tuple[Row, ...]:
        """The rows fired by the latest step, in order (for logs and coverage)."""
        return self._fired
