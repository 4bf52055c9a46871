"""The compiled table: one immutable, format-neutral model shared by every part.

The runtime, the verifier, the diagram renderers and the vector generator all read this
model; none of them re-reads YAML or re-interprets expression text. Expressions are kept
both as IR (for printing, mutation and export to other languages) and as compiled
closures over an environment tuple ``(state index, *variables, *event parameters)``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from agentfsm.spec.errors import Mark
from agentfsm.spec.expr import Env, Expr, Type, Value

WILDCARD = "*"


class Ranged:
    """What variables and parameters share: a type and an inclusive range (ints)."""

    type: Type
    lo: int
    hi: int

    @property
    def domain(self) -> tuple[Value, ...]:
        """Every value, in order (builds the whole range: for enumeration, not for checks)."""
        if self.type == "bool":
            return (False, True)
        return tuple(range(self.lo, self.hi + 1))

    @property
    def size(self) -> int:
        """How many values there are, by arithmetic (a range of 10^20 costs nothing)."""
        return 2 if self.type == "bool" else self.hi - self.lo + 1

    def admits(self, value: object) -> bool:
        """Whether ``value`` has the type and lies in the range, without building the range."""
        if self.type == "bool":
            return isinstance(value, bool)
        return isinstance(value, int) and not isinstance(value, bool) and self.lo <= value <= self.hi


@dataclass(frozen=True)
class Variable(Ranged):
    name: str
    type: Type
    lo: int
    hi: int
    init: Value
    description: str = ""


@dataclass(frozen=True)
class Param(Ranged):
    name: str
    type: Type
    lo: int
    hi: int


@dataclass(frozen=True)
class State:
    name: str
    index: int
    initial: bool = False
    final: bool = False
    transient: bool = False
    description: str = ""


@dataclass(frozen=True)
class Event:
    name: str
    params: tuple[Param, ...] = ()
    description: str = ""

    def param_values(self, given: Mapping[str, object]) -> tuple[Value, ...]:
        """Order ``given`` as the event declares its parameters; raise ValueError if off."""
        unknown = set(given) - {p.name for p in self.params}
        if unknown:
            raise ValueError(f"event {self.name} has no parameter {sorted(unknown)[0]!r}")
        values: list[Value] = []
        for p in self.params:
            if p.name not in given:
                raise ValueError(f"event {self.name} needs parameter {p.name!r}")
            value = given[p.name]
            if not p.admits(value):
                want = "true or false" if p.type == "bool" else f"an integer in {p.lo}..{p.hi}"
                raise ValueError(f"parameter {p.name!r} of {self.name} must be {want}, got {value!r}")
            values.append(value)  # type: ignore[arg-type]
        return tuple(values)

    def param_dict(self, values: Sequence[Value]) -> dict[str, Value]:
        return {p.name: v for p, v in zip(self.params, values, strict=True)}


@dataclass(frozen=True)
class Action:
    name: str
    effect: Literal["internal", "external"] = "internal"
    idempotent: bool = True
    description: str = ""
    approval: bool = False                  # asks the user; pending until the next accepted event
    approval_lifetime: float | None = None  # seconds an approval stays valid (None: no limit)
    params: tuple[Param, ...] = ()          # values each emit of it carries (format 1 actions have none)


@dataclass(frozen=True)
class Arg:
    """One parameter of an emitted action, computed from the emitting row's environment."""

    param: str
    expr: Expr
    text: str
    fn: Callable[[Env], Any] = field(compare=False, repr=False)


@dataclass(frozen=True)
class Update:
    var: str
    slot: int
    expr: Expr
    text: str
    fn: Callable[[Env], Any] = field(compare=False, repr=False)


@dataclass(frozen=True, eq=False)
class Row:
    """One transition row. ``index`` is 1-based in table order (vectors cite ``row:N``)."""

    index: int
    mark: Mark
    source: str
    event: str | None
    target: str
    guard: Expr | None
    guard_text: str | None
    updates: tuple[Update, ...]
    emit: tuple[str, ...]
    description: str
    guard_fn: Callable[[Env], Any] | None = field(repr=False)
    # Per entry of ``emit``, its args in the action's declared parameter order.
    emit_args: tuple[tuple[Arg, ...], ...] = field(default=(), repr=False)

    @property
    def wildcard(self) -> bool:
        return self.source == WILDCARD

    @property
    def eventless(self) -> bool:
        return self.event is None

    def enabled(self, env: Env) -> bool:
        return self.guard_fn is None or bool(self.guard_fn(env))

    def label(self) -> str:
        """``Event [guard] / actions`` as diagrams and reports show a row."""
        text = self.event or ""
        if self.guard_text:
            text += f" [{self.guard_text}]" if text else f"[{self.guard_text}]"
        if self.emit:
            text += " / " + ", ".join(self.emit)
        return text


