"""Distinguishing suffixes for implementations with more states than the table (``--extra-states K``).

The ``suffixes`` set checks every (configuration, event) pair with the identification
set of the configuration the event leads to. As in the W and Wp methods, that proves
conformance only of an implementation with no more distinguishable states than the
table has configurations: a fault that needs some history the table does not model (a
flag set by one event and read three events later) sits in a state the table lacks,
and a suffix reaches it only by chance. The Wp method for an implementation with up to
K extra states puts every event sequence of length at most K between the pair and the
suffixes. The number of vectors grows with (events)^K, so they are counted first and
made one at a time, each step's expectation taken from the look-alike universe (no
replay of the semantics per vector).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from dataclasses import dataclass, field

from agentfsm.spec.model import Table
from agentfsm.spec.semantics import step
from agentfsm.spec.vectorfile import Expect, Step, Vector, describe_config, describe_label, expected_run
from agentfsm.verify.conformance.distinguish import Universe
from agentfsm.verify.table.explore import Exploration


def extension_id(machine: str, number: int, pad: int) -> str:
    """An extension vector's id: its number (after the ``suffixes`` set's own), padded."""
    return f"{machine}/suffix-{number:0{pad}d}"


@dataclass
class ExtraStates:
    """The extension vectors of every (reachable configuration, event) pair, for K extra states."""

    table: Table
    ex: Exploration
    u: Universe
    k: int
    steps: dict[tuple[int, int], Step] = field(default_factory=dict)
    orders: dict[int, list[int]] = field(default_factory=dict)
    sizes: dict[tuple[int, int], int] = field(default_factory=dict)
    prefixes: dict[int, tuple[Step, ...]] = field(default_factory=dict)
    pairs: list[tuple[int, int]] | None = None
    before: list[int] = field(default_factory=list)
    ats: list[int] = field(default_factory=list)

    def _ends(self, c: int, front: int) -> int:
        """Vectors whose front sequence ends at ``c`` after ``front`` events: one per identification sequence."""
        return len(self.u.identification(c)) or (1 if front == self.k else 0)

    def count(self) -> int:
        """The number of vectors ``vectors`` yields, computed without making them."""
        return self._layout()[1][-1]

    def _through(self, c: int, front: int) -> int:
        """Vectors of the subtree at ``c`` after ``front`` events: its own and those of every longer front."""
        key = (c, front)
        found = self.sizes.get(key)
        if found is None:
            found = self._ends(c, front)
            if front < self.k:
                found += sum(self._through(n, front + 1) for n in self.u.successors[c] if n >= 0)
            self.sizes[key] = found
        return found

    def _layout(self) -> tuple[list[tuple[int, int]], list[int]]:
        """The pairs in the order ``vectors`` takes them, and how many vectors come before each (and in all, last)."""
        if self.pairs is None:
            ats = self.ats = [self.u.index[self.ex.config(i)] for i in range(self.ex.count)]
            pairs = [(i, j) for i in range(self.ex.count) for j in self._accepted_first(ats[i])]
            pairs.sort(key=lambda pair: not self._accepts(ats[pair[0]], pair[1]))
            before = [0]
            for i, j in pairs:
                n = self.u.successors[ats[i]][j]
                before.append(before[-1] + sum(self._through(m, 1) for m in self.u.successors[n] if m >= 0))
            self.pairs, self.before = pairs, before
        return self.pairs, self.before

    def _step(self, c: int, j: int) -> Step:
        found = self.steps.get((c, j))
        if found is None:
            (state, values), (name, params) = self.u.configs[c], self.u.labels[j]
            result = step(self.table, state, values, name, params)
            expect = Expect(result.accepted, self.table.states[result.state].name, result.actions,
                            self.table.vars_dict(result.vars))
            found = self.steps[(c, j)] = Step(name, self.table.event(name).param_dict(params), expect)
        return found

    def _accepted_first(self, c: int) -> list[int]:
        """The labels with a successor from ``c``, those it accepts first (each group in table order)."""
        found = self.orders.get(c)
        if found is None:
            valid = [j for j, n in enumerate(self.u.successors[c]) if n >= 0]
            found = self.orders[c] = sorted(valid, key=lambda j: not self._accepts(c, j))
        return found

    def _accepts(self, c: int, j: int) -> bool:
        expect = self._step(c, j).expect
        return isinstance(expect, Expect) and expect.accepted

    def vectors(self, first: int, pad: int, start: int = 0, stop: int | None = None) -> Iterator[Vector]:
        """Pair, then 1..K events in front, then each identification sequence of where they lead;
        only those from ``start`` up to ``stop`` (numbered ``first`` + their place), the
        others skipped by their counts without being made (each worker of ``conform --jobs``
        makes its own share).

        The order only matters for a run that stops early (``--max-failures``): the pairs
        whose event is accepted come first, then the rejected ones, and in front the
        accepted events before the rejected ones, so faults in what the table does show
        before faults in what it refuses.
        """
        table, u, labels = self.table, self.u, self.u.labels
        pairs, before = self._layout()
        stop = before[-1] if stop is None else min(stop, before[-1])
        p = bisect.bisect_right(before, start) - 1
        place = before[p]
        for i, j in pairs[p:]:
            if place >= stop:
                return
            config, at, label = self.ex.config(i), self.ats[i], labels[j]
            where = describe_config(table, *config)
            head = (*self._prefix(i), self._step(at, j))
            root = u.successors[at][j]
            # (where from, the steps there, the events in front there, the next event)
            stack: list[tuple[int, tuple[Step, ...], tuple[int, ...], int]] = [
                (root, head, (), x) for x in reversed(self._accepted_first(root))]
            while stack and place < stop:
                parent, steps_before, front_before, x = stack.pop()
                c, front = u.successors[parent][x], (*front_before, x)
                size = self._through(c, len(front))
                if place + size <= start:
                    place += size
                    continue
                steps = (*steps_before, self._step(parent, x))
                tag = (f"suffix:{where}/{describe_label(table, label)}+"
                       + ",".join(describe_label(table, labels[y]) for y in front))
                suffixes = u.identification(c) or ([()] if len(front) == self.k else [])
                for k, suffix in enumerate(suffixes, start=1):
                    if start <= place < stop:
                        yield Vector(extension_id(table.machine, first + place, pad), table.machine,
                                     (f"{tag}#{k}",), steps + self._run(c, suffix))
                    place += 1
                if len(front) < self.k:
                    stack.extend((c, steps, front, y) for y in reversed(self._accepted_first(c)))

    def _prefix(self, i: int) -> tuple[Step, ...]:
        """The steps of the shortest path to configuration ``i``."""
        found = self.prefixes.get(i)
        if found is None:
            found = self.prefixes[i] = tuple(s for s, _ in expected_run(self.table, self.ex.path(i)))
        return found

    def _run(self, c: int, suffix: tuple[int, ...]) -> tuple[Step, ...]:
        out = []
        for j in suffix:
            out.append(self._step(c, j))
            c = self.u.successors[c][j]
        return tuple(out)
