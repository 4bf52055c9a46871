"""System configurations as rows of small ints, and each row's unique int64 key.

The batch explorer (``batched``) works on a matrix with one row per configuration:
per instance its local code (the state and variables in mixed radix, state most
significant, so codes order as the scalar explorer's (state, vars) tuples), its mailbox
as ``capacity`` slots of message codes (0: empty; codes numbered in the sorted order of
every message a link can carry, so slot sequences order as mailbox tuples), its stalled
bit, and per fault the number spent. ``Layout`` encodes, decodes and keys such rows.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from functools import partial
from typing import TypeVar

import numpy as np
import numpy.typing as npt
from agentfsm.spec.expr import Value
from agentfsm.spec.system_model import System
from agentfsm.verify.kernel.visited import CodeIndex
from agentfsm.verify.system.step import Config, InstConf, Message

Ints = npt.NDArray[np.int64]
T = TypeVar("T")
MAX_MESSAGES = 1 << 15   # distinct linked messages a system may have for the array path
WORD = 62   # bits of a key word: the first holds columns, each later one a prefix number and columns
PREFIX = 32   # bits of a prefix number (its visited set numbers at most 2**32 prefixes)


def _local_radix(system: System, i: int) -> list[tuple[int, int, bool]]:
    """Per field of instance ``i``'s local code (the state, then each variable): (size, low, bool)."""
    table = system.instances[i].table
    fields = [(len(table.states), 0, False)]
    fields += [(v.size, 0 if v.type == "bool" else v.lo, v.type == "bool") for v in table.variables]
    return fields


def messages(system: System) -> list[Message] | None:
    """Every message a link can carry, sorted as the scalar explorer's tuples compare (so that
    codes order mailboxes as tuples do), or None when there are too many."""
    found: set[Message] = set()
    for link in system.links:
        for source in sorted(link.sources):
            inst = system.instances[source]
            action = inst.table.action_index[link.action]
            domains = [(inst.member,) if k < 0 else action.params[k].domain for k in link.params]
            count = 1
            for domain in domains:
                count *= len(domain)
            if len(found) + count > MAX_MESSAGES:
                return None
            found.update((link.event, values) for values in itertools.product(*domains))
    return sorted(found)


