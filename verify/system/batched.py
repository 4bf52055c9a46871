"""System exploration a batch of configurations at a time, as numpy array operations.

The scalar explorer (``explore``) pays the interpreter for every edge: the
successor generator, the routing, a tuple per successor, a sort under symmetry and a
dict lookup. Here a batch (a run of consecutive configurations of the queue) is a matrix
of small ints, one row per configuration (``rows.Layout``): per instance its local
code (its state and variables), its mailbox as ``capacity`` slots of message codes, its
stalled bit, and per fault the number spent.

Each system step kind is applied to the whole batch at once: per (instance, event,
parameter values) group, the rows are split by the instance's local code, and for each
distinct code the instance's step is ``Stepper.instance_step`` itself (memoised: a
group meets a handful of distinct local states however wide the frontier), so the step
semantics and its errors are the scalar explorer's, never a copy. What the step does to
the rest of the configuration (the new local code, the mailbox pop, the messages routed
into the targets' slot columns, overflow, stalled bits, fault counters) is array work
over all the rows of that code at once. Symmetry is a sort of the member blocks of each
``count`` group by a key that orders as the scalar canonicalizer's tuples do.

Same numbering as the scalar loop: successors are ordered by (configuration, step
position, routing choice), the scalar generator's order, and numbered by first
occurrence, so numbers, parents, edges and labels agree. The first finding of each kind
is taken from the scalar ``Stepper`` on the first configuration the arrays flag for it,
so its message is the scalar one word for word.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Container
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt
from agentfsm.spec.expr import Value
from agentfsm.spec.semantics import SemanticError
from agentfsm.spec.system_model import System
from agentfsm.spec.system_trace import Label
from agentfsm.verify.kernel.visited import CodeIndex, DenseIndex, code_index, in_first_occurrence_order
from agentfsm.verify.system.rows import Layout, messages
from agentfsm.verify.system.step import Config, Stepper, past_limit, symmetry_ranges

Ints = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]
LEVEL_MIN: int | None = 128   # unexplored configurations that switch to batches (None: never); measured
LEVEL_LOW = 32   # and back to the scalar loop below this many (hysteresis against flapping)
BATCH = 1 << 13   # configurations per batch at most


class Exploring(Protocol):
    """The lists of a ``SystemExploration`` the batches continue."""

    configs: list[Config]
    parent: list[int]
    edges_src: list[int]
    edges_dst: list[int]
    edges_label: list[Label]
    out_degree: list[int]


@dataclass(frozen=True)
class Outcome:
    """Instance ``i``'s step from one local code on one event: what the arrays need of it."""

    error: str | None    # the SemanticError's kind: a finding and no successor
    after: int           # the new local code
    fired: bool          # a row fired (else an environment offer is a step only through its messages)
    rejected: bool
    routes: tuple[tuple[int, tuple[int, ...], bool], ...]   # (message code, targets, goes to any one)