@dataclass(frozen=True)
class Unhandled:
    """What an event with no enabled row does. ``anomaly`` is what a runtime does with a rejected
    event besides recording it: ``halt`` stops automatic progress until a user decides, ``log``
    warns and goes on; ``feed`` names an event the runtime delivers next (e.g. into an error state)."""

    policy: Literal["reject", "ignore"] = "reject"
    emit: tuple[str, ...] = ()
    anomaly: Literal["halt", "log"] = "halt"
    feed: str | None = None


@dataclass(frozen=True)
class Invariant:
    name: str
    expr: Expr
    text: str
    mark: Mark
    fn: Callable[[Env], Any] = field(compare=False, repr=False)


PropertyKind = Literal["always-reachable", "no-cycle-within", "eventually", "leads-to", "always"]
PROPERTY_KINDS: tuple[PropertyKind, ...] = ("always-reachable", "no-cycle-within", "eventually", "leads-to", "always")


@dataclass(frozen=True)
class Property:
    """A temporal property; ``kind`` says which fields are meaningful.

    ``goal`` is the set of configurations the property is about (for ``always-reachable``,
    ``eventually``, the ``to`` of ``leads-to``, and the expression of ``always``), compiled
    to an expression over the state and the variables (a list of states becomes
    ``state in (...)``); ``source`` is the ``from`` of ``leads-to``."""

    name: str
    kind: PropertyKind
    mark: Mark
    target: str | None = None   # always-reachable of one state name (kept for readers of the old form)
    events: tuple[str, ...] = ()
    goal: Expr | None = None
    goal_text: str = ""
    source: Expr | None = None
    source_text: str = ""


Fairness = Literal["weak", "strong"]


@dataclass(frozen=True, eq=False)
class Table:
    file: str
    machine: str
    title: str
    source: str
    description: str
    constants: Mapping[str, Value]
    variables: tuple[Variable, ...]
    states: tuple[State, ...]
    events: tuple[Event, ...]
    actions: tuple[Action, ...]
    rows: tuple[Row, ...]
    unhandled: Unhandled
    invariants: tuple[Invariant, ...]
    properties: tuple[Property, ...]
    state_index: Mapping[str, int] = field(repr=False)
    event_index: Mapping[str, Event] = field(repr=False)
    action_index: Mapping[str, Action] = field(repr=False)
    rows_by_state_event: Mapping[tuple[int, str], tuple[Row, ...]] = field(repr=False)
    eventless_rows: Mapping[int, tuple[Row, ...]] = field(repr=False)
    fairness: Mapping[str, Fairness] = field(default_factory=dict)   # event -> kind; none by default
    runtime: Mapping[str, Value] = field(default_factory=dict)
    """Constants a runtime uses instead of the declared ones (the verifier's bounds), e.g. the
    tool calls one response may hold; ``--set`` overrides both."""

    @property
    def initial(self) -> State:
        return next(s for s in self.states if s.initial)

    def initial_vars(self) -> tuple[Value, ...]:
        return tuple(v.init for v in self.variables)

    def state(self, name: str) -> State:
        return self.states[self.state_index[name]]

    def event(self, name: str) -> Event:
        return self.event_index[name]

    def candidates(self, state: int, event: str) -> tuple[Row, ...]:
        """Rows that apply to an event in a state: its own rows, then wildcard rows."""
        return self.rows_by_state_event.get((state, event), ())

    def vars_dict(self, values: Sequence[Value]) -> dict[str, Value]:
        return {v.name: x for v, x in zip(self.variables, values, strict=True)}

    def summary(self) -> str:
        return (f"{self.machine}: {len(self.states)} states, {len(self.events)} events, "
                f"{len(self.actions)} actions, {len(self.rows)} rows, {len(self.variables)} variables")
