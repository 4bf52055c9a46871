"""The visited sets and the first-occurrence ordering, against a dict and a list.

The explorers trust the visited set to answer every code's number, -1 for a code not yet
added, after any mix of batch and single inserts; and ``code_index`` to pick the set the
module's docstring promises for a span, moving a watched array to the hash table exactly
when its pages cost more than the documented bytes.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from agentfsm.verify.kernel import visited
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

SPAN = 1001   # not a whole number of pages (of 4 codes here, of 1,024 as shipped): the last code's page is partly used

# Operations on a visited set: ("batch", codes, numbers), ("one", code, number).
Operation = tuple[str, list[int], list[int]]


@st.composite
def operations(draw: st.DrawFn, top: int, number_top: int) -> list[Operation]:
    """Distinct codes below ``top``, added in batches and one at a time, with numbers (0 included)."""
    codes = draw(st.lists(st.integers(0, top - 1), unique=True, max_size=400))
    numbers = draw(st.lists(st.integers(0, number_top), min_size=len(codes), max_size=len(codes)))
    ops: list[Operation] = []
    at = 0
    while at < len(codes):
        size = draw(st.integers(0, 12))
        if draw(st.booleans()):
            ops.append(("batch", codes[at:at + size], numbers[at:at + size]))
        else:
            ops += [("one", [c], [n]) for c, n in zip(codes[at:at + size], numbers[at:at + size], strict=True)]
        at += size
    return ops


def small_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    """4-code pages; an array may use 4 pages, then 4 bytes a code."""
    monkeypatch.setattr(visited, "PAGE_BITS", 2)
    monkeypatch.setattr(visited, "DENSE_FLOOR", 4 * 16)
    monkeypatch.setattr(visited, "SPARSE_BYTES", 4)


def absent_codes(added: dict[int, int], top: int) -> list[int]:
    near = {c + d for c in added for d in (-1, 1)} | {0, top - 1}
    return sorted(c for c in near if 0 <= c < top and c not in added)


def check_table(index: visited.CodeIndex) -> None:
    """At most half the slots in use, each code once, and the mask covering the slots."""
    live = index.keys[index.keys != visited.EMPTY]
    assert index.size == len(live) == len(set(live.tolist()))
    assert 2 * index.size <= len(index.keys) == 1 << index.bits
    assert index.mask == len(index.keys) - 1


def apply(index: visited.DenseIndex | visited.CodeIndex, ops: list[Operation], top: int) -> Iterator[dict[int, int]]:
    """Apply each operation, checking every answer against a dict; yields the dict after each."""
    added: dict[int, int] = {}
    for kind, codes, numbers in ops:
        if kind == "batch":
            index.insert(np.array(codes, dtype=np.int64), np.array(numbers, dtype=np.int64))
        else:
            assert index.get(codes[0]) is None
            index[codes[0]] = numbers[0]
        added.update(zip(codes, numbers, strict=True))
        every = list(added)
        missing = absent_codes(added, top)
        assert index.lookup(np.array(every, dtype=np.int64)).tolist() == [added[c] for c in every]
        assert [index.get(c) for c in every] == [added[c] for c in every]
        assert index.lookup(np.array(missing, dtype=np.int64)).tolist() == [-1] * len(missing)
        assert [index.get(c) for c in missing] == [None] * len(missing)
        hashed = index if isinstance(index, visited.CodeIndex) else index.hashed
        if hashed is not None:
            check_table(hashed)
        yield added


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=operations(SPAN, (1 << 31) - 2), kind=st.sampled_from(["dense", "watched"]))
def test_an_array_answers_as_a_dict_does(ops: list[Operation], kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Codes up to the span's last, numbers up to int32's last less one; the watched array
    moves to the hash table past four 4-code pages and goes on answering the same. (The
    fixture only sets module constants, the same for every example.)"""
    small_pages(monkeypatch)
    index = visited.DenseIndex(SPAN, watched=kind == "watched")
    moved = False
    for added in apply(index, ops, SPAN):
        pages = len({c >> 2 for c in added})
        if kind == "watched":   # after each insert: 16 bytes a page against 64 in all or 4 a code
            moved = moved or 16 * pages > max(64, 4 * len(added))
            assert (index.hashed is not None) == moved
            assert moved or (index.touched, index.size) == (pages, len(added))
        else:
            assert index.hashed is None and index.pages is None


@settings(max_examples=150, deadline=None)
@given(ops=operations(1 << 63, (1 << 63) - 1), expected=st.integers(0, 600))
def test_the_hash_table_answers_as_a_dict_does(ops: list[Operation], expected: int) -> None:
    """Codes over all 63 bits (the hash uses the top bits of a 64-bit product), batches and
    single codes mixed, so a code placed by the batch path is found by the scalar one."""
    index = visited.CodeIndex(expected)
    for _ in apply(index, ops, 1 << 63):
        pass


