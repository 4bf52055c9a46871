"""Partial-order reduction of system exploration: stubborn sets of instances.

Interleavings of steps that do not interact reach the same configurations in every
order; exploring one order is enough for the safety checks. At a configuration the
reducer grows a set ``I`` of instances, closed under "may interact before a member of
``I`` moves", and expands only the enabled steps of ``I`` when that is fewer than all of
them, none of them can change what an invariant reads or report a finding, and (the
breadth-first cycle proviso, checked by the explorer's callback) every one of them leads
to a configuration deeper than the current level. Each condition and why it suffices is
argued in docs/verifier.md ("Partial-order reduction of systems").

Resources a step reads or writes: ``("st", i)`` instance ``i``'s state, ``("v", i, k)``
its variable ``k``, ``("m", i)`` its mailbox, ``("x", i)`` its stalled flag, ``("f", f)``
the budget of fault ``f``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, TypeVar

from agentfsm.spec.system_model import System
from agentfsm.spec.system_trace import Label

if TYPE_CHECKING:
    from agentfsm.verify.system.step import Config

Resource = tuple[str, int] | tuple[str, int, int]


class Sending(Protocol):
    @property
    def target(self) -> int: ...


class StepEffect(Protocol):
    """What the reducer reads of a step's effect (``step.Effect``)."""

    @property
    def findings(self) -> Sequence[object]: ...

    @property
    def sent(self) -> Sequence[Sending]: ...


Successor = TypeVar("Successor", bound="tuple[Label, Config, StepEffect]")

# The names system expressions compile to in Promela (spec/system_expr.py); their text is
# the list of what an invariant or environment guard reads.
_STATE = re.compile(r"\bst(\d+)\b")
_VAR = re.compile(r"\bv(\d+)_(\w+)")
_MAILBOX = re.compile(r"\blen\(mb(\d+)\)")
_STALLED = re.compile(r"\bstall(\d+)\b")


def expression_reads(system: System, promela: str) -> set[Resource]:
    """The resources a compiled system expression reads, from its Promela text."""
    reads: set[Resource] = {("st", int(m.group(1))) for m in _STATE.finditer(promela)}
    for m in _VAR.finditer(promela):
        i = int(m.group(1))
        names = [v.name for v in system.instances[i].table.variables]
        reads.add(("v", i, names.index(m.group(2))))
    reads |= {("m", int(m.group(1))) for m in _MAILBOX.finditer(promela)}
    reads |= {("x", int(m.group(1))) for m in _STALLED.finditer(promela)}
    return reads


def instance_fields(system: System, i: int) -> set[Resource]:
    return {("st", i), *(("v", i, k) for k in range(len(system.instances[i].table.variables)))}


def invariant_reads(system: System) -> set[Resource]:
    """Everything an invariant reads: the system's, and each instance's table invariants (its
    state and every variable)."""
    reads: set[Resource] = set()
    for inv in system.invariants:
        reads |= expression_reads(system, inv.promela)
    for inst in system.instances:
        if inst.table.invariants:
            reads |= instance_fields(system, inst.index)
    return reads


def step_writes(config: Config, nxt: Config, label_instance: int) -> set[Resource]:
    """What one step changed, by comparing the configurations before and after."""
    insts, boxes, stalled, spent = config
    n_insts, n_boxes, n_stalled, n_spent = nxt
    writes: set[Resource] = set()
    i = label_instance
    if insts[i][0] != n_insts[i][0]:
        writes.add(("st", i))
    writes |= {("v", i, k) for k, (a, b) in enumerate(zip(insts[i][1], n_insts[i][1], strict=True)) if a != b}
    writes |= {("m", t) for t, (a, b) in enumerate(zip(boxes, n_boxes, strict=True)) if a != b}
    writes |= {("x", t) for t, (a, b) in enumerate(zip(stalled, n_stalled, strict=True)) if a != b}
    writes |= {("f", f) for f, (a, b) in enumerate(zip(spent, n_spent, strict=True)) if a != b}
    return writes


