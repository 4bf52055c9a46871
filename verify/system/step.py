"""One step of a system: its configurations and the successor function, which the scalar explorer
(``explore``) and the batches (``batched``) both drive; also where an exploration stops past its
limit."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

from agentfsm.spec.expr import Value
from agentfsm.spec.semantics import SemanticError, StepResult, step
from agentfsm.spec.system_model import Route, System
from agentfsm.spec.system_trace import Label
from agentfsm.verify.table.explore import ExplorationLimit

InstConf = tuple[int, tuple[Value, ...]]
Message = tuple[str, tuple[Value, ...]]
Config = tuple[tuple[InstConf, ...], tuple[tuple[Message, ...], ...], tuple[bool, ...], tuple[int, ...]]

FAULT_STEPS = ("crash", "lose", "duplicate", "stall")


@dataclass(frozen=True)
class Sent:
    source: int
    action: str
    target: int
    event: str
    params: tuple[Value, ...]
    dropped: bool = False        # the target's mailbox was full


@dataclass(frozen=True)
class Finding:
    """Something a step did that a check reports: ``kind`` is the check's name."""

    kind: str
    message: str


@dataclass(frozen=True)
class Effect:
    """What one system step did, for traces and message sequence charts."""

    before: InstConf | None
    after: InstConf | None
    actions: tuple[str, ...] = ()
    sent: tuple[Sent, ...] = ()
    findings: tuple[Finding, ...] = ()
    status: str = ""


Successor = tuple[Label, Config, Effect]


def initial_config(system: System) -> Config:
    insts = tuple((inst.table.initial.index, inst.table.initial_vars()) for inst in system.instances)
    n = len(system.instances)
    return insts, tuple(() for _ in range(n)), (False,) * n, (0,) * len(system.faults)


class Stepper:
    """The successor function of one system, with instance steps and their routing memoised."""

    def __init__(self, system: System) -> None:
        self.system = system
        self.cache: dict[tuple[int, int, tuple[Value, ...], str, tuple[Value, ...]],
                         tuple[StepResult, tuple[Route, ...]] | SemanticError] = {}

    def instance_step(self, i: int, conf: InstConf, event: str,
                      params: tuple[Value, ...]) -> tuple[StepResult, tuple[Route, ...]]:
        """The table's own step (``agentfsm.spec.semantics.step``) and where its messages may go."""
        key = (i, conf[0], conf[1], event, params)
        cached = self.cache.get(key)
        if cached is None:
            try:
                result = step(self.system.instances[i].table, conf[0], conf[1], event, params)
                cached = result, self.system.routes(i, result.actions, result.args)
            except SemanticError as exc:
                cached = exc
            self.cache[key] = cached
        if isinstance(cached, SemanticError):
            raise cached
        return cached

    def successors(self, config: Config) -> Iterator[Successor]:
        """Every system step from ``config``, with what it did (a step may return to ``config``)."""
        insts, mailboxes, stalled, spent = config
        system = self.system
        for env in system.environment:
            if env.guard is not None and not env.guard(config):
                continue
            for i in env.instances:
                if stalled[i]:
                    continue
                for params in env.choices:
                    yield from self.deliver(config, ("env", i, env.event, params, ()), mailboxes)
        for i, box in enumerate(mailboxes):
            if box and not stalled[i]:
                event, params = box[0]
                rest = (*mailboxes[:i], box[1:], *mailboxes[i + 1:])
                yield from self.deliver(config, ("deliver", i, event, params, ()), rest)
        for f, fault in enumerate(system.faults):
            if spent[f] >= fault.max:
                continue
            used = (*spent[:f], spent[f] + 1, *spent[f + 1:])
            for i in sorted(fault.instances):
                result = self.fault(config, fault.kind, i, used)
                if result is not None:
                    yield result
        for i, flag in enumerate(stalled):
            if flag:
                after = (*stalled[:i], False, *stalled[i + 1:])
                yield ("wake", i, "", (), ()), (insts, mailboxes, after, spent), Effect(insts[i], insts[i])

    def deliver(self, config: Config, label: Label,
                mailboxes: tuple[tuple[Message, ...], ...]) -> Iterator[Successor]:
        insts, _, stalled, spent = config
        kind, i, event, params, _ = label
        conf = insts[i]
        try:
            result, routes = self.instance_step(i, conf, event, params)
        except SemanticError as exc:
            name = self.system.instances[i].name
            yield label, config, Effect(conf, None, findings=(Finding(exc.kind, f"{name}: {exc.message}"),))
            return
        status = result.status
        # An environment event that fires no row (rejected, ignored, or to a final instance) is a
        # step only through the messages it sends; a fired row and a message taken always are,
        # even when they leave the system configuration as it was.
        offered = kind == "env" and status != "fired"
        if offered and not routes:
            return
        findings: tuple[Finding, ...] = ()
        if kind == "deliver" and status == "rejected" and not self.system.rejectable(i, event):
            inst = self.system.instances[i]
            findings = (Finding("unhandled-message", f"{inst.name} rejects {event}{_params(params)} in "
                                                     f"{inst.table.states[conf[0]].name}"),)
        after: InstConf = (result.state, result.vars)
        new_insts = (*insts[:i], after, *insts[i + 1:]) if after != conf else insts
        if not routes:
            yield label, (new_insts, mailboxes, stalled, spent), Effect(conf, after, result.actions, (), findings,
                                                                        status)
            return
        for choice in itertools.product(*(targets for _, targets in routes)):
            boxes = list(mailboxes)
            sent: list[Sent] = []
            chosen: list[int] = []
            note = list(findings)
            for (message, _), target in zip(routes, choice, strict=True):
                action, link_event, link_params, is_any = message
                if is_any:
                    chosen.append(target)
                capacity = self.system.instances[target].capacity
                full = len(boxes[target]) >= capacity
                if full:
                    note.append(Finding("mailbox-overflow", f"{self.system.instances[target].name}'s mailbox "
                                        f"(capacity {capacity}) is full: {link_event}{_params(link_params)} "
                                        f"from {self.system.instances[i].name} is dropped"))
                else:
                    boxes[target] = (*boxes[target], (link_event, link_params))
                sent.append(Sent(i, action, target, link_event, link_params, full))
            new = (new_insts, tuple(boxes), stalled, spent)
            yield (kind, i, event, params, tuple(chosen)), new, Effect(conf, after, result.actions, tuple(sent),
                                                                       tuple(note), status)

    def fault(self, config: Config, kind: str, i: int, used: tuple[int, ...]) -> Successor | None:
        insts, mailboxes, stalled, _ = config
        inst = self.system.instances[i]
        box = mailboxes[i]
        label: Label = (kind, i, "", (), ())
        if kind == "crash":
            table = inst.table
            state = insts[i][0] if inst.durable_state else table.initial.index
            init = table.initial_vars()
            values = tuple(v if k in inst.durable_vars else init[k] for k, v in enumerate(insts[i][1]))
            after: InstConf = (state, values)
            new_insts = (*insts[:i], after, *insts[i + 1:])
            boxes = (*mailboxes[:i], (), *mailboxes[i + 1:])
            flags = (*stalled[:i], False, *stalled[i + 1:])
            return label, (new_insts, boxes, flags, used), Effect(insts[i], after, status="crashed")
        if kind == "lose" and box:
            boxes = (*mailboxes[:i], box[1:], *mailboxes[i + 1:])
            return (kind, i, box[0][0], box[0][1], ()), (insts, boxes, stalled, used), Effect(insts[i], insts[i])
        if kind == "duplicate" and box and len(box) < inst.capacity:
            boxes = (*mailboxes[:i], (box[0], *box), *mailboxes[i + 1:])
            return (kind, i, box[0][0], box[0][1], ()), (insts, boxes, stalled, used), Effect(insts[i], insts[i])
        if kind == "stall" and not stalled[i] and not inst.table.states[insts[i][0]].final:
            flags = (*stalled[:i], True, *stalled[i + 1:])
            return label, (insts, mailboxes, flags, used), Effect(insts[i], insts[i])
        return None


