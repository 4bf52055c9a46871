"""Generating vectors from a table: four coverage sets, each vector as short as it can be.

- ``rows``: every row that can fire, by the shortest event sequence ending in a step that
  fires it (an eventless row fires in the step that enters its transient state);
- ``events``: every (reachable configuration, event with parameter values) pair, the
  rejected ones included: the shortest path to the configuration, then the event;
- ``row-pairs``: every pair of rows that can fire one right after the other (in one step
  through a transient state, or in two consecutive steps), by a breadth-first search
  over (configuration, last row fired);
- ``walks``: seeded random long walks, which exercise runs deeper than any shortest path;
- ``suffixes``: every (reachable configuration, event) pair again, now followed by each
  sequence of the reached configuration's identification set (``distinguish``), so that
  an implementation that hides its variables still shows a step that left them wrong.
  The reset counts as a pair too (the initial configuration, no event).

Breadth-first order makes the first vector found for an item a shortest one. A vector
equal to an earlier one (same events) is not repeated: the earlier one gains the tag.
Expectations come from the reference semantics only (``vectorfile.expected_run``).
"""

from __future__ import annotations

import functools
import itertools
import random
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, overload

from agentfsm.spec.model import Table
from agentfsm.spec.semantics import SemanticError, StepResult, step
from agentfsm.spec.vectorfile import Label, Manifest, StepMemo, Vector, describe_config, describe_label, make_vector
from agentfsm.verify.conformance.distinguish import Universe, universe
from agentfsm.verify.conformance.extra_states import ExtraStates, extension_id
from agentfsm.verify.conformance.guided import DEFAULT_BUDGET, guided_walks
from agentfsm.verify.conformance.invalid import invalid_vectors
from agentfsm.verify.table.explore import Exploration, explore, labels_of
from agentfsm.verify.table.graph import path_back

SETS = ("rows", "events", "row-pairs", "walks", "guided", "suffixes", "invalid")
DEFAULT_SETS = SETS
DEFAULT_WALKS = 20
DEFAULT_WALK_LENGTH = 60
DEFAULT_SEED = 0


@dataclass
class _Collector:
    """Vectors in order of discovery, merged when their event sequences coincide."""

    table: Table
    order: list[tuple[str, list[str], tuple[Label, ...]]] = field(default_factory=list)
    by_labels: dict[tuple[Label, ...], int] = field(default_factory=dict)

    def add(self, vid: str, cover: str, labels: Sequence[Label]) -> None:
        key = tuple(labels)
        at = self.by_labels.get(key)
        if at is None:
            self.by_labels[key] = len(self.order)
            self.order.append((vid, [cover], key))
        else:
            self.order[at][1].append(cover)

    def vectors(self) -> list[Vector]:
        """The vectors, sharing each step (an event from a configuration) among those that take it."""
        memo: StepMemo = {}
        return [make_vector(self.table, vid, covers, labels, memo) for vid, covers, labels in self.order]


def _step(table: Table, state: int, values: tuple[Any, ...], label: Label) -> StepResult | None:
    try:
        return step(table, state, values, *label)
    except SemanticError:
        return None


class Vectors(Sequence[Vector]):
    """The generated vectors: a list, then (with extra states) extension vectors made as they are read."""

    def __init__(self, made: list[Vector], extra: ExtraStates | None = None) -> None:
        self.made = made
        self.extra = extra
        self.extra_count = extra.count() if extra is not None else 0

    def __len__(self) -> int:
        return len(self.made) + self.extra_count

    def __iter__(self) -> Iterator[Vector]:
        return self.span(0, len(self))

    def span(self, start: int, stop: int) -> Iterator[Vector]:
        """The vectors from ``start`` up to ``stop``, the extension ones before ``start`` skipped unmade."""
        yield from itertools.islice(self.made, start, stop)
        if self.extra is not None and stop > len(self.made):
            yield from self.extra.vectors(self.first_extra, len(str(len(self))), max(start - len(self.made), 0),
                                          stop - len(self.made))

    def vector_id(self, index: int) -> str:
        """The id of vector ``index``, without making it (a run's report rebuilds passing vectors' ids so)."""
        if index < len(self.made) or self.extra is None:
            return self.made[index].id
        return extension_id(self.extra.table.machine, self.first_extra + index - len(self.made), len(str(len(self))))

    @functools.cached_property
    def first_extra(self) -> int:
        """The number of the first extension vector, after the ``suffixes`` set's own."""
        numbers = [int(v.id.rsplit("-", 1)[1]) for v in self.made if v.id.split("/")[-1].startswith("suffix-")]
        return max(numbers, default=0) + 1

    @overload
    def __getitem__(self, index: int) -> Vector: ...

    @overload
    def __getitem__(self, index: slice) -> list[Vector]: ...

    def __getitem__(self, index: int | slice) -> Vector | list[Vector]:
        if isinstance(index, slice):
            start, stop, stride = index.indices(len(self))
            if stride == 1:
                return list(self.span(start, stop))
            return [self[i] for i in range(start, stop, stride)]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        return next(self.span(index, index + 1))


