"""Vector generation at its edges: the defaults docs/conformance.md shows, ids read without
making the vector, spans past the end."""

from __future__ import annotations

import io
import json

import pytest
from agentfsm.spec import Table, load_table_bytes
from agentfsm.spec.vectorfile import (
    Manifest,
    Vector,
    describe_config,
    describe_label,
    vector_labels,
    write_vectors,
)
from agentfsm.verify.conformance.distinguish import universe
from agentfsm.verify.conformance.vectors import Vectors, generate, generate_extended
from agentfsm.verify.table.explore import explore
from conftest import ROOT


def test_the_manifest_the_docs_show_is_the_loom_tables_with_the_default_options(loom: Table) -> None:
    """The defaults (20 walks of 60 steps from seed 0, every set) and each set's counts."""
    text = (ROOT / "docs" / "conformance.md").read_text()
    shown = text.split("**Line 1 is the manifest**", 1)[1].split("```json\n", 1)[1].split("```", 1)[0]
    out = io.StringIO()
    write_vectors(out, *generate(loom))
    assert json.loads(out.getvalue().splitlines()[0]) == json.loads(shown)


@pytest.fixture(scope="module")
def generated(loom: Table) -> tuple[Manifest, Vectors]:
    return generate_extended(loom, sets=["rows", "suffixes"], extra_states=1)


@pytest.fixture(scope="module")
def extended(generated: tuple[Manifest, Vectors]) -> tuple[list[Vector], Vectors]:
    """Every vector, read once in order, and the sequence that makes the extension ones lazily."""
    return list(generated[1]), generated[1]


def test_the_manifest_counts_the_extension_vectors_in_the_suffixes_set(generated: tuple[Manifest, Vectors]) -> None:
    manifest, vectors = generated
    made = sum(any(c.startswith("suffix:") for c in v.covers) for v in vectors.made)
    suffixes = manifest.sets["suffixes"]
    assert vectors.extra_count > 0 and made > 0
    assert (suffixes["extra_states"], suffixes["extended"]) == (1, vectors.extra_count)
    assert suffixes["vectors"] == made + vectors.extra_count
    assert manifest.vectors == len(vectors) == len(vectors.made) + vectors.extra_count
    assert manifest.options["extra_states"] == 1


def test_an_id_read_without_its_vector_is_the_id_of_the_vector_made_there(
        extended: tuple[list[Vector], Vectors]) -> None:
    ids = [v.id for v in extended[0]]
    vectors = extended[1]
    assert [vectors.vector_id(i) for i in range(len(vectors))] == ids
    plain = Vectors(vectors.made)
    assert [plain.vector_id(i) for i in range(len(plain))] == ids[:len(vectors.made)]


def test_extension_vectors_are_numbered_on_from_the_suffixes_set(extended: tuple[list[Vector], Vectors]) -> None:
    """The first extension vector's number is one past the ``suffixes`` set's last; every id is
    padded to the width of the whole count."""
    ids = [v.id for v in extended[0]]
    vectors = extended[1]
    last = max(int(i.rsplit("-", 1)[1]) for i in ids[:len(vectors.made)] if "/suffix-" in i)
    width = len(str(len(vectors)))
    assert vectors.extra_count > 0
    assert ids[len(vectors.made)] == f"loom-agent/suffix-{last + 1:0{width}d}"
    assert ids[-1] == f"loom-agent/suffix-{last + vectors.extra_count:0{width}d}"


def test_a_span_past_the_end_holds_the_vectors_there_are(extended: tuple[list[Vector], Vectors]) -> None:
    """As a slice does: with extension vectors and without."""
    made, vectors = extended
    assert list(vectors.span(len(vectors) - 2, len(vectors) + 5)) == made[-2:]
    plain = Vectors(vectors.made)
    assert list(plain.span(len(plain) - 2, len(plain) + 5)) == vectors.made[-2:]


def test_vectors_are_read_by_index_and_by_slice_as_from_a_list(extended: tuple[list[Vector], Vectors]) -> None:
    made, vectors = extended
    n, first = len(vectors), len(vectors.made)
    assert n == len(made) > first
    for index in (0, 1, first - 1, first, n - 1, -1, -2, -n, first - n):
        assert vectors[index] == made[index]
    for index in (n, -n - 1):
        with pytest.raises(IndexError):
            vectors[index]
    for cut in (slice(3, 50, 7), slice(first - 3, first + 40, 2), slice(None, None, -97),
                slice(first - 2, first + 2)):
        assert vectors[cut] == made[cut]


@pytest.mark.parametrize(("sets", "tag", "count"), [(["events"], "event", 1216), (["walks"], "walk", 20),
                                                    (["guided"], "guided", 50)])
def test_a_sets_vectors_are_numbered_from_one_padded_to_the_width_of_their_count(
        loom: Table, sets: list[str], tag: str, count: int) -> None:
    made = generate(loom, sets=sets)[1]
    width = len(str(count))
    assert [v.id for v in made] == [f"loom-agent/{tag}-{k:0{width}d}" for k in range(1, count + 1)]


