"""Distinguishing suffixes: checked against a brute-force search straight from ``step``."""

from __future__ import annotations

from collections import deque

from agentfsm.spec import Table
from agentfsm.spec.expr import Value
from agentfsm.spec.semantics import SemanticError, step
from agentfsm.spec.vectorfile import Label, Vector
from agentfsm.verify.conformance.distinguish import Config, Universe, universe
from agentfsm.verify.conformance.vectors import generate
from agentfsm.verify.table.explore import explore, labels_of
from hypothesis import given, settings
from strategies_tables import build, tables


def answer(table: Table, config: Config, label: Label) -> tuple[object, Config | None]:
    try:
        result = step(table, *config, *label)
    except SemanticError as exc:
        return ("error", exc.kind), None
    return (result.accepted, result.state, result.actions), (result.state, result.vars)


def shortest_separation(table: Table, a: Config, b: Config) -> int | None:
    """Breadth-first over pairs: the fewest events after which ``a`` and ``b`` answer differently."""
    labels = labels_of(table)
    seen = {(a, b)}
    queue = deque([(a, b, 0)])
    while queue:
        x, y, depth = queue.popleft()
        for label in labels:
            (seen_x, nx), (seen_y, ny) = answer(table, x, label), answer(table, y, label)
            if seen_x != seen_y:
                return depth + 1
            if nx is not None and ny is not None and (nx, ny) not in seen:
                seen.add((nx, ny))
                queue.append((nx, ny, depth + 1))
    return None


def built(table: Table) -> tuple[Universe, list[Config]]:
    ex = explore(table)
    reachable = [ex.config(i) for i in range(ex.count)]
    return universe(table, reachable, ex.labels), reachable


def check(table: Table, pairs_per_config: int | None = None) -> None:
    u, reachable = built(table)
    for config in reachable:
        a = u.index[config]
        suffixes = u.identification(a)
        look_alikes = [d for d in u.by_state[config[0]] if d != a][:pairs_per_config]
        for d in look_alikes:
            brute = shortest_separation(table, config, u.configs[d])
            assert u.first_split(a, d) == brute, (config, u.configs[d])
            told = any(u.tells_apart(a, d, s) for s in suffixes)
            assert told == (brute is not None)
            if brute is not None:
                assert len(u.separating(a, d)) == brute and u.tells_apart(a, d, u.separating(a, d))


def test_the_loom_tables_look_alikes_are_told_apart_exactly_when_they_can_be(loom: Table) -> None:
    check(loom)


def test_look_alikes_include_every_single_wrong_variable(loom: Table) -> None:
    u, reachable = built(loom)
    values: tuple[Value, ...]
    for state, values in reachable:
        for slot, var in enumerate(loom.variables):
            for value in var.domain:
                assert (state, (*values[:slot], value, *values[slot + 1:])) in u.index


@settings(max_examples=40, deadline=None)
@given(tables(max_states=4, max_rows=8))
def test_identification_sets_on_random_tables(table: Table) -> None:
    check(table, pairs_per_config=12)


def suffix_vectors(vectors: list[Vector]) -> list[Vector]:
    return [v for v in vectors if any(c.startswith("suffix:") for c in v.covers)]


def test_each_suffix_vector_extends_its_pairs_shortest_vector(loom: Table) -> None:
    manifest, vectors = generate(loom)
    events = {c.removeprefix("event:"): v for v in vectors for c in v.covers if c.startswith("event:")}
    found = suffix_vectors(vectors)
    assert found and manifest.sets["suffixes"]["vectors"] == len(found)
    for vector in found:
        for cover in (c for c in vector.covers if c.startswith("suffix:")):
            pair = cover.removeprefix("suffix:").rsplit("#", 1)[0]
            if "/" not in pair:   # the reset: the suffix starts from the initial configuration
                continue
            prefix = events[pair].steps
            assert vector.steps[:len(prefix)] == prefix and len(vector.steps) > len(prefix)


def test_without_look_alikes_there_are_no_suffixes() -> None:
    data = {"format": 1, "machine": "plain", "states": {"A": {"initial": True}, "B": {}},
            "events": {"Go": {}}, "transitions": [{"from": "A", "on": "Go", "to": "B"},
                                                 {"from": "B", "on": "Go", "to": "A"}]}
    manifest, vectors = generate(build(data))
    assert manifest.sets["suffixes"]["items"] == 0 and not suffix_vectors(vectors)