class Levels:
    """The batch successor function of one system (with its layout and memoised instance steps)."""

    def __init__(self, system: System, layout: Layout, symmetry: bool) -> None:
        self.system = system
        self.layout = layout
        self.stepper = Stepper(system)
        self.outcomes: dict[tuple[int, int, str, tuple[Value, ...]], Outcome] = {}
        self.labels: list[Label] = []
        self.label_ids: dict[Label, int] = {}
        self.finals = [np.array([s.final for s in inst.table.states]) for inst in system.instances]
        self.ranges = symmetry_ranges(system) if symmetry else []
        self.alike = all(len({system.instances[m].capacity for m in range(lo, hi)}) == 1 for lo, hi in self.ranges)
        self.blocks = [self._blocks(lo, hi) for lo, hi in self.ranges] if self.alike else []

    def label(self, label: Label) -> int:
        found = self.label_ids.get(label)
        if found is None:
            found = self.label_ids[label] = len(self.labels)
            self.labels.append(label)
        return found

    def outcome(self, i: int, local: int, event: str, params: tuple[Value, ...]) -> Outcome:
        key = (i, local, event, params)
        found = self.outcomes.get(key)
        if found is None:
            layout = self.layout
            try:
                result, routes = self.stepper.instance_step(i, layout.unlocal(i, local), event, params)
            except SemanticError as exc:
                found = Outcome(exc.kind, local, False, False, ())
            else:
                found = Outcome(None, layout.local(i, (result.state, result.vars)), result.status == "fired",
                                result.status == "rejected", tuple((layout.message_code[(m[1], m[2])], targets, m[3])
                                                                   for m, targets in routes))
            self.outcomes[key] = found
        return found

    # The successors of a batch

    def batch(self, rows: Ints, configs: list[Config]) -> Successors:
        """Every successor of ``rows`` (the representatives ``configs``), in the scalar order."""
        out = Successors(self.layout.width)
        system, layout = self.system, self.layout
        n = len(rows)
        stalled = rows[:, layout.stalled:layout.spent].astype(np.bool_)
        slot = 0
        seen: tuple[list[int], Ints] | None = None
        for env in system.environment:
            offered = np.ones(n, dtype=np.bool_)
            if env.guard is not None:
                seen = seen or self._seen(rows)
                guard = env.guard
                offered = np.array([bool(guard(configs[k])) for k in seen[0]], dtype=np.bool_)[seen[1]]
            for i in env.instances:
                where = np.flatnonzero(offered & ~stalled[:, i])
                parts = _split(rows[where, i])
                for params in env.choices:
                    self._step(out, rows, where, parts, rows, slot, "env", i, env.event, params)
                    slot += 1
        for i in range(len(system.instances)):
            head = rows[:, layout.box[i]]
            where = np.flatnonzero((head > 0) & ~stalled[:, i])
            popped = self._pop(rows, i)
            for code, part in _split(head[where]):
                event, params = self.layout.messages[code]
                taking = where[part]
                self._step(out, rows, taking, _split(rows[taking, i]), popped, slot, "deliver", i, event, params)
            slot += 1
        for f, fault in enumerate(system.faults):
            open_ = np.flatnonzero(rows[:, layout.spent + f] < fault.max)
            for i in sorted(fault.instances):
                self._fault(out, rows, open_, slot, f, fault.kind, i)
                slot += 1
        for i in range(len(system.instances)):
            where = np.flatnonzero(stalled[:, i])
            new = rows[where].copy()
            new[:, layout.stalled + i] = 0
            out.add(where, new, slot, 0, self.label(("wake", i, "", (), ())))
            slot += 1
        return out

    def _seen(self, rows: Ints) -> tuple[list[int], Ints]:
        """What a system expression can read of each row (the instances' states and variables,
        their stalled bits and mailbox lengths): one row per distinct view, and each row's view."""
        layout = self.layout
        lengths = [np.count_nonzero(rows[:, layout.box[i]:layout.box[i] + inst.capacity], axis=1)
                   for i, inst in enumerate(self.system.instances)]
        view = np.column_stack([rows[:, :len(lengths)], rows[:, layout.stalled:layout.spent], *lengths])
        _, first, inverse = np.unique(view, axis=0, return_index=True, return_inverse=True)
        return first.tolist(), inverse.reshape(-1)

    def _pop(self, rows: Ints, i: int) -> Ints:
        """``rows`` with instance ``i``'s mailbox head removed."""
        lo, hi = self.layout.box[i], self.layout.box[i] + self.system.instances[i].capacity
        popped = rows.copy()
        popped[:, lo:hi - 1] = rows[:, lo + 1:hi]
        popped[:, hi - 1] = 0
        return popped

    def _step(self, out: Successors, rows: Ints, where: Ints, parts: list[tuple[int, Ints]], base: Ints, slot: int,
              kind: str, i: int, event: str, params: tuple[Value, ...]) -> None:
        """Instance ``i`` takes ``event(params)`` in the rows ``where``, split by its local code
        into ``parts`` (their successors start from ``base``)."""
        unhandled = kind == "deliver" and not self.system.rejectable(i, event)
        for local, part in parts:
            outcome = self.outcome(i, local, event, params)
            sub = where[part]
            if outcome.error is not None:
                out.finding(outcome.error, sub)
                continue
            if kind == "env" and not outcome.fired and not outcome.routes:
                continue   # an environment offer that fires no row and sends nothing: no step
            start = base[sub].copy()
            start[:, i] = outcome.after
            if unhandled and outcome.rejected:
                out.finding("unhandled-message", sub)
            if not outcome.routes:
                out.add(sub, start, slot, 0, self.label((kind, i, event, params, ())))
                continue
            for choice, targets in enumerate(itertools.product(*(t for _, t, _ in outcome.routes))):
                new = start.copy()
                over = np.zeros(len(sub), dtype=np.bool_)
                for (code, _, _), target in zip(outcome.routes, targets, strict=True):
                    full = self._append(new, target, code)
                    over |= full
                if over.any():
                    out.finding("mailbox-overflow", sub[over])
                chosen = tuple(t for (_, _, is_any), t in zip(outcome.routes, targets, strict=True) if is_any)
                out.add(sub, new, slot, choice, self.label((kind, i, event, params, chosen)))

    def _append(self, rows: Ints, target: int, code: int) -> Bools:
        """Append message ``code`` to ``target``'s mailbox in every row; return where it was full."""
        lo, capacity = self.layout.box[target], self.system.instances[target].capacity
        length = np.count_nonzero(rows[:, lo:lo + capacity], axis=1)
        full: Bools = length >= capacity
        room = np.flatnonzero(~full)
        rows[room, lo + length[room]] = code
        return full

    def _fault(self, out: Successors, rows: Ints, where: Ints, slot: int, f: int, kind: str, i: int) -> None:
        layout = self.layout
        inst = self.system.instances[i]
        lo, capacity = layout.box[i], inst.capacity
        if kind == "crash":
            new = rows[where].copy()
            for local, part in _split(new[:, i]):
                new[part, i] = self._crashed(i, local)
            new[:, lo:lo + capacity] = 0
            new[:, layout.stalled + i] = 0
        else:
            length = np.count_nonzero(rows[where, lo:lo + capacity], axis=1)
            if kind == "lose":
                where = where[length > 0]
                new = self._pop(rows[where], i)
            elif kind == "duplicate":
                where = where[(length > 0) & (length < capacity)]
                new = rows[where].copy()
                new[:, lo + 1:lo + capacity] = rows[where, lo:lo + capacity - 1]
            else:
                states = rows[where, i] // (layout.local_size[i] // len(inst.table.states))
                where = where[(rows[where, layout.stalled + i] == 0) & ~self.finals[i][states]]
                new = rows[where].copy()
                new[:, layout.stalled + i] = 1
        new[:, layout.spent + f] += 1
        if kind in ("lose", "duplicate"):
            heads = rows[where, lo]
            for code, part in _split(heads):
                event, params = self.layout.messages[code]
                out.add(where[part], new[part], slot, 0, self.label((kind, i, event, params, ())))
        else:
            out.add(where, new, slot, 0, self.label((kind, i, "", (), ())))

    def _crashed(self, i: int, local: int) -> int:
        inst = self.system.instances[i]
        state, values = self.layout.unlocal(i, local)
        table = inst.table
        init = table.initial_vars()
        kept = tuple(v if k in inst.durable_vars else init[k] for k, v in enumerate(values))
        return self.layout.local(i, (state if inst.durable_state else table.initial.index, kept))

    # Symmetry: the member blocks of each group sorted by a key ordered as the scalar tuples

    def _blocks(self, lo: int, hi: int) -> Ints:
        """Per member of a group, its columns: the local code, the mailbox slots, the stalled bit."""
        layout = self.layout
        capacity = self.system.instances[lo].capacity
        return np.array([[m, *range(layout.box[m], layout.box[m] + capacity), layout.stalled + m]
                         for m in range(lo, hi)], dtype=np.int64)

    def symmetric(self) -> bool:
        """Whether the members of each group have alike blocks (one capacity) whose sort keys
        fit in 63 bits (else the array path is not exact)."""
        return self.alike and all(sum(self.layout.bits[c] for c in block[0]) <= 63 for block in self.blocks)

    def canonical(self, rows: Ints) -> Ints:
        """Each row's representative: every group's members sorted as ``canonicalizer`` sorts them."""
        if not self.ranges or not len(rows):
            return rows
        bits = self.layout.bits
        for block in self.blocks:
            key = np.zeros((len(rows), len(block)), dtype=np.int64)
            for m, columns in enumerate(block):
                member = np.zeros(len(rows), dtype=np.int64)
                for c in columns:
                    member = (member << bits[int(c)]) | rows[:, c]
                key[:, m] = member
            order = np.argsort(key, axis=1, kind="stable")
            if np.all(order == np.arange(len(block))):
                continue
            rows = rows.copy()
            rows[:, block.ravel()] = rows[np.arange(len(rows))[:, None], block[order].reshape(len(rows), -1)]
        return rows


