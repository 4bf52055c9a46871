"""Vector generation: complete coverage sets, shortest prefixes, deterministic output."""

from __future__ import annotations

import io
import itertools
import json
from collections import deque
from collections.abc import Sequence
from pathlib import Path

import pytest
from agentfsm.spec import Table, load_table
from agentfsm.spec.expr import Value
from agentfsm.spec.semantics import step
from agentfsm.spec.vectorfile import (
    Expect,
    Label,
    Manifest,
    Step,
    Vector,
    VectorError,
    expected_run,
    read_vectors,
    vector_labels,
    write_vectors,
)
from agentfsm.verify.conformance.vectors import Vectors, generate, generate_extended
from agentfsm.verify.table.explore import labels_of
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies_tables import tables

Config = tuple[int, tuple[Value, ...]]


@pytest.fixture(scope="module")
def generated(loom: Table) -> tuple[Manifest, list[Vector]]:
    return generate(loom)


def depths(table: Table) -> dict[Config, int]:
    """Breadth-first depth of every reachable configuration, straight from ``step``."""
    start = (table.initial.index, table.initial_vars())
    seen = {start: 0}
    queue = deque([start])
    while queue:
        config = queue.popleft()
        for label in labels_of(table):
            result = step(table, *config, *label)
            nxt = (result.state, result.vars)
            if nxt not in seen:
                seen[nxt] = seen[config] + 1
                queue.append(nxt)
    return seen


def tagged(vectors: list[Vector], prefix: str) -> dict[str, Vector]:
    return {c: v for v in vectors for c in v.covers if c.startswith(prefix)}


def test_every_row_has_a_shortest_vector(loom: Table, generated: tuple[Manifest, list[Vector]]) -> None:
    manifest, vectors = generated
    by_row = tagged(vectors, "row:")
    assert set(by_row) == {f"row:{r.index}" for r in loom.rows}
    assert manifest.sets["rows"]["uncovered"] == []
    shortest: dict[int, int] = {}
    for (state, values), depth in depths(loom).items():
        for label in labels_of(loom):
            for row in step(loom, state, values, *label).rows:
                shortest[row.index] = min(shortest.get(row.index, depth + 1), depth + 1)
    for row in loom.rows:
        vector = by_row[f"row:{row.index}"]
        labels = vector_labels(loom, vector)
        *_, (_, fired) = expected_run(loom, labels)
        assert row in fired
        assert len(vector.steps) == shortest[row.index]


def test_every_configuration_meets_every_event(loom: Table, generated: tuple[Manifest, list[Vector]]) -> None:
    manifest, vectors = generated
    configs = depths(loom)
    by_pair = tagged(vectors, "event:")
    assert len(by_pair) == len(configs) * len(labels_of(loom)) == manifest.sets["events"]["covered"]
    rejected = 0
    for vector in by_pair.values():
        labels = vector_labels(loom, vector)
        state, values = loom.initial.index, loom.initial_vars()
        for label in labels[:-1]:
            result = step(loom, state, values, *label)
            state, values = result.state, result.vars
        assert len(labels) == configs[(state, values)] + 1
        last = vector.steps[-1].expect
        assert isinstance(last, Expect)
        rejected += not last.accepted
    assert rejected > 0


def pairs_in(table: Table, labels: list[Label]) -> set[tuple[int, int]]:
    found, last = set(), 0
    for _, rows in expected_run(table, labels):
        fired = [last, *(r.index for r in rows)] if rows else []
        found |= {p for p in itertools.pairwise(fired) if p[0]}
        last = rows[-1].index if rows else 0
    return found


def test_each_row_pair_vector_ends_with_its_pair(loom: Table, generated: tuple[Manifest, list[Vector]]) -> None:
    _, vectors = generated
    for cover, vector in tagged(vectors, "rows:").items():
        a, b = (int(x) for x in cover[len("rows:"):].split(">"))
        labels = vector_labels(loom, vector)
        assert (a, b) in pairs_in(loom, labels)
        assert (a, b) not in pairs_in(loom, labels[:-1])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=10_000), max_size=40))
def test_no_consecutive_rows_escape_the_row_pair_set(loom: Table, picks: list[int]) -> None:
    labels = labels_of(loom)
    walk = [labels[p % len(labels)] for p in picks]
    _, vectors = generate(loom, sets=["row-pairs"])
    covered = {tuple(int(x) for x in c[len("rows:"):].split(">")) for v in vectors for c in v.covers}
    assert pairs_in(loom, walk) <= covered


def test_walks_are_seeded(loom: Table) -> None:
    one = generate(loom, sets=["walks"], walks=5, seed=1)[1]
    assert one == generate(loom, sets=["walks"], walks=5, seed=1)[1]
    assert one != generate(loom, sets=["walks"], walks=5, seed=2)[1]
    ends = [v.steps[-1].expect for v in one]
    assert len(one) == 5 and all(len(v.steps) == 60 or (isinstance(e, Expect) and loom.state(e.state).final)
                                 for v, e in zip(one, ends, strict=True))


