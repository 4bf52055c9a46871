"""A visited set of packed configuration codes, looked up and added to a batch at a time.

The level-at-a-time explorer looks up and inserts a whole batch of codes at once: a
Python dict would cost an interpreter round trip per code, a sorted array a re-sort per
batch. When every code is below ``DENSE_CODES`` (a table whose fields fit in 24 bits) the
set is a plain array indexed by the code, holding number + 1 (0: absent): one gather per
lookup, one scatter per insert, and zeroed pages cost no memory until a code lands on
them. Up to ``DENSE_MAX`` it starts as such an array too, counting the pages its codes
land on: while they cost at most ``SPARSE_BYTES`` per code (what the hash table costs at
least) or ``DENSE_FLOOR`` in all, it stays an array; past that (codes spread thin over
a wide span) it moves its codes into the hash table once and goes on there. Otherwise it
is an open-addressing hash table (linear probing, at most half the slots in use, a few
array passes per batch). Codes are below 2**63 (non-negative ``int64``); an empty slot
holds -1.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

EMPTY = -1
DENSE_CODES = 1 << 24   # below this span: an array, whatever the spread of the codes
DENSE_MAX = 1 << 31   # below this span: an array while it is dense enough (numbers are int32)
PAGE_BITS = 10   # 2**10 int32 numbers: one 4 KiB page of the array
SPARSE_BYTES = 32   # the hash table's least bytes per code (two int64 arrays, at most half full)
DENSE_FLOOR = 64 << 20   # bytes the array may always use (what a 2**24 span costs)
GOLDEN = 0x9E3779B97F4A7C15   # Fibonacci hashing: the top bits of code * 2**64/phi, modulo 2**64

Ints = npt.NDArray[np.int64]


def code_index(span: int, expected: int) -> DenseIndex | CodeIndex:
    """The visited set for codes below ``span``, about ``expected`` of them to start with."""
    if span <= DENSE_CODES:
        return DenseIndex(span)
    if span <= DENSE_MAX:
        try:
            return DenseIndex(span, watched=True)
        except MemoryError:   # no room for the span even unbacked (a ulimit -v): the hash table needs less
            pass
    return CodeIndex(expected)


class DenseIndex:
    """Codes to configuration numbers through an array indexed by the code; ``watched``:
    counting the pages in use, and moving to a ``CodeIndex`` once they cost more than it."""

    def __init__(self, span: int, watched: bool = False) -> None:
        pages = (span >> PAGE_BITS) + 1
        self.numbers: npt.NDArray[np.int32] = np.zeros(pages << PAGE_BITS if watched else span, dtype=np.int32)
        self.pages: npt.NDArray[np.bool_] | None = np.zeros(pages, dtype=np.bool_) if watched else None
        self.touched = 0   # pages in use
        self.size = 0   # codes inserted
        self.hashed: CodeIndex | None = None   # where the codes went once they were too sparse

    def lookup(self, codes: npt.NDArray[Any]) -> Ints:
        """The number of each code, or -1 where it is absent."""
        if self.hashed is not None:
            return self.hashed.lookup(codes)
        found: Ints = self.numbers[codes].astype(np.int64)
        found -= 1
        return found

    def insert(self, codes: Ints, numbers: Ints) -> None:
        """Add codes that are distinct and absent, with their numbers."""
        if self.hashed is not None:
            self.hashed.insert(codes, numbers)
            return
        self.numbers[codes] = numbers + 1
        if self.pages is not None:
            pages = codes >> PAGE_BITS
            fresh = np.unique(pages[~self.pages[pages]])
            self.pages[fresh] = True
            self._grown(len(codes), len(fresh))

    def get(self, code: int) -> int | None:
        """One code's number (the scalar loop's dict interface)."""
        if self.hashed is not None:
            return self.hashed.get(code)
        found = int(self.numbers[code])
        return found - 1 if found else None

    def __setitem__(self, code: int, number: int) -> None:
        if self.hashed is not None:
            self.hashed[code] = number
            return
        self.numbers[code] = number + 1
        if self.pages is not None:
            page = code >> PAGE_BITS
            fresh = not self.pages[page]
            self.pages[page] = True
            self._grown(1, int(fresh))

    def _grown(self, codes: int, pages: int) -> None:
        """Count what an insert added; past the hash table's cost, move there."""
        self.size += codes
        self.touched += pages
        if self.touched << PAGE_BITS + 2 > max(DENSE_FLOOR, SPARSE_BYTES * self.size):
            self._move()

    def _move(self) -> None:
        """Move every code to a hash table, reading only the pages in use."""
        assert self.pages is not None
        pages = np.flatnonzero(self.pages)
        numbers = self.numbers.reshape(-1, 1 << PAGE_BITS)[pages]
        rows, offsets = np.nonzero(numbers)
        self.hashed = CodeIndex(self.size)
        self.hashed.insert((pages[rows] << PAGE_BITS) | offsets, numbers[rows, offsets].astype(np.int64) - 1)
        self.numbers = np.zeros(0, dtype=np.int32)
        self.pages = None


