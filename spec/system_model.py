"""The compiled system: tables composed into instances, links, environment and faults.

Format-neutral like ``Table``: the explorer, the Promela export, the diagrams and the
runtime read this model, never the YAML. Instances are numbered in file order, a
``count`` group's members consecutively; everything that names instances holds numbers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from agentfsm.spec.errors import Mark
from agentfsm.spec.expr import Value
from agentfsm.spec.model import Table
from agentfsm.spec.system_expr import SysFn

FaultKind = Literal["crash", "lose", "duplicate", "stall"]
# A linked message of a step: (action, event, params, goes to any one of its targets), its possible targets.
Route = tuple[tuple[str, str, tuple[Value, ...], bool], tuple[int, ...]]
FAULT_KINDS: tuple[FaultKind, ...] = ("crash", "lose", "duplicate", "stall")


@dataclass(frozen=True, eq=False)
class Instance:
    index: int
    name: str                    # agent, call[1]
    group: str                   # agent, call
    member: int                  # number within its group (0 for a single instance)
    table: Table
    capacity: int                # mailbox bound
    durable_state: bool          # a crash keeps the state (else: the initial state)
    durable_vars: frozenset[int]  # variable positions a crash keeps
    passive: bool = False        # a server: idle forever is not a deadlock


@dataclass(frozen=True)
class Group:
    name: str
    members: tuple[int, ...]
    counted: bool                # declared with 'count' (members NAME[i])
    symmetric: bool              # members interchangeable (nothing names one of them or routes by number)
    why_not: str = ""            # what broke the symmetry


@dataclass(frozen=True)
class Link:
    """An action of a source instance delivered as an event to target instances."""

    mark: Mark
    sources: frozenset[int]
    action: str
    mode: Literal["one", "all", "any", "arg"]
    targets: tuple[int, ...]     # the instance (one), the group's members (all, any, arg)
    route_arg: int               # mode 'arg': position of the arg naming the member
    event: str
    # Per event parameter, in declared order: the position of the action arg it takes, or -1 for
    # the sender's member number.
    params: tuple[int, ...]
    text: str                    # 'agent.ExecuteTools -> call[any].Requested' for reports
    rejectable: bool = False     # the target may reject it (a tolerated race)


@dataclass(frozen=True)
class EnvEvent:
    instances: tuple[int, ...]
    event: str
    choices: tuple[tuple[Value, ...], ...]  # every allowed tuple of parameter values
    guard: SysFn | None
    guard_text: str | None
    guard_promela: str | None


@dataclass(frozen=True)
class Fault:
    kind: FaultKind
    instances: frozenset[int]
    max: int


@dataclass(frozen=True)
class SysInvariant:
    name: str
    text: str
    mark: Mark
    fn: SysFn
    promela: str


@dataclass(frozen=True)
class StepPattern:
    """``call[*].Finished``: steps of these instances that are this event or fault kind."""

    instances: frozenset[int]
    name: str


@dataclass(frozen=True)
class SysProperty:
    name: str
    kind: Literal["always-reachable", "no-cycle-within"]
    mark: Mark
    text: str
    goal: SysFn | None = None
    steps: tuple[StepPattern, ...] = ()


@dataclass(frozen=True, eq=False)
class System:
    file: str
    name: str
    title: str
    description: str
    instances: tuple[Instance, ...]
    groups: Mapping[str, Group]
    links: tuple[Link, ...]
    links_by_source: Mapping[tuple[int, str], tuple[Link, ...]]
    environment: tuple[EnvEvent, ...]
    faults: tuple[Fault, ...]
    invariants: tuple[SysInvariant, ...]
    properties: tuple[SysProperty, ...]

    def rejectable(self, target: int, event: str) -> bool:
        """Whether a link declared that ``target`` may reject ``event`` (a race its table tolerates)."""
        return any(link.rejectable and link.event == event and target in link.targets for link in self.links)

    def routes(self, i: int, actions: Sequence[str], args: Sequence[tuple[Value, ...]]) -> tuple[Route, ...]:
        """Per linked message of instance ``i``'s step, in emission order: (message, its possible targets)."""
        result: list[Route] = []
        member = self.instances[i].member
        for action, values in zip(actions, args or tuple(() for _ in actions), strict=True):
            for link in self.links_by_source.get((i, action), ()):
                params = tuple(member if k < 0 else values[k] for k in link.params)
                message = (action, link.event, params, link.mode == "any")
                if link.mode in ("one", "any"):
                    result.append((message, link.targets))
                elif link.mode == "all":
                    result.extend((message, (t,)) for t in link.targets)
                else:
                    number = values[link.route_arg]
                    if isinstance(number, int) and 0 <= number < len(link.targets):
                        result.append((message, (link.targets[int(number)],)))
        return tuple(result)

    def instance(self, name: str) -> Instance:
        for inst in self.instances:
            if inst.name == name:
                return inst
        raise KeyError(name)

    def tables(self) -> list[Table]:
        """Each distinct compiled table once, in instance order."""
        seen: dict[int, Table] = {}
        for inst in self.instances:
            seen.setdefault(id(inst.table), inst.table)
        return list(seen.values())

    def summary(self) -> str:
        symmetric = [g.name for g in self.groups.values() if g.symmetric and len(g.members) > 1]
        return (f"{self.name}: {len(self.instances)} instances of {len(self.tables())} tables, "
                f"{len(self.links)} links, {len(self.environment)} environment events, "
                f"{sum(f.max for f in self.faults)} faults, {len(self.invariants)} invariants"
                + (f", symmetric groups: {', '.join(symmetric)}" if symmetric else ""))