class Layout:
    """Where each part of a system configuration lives in a row, and the row's unique key.

    Columns: each instance's local code, then each instance's mailbox slots, then the
    stalled bits, then the fault counters. The key packs the columns into one int64:
    when they do not fit in ``WORD`` bits, the leading word is replaced by its number in
    a visited set of prefixes (chained), so keys stay injective."""

    def __init__(self, system: System, messages: list[Message]) -> None:
        n = len(system.instances)
        self.system = system
        self.messages: list[Message] = [("", ()), *messages]   # code 0: an empty slot
        self.message_code = {m: k + 1 for k, m in enumerate(messages)}
        self.radix = [_local_radix(system, i) for i in range(n)]
        self.local_size = [int(np.prod([size for size, _, _ in fields], dtype=object)) for fields in self.radix]
        self.box = []   # first slot column of each instance
        column = n
        for inst in system.instances:
            self.box.append(column)
            column += inst.capacity
        self.stalled = column
        self.spent = column + n
        self.width = self.spent + len(system.faults)
        message_bits = max(1, len(messages).bit_length())
        self.bits = [max(1, (s - 1).bit_length()) for s in self.local_size]
        self.bits += [message_bits] * (self.stalled - n) + [1] * n
        self.bits += [max(1, f.max.bit_length()) for f in system.faults]
        self.words = self._words()
        self.prefixes: list[CodeIndex] = [CodeIndex() for _ in self.words[1:]]
        self.prefix_counts = [0 for _ in self.words[1:]]
        self.local_memo: dict[tuple[int, int], InstConf] = {}

    def _words(self) -> list[list[int]]:
        """The columns of each key word, widest first."""
        order = sorted(range(self.width), key=lambda c: -self.bits[c])
        words: list[list[int]] = [[]]
        used, room = 0, WORD
        for c in order:
            if used + self.bits[c] > room:
                words.append([])
                used, room = 0, WORD - PREFIX
            words[-1].append(c)
            used += self.bits[c]
        return words

    def fits(self) -> bool:
        """Whether every column fits in its key word."""
        return all(sum(self.bits[c] for c in word) <= (WORD if k == 0 else WORD - PREFIX)
                   for k, word in enumerate(self.words))

    def key_bits(self) -> int:
        return sum(self.bits[c] for c in self.words[-1]) + (PREFIX if len(self.words) > 1 else 0)

    def _pack(self, rows: Ints, word: list[int]) -> Ints:
        code = np.zeros(len(rows), dtype=np.int64)
        for c in word:
            code = (code << self.bits[c]) | rows[:, c]
        return code

    def keys(self, rows: Ints) -> Ints:
        """The unique int64 key of each row."""
        code = self._pack(rows, self.words[0])
        for k, word in enumerate(self.words[1:]):
            index = self.prefixes[k]
            ids = index.lookup(code)
            missing = ids < 0
            if missing.any():
                fresh, inverse = np.unique(code[missing], return_inverse=True)
                numbers = self.prefix_counts[k] + np.arange(len(fresh), dtype=np.int64)
                index.insert(fresh, numbers)
                self.prefix_counts[k] += len(fresh)
                if self.prefix_counts[k] > 1 << PREFIX:
                    raise OverflowError(f"more than 2**{PREFIX} distinct key prefixes: the batches' keys would collide")
                ids[missing] = numbers[inverse]
            code = (ids << sum(self.bits[c] for c in word)) | self._pack(rows, word)
        return code

    def local(self, i: int, conf: InstConf) -> int:
        """Instance ``i``'s local code of (state, vars)."""
        code = 0
        for (size, lo, _), value in zip(self.radix[i], (conf[0], *conf[1]), strict=True):
            code = code * size + int(value) - lo
        return code

    def unlocal(self, i: int, code: int) -> InstConf:
        key = (i, code)
        found = self.local_memo.get(key)
        if found is None:
            values: list[Value] = []
            rest = code
            for size, lo, is_bool in reversed(self.radix[i]):
                rest, digit = divmod(rest, size)
                values.append(bool(digit) if is_bool else digit + lo)
            values.reverse()
            found = self.local_memo[key] = (int(values[0]), tuple(values[1:]))
        return found

    def encode(self, config: Config) -> list[int]:
        insts, boxes, stalled, spent = config
        row = [self.local(i, conf) for i, conf in enumerate(insts)]
        for i, box in enumerate(boxes):
            codes = [self.message_code[m] for m in box]
            row += codes + [0] * (self.system.instances[i].capacity - len(codes))
        row += [int(flag) for flag in stalled] + list(spent)
        return row

    def decode(self, rows: Ints) -> list[Config]:
        """The configurations of ``rows``: each part built once per distinct value, then zipped."""
        n = len(self.system.instances)
        insts = [_objects(rows[:, i], partial(self.unlocal, i)) for i in range(n)]
        boxes = []
        for i in range(n):
            columns = list(range(self.box[i], self.box[i] + self.system.instances[i].capacity))
            boxes.append(_objects(self._pack(rows, columns), partial(self._mailbox, columns)))
        flags = list(range(self.stalled, self.spent))
        stalled = _objects(self._pack(rows, flags), lambda code: tuple(bool(v) for v in self._unpack(code, flags)))
        counters = list(range(self.spent, self.width))
        spent = _objects(self._pack(rows, counters), lambda code: tuple(self._unpack(code, counters)))
        return list(zip(zip(*insts, strict=True), zip(*boxes, strict=True), stalled, spent, strict=True))

    def _mailbox(self, columns: list[int], code: int) -> tuple[Message, ...]:
        return tuple(self.messages[m] for m in self._unpack(code, columns) if m)

    def _unpack(self, code: int, columns: list[int]) -> list[int]:
        """The values of ``columns`` packed into ``code`` by ``_pack``."""
        values = []
        for c in reversed(columns):
            values.append(code & ((1 << self.bits[c]) - 1))
            code >>= self.bits[c]
        return values[::-1]


def _objects(codes: Ints, make: Callable[[int], T]) -> list[T]:
    """``make(code)`` for every code, calling ``make`` once per distinct code."""
    distinct, inverse = np.unique(codes, return_inverse=True)
    made = np.empty(len(distinct), dtype=object)
    for k, code in enumerate(distinct.tolist()):
        made[k] = make(code)
    found: list[T] = made[inverse.reshape(-1)].tolist()
    return found