def test_crowded_slots_are_probed_past_on_both_paths() -> None:
    """Codes whose hashes share a slot: each is found past the others, by the batch and the
    single lookup alike, and a code absent from a run of full slots is not found."""
    index = visited.CodeIndex()
    slots = index._slots(np.arange(1 << 16, dtype=np.int64))
    same = np.flatnonzero(slots == slots[0])[:40]
    assert len(same) >= 20
    index.insert(same[:10], np.arange(10, dtype=np.int64))
    for k, code in enumerate(same[10:20].tolist()):
        index[code] = 10 + k
    assert index.lookup(same[:20]).tolist() == list(range(20))
    assert [index.get(int(c)) for c in same[:20]] == list(range(20))
    assert index.lookup(same[20:]).tolist() == [-1] * len(same[20:])
    assert [index.get(int(c)) for c in same[20:]] == [None] * len(same[20:])
    check_table(index)


def least_room(codes: int, at_least: int) -> int:
    """The least power of two, at least ``at_least``, above four times ``codes``."""
    slots = at_least
    while slots <= 4 * codes:
        slots *= 2
    return slots


@pytest.mark.parametrize("expected", [0, 1, 255, 256, 500, 511, 512, 1000])
def test_the_hash_table_grows_at_half_full_to_under_a_quarter_full(expected: int) -> None:
    """It starts with the least room for ``expected`` codes in under a quarter of its slots
    (at least 1,024), fills a code at a time up to half its slots, and on the code that
    would pass half grows to the least room for what it holds (more than twice as large)."""
    index = visited.CodeIndex(expected)
    start = len(index.keys)
    assert start == least_room(expected, 1024)
    index.insert(np.arange(expected, dtype=np.int64) << 20, np.arange(expected, dtype=np.int64))
    while 2 * (index.size + 1) <= len(index.keys):
        index[index.size << 20] = index.size
    assert len(index.keys) == start and index.lookup(np.array([-5, 1 << 40])).tolist() == [-1, -1]
    assert index.get(-5) is None and index.get(1 << 40) is None
    index[index.size << 20] = index.size
    assert len(index.keys) == least_room(index.size, 1024) > 2 * start
    check_table(index)
    assert index.lookup(np.arange(index.size) << 20).tolist() == list(range(index.size))
    assert [index.get(k << 20) for k in range(index.size)] == list(range(index.size))


def test_a_batch_that_would_pass_half_grows_the_table_first() -> None:
    """Codes and numbers differ (code = number * 2**20 + 3), so that a move that mixes them up shows."""
    index = visited.CodeIndex()
    half = len(index.keys) // 2

    def add(low: int, high: int) -> None:
        numbers = np.arange(low, high, dtype=np.int64)
        index.insert((numbers << 20) + 3, numbers)

    add(0, half)
    assert len(index.keys) == 2 * half
    add(half, half + 1)
    assert len(index.keys) == least_room(half + 1, 1024)
    big = 7000   # 4 * 7000 and 5 * 7000 lie on either side of 2**15: the room is exact
    add(half + 1, big)
    assert len(index.keys) == least_room(big, 1024)
    check_table(index)
    codes = (np.arange(big, dtype=np.int64) << 20) + 3
    assert index.lookup(codes).tolist() == list(range(big))
    assert [index.get(int(c)) for c in codes[::97]] == list(range(0, big, 97))


class Recorded:
    """Stands for DenseIndex: records what ``code_index`` asked for, allocating nothing."""

    def __init__(self, span: int, watched: bool = False) -> None:
        self.span, self.watched = span, watched


@pytest.mark.parametrize(("span", "chosen"), [
    (1, "array"), (1 << 24, "array"), ((1 << 24) + 1, "watched"), (1 << 31, "watched"),
    ((1 << 31) + 1, "hashed"), (1 << 63, "hashed")])