def generate(table: Table, sets: Iterable[str] = DEFAULT_SETS, walks: int = DEFAULT_WALKS, seed: int = DEFAULT_SEED,
             walk_length: int = DEFAULT_WALK_LENGTH, exploration: Exploration | None = None,
             budget: int = DEFAULT_BUDGET) -> tuple[Manifest, list[Vector]]:
    """The vectors of the chosen coverage sets, and the manifest that counts them."""
    manifest, vectors = generate_extended(table, sets, walks, seed, walk_length, exploration, budget)
    return manifest, vectors.made


def generate_extended(table: Table, sets: Iterable[str] = DEFAULT_SETS, walks: int = DEFAULT_WALKS,
                      seed: int = DEFAULT_SEED, walk_length: int = DEFAULT_WALK_LENGTH,
                      exploration: Exploration | None = None, budget: int = DEFAULT_BUDGET,
                      extra_states: int = 0) -> tuple[Manifest, Vectors]:
    """``generate``, and with ``extra_states`` K > 0 the ``suffixes`` set's extension for
    implementations with up to K more states than the table (``extra_states``): those
    vectors are counted at once and made only as they are read.
    """
    chosen = [s for s in SETS if s in set(sets)]
    ex = exploration or explore(table)
    out = _Collector(table)
    info: dict[str, dict[str, Any]] = {}
    if "rows" in chosen or "events" in chosen:
        rows_info, events_info = _rows_and_events(table, ex, out, "rows" in chosen, "events" in chosen)
        if "rows" in chosen:
            info["rows"] = rows_info
        if "events" in chosen:
            info["events"] = events_info
    if "row-pairs" in chosen:
        info["row-pairs"] = _row_pairs(table, ex, out)
    if "walks" in chosen:
        info["walks"] = _walks(table, out, walks, seed, walk_length)
    if "guided" in chosen:
        found, info["guided"] = guided_walks(table, ex, budget, seed, walk_length)
        width = len(str(len(found)))
        for w, walk in enumerate(found, start=1):
            out.add(f"guided-{w:0{width}d}", f"guided:{w}", walk)
    extra = None
    if "suffixes" in chosen:
        info["suffixes"], u = _suffixes(table, ex, out)
        if extra_states > 0:
            extra = ExtraStates(table, ex, u, extra_states)
    made = out.vectors()
    if "invalid" in chosen:
        invalid = invalid_vectors(table, ex)
        made.extend(invalid)
        info["invalid"] = {"items": len(invalid), "covered": len(invalid)}
    vectors = Vectors(made, extra)
    for name, data in info.items():
        data["vectors"] = sum(1 for v in made if any(c.split(":", 1)[0] == _TAG[name] for c in v.covers))
    if extra is not None:
        info["suffixes"].update(extra_states=extra_states, extended=vectors.extra_count)
        info["suffixes"]["vectors"] += vectors.extra_count
    options = {"configurations": ex.count, "labels": len(ex.labels), "walks": walks, "seed": seed,
               "walk_length": walk_length, "budget": budget, "extra_states": extra_states}
    return Manifest(table.machine, info, len(vectors), options), vectors


_TAG = {"rows": "row", "events": "event", "row-pairs": "rows", "walks": "walk", "guided": "guided",
        "suffixes": "suffix", "invalid": "invalid"}


def _rows_and_events(table: Table, ex: Exploration, out: _Collector, want_rows: bool,
                     want_events: bool) -> tuple[dict[str, Any], dict[str, Any]]:
    width = len(str(len(table.rows)))
    row_found: dict[int, tuple[Label, ...]] = {}
    events: list[tuple[str, tuple[Label, ...]]] = []
    errors = 0
    for i in range(ex.count):
        state, values = ex.config(i)
        prefix = ex.path(i)
        config = describe_config(table, state, values)
        for label in ex.labels:
            result = _step(table, state, values, label)
            if result is None:
                errors += 1
                continue
            labels = (*prefix, label)
            events.append((f"event:{config}/{describe_label(table, label)}", labels))
            for row in result.rows:
                row_found.setdefault(row.index, labels)
    if want_rows:
        for index in sorted(row_found):
            out.add(f"row-{index:0{width}d}", f"row:{index}", row_found[index])
    if want_events:
        pad = len(str(len(events)))
        for number, (cover, labels) in enumerate(events, start=1):
            out.add(f"event-{number:0{pad}d}", cover, labels)
    pairs = len(events)
    rows_info = {"items": len(table.rows), "covered": len(row_found),
                 "uncovered": [r.index for r in table.rows if r.index not in row_found]}
    events_info = {"items": ex.count * len(ex.labels), "covered": pairs, "unspecified": errors}
    return rows_info, events_info


