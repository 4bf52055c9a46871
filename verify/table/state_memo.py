"""One memo per state for the explorer's scalar loop: every edge of a configuration at one lookup.

The explorer memoises each (state, label)'s outcome on the fields its rows read (a plan's
key). A state with several labels then costs a lookup per label for every configuration,
and on a narrow, deep space (Loom's retries grown) that loop is most of ``verify``'s time.
A ``StateMemo`` keys the whole state on the union of its plans' fields, the counter some
plans key by interval (``intervals``) by the common refinement of their intervals: each
plan's key is then a function of the state's key, so one lookup can give the outcome of
every label. It is filled from the plans' own memos (so their outcome tallies are as
before) and holds only plain outcomes: edges, and labels with no edge. Anything else (a
step error, an event ignored by policy, a plan evaluated directly past its memo's limit)
turns the state's memo off, and the per-label loop goes on as without it.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field

from agentfsm.verify.kernel.compiled import Packing
from agentfsm.verify.table.intervals import Fold

# (label, keep, add): an edge to ``(code & keep) + add``
Edge = tuple[int, int, int]
# A configuration's edges: their labels (which the explorer appends at once), and the edges
Edges = tuple["array[int]", tuple[Edge, ...]]


@dataclass
class StateMemo:
    """Every edge of the configurations of one state, keyed by ``(code & rmask) |
    classes[code >> shift & mask]`` (no folded counter: ``shift`` and ``mask`` 0, ``classes``
    ``(0,)``)."""

    rmask: int
    shift: int
    mask: int
    classes: tuple[int, ...]
    memo: dict[int, Edges] = field(default_factory=dict)

    def key(self, code: int) -> int:
        return (code & self.rmask) | self.classes[code >> self.shift & self.mask]

    def entry(self) -> tuple[int, int, int, tuple[int, ...], dict[int, Edges]]:
        """The fields as a tuple, which the hot loop unpacks into locals."""
        return self.rmask, self.shift, self.mask, self.classes, self.memo


def state_memo(plans: Sequence[tuple[int, Fold | None]], packing: Packing) -> StateMemo | None:
    """The memo for a state whose plans have these ``(rmask, fold)``, or ``None`` when keying
    the state as a whole would not merge configurations: no plan, counters folded on two
    variables, or a folded counter some other plan reads by value (each value would be a
    key of its own)."""
    if not plans:
        return None
    rmask = 0
    for mask, _ in plans:
        rmask |= mask
    folds = [fold for _, fold in plans if fold is not None]
    if not folds:
        return StateMemo(rmask, 0, 0, (0,))
    slot = folds[0].slot
    if any(f.slot != slot for f in folds) or rmask & (packing.masks[slot] << packing.shifts[slot]):
        return None
    shift = packing.shifts[slot]
    distinct = list(dict.fromkeys(f.classes for f in folds))
    if len(distinct) == 1:
        return StateMemo(rmask, shift, packing.masks[slot], distinct[0])
    together = list(zip(*distinct, strict=True))   # per value, its interval in each plan
    number = {key: k << shift for k, key in enumerate(dict.fromkeys(together))}
    return StateMemo(rmask, shift, packing.masks[slot], tuple(map(number.__getitem__, together)))