def _params(params: tuple[Value, ...]) -> str:
    if not params:
        return ""
    return "(" + ", ".join(str(v).lower() if isinstance(v, bool) else str(v) for v in params) + ")"


def symmetry_ranges(system: System) -> list[tuple[int, int]]:
    """The index ranges of the groups whose members are interchangeable."""
    return [(g.members[0], g.members[-1] + 1) for g in system.groups.values()
            if g.counted and g.symmetric and len(g.members) > 1]


def canonicalizer(system: System, symmetry: bool) -> Callable[[Config], Config]:
    ranges = symmetry_ranges(system) if symmetry else []
    if not ranges:
        return lambda config: config

    def canonical(config: Config) -> Config:
        insts, boxes, stalled, spent = config
        li, lb, ls = list(insts), list(boxes), list(stalled)
        for lo, hi in ranges:
            members = sorted(zip(insts[lo:hi], boxes[lo:hi], stalled[lo:hi], strict=True))
            for k, (conf, box, flag) in enumerate(members):
                li[lo + k], lb[lo + k], ls[lo + k] = conf, box, flag
        return tuple(li), tuple(lb), tuple(ls), spent
    return canonical


class Explored(Protocol):
    """How far an exploration got (a ``SystemExploration``, or the lists the batches continue)."""

    configs: list[Config]
    parent: list[int]
    edges_src: list[int]


def past_limit(ex: Explored, limit: int) -> ExplorationLimit:
    """The stop past ``limit``: the configurations and steps found, the depth of the last one."""
    depth, node = 0, len(ex.configs) - 1
    while ex.parent[node] >= 0:
        node, depth = ex.parent[node], depth + 1
    return ExplorationLimit(f"more than {limit:,} configurations (--max-configurations {limit})",
                            len(ex.configs), len(ex.edges_src), depth)