def _row_pairs(table: Table, ex: Exploration, out: _Collector) -> dict[str, Any]:
    """Breadth-first over (configuration, last row fired; 0 after a step that fired none)."""
    width = len(str(len(table.rows)))
    parent: dict[tuple[int, int], tuple[tuple[int, int], Label] | None] = {(0, 0): None}
    queue = deque([(0, 0)])
    found: dict[tuple[int, int], tuple[Label, ...]] = {}

    while queue:
        node = queue.popleft()
        i, last = node
        state, values = ex.config(i)
        for label in ex.labels:
            result = _step(table, state, values, label)
            if result is None:
                continue
            fired = [last, *(r.index for r in result.rows)] if result.rows else []
            for pair in itertools.pairwise(fired):
                if pair[0] and pair not in found:
                    found[pair] = (*path_back(parent, node), label)
            target = ex.index_of(result.state, result.vars)
            nxt = (target if target is not None else i, result.rows[-1].index if result.rows else 0)
            if nxt not in parent:
                parent[nxt] = (node, label)
                queue.append(nxt)
    for a, b in sorted(found):
        out.add(f"rows-{a:0{width}d}-{b:0{width}d}", f"rows:{a}>{b}", found[(a, b)])
    return {"items": len(found), "covered": len(found)}


def _walks(table: Table, out: _Collector, count: int, seed: int, length: int) -> dict[str, Any]:
    """Random walks; an event that would end the run in a final state only as the last step."""
    rng = random.Random(seed)
    labels = labels_of(table)
    width = len(str(count))
    total = 0
    for w in range(1, count + 1):
        state, values = table.initial.index, table.initial_vars()
        walk: list[Label] = []
        for n in range(length):   # bounded by its count, not by the walk it grows
            options = []
            for label in labels:
                result = _step(table, state, values, label)
                if result is not None and (not table.states[result.state].final or n == length - 1):
                    options.append((label, result))
            if not options:
                break
            label, result = options[rng.randrange(len(options))]
            walk.append(label)
            state, values = result.state, result.vars
        if walk:
            total += len(walk)
            out.add(f"walk-{w:0{width}d}", f"walk:{w}", walk)
    return {"items": count, "covered": count, "seed": seed, "length": length, "steps": total}



def _suffixes(table: Table, ex: Exploration, out: _Collector) -> tuple[dict[str, Any], Universe]:
    """Shortest path, event, then each identification sequence of where the event leads."""
    u = universe(table, (ex.config(i) for i in range(ex.count)), ex.labels)
    items: list[tuple[str, tuple[Label, ...]]] = []
    suffixes: set[tuple[int, ...]] = set()

    def check(cover: str, prefix: tuple[Label, ...], target: int) -> None:
        for k, suffix in enumerate(u.identification(target), start=1):
            suffixes.add(suffix)
            items.append((f"{cover}#{k}", _defined(table, (*prefix, *(ex.labels[j] for j in suffix)))))

    initial = u.index[ex.config(0)]
    check(f"suffix:{describe_config(table, *ex.config(0))}", (), initial)
    for i in range(ex.count):
        state, values = ex.config(i)
        prefix, at = tuple(ex.path(i)), u.index[(state, values)]
        config = describe_config(table, state, values)
        for j, label in enumerate(ex.labels):
            target = u.successors[at][j]
            if target >= 0:
                check(f"suffix:{config}/{describe_label(table, label)}", (*prefix, label), target)
    pad = len(str(len(items)))
    for number, (cover, labels) in enumerate(items, start=1):
        out.add(f"suffix-{number:0{pad}d}", cover, labels)
    return {"items": len(items), "covered": len(items), "suffixes": len(suffixes),
            "longest": max(map(len, suffixes), default=0), "universe": len(u.configs),
            "classes": len(set(u.final))}, u


def _defined(table: Table, labels: tuple[Label, ...]) -> tuple[Label, ...]:
    """The labels up to the first step that breaks the table's rules (an identification
    sequence may tell configurations apart by such an error, which no vector can expect)."""
    state, values = table.initial.index, table.initial_vars()
    for n, label in enumerate(labels):
        result = _step(table, state, values, label)
        if result is None:
            return labels[:n]
        state, values = result.state, result.vars
    return labels