def test_the_span_picks_the_visited_set(span: int, chosen: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Up to 2**24 codes a plain array; up to 2**31 an array watched for sparseness; past
    that the hash table, as the module's docstring promises."""
    monkeypatch.setattr(visited, "DenseIndex", Recorded)
    index: Any = visited.code_index(span, 7)
    found = "hashed" if isinstance(index, visited.CodeIndex) else "watched" if index.watched else "array"
    assert found == chosen
    if isinstance(index, Recorded):
        assert index.span == span


def test_an_array_refused_by_the_memory_limit_gives_the_hash_table(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(span: int, watched: bool = False) -> None:
        raise MemoryError

    monkeypatch.setattr(visited, "DenseIndex", refuse)
    index = visited.code_index(1 << 30, 5000)
    assert isinstance(index, visited.CodeIndex) and len(index.keys) >= 2 * 5000


def test_the_watched_array_may_always_use_64_mib() -> None:
    """With the shipped constants: codes each on its own 4 KiB page stay in the array up to
    16,384 pages (64 MiB) and move to the hash table on the next page, keeping every number."""
    index = visited.DenseIndex((1 << 26) + 5, watched=True)
    codes = np.arange(16385, dtype=np.int64) << 11   # one code every other page
    index.insert(codes[:16000], np.arange(16000, dtype=np.int64))
    for k in range(16000, 16384):
        index[int(codes[k])] = k
    assert index.hashed is None and index.touched == 16384 and index.size == 16384
    index[int(codes[16384])] = 16384
    assert index.hashed is not None and index.pages is None and len(index.numbers) == 0
    assert index.lookup(codes).tolist() == list(range(16385))
    assert index.get(int(codes[-1]) + 1) is None and index.lookup(np.array([3])).tolist() == [-1]


@pytest.mark.parametrize("one_at_a_time", [False, True])
def test_the_watched_array_moves_once_its_pages_cost_more_than_32_bytes_a_code(
        one_at_a_time: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the floor (set to 0 here), pages of 4 KiB stay while they hold 128 codes each (32
    bytes a code, what the hash table costs at least) and move on a page that holds fewer."""
    monkeypatch.setattr(visited, "DENSE_FLOOR", 0)
    short = visited.DenseIndex(1 << 20, watched=True)   # 4 pages, 511 codes: 32.06 bytes a code
    short.insert(np.arange(0, 4 << 10, 8, dtype=np.int64)[1:], np.arange(511, dtype=np.int64))
    assert short.hashed is not None
    index = visited.DenseIndex(1 << 20, watched=True)
    full = np.arange(0, 4 << 10, 8, dtype=np.int64)   # 4 pages of 1,024 slots, 128 codes each
    index.insert(full, np.arange(len(full), dtype=np.int64))
    assert index.hashed is None and index.touched == 4
    last = (9 << 10) + 7
    if one_at_a_time:
        index[last] = len(full)
    else:
        index.insert(np.array([last], dtype=np.int64), np.array([len(full)], dtype=np.int64))
    assert index.hashed is not None
    assert index.lookup(np.append(full, last)).tolist() == list(range(len(full) + 1))


def test_a_moved_array_adds_and_answers_through_its_hash_table(monkeypatch: pytest.MonkeyPatch) -> None:
    small_pages(monkeypatch)
    index = visited.DenseIndex(SPAN, watched=True)
    index.insert(np.arange(0, 20, 4, dtype=np.int64), np.arange(5, dtype=np.int64))   # 5 pages, 5 codes: moved
    assert index.hashed is not None
    index.insert(np.array([1000, 1], dtype=np.int64), np.array([7, 0], dtype=np.int64))
    index[2] = 9
    assert index.lookup(np.array([0, 4, 16, 1000, 1, 2, 3])).tolist() == [0, 1, 4, 7, 0, 9, -1]
    assert [index.get(c) for c in (1000, 1, 2, 3)] == [7, 0, 9, None]


def test_codes_on_pages_already_in_use_cost_no_page(monkeypatch: pytest.MonkeyPatch) -> None:
    small_pages(monkeypatch)
    index = visited.DenseIndex(SPAN, watched=True)
    index.insert(np.array([0, 1, 5], dtype=np.int64), np.array([0, 1, 2], dtype=np.int64))
    index[2] = 3
    index.insert(np.array([4, 6, 7], dtype=np.int64), np.array([4, 5, 6], dtype=np.int64))
    assert (index.touched, index.size, index.hashed) == (2, 7, None)


def first_occurrences(codes: list[int]) -> tuple[list[int], list[int], list[int]]:
    first = {c: codes.index(c) for c in dict.fromkeys(codes)}
    order = list(first)
    return order, list(first.values()), [order.index(c) for c in codes]


@settings(max_examples=200, deadline=None)
@given(codes=st.lists(st.integers(0, 40), max_size=200), bits=st.sampled_from([6, 63]))
def test_first_occurrences_in_order(codes: list[int], bits: int) -> None:
    """Both ways (packed keys, and the argsort for codes too wide to pack) agree with a dict."""
    fresh, at, rank = visited.in_first_occurrence_order(np.array(codes, dtype=np.int64), bits)
    assert (fresh.tolist(), at.tolist(), rank.tolist()) == first_occurrences(codes)


@pytest.mark.parametrize("count", [1, 2, 3, 4, 5, 8, 9])
def test_codes_as_wide_as_the_packed_keys_allow(count: int) -> None:
    """Codes of exactly 63 - shift bits, where shift numbers the positions: packed and
    sorted, the widest code still comes back whole; one bit wider goes the other way."""
    shift = max(1, (count - 1).bit_length())
    for bits in (63 - shift, 64 - shift):
        codes = [((1 << bits) - 1 - 3 * (k % 3)) for k in range(count)][::-1]
        fresh, at, rank = visited.in_first_occurrence_order(np.array(codes, dtype=np.int64), bits)
        assert (fresh.tolist(), at.tolist(), rank.tolist()) == first_occurrences(codes)


def test_no_codes_give_empty_arrays() -> None:
    empty = np.zeros(0, dtype=np.int64)
    assert [len(a) for a in visited.in_first_occurrence_order(empty, 5)] == [0, 0, 0]