def _split(values: Ints) -> list[tuple[int, Ints]]:
    """The positions of each distinct value, ascending."""
    if not len(values):
        return []
    first = int(values[0])
    if np.all(values == first):
        return [(first, np.arange(len(values)))]
    order = np.argsort(values, kind="stable")
    ordered = values[order]
    starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
    ends = [*starts[1:].tolist(), len(values)]
    return [(int(ordered[s]), order[s:e]) for s, e in zip(starts.tolist(), ends, strict=True)]


class Successors:
    """A batch's successors as they are found (in any order), with their scalar positions."""

    def __init__(self, width: int) -> None:
        self.width = width
        self.sources: list[Ints] = []
        self.rows: list[Ints] = []
        self.slots: list[int] = []
        self.choices: list[int] = []
        self.labels: list[int] = []
        self.sizes: list[int] = []
        self.findings: dict[str, int] = {}   # kind: the first source row that has it

    def add(self, sources: Ints, rows: Ints, slot: int, choice: int, label: int) -> None:
        if len(sources):
            self.sources.append(sources)
            self.rows.append(rows)
            self.slots.append(slot)
            self.choices.append(choice)
            self.labels.append(label)
            self.sizes.append(len(sources))

    def finding(self, kind: str, sources: Ints) -> None:
        first = int(sources.min())
        self.findings[kind] = min(first, self.findings.get(kind, first))

    def ordered(self) -> tuple[Ints, Ints, Ints]:
        """(source row, successor row, label) of every edge in the scalar order."""
        if not self.sources:
            empty = np.empty(0, dtype=np.int64)
            return empty, np.empty((0, self.width), dtype=np.int64), empty
        sizes = np.array(self.sizes, dtype=np.int64)
        sources = np.concatenate(self.sources)
        slots = np.repeat(np.array(self.slots, dtype=np.int64), sizes)
        choices = np.repeat(np.array(self.choices, dtype=np.int64), sizes)
        order = np.lexsort((choices, slots, sources))
        labels = np.repeat(np.array(self.labels, dtype=np.int64), sizes)
        return sources[order], np.concatenate(self.rows)[order], labels[order]


