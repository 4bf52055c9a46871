"""A visited set of packed configuration codes, looked up and added to a batch at a time.

The level-at-a-time explorer looks up and inserts a whole batch of codes at once: a
Python dict would cost an interpreter round trip per code, a sorted array a re-sort per
batch. When every code is below ``DENSE_CODES`` (a table whose fields fit in 24 bits) the
set is a plain array indexed by the code, holding number + 1 (0: absent): one gather per
lookup, one scatter per insert, and zeroed pages cost no memory until a code lands on
them. Otherwise it is an open-addressing hash table (linear probing, at most half the
slots in use, a few array passes per batch). Codes are below 2**63 (non-negative
``int64``); an empty slot holds -1.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

EMPTY = -1
DENSE_CODES = 1 << 24
GOLDEN = 0x9E3779B97F4A7C15   # Fibonacci hashing: the top bits of code * 2**64/phi, modulo 2**64

Ints = npt.NDArray[np.int64]


def code_index(span: int, expected: int) -> DenseIndex | CodeIndex:
    """The visited set for codes below ``span``, about ``expected`` of them to start with."""
    return DenseIndex(span) if span <= DENSE_CODES else CodeIndex(expected)


class DenseIndex:
    """Codes to configuration numbers through an array indexed by the code."""

    def __init__(self, span: int) -> None:
        self.numbers = np.zeros(span, dtype=np.int32)

    def lookup(self, codes: npt.NDArray[Any]) -> Ints:
        """The number of each code, or -1 where it is absent."""
        found: Ints = self.numbers[codes].astype(np.int64)
        found -= 1
        return found

    def insert(self, codes: Ints, numbers: Ints) -> None:
        """Add codes that are distinct and absent, with their numbers."""
        self.numbers[codes] = numbers + 1

    def get(self, code: int) -> int | None:
        """One code's number (the scalar loop's dict interface)."""
        found = int(self.numbers[code])
        return found - 1 if found else None

    def __setitem__(self, code: int, number: int) -> None:
        self.numbers[code] = number + 1


class CodeIndex:
    """Codes to configuration numbers; ``lookup`` gives -1 for a code not yet inserted."""

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
            self._allocate(max(self.bits + 1, (4 * (self.size + len(codes))).bit_length()))
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