def test_output_is_deterministic_and_round_trips(loom: Table, tmp_path: Path) -> None:
    texts = []
    for _ in range(2):
        out = io.StringIO()
        write_vectors(out, *generate(loom))
        texts.append(out.getvalue())
    assert texts[0] == texts[1]
    path = tmp_path / "v.jsonl"
    path.write_text(texts[0])
    manifest, vectors = read_vectors(path)
    assert manifest is not None and manifest.vectors == len(vectors) == len(texts[0].splitlines()) - 1
    assert vectors == generate(loom)[1]


def test_identical_vectors_are_merged(generated: tuple[Manifest, list[Vector]]) -> None:
    _, vectors = generated
    sequences = [json.dumps([(s.event, s.params) for s in v.steps]) for v in vectors]
    assert len(set(sequences)) == len(sequences)
    assert vectors[0].id == "loom-agent/row-01"
    assert vectors[0].covers[0] == "row:1" and any(c.startswith("event:") for c in vectors[0].covers)


@pytest.mark.parametrize(("line", "message"), [
    ("[1, 2]", "a line must be a JSON object"),
    ('{"id": "a", "machine": "m"}', "malformed vector: 'steps'"),
    ('{"id": "a", "machine": "m", "steps": []}', "'steps' must be a non-empty list"),
    ('{"id": "a", "machine": "m", "steps": [{"event": "E", "expect": {"accepted": 1, "state": "S"}}]}',
     "boolean 'accepted'"),
    ('{"id": "a", "machine": "m", "steps": [{"event": "E", "params": {"x": 1.5}, '
     '"expect": {"accepted": true, "state": "S"}}]}', "'params' must be an object of integers"),
])
def test_malformed_vector_files_name_the_line(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "v.jsonl"
    path.write_text('{"manifest": 1, "machine": "m"}\n\n' + line + "\n")
    with pytest.raises(VectorError, match=f"{path}:3: error: .*{message}"):
        read_vectors(path)


def test_vectors_naming_unknown_events_are_refused(loom: Table) -> None:
    vector = generate(loom, sets=["rows"])[1][0]
    bad = Vector(vector.id, vector.machine, vector.covers,
                 (Step("Nope", {}, vector.steps[0].expect),))
    with pytest.raises(VectorError, match="event 'Nope' is not in table loom-agent"):
        vector_labels(loom, bad)


def test_extension_vectors_are_counted_before_they_are_made(loom: Table) -> None:
    manifest, vectors = generate_extended(loom, extra_states=1)
    made = list(vectors)
    assert len(made) == len(vectors) == manifest.vectors
    assert len({v.id for v in made}) == len(made)
    extension = made[len(vectors.made):]
    assert len(extension) == vectors.extra_count == manifest.sets["suffixes"]["extended"]
    assert vectors[len(vectors) - 1] == made[-1] and vectors[-2:] == made[-2:]
    for vector in extension[:200]:
        # Each is a pair, one event in front, then an identification sequence, as the table prescribes.
        assert "+" in vector.covers[0]
        assert [s for s, _ in expected_run(loom, vector_labels(loom, vector))] == list(vector.steps)


@pytest.fixture(scope="module")
def extended_two() -> tuple[list[Vector], Sequence[Vector]]:
    table = load_table(Path(__file__).resolve().parents[2] / "spec" / "explorer-evaluator.yaml")
    vectors = generate_extended(table, sets=["rows", "suffixes"], extra_states=2)[1]
    return list(vectors), vectors


@settings(max_examples=60, deadline=None)
@given(start=st.integers(0, 80_000), length=st.integers(0, 3000))
def test_any_span_is_the_same_run_of_vectors_as_a_full_read(extended_two: tuple[list[Vector], Sequence[Vector]],
                                                            start: int, length: int) -> None:
    """``span`` skips what comes before it by counts: the vectors, ids and steps, are those a full read makes there."""
    made, vectors = extended_two
    assert isinstance(vectors, Vectors)
    assert list(vectors.span(start, start + length)) == made[start:start + length]


@settings(max_examples=30, deadline=None)
@given(tables(max_states=4, max_rows=8))
def test_generated_vectors_share_a_step_where_they_take_the_same_event_from_the_same_configuration(
        table: Table) -> None:
    """Shared steps (a harness learns each once) are the steps each vector's own run gives."""
    made = generate(table, sets=("rows", "events", "row-pairs", "walks", "suffixes"))[1]
    at: dict[tuple[object, ...], Step] = {}
    for vector in made:
        labels = vector_labels(table, vector)
        assert [s for s, _ in expected_run(table, labels)] == list(vector.steps)
        state, values = table.initial.index, table.initial_vars()
        for label, s in zip(labels, vector.steps, strict=True):
            assert at.setdefault((state, values, label), s) is s
            result = step(table, state, values, *label)
            state, values = result.state, result.vars
