"""The reference runtime running a system: one ``Engine`` per instance, an ``asyncio.Queue``
per mailbox, the links routing each step's actions (with their arguments) to the queues.

``run SYSTEM --script TRACE`` plays an interleaved trace (the verifier's counterexample
format, docs/systems.md) step by step against this real code, so a counterexample found
by the explorer is reproduced by the engines themselves: each step is checked to be
possible (the message at the head of the queue is the one the trace names, a fault is
within its budget), and the configuration reached is reported in the explorer's shape.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from agentfsm.impl.engine import Engine, Outcome, SemanticError
from agentfsm.spec.expr import Value
from agentfsm.spec.system_model import System
from agentfsm.spec.system_trace import Label, label_text

Message = tuple[str, tuple[Value, ...]]


class RunDiverged(Exception):
    """A step of the script cannot happen against the running system."""


@dataclass
class Mailbox:
    """A bounded FIFO queue of messages; a put into a full one drops the message."""

    queue: asyncio.Queue[Message]

    def put(self, message: Message) -> bool:
        try:
            self.queue.put_nowait(message)
        except asyncio.QueueFull:
            return False
        return True

    def contents(self) -> tuple[Message, ...]:
        items = []
        while not self.queue.empty():
            items.append(self.queue.get_nowait())
        for item in items:
            self.queue.put_nowait(item)
        return tuple(items)

    def replace(self, items: Sequence[Message]) -> None:
        while not self.queue.empty():
            self.queue.get_nowait()
        for item in items:
            self.queue.put_nowait(item)


class SystemRuntime:
    """The running system; ``apply`` performs one step of an interleaved trace."""

    def __init__(self, system: System, say: Callable[[str], None]) -> None:
        self.system = system
        self.say = say
        self.engines = [Engine(inst.table) for inst in system.instances]
        self.boxes = [Mailbox(asyncio.Queue(maxsize=inst.capacity)) for inst in system.instances]
        self.stalled = [False] * len(system.instances)
        self.spent = [0] * len(system.faults)

    def configuration(self) -> tuple[object, ...]:
        """(insts, mailboxes, stalled, spent), as the explorer writes a system configuration."""
        insts = tuple((e.state_index, e.values) for e in self.engines)
        return insts, tuple(b.contents() for b in self.boxes), tuple(self.stalled), tuple(self.spent)

    async def apply(self, n: int, label: Label) -> None:
        kind, i, event, params, chosen = label
        name = self.system.instances[i].name
        if kind in ("env", "deliver") and self.stalled[i]:
            raise RunDiverged(f"step {n}: {name} is stalled")
        if kind == "env":
            self.perform(n, i, self.engines[i].step_values(event, params), chosen)
        elif kind == "deliver":
            head = await self.take(n, i)
            if head != (event, params):
                raise RunDiverged(f"step {n}: {name}'s next message is {head[0]}{head[1]}, not {event}{params}")
            self.perform(n, i, self.step(n, i, event, params), chosen)
        elif kind == "wake":
            if not self.stalled[i]:
                raise RunDiverged(f"step {n}: {name} is not stalled")
            self.stalled[i] = False
        else:
            self.fault(n, kind, i)
        self.say(f"  {n:3d}. {label_text(self.system, label)}  -> {name}: {self.engines[i].state}")

    def step(self, n: int, i: int, event: str, params: tuple[Value, ...]) -> Outcome:
        try:
            return self.engines[i].step_values(event, params)
        except SemanticError as exc:
            raise RunDiverged(f"step {n}: {self.system.instances[i].name}: {exc.message}") from None

    async def take(self, n: int, i: int) -> Message:
        queue = self.boxes[i].queue
        if queue.empty():
            raise RunDiverged(f"step {n}: {self.system.instances[i].name}'s mailbox is empty")
        return await queue.get()

    def perform(self, n: int, i: int, outcome: Outcome, chosen: tuple[int, ...]) -> None:
        """Route the step's actions: each linked message into its target's queue."""
        picks = list(chosen)
        for (action, event, params, is_any), targets in self.system.routes(i, outcome.actions, outcome.args):
            target = targets[0]
            if is_any:
                if not picks or picks[0] not in targets:
                    raise RunDiverged(f"step {n}: no member chosen for {action} -> {event}")
                target = picks.pop(0)
            if not self.boxes[target].put((event, params)):
                self.say(f"         {self.system.instances[target].name}'s mailbox is full: {event} dropped")

    def fault(self, n: int, kind: str, i: int) -> None:
        inst = self.system.instances[i]
        budget = next((f for f, fault in enumerate(self.system.faults)
                       if fault.kind == kind and i in fault.instances), None)
        if budget is None or self.spent[budget] >= self.system.faults[budget].max:
            raise RunDiverged(f"step {n}: no {kind} fault left for {inst.name}")
        box = self.boxes[i].contents()
        if kind == "crash":
            engine = self.engines[i]
            init = inst.table.initial_vars()
            values = [v if k in inst.durable_vars else init[k] for k, v in enumerate(engine.values)]
            state = engine.state if inst.durable_state else inst.table.initial.name
            engine.restore(state, values)
            self.boxes[i].replace(())
            self.stalled[i] = False
        elif kind == "lose" and box:
            self.boxes[i].replace(box[1:])
        elif kind == "duplicate" and box and len(box) < inst.capacity:
            self.boxes[i].replace((box[0], *box))
        elif kind == "stall" and not self.stalled[i] and not self.engines[i].is_final:
            self.stalled[i] = True
        else:
            raise RunDiverged(f"step {n}: {inst.name} cannot {kind} here")
        self.spent[budget] += 1


async def run_trace(system: System, labels: Sequence[Label], say: Callable[[str], None]) -> tuple[object, ...]:
    """Play ``labels`` against fresh engines; the configuration reached."""
    runtime = SystemRuntime(system, say)
    for n, label in enumerate(labels, start=1):
        await runtime.apply(n, label)
    return runtime.configuration()