def batches(system: System, symmetry: bool) -> Batches | None:
    """The array side of an exploration, or None when it cannot be exact for this system."""
    found = messages(system)
    if found is None:
        return None
    layout = Layout(system, found)
    if not layout.fits():
        return None
    levels = Levels(system, layout, symmetry)
    return Batches(levels) if levels.symmetric() else None


class Batches:
    """The array side of an exploration: every configuration's row, and their keys' numbers.

    Kept beside the scalar loop's dict for the whole exploration, so that switching
    between the two (wide frontiers here, narrow ones there) costs only the rows the
    other side added since."""

    def __init__(self, levels: Levels) -> None:
        self.levels = levels
        layout = levels.layout
        self.rows = np.zeros((1024, layout.width), dtype=np.int64)
        self.count = 0
        self.index: CodeIndex | DenseIndex = code_index(1 << layout.key_bits(), 1024)

    def _add(self, rows: Ints) -> None:
        """Append rows already numbered (the next numbers, in order)."""
        if self.count + len(rows) > len(self.rows):
            grown = np.zeros((2 * (self.count + len(rows)), self.rows.shape[1]), dtype=np.int64)
            grown[:self.count] = self.rows[:self.count]
            self.rows = grown
        self.rows[self.count:self.count + len(rows)] = rows
        self.count += len(rows)

    def run(self, ex: Exploring, head: int, limit: int | None, known: Container[str],
            findings: Callable[[list[int]], None]) -> int:
        """Explore from configuration ``head`` on, batch by batch, continuing ``ex`` in place,
        until nothing is left or fewer than ``LEVEL_LOW`` wait; returns where it stopped.
        ``findings`` records, from the scalar successors, the findings of the configurations
        where a kind not yet ``known`` first shows (so messages are the scalar loop's)."""
        levels, layout = self.levels, self.levels.layout
        if self.count < len(ex.configs):   # what the scalar loop found since
            rows = np.array([layout.encode(c) for c in ex.configs[self.count:]], dtype=np.int64)
            self.index.insert(layout.keys(rows), self.count + np.arange(len(rows), dtype=np.int64))
            self._add(rows)
        count = self.count
        while head < count:
            n = min(count - head, BATCH)
            out = levels.batch(self.rows[head:head + n], ex.configs[head:head + n])
            findings(sorted({head + row for kind, row in out.findings.items() if kind not in known}))
            sources, rows, labels = out.ordered()
            rows = levels.canonical(rows)
            distinct, at, rank = in_first_occurrence_order(layout.keys(rows), layout.key_bits())
            known = self.index.lookup(distinct)
            new = np.flatnonzero(known < 0)
            known[new] = count + np.arange(len(new), dtype=np.int64)
            self.index.insert(distinct[new], known[new])
            fresh = rows[at[new]]
            self._add(fresh)
            ex.configs.extend(layout.decode(fresh))
            ex.parent.extend((head + sources[at[new]]).tolist())
            count += len(new)
            ex.edges_src.extend((head + sources).tolist())
            ex.edges_dst.extend(known[rank].tolist())
            names = levels.labels
            ex.edges_label.extend([names[k] for k in labels.tolist()])
            ex.out_degree.extend(np.bincount(sources, minlength=n).tolist())
            head += n
            if limit is not None and count > limit:
                raise past_limit(ex, limit)
            if count - head < LEVEL_LOW:
                break
        return head