class Reducer:
    """Chooses, per configuration, the steps to expand (see the module docstring)."""

    def __init__(self, system: System) -> None:
        self.system = system
        n = len(system.instances)
        self.visible = invariant_reads(system)
        self.visible_state = [("st", i) in self.visible for i in range(n)]
        self.visible_slots = [[r[-1] for r in self.visible if r[0] == "v" and r[1] == i] for i in range(n)]
        self.visible_boxes = sorted(r[1] for r in self.visible if r[0] == "m")
        self.visible_stalls = sorted(r[1] for r in self.visible if r[0] == "x")
        self.every = set(range(n))
        # Per instance: the instances whose environment guards read what this resource holds.
        self.guard_readers: dict[Resource, set[int]] = {}
        self.blind_guards: set[int] = set()      # instances with a guard whose reads are unknown
        self.guard_reads: list[set[Resource]] = [set() for _ in range(n)]
        self.guard_blind = [False] * n           # an env event of this instance has an unknown guard
        for env in system.environment:
            if env.guard is None:
                continue
            if env.guard_promela is None:
                self.blind_guards.update(env.instances)
                for i in env.instances:
                    self.guard_blind[i] = True
                continue
            reads = expression_reads(system, env.guard_promela)
            for i in env.instances:
                self.guard_reads[i] |= reads
            for resource in reads:
                self.guard_readers.setdefault(resource, set()).update(env.instances)
        self.fault_members = [set(f.instances) for f in system.faults]
        self.future: dict[tuple[int, int], frozenset[int]] = {}
        self.pushers_memo: dict[tuple[int, ...], list[set[int]]] = {}

    def future_targets(self, k: int, state: int) -> frozenset[int]:
        """The mailboxes instance ``k`` may ever send to from ``state``: the links of every action a row
        can emit from a state its table's graph reaches (guards ignored; a crash restarts it)."""
        key = (k, state)
        cached = self.future.get(key)
        if cached is not None:
            return cached
        inst = self.system.instances[k]
        table = inst.table
        starts = {state}
        if any(k in f.instances and f.kind == "crash" for f in self.system.faults) and not inst.durable_state:
            starts.add(table.initial.index)
        seen, todo = set(starts), list(starts)
        actions: set[str] = set(table.unhandled.emit)
        while todo:
            q = todo.pop()
            rows = [row for (s, _), rs in table.rows_by_state_event.items() if s == q for row in rs]
            rows.extend(table.eventless_rows.get(q, ()))
            for row in rows:
                actions.update(row.emit)
                nxt = table.state_index[row.target]
                if nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        targets = frozenset(t for a in actions for link in self.system.links_by_source.get((k, a), ())
                            for t in link.targets)
        self.future[key] = targets
        return targets

    def pushers(self, states: tuple[int, ...]) -> list[set[int]]:
        """Per mailbox, the instances that may still send to it, with the instances in ``states``."""
        found = self.pushers_memo.get(states)
        if found is None:
            futures = [self.future_targets(k, state) for k, state in enumerate(states)]
            found = self.pushers_memo[states] = [{k for k, targets in enumerate(futures) if t in targets}
                                                 for t in self.every]
        return found

    def writers(self, pushers: Sequence[set[int]], resource: Resource) -> set[int]:
        """The instances whose steps may change ``resource``."""
        if resource[0] == "m":
            return {resource[1]} | pushers[resource[1]]
        if resource[0] == "f":
            return set(self.fault_members[resource[1]])
        return {resource[1]}

    def readers(self, writes: Iterable[Resource]) -> set[int]:
        """The instances whose environment guards read something in ``writes``."""
        found = set(self.blind_guards)
        for resource in writes:
            found |= self.guard_readers.get(resource, set())
        return found

    def closure(self, seed: int, pushers: Sequence[set[int]],
                steps: Mapping[int, list[tuple[Successor, set[Resource]]]], stop: set[int]) -> set[int] | None:
        """The smallest set of instances holding ``seed`` that no other instance can interact with before
        one of them moves; None as soon as it would hold an instance of ``stop``."""
        members = {seed}
        todo = [seed]
        while todo:
            i = todo.pop()
            need = set(pushers[i])                   # enable its messages, or race its mailbox
            if self.guard_blind[i]:
                need |= self.every
            for resource in self.guard_reads[i]:     # enable or disable its environment events
                need |= self.writers(pushers, resource)
            for (_, _, effect), writes in steps.get(i, ()):
                # Order and room in the mailboxes it sends to: their owners, and so (above) their other senders.
                need.update(sent.target for sent in effect.sent)
                for resource in writes:
                    if resource[0] == "f":           # a shared fault budget
                        need |= self.fault_members[resource[1]]
                need |= self.readers(writes)         # guards its step changes
            for k in need - members:
                if k in stop:
                    return None
                members.add(k)
                todo.append(k)
        return members

    def reduce(self, config: Config, successors: list[Successor],
               deeper: Callable[[Config], bool]) -> list[Successor]:
        """A subset of ``successors`` that is enough for the safety checks, or all of them. ``deeper``
        says whether a successor lies beyond the current breadth-first level (the cycle proviso)."""
        if len(successors) < 2:
            return successors
        steps: dict[int, list[tuple[Successor, set[Resource]]]] = {}
        visible: set[int] = set()    # instances with an enabled step that is visible
        movers: set[int] = set()
        for succ in successors:
            i = succ[0][1]
            movers.add(i)
            if i in visible:
                continue
            if self.shows(config, succ):
                visible.add(i)
            else:
                steps.setdefault(i, []).append((succ, step_writes(config, succ[1], i)))
        if len(movers) < 2 or visible >= movers:
            return successors
        pushers = self.pushers(tuple(conf[0] for conf in config[0]))
        best: list[Successor] | None = None
        for seed in sorted(movers - visible):
            members = self.closure(seed, pushers, steps, visible)   # a member with a visible step spoils it
            if members is None or members >= movers:
                continue
            chosen = [succ for i in sorted(members & movers) for succ, _ in steps[i]]
            if (best is None or len(chosen) < len(best)) and all(deeper(succ[1]) for succ in chosen):
                best = chosen
        return successors if best is None else best

    def shows(self, config: Config, succ: Successor) -> bool:
        """Whether a step is visible: it reports a finding, fails, or changes what an invariant reads."""
        label, nxt, effect = succ
        if nxt is config or effect.findings:
            return True
        i = label[1]
        before, after = config[0][i], nxt[0][i]
        if before is not after:
            if self.visible_state[i] and before[0] != after[0]:
                return True
            if any(before[1][k] != after[1][k] for k in self.visible_slots[i]):
                return True
        return any(config[1][t] != nxt[1][t] for t in self.visible_boxes) \
            or any(config[2][t] != nxt[2][t] for t in self.visible_stalls)