OVERLAP = b"""format: 1
machine: overlap
variables:
  n: {type: int, min: 0, max: 3, init: 0}
states:
  A: {initial: true}
events:
  Up: {}
  Both: {}
transitions:
  - {from: A, on: Up, when: n < 3, to: A, set: {n: n + 1}}
  - {from: A, on: Both, when: n >= 1, to: A}
  - {from: A, on: Both, when: n >= 2, to: A, set: {n: 0}}
"""


def test_the_events_set_counts_the_pairs_that_break_the_rules_as_unspecified() -> None:
    """``Both`` from n = 2 and n = 3 enables two rows (a determinism error): no vector can expect
    an answer there, so those two pairs are unspecified and the other six are covered."""
    table = load_table_bytes(OVERLAP, "overlap.yaml")
    manifest, made = generate(table, sets=["events"])
    assert manifest.sets["events"] == {"items": 8, "covered": 6, "unspecified": 2, "vectors": 6}
    assert len(made) == 6



def test_a_pair_whose_step_breaks_the_rules_is_followed_by_no_sequence() -> None:
    """No vector can expect an answer past a determinism error, so ``Both`` from n = 2 and n = 3
    has no ``suffixes`` item, while ``Both`` from n = 1 has."""
    table = load_table_bytes(OVERLAP, "overlap.yaml")
    pairs = {c.rsplit("#", 1)[0] for v in generate(table, sets=["suffixes"])[1] for c in v.covers}
    both = {n: f"suffix:{describe_config(table, 0, (n,))}/{describe_label(table, ('Both', ()))}" for n in (1, 2, 3)}
    assert both[1] in pairs and both[2] not in pairs and both[3] not in pairs

DOOR = b"""format: 1
machine: door
states:
  A: {initial: true}
  F: {final: true}
events:
  Stay: {}
  Go: {}
transitions:
  - {from: A, on: Stay, to: A}
  - {from: A, on: Go, to: F}
"""


def test_a_walk_enters_a_final_state_only_at_its_last_step() -> None:
    """Every walk is as long as asked (``Stay`` is always there), and ``Go`` ends some of them."""
    table = load_table_bytes(DOOR, "door.yaml")
    made = generate(table, sets=["walks"], walks=20, walk_length=3)[1]
    events = [[s.event for s in v.steps] for v in made]
    assert all(len(e) == 3 and e[:2] == ["Stay", "Stay"] for e in events)
    assert {e[2] for e in events} == {"Stay", "Go"}


def test_the_sequences_after_each_pair_are_numbered_from_one(generated: tuple[Manifest, Vectors]) -> None:
    """``suffix:CONFIG/EVENT#K``: the K-th identification sequence after that pair, K = 1, 2, ..."""
    numbers: dict[str, set[int]] = {}
    for vector in generated[1].made:
        for cover in vector.covers:
            if cover.startswith("suffix:"):
                pair, k = cover.rsplit("#", 1)
                numbers.setdefault(pair, set()).add(int(k))
    assert len(numbers) > 100
    assert all(ks == set(range(1, len(ks) + 1)) for ks in numbers.values())


def test_the_suffixes_sets_vectors_are_numbered_from_one_in_the_order_of_their_pairs(loom: Table) -> None:
    """A sequence equal to an earlier one's is merged into it, so numbers may skip, never go back."""
    manifest, made = generate(loom, sets=["suffixes"])
    items = manifest.sets["suffixes"]["items"]
    numbers = [int(v.id.rsplit("-", 1)[1]) for v in made]
    assert made[0].id == f"loom-agent/suffix-{1:0{len(str(items))}d}"
    assert numbers == sorted(set(numbers)) and numbers[-1] <= items and len(numbers) == len(made) > 100


def test_the_reset_pair_is_followed_by_the_initial_configurations_sequences(loom: Table) -> None:
    """``suffix:CONFIG#K`` (no event): the initial configuration's K-th identification sequence,
    up to the first step that breaks the table's rules."""
    ex = explore(loom)
    u = universe(loom, (ex.config(i) for i in range(ex.count)), ex.labels)
    sequences = [[ex.labels[j] for j in s] for s in u.identification(u.index[ex.config(0)])]
    reset = f"suffix:{describe_config(loom, *ex.config(0))}#"
    by_k = {int(c[len(reset):]): v for v in generate(loom, sets=["suffixes"])[1] for c in v.covers
            if c.startswith(reset)}
    assert sorted(by_k) == list(range(1, len(sequences) + 1)) and len(sequences) > 1
    for k, vector in by_k.items():
        labels = vector_labels(loom, vector)
        assert labels and labels == sequences[k - 1][:len(labels)]


STILL = b"""format: 1
machine: still
states:
  A: {initial: true}
events:
  Stay: {}
transitions:
  - {from: A, on: Stay, to: A}
"""


def test_a_table_of_one_configuration_has_no_suffixes_and_its_extension_starts_at_one() -> None:
    """Nothing to tell apart: no identification sequence, the longest of none is 0, and the
    extension's one vector (the pair, then the events in front) is number 1."""
    manifest, vectors = generate_extended(load_table_bytes(STILL, "still.yaml"), sets=["suffixes"], extra_states=1)
    assert manifest.sets["suffixes"] == {"items": 0, "covered": 0, "suffixes": 0, "longest": 0, "universe": 1,
                                         "classes": 1, "vectors": 1, "extra_states": 1, "extended": 1}
    assert [v.id for v in vectors] == ["still/suffix-1"]
