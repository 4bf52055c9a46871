"""Distinguishing suffixes: checked against a brute-force search straight from ``step``."""

from __future__ import annotations

from collections import deque

import pytest
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


def one_counter(hi: int) -> Table:
    """One state and a counter ``n: 0..hi`` that no row changes: one reachable configuration
    and ``hi`` one-variable variants of it."""
    return build({"format": 1, "machine": "counter", "states": {"A": {"initial": True}},
                  "events": {"Tick": {}}, "variables": {"n": {"type": "int", "min": 0, "max": hi, "init": 0}},
                  "transitions": [{"from": "A", "on": "Tick", "to": "A"}]})


def test_the_universe_keeps_its_variants_up_to_200_000_configurations_and_not_one_more() -> None:
    """docs/conformance.md: beyond 200 000 configurations, the look-alikes are the reachable ones only."""
    assert len(built(one_counter(199_999))[0].configs) == 200_000
    assert len(built(one_counter(200_000))[0].configs) == 1


def test_separating_refuses_configurations_in_different_states_or_never_told_apart(loom: Table) -> None:
    """Its sequences tell look-alikes apart; configurations in different states are told apart
    by their state already (level 0), and no sequence separates a pair that always answers alike."""
    u, reachable = built(loom)
    a = u.index[reachable[0]]
    other = next(d for d in range(len(u.configs)) if u.configs[d][0] != u.configs[a][0])
    alike = next(d for d in u.by_state[u.configs[a][0]] if d != a and u.first_split(a, d) is None)
    assert u.first_split(a, other) == 0
    for b in (other, alike):
        with pytest.raises(AssertionError, match="only configurations in the same state"):
            u.separating(a, b)


def test_a_look_alike_whose_sequence_passes_through_the_initial_configuration_is_told_apart() -> None:
    """(B, n=1) and its look-alike (B, n=0) answer ``Back`` alike, the look-alike landing on the
    initial configuration (A, n=0), the first of the universe; only ``Check`` then tells them
    apart. No step breaks a rule on the way, so the sequence must be followed to its end."""
    table = build({"format": 1, "machine": "back", "states": {"A": {"initial": True}, "B": {}},
                   "events": {"Go": {}, "Back": {}, "Check": {}},
                   "variables": {"n": {"type": "int", "min": 0, "max": 1, "init": 0}},
                   "transitions": [{"from": "A", "on": "Go", "to": "B", "set": {"n": 1}},
                                   {"from": "B", "on": "Back", "to": "A"},
                                   {"from": "A", "on": "Check", "when": "n == 1", "to": "B"}]})
    u, _ = built(table)
    names = [name for name, _ in u.labels]
    a, d = u.index[(1, (1,))], u.index[(1, (0,))]
    assert u.successors[d][names.index("Back")] == 0
    suffix = u.separating(a, d)
    assert [names[j] for j in suffix] == ["Back", "Check"]
    assert u.tells_apart(a, d, suffix) and u.tells_apart(d, a, suffix)
    assert u.identification(a) == [suffix]


def test_a_sequence_both_configurations_break_alike_does_not_tell_them_apart() -> None:
    """(B, n=2, k=0) has three look-alikes. ``Inc`` sets n out of its range from n=2: it tells the
    configuration from those with a smaller n, and from (B, n=2, k=1) not at all, since both break
    the same rule there; ``Peek`` tells that one apart. The greedy choice counts, for each
    candidate, the look-alikes it tells apart, so a sequence that ends on a broken rule counts as
    telling none."""
    table = build({"format": 1, "machine": "inc", "states": {"A": {"initial": True}, "B": {}},
                   "events": {"Go": {}, "Inc": {}, "Peek": {}},
                   "variables": {"n": {"type": "int", "min": 0, "max": 2, "init": 0},
                                 "k": {"type": "int", "min": 0, "max": 1, "init": 0}},
                   "transitions": [{"from": "A", "on": "Go", "to": "B", "set": {"n": 2}},
                                   {"from": "B", "on": "Inc", "to": "B", "set": {"n": "n + 1"}},
                                   {"from": "B", "on": "Peek", "when": "k == 1", "to": "B"}]})
    u, _ = built(table)
    names = [name for name, _ in u.labels]
    inc, peek = (names.index("Inc"),), (names.index("Peek"),)
    a, broken_alike = u.index[(1, (2, 0))], u.index[(1, (2, 1))]
    assert u.successors[a][inc[0]] == u.successors[broken_alike][inc[0]] == -1
    assert u.tells_apart(a, broken_alike, inc) is False
    assert u.identification(a) == [inc, peek]


def test_variants_are_counted_once_per_configuration_they_vary_before_any_is_made() -> None:
    """400 reachable counts (n = 0..399) of a counter ``n: 0..hi``: each has ``hi`` variants, so
    400 * hi are counted against the 200 000, by arithmetic, although the universe they would
    make holds only ``hi + 1`` configurations."""
    def counter(hi: int) -> Table:
        return build({"format": 1, "machine": "counter", "states": {"A": {"initial": True}},
                      "events": {"Up": {}}, "variables": {"n": {"type": "int", "min": 0, "max": hi, "init": 0}},
                      "transitions": [{"from": "A", "on": "Up", "when": "n < 399", "to": "A", "set": {"n": "n + 1"}}]})
    assert len(built(counter(500))[0].configs) == 501
    assert len(built(counter(501))[0].configs) == 400
