"""The ``guided`` coverage set: walks that go where the vectors so far have not been.

Random walks find faults that need a long or unusual history, but by chance: a fault
behind a particular three-event history is hit by a few walks in a hundred. A guided
walk spends a step budget the same way, but at every step takes the event whose step
hits the least-covered items so far — the rows it fires, the pairs of consecutive rows,
and the n-grams (n = 1 … ``GRAM``) of accepted events ending with it — ties broken by
a seeded random choice. It thus runs through every short history of accepted events
the table allows before repeating one. An event leading into a final state is taken only as a walk's last step.
"""

from __future__ import annotations

import itertools
import random
from collections import Counter
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from agentfsm.spec.model import Table
from agentfsm.spec.semantics import SemanticError, StepResult, step
from agentfsm.spec.vectorfile import Label
from agentfsm.verify.table.explore import Exploration

GRAM = 4
DEFAULT_BUDGET = 3000


@dataclass
class Coverage:
    """How often each row, row pair and event n-gram has been walked."""

    counts: Counter[Hashable]

    def score(self, items: list[Hashable]) -> float:
        return sum(1.0 / (1 + self.counts[item]) ** 2 for item in items)

    def summary(self) -> dict[str, int]:
        kinds: Counter[str] = Counter(str(item[0]) for item in self.counts if isinstance(item, tuple))
        return {kind: kinds[kind] for kind in sorted(kinds)}


def guided_walks(table: Table, ex: Exploration, budget: int, seed: int, length: int,
                 ) -> tuple[list[list[Label]], dict[str, Any]]:
    """Walks of at most ``length`` steps spending ``budget`` steps; and the coverage they reached."""
    rng = random.Random(seed)
    cache: dict[tuple[int, int], tuple[StepResult, int] | None] = {}
    coverage = Coverage(Counter())
    walks: list[list[Label]] = []
    spent = 0

    def successor(config: int, j: int) -> tuple[StepResult, int] | None:
        key = (config, j)
        if key not in cache:
            state, values = ex.config(config)
            try:
                result = step(table, state, values, *ex.labels[j])
            except SemanticError:
                cache[key] = None
            else:
                target = ex.index_of(result.state, result.vars)
                cache[key] = None if target is None else (result, target)
        return cache[key]

    while spent < budget and length > 0:
        config, last_row = 0, 0
        history: tuple[int, ...] = ()
        walk: list[Label] = []
        while len(walk) < min(length, budget - spent):
            last_step = len(walk) == min(length, budget - spent) - 1
            best: list[tuple[int, list[Hashable], tuple[StepResult, int]]] = []
            best_score = -1.0
            for j in range(len(ex.labels)):
                found = successor(config, j)
                if found is None or (table.states[found[0].state].final and not last_step):
                    continue
                items = _items(found[0], last_row, (*history, j) if found[0].accepted else (j,))
                score = coverage.score(items)
                if score > best_score:
                    best, best_score = [(j, items, found)], score
                elif score == best_score:
                    best.append((j, items, found))
            if not best:
                break
            j, items, (result, config) = best[rng.randrange(len(best))] if len(best) > 1 else best[0]
            coverage.counts.update(items)
            walk.append(ex.labels[j])
            if result.accepted:
                history = (*history, j)[-(GRAM - 1):]
            last_row = result.rows[-1].index if result.rows else 0
        if not walk:
            break
        spent += len(walk)
        walks.append(walk)
    info = {"items": len(walks), "covered": len(walks), "budget": budget, "steps": spent, "seed": seed,
            "length": length, "reached": coverage.summary()}
    return walks, info


def _items(result: StepResult, last_row: int, history: tuple[int, ...]) -> list[Hashable]:
    """What one step covers: its rows, its row pairs, and the event n-grams that end with it.

    The n-grams are of accepted events: a rejected event leaves the configuration as it
    was, so it counts once per event ("rejected") and does not break a history.
    """
    if not result.accepted:
        return [("rejected", history)]
    items: list[Hashable] = [("rows", row.index) for row in result.rows]
    fired = [last_row, *(r.index for r in result.rows)] if result.rows else []
    items.extend(("row-pairs", a, b) for a, b in itertools.pairwise(fired) if a)
    items.extend((f"{n}-grams", history[-n:]) for n in range(1, min(GRAM, len(history)) + 1))
    return items
