"""Distinguishing suffixes: telling a configuration from its look-alikes by what is observable.

An implementation that hides its variables shows only ``accepted``, ``state`` and
``actions``. Two configurations in the same state look alike until some event sequence
makes them answer differently, so a step that leaves wrong variable values goes unseen
unless such a sequence follows it. As in the W- and Wp-methods of conformance testing,
this module computes, for a configuration, an *identification set*: a few event
sequences that together tell it apart from every configuration in the same state that
answers some sequence differently.

The look-alikes are taken from a *universe*: the reachable configurations, each with
every variable moved in turn to each other value of its domain (what a wrong update
leaves), closed under the table's steps. Moore's partition refinement over the universe
(level k: configurations that agree on every sequence of at most k events) gives each
pair's first distinguishing level, and from the levels a shortest separating sequence.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from agentfsm.spec.expr import Value
from agentfsm.spec.model import Table
from agentfsm.spec.semantics import SemanticError, step
from agentfsm.spec.vectorfile import Label

Config = tuple[int, tuple[Value, ...]]
Suffix = tuple[int, ...]   # indices into the labels
# The universe grows from the reachable configurations; past this size the look-alikes
# are the reachable configurations only (still closed under steps).
UNIVERSE_LIMIT = 200_000


@dataclass
class Universe:
    """Configurations, their observable answer (interned) and successor for every label."""

    table: Table
    labels: Sequence[Label]
    configs: list[Config] = field(default_factory=list)
    index: dict[Config, int] = field(default_factory=dict)
    outputs: list[list[int]] = field(default_factory=list)
    successors: list[list[int]] = field(default_factory=list)   # -1 after a step that breaks the table's rules
    levels: list[list[int]] = field(default_factory=list)
    by_state: dict[int, list[int]] = field(default_factory=dict)
    identified: dict[int, list[Suffix]] = field(default_factory=dict)

    def add(self, config: Config) -> int:
        at = self.index.get(config)
        if at is None:
            at = self.index[config] = len(self.configs)
            self.configs.append(config)
        return at

    @property
    def final(self) -> list[int]:
        return self.levels[-1]

    def first_split(self, a: int, b: int) -> int | None:
        """The length of the shortest sequence that tells ``a`` from ``b`` (None: none does)."""
        if self.final[a] == self.final[b]:
            return None
        return next(k for k, level in enumerate(self.levels) if level[a] != level[b])

    def separating(self, a: int, b: int) -> Suffix:
        """A shortest event sequence (label indices) that ``a`` and ``b`` answer differently."""
        k = self.first_split(a, b)
        assert k is not None and k > 0, "only configurations in the same state, told apart, are separated"
        suffix: list[int] = []
        while True:
            out_a, out_b = self.outputs[a], self.outputs[b]
            here = next((j for j in range(len(self.labels)) if out_a[j] != out_b[j]), None)
            if here is not None:
                suffix.append(here)
                return tuple(suffix)
            k -= 1
            level = self.levels[k]
            j = next(j for j in range(len(self.labels))
                     if level[self.successors[a][j]] != level[self.successors[b][j]])
            suffix.append(j)
            a, b = self.successors[a][j], self.successors[b][j]

    def tells_apart(self, a: int, b: int, suffix: Suffix) -> bool:
        for j in suffix:
            if self.outputs[a][j] != self.outputs[b][j]:
                return True
            a, b = self.successors[a][j], self.successors[b][j]
            if a < 0 or b < 0:
                return False
        return False

    def identification(self, a: int) -> list[Suffix]:
        """Sequences that together tell ``a`` from every distinguishable look-alike in its state.

        Greedy and deterministic: among the shortest separating sequences of the look-alikes
        not yet told apart, take the one that tells most of them apart (then the shortest,
        then the first), until none is left.
        """
        found = self.identified.get(a)
        if found is not None:
            return found
        final = self.final
        left = [d for d in self.by_state[self.configs[a][0]] if final[d] != final[a]]
        chosen: list[Suffix] = []
        while left:
            candidates = sorted({self.separating(a, d) for d in left}, key=lambda s: (len(s), s))
            best = max(candidates, key=lambda s: (sum(self.tells_apart(a, d, s) for d in left), -len(s)))
            chosen.append(best)
            left = [d for d in left if not self.tells_apart(a, d, best)]
        self.identified[a] = chosen
        return chosen


def universe(table: Table, reachable: Iterable[Config], labels: Sequence[Label]) -> Universe:
    """The look-alike universe of the module docstring, refined until it is stable."""
    start = list(reachable)
    u = _close(table, labels, _with_variants(table, start), UNIVERSE_LIMIT)
    if len(u.outputs) < len(u.configs):
        u = _close(table, labels, start, None)
    _refine(u)
    return u


def _with_variants(table: Table, configs: list[Config]) -> list[Config]:
    """The configurations and their one-variable variants; none when there would be more than
    the universe takes (ranges are sized by arithmetic, never enumerated for that)."""
    out = list(configs)
    if len(configs) * sum(var.size - 1 for var in table.variables) > UNIVERSE_LIMIT:
        return out
    for state, values in configs:
        for slot, var in enumerate(table.variables):
            for value in var.domain:
                if value != values[slot]:
                    out.append((state, (*values[:slot], value, *values[slot + 1:])))
    return out


def _close(table: Table, labels: Sequence[Label], seeds: list[Config], limit: int | None) -> Universe:
    """The seeds and every configuration they lead to (stopping once past ``limit``)."""
    u = Universe(table, labels)
    for config in seeds:
        u.add(config)
    answers: dict[tuple[object, ...], int] = {}
    i = 0
    while i < len(u.configs) and (limit is None or len(u.configs) <= limit):
        state, values = u.configs[i]
        outs, succs = [], []
        for label in labels:
            try:
                result = step(table, state, values, *label)
            except SemanticError as exc:
                outs.append(answers.setdefault(("error", exc.kind), len(answers)))
                succs.append(-1)
                continue
            outs.append(answers.setdefault((result.accepted, result.state, result.actions), len(answers)))
            succs.append(u.add((result.state, result.vars)))
        u.outputs.append(outs)
        u.successors.append(succs)
        i += 1
    return u


def _refine(u: Universe) -> None:
    """Moore's refinement: level 0 splits by state, level k+1 by answers and level-k successors."""
    for i, (state, _) in enumerate(u.configs):
        u.by_state.setdefault(state, []).append(i)
    level = [state for state, _ in u.configs]
    u.levels = [level]
    count = len(set(level))
    while True:
        keys: dict[tuple[object, ...], int] = {}
        nxt = [keys.setdefault((level[i], tuple(u.outputs[i]), tuple(level[j] if j >= 0 else -1 for j in succ)),
                               len(keys))
               for i, succ in enumerate(u.successors)]
        if len(keys) == count:
            return
        u.levels.append(nxt)
        level, count = nxt, len(keys)