class CodeIndex:
    """Codes to configuration numbers; ``lookup`` gives -1 for a code not yet inserted.

    It starts, and grows once more than half its slots would be in use, to the least power of
    two of slots (at least 1,024 to start) that holds the codes expected, or held, in under a
    quarter of them: a batch's probes stay short, a move is rare."""

    def __init__(self, expected: int = 0) -> None:
        self.size = 0
        self._allocate(max(10, (2 * expected).bit_length() + 1))

    def _allocate(self, bits: int) -> None:
        self.bits = bits
        self.mask = (1 << bits) - 1
        self.keys: Ints = np.full(1 << bits, EMPTY, dtype=np.int64)
        self.values: Ints = np.zeros(1 << bits, dtype=np.int64)

    def _slots(self, codes: Ints) -> Ints:
        return ((codes.astype(np.uint64) * np.uint64(GOLDEN)) >> np.uint64(64 - self.bits)).astype(np.int64)

    def lookup(self, codes: npt.NDArray[Any]) -> Ints:
        """The number of each code, or -1 where it is absent."""
        codes = np.asarray(codes, dtype=np.int64)
        found = np.full(len(codes), -1, dtype=np.int64)
        pending = np.arange(len(codes))
        wanted = codes
        slots = self._slots(codes)
        while len(pending):
            keys = self.keys[slots]
            hit = keys == wanted
            found[pending[hit]] = self.values[slots[hit]]
            more = ~hit & (keys != EMPTY)
            pending, wanted, slots = pending[more], wanted[more], (slots[more] + 1) & self.mask
        return found

    def get(self, code: int) -> int | None:
        """One code's number (the scalar loop's dict interface)."""
        slot = self._slot(code)
        while True:
            key = int(self.keys[slot])
            if key == code:
                return int(self.values[slot])
            if key == EMPTY:
                return None
            slot = (slot + 1) & self.mask

    def __setitem__(self, code: int, number: int) -> None:
        """Add one absent code."""
        if 2 * (self.size + 1) > len(self.keys):
            self.insert(np.array([code], dtype=np.int64), np.array([number], dtype=np.int64))
            return
        slot = self._slot(code)
        while int(self.keys[slot]) != EMPTY:
            slot = (slot + 1) & self.mask
        self.keys[slot], self.values[slot] = code, number
        self.size += 1

    def _slot(self, code: int) -> int:
        return ((code * GOLDEN) & ((1 << 64) - 1)) >> (64 - self.bits)

    def insert(self, codes: Ints, numbers: Ints) -> None:
        """Add codes that are distinct and absent, with their numbers."""
        if 2 * (self.size + len(codes)) > len(self.keys):
            live = self.keys != EMPTY
            old_keys, old_values = self.keys[live], self.values[live]
            self._allocate((4 * (self.size + len(codes))).bit_length())   # more than twice the slots
            self.size = 0
            self._place(old_keys, old_values)
        self._place(codes, numbers)

    def _place(self, codes: Ints, numbers: Ints) -> None:
        self.size += len(codes)
        slots = self._slots(codes)
        while len(codes):
            free = self.keys[slots] == EMPTY
            claimed = slots[free]
            self.keys[claimed] = codes[free]   # two codes on one free slot: the last write wins
            won = np.zeros(len(codes), dtype=np.bool_)
            won[free] = self.keys[claimed] == codes[free]
            self.values[slots[won]] = numbers[won]
            lost = ~won
            codes, numbers, slots = codes[lost], numbers[lost], (slots[lost] + 1) & self.mask


def in_first_occurrence_order(codes: Ints, bits: int) -> tuple[Ints, Ints, Ints]:
    """The distinct codes ordered by first occurrence, where each first occurs, and for
    every code the rank of its distinct code in that order.

    When a code and a position fit in 63 bits together, plain sorts of packed (code,
    position) keys do it; otherwise an argsort with the least position per code."""
    if not len(codes):
        return codes, codes, codes
    shift = max(1, (len(codes) - 1).bit_length())
    low = (1 << shift) - 1
    positions = np.arange(len(codes), dtype=np.int64)
    if bits + shift <= 63:
        keys = np.sort((codes << shift) | positions)
        ordered, where = keys >> shift, keys & low
    else:
        where = np.argsort(codes)
        ordered = codes[where]
    starts = np.concatenate(([True], ordered[1:] != ordered[:-1]))
    group = np.cumsum(starts) - 1   # of each sorted code: its distinct code, in code order
    heads = np.flatnonzero(starts)
    first = np.minimum.reduceat(where, heads)
    by_position = np.sort((first << shift) | np.arange(len(heads)))   # distinct codes in first-occurrence order
    chosen = by_position & low
    rank = np.empty(len(heads), dtype=np.int64)
    rank[chosen] = np.arange(len(heads))
    inverse = np.empty(len(codes), dtype=np.int64)
    inverse[where] = rank[group]
    return ordered[heads][chosen], by_position >> shift, inverse
