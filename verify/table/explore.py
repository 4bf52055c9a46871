"""Breadth-first exploration of every reachable configuration of a table.

A configuration ``(state, vars)`` is packed into one integer of bit fields (the state in
the lowest bits, then each variable's offset from its lower bound), so the visited set
is a dict of ints and the graph is a pair of flat arrays in CSR form: analyses over the
whole space stay linear and compact.

Successors come from ``agentfsm.spec.semantics.step`` itself, memoised per (state,
label) on the variables the step can read: the guards and update expressions of the
event's candidate rows and of every eventless row reachable through transient states.
Configurations that agree on those fields get the same outcome: the same target state
and the same new values for the variables the fired rows write, every other field
unchanged. So an outcome is two masks and the successor is ``(code & keep) + add``:
the hot loop is a mask, two dict lookups and two bit operations. A wide counter that the
rows only compare with constants and count by a constant is keyed by its interval
(``intervals``), and its count is in ``add`` (its field then stays in ``keep``); an
outcome with no successor has ``keep`` negative (``~outcome``).

When a (state, label) reads a variable with a large domain, the memo would miss on
every configuration, so past ``MEMO_LIMIT`` entries that pair switches to evaluating
the compiled guards and updates directly; anything but the plain case (exactly one
enabled row, a stable target, values in range, no emitted arguments to range-check)
still goes through ``step``. The differential tests hold both paths to ``step`` on
random tables.

While the queue holds ``LEVEL_MIN`` unexplored configurations or more (a wide space),
they go a batch at a time through numpy array operations (``batched``), with the
same numbering, edges and counts, until fewer than ``LEVEL_LOW`` wait; the scalar loop
then goes on with the batches' visited set and graph. A narrow, deep space whose
configurations repeat along a counter keyed by interval is explored ahead in batches once
the scalar loop has found ``AHEAD_AT`` of them (``ahead``: a guess, closed under the step and
renumbered breadth-first; never trusted). Parents and edges go into typed arrays from the
start (appending to an ``array`` is cheaper than to a list, and nothing is converted after).

Edges are the accepted steps: an event that fires a row (possibly a self-loop) and an
event the ``ignore`` policy accepts (a self-loop, a *stutter*: ``stutter`` lists those
edges, which the checks disregard, as an ignored event is no progress). A rejected event leaves the
configuration unchanged and is no transition, and final states accept nothing, so
neither produces an edge; both are counted in the unhandled report instead (final
states are not: accepting nothing is what they are for). A step that breaks the table's
rules (``SemanticError``) has no successor either; it is recorded in ``errors``.

``explore(..., edges=False)`` counts the edges without storing them (12 bytes a
transition, most of the memory of a wide space): the offsets (so each configuration's
degree), the stutter edges' positions and the parents (so every shortest path) stay,
which is all the checks that read no edge need (``verify.reads_edges`` decides).
"""

from __future__ import annotations

import functools
import itertools
from array import array
from bisect import bisect_left
from collections.abc import Callable, Iterable, Iterator, MutableSequence, Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import Any, cast

import numpy as np
import numpy.typing as npt
from agentfsm.spec.expr import Binary, Expr, InStates, Lit, Ref, Unary, Value
from agentfsm.spec.model import Row, Table
from agentfsm.spec.semantics import SemanticError, StepResult, step
from agentfsm.verify.kernel.compiled import compile_packed
from agentfsm.verify.kernel.visited import CodeIndex, DenseIndex, code_index
from agentfsm.verify.table import ahead, batched, intervals
from agentfsm.verify.table.batched import NO_EDGE, STUTTER
from agentfsm.verify.table.intervals import Fold
from agentfsm.verify.table.state_memo import Edge, Edges, state_memo

Label = tuple[str, tuple[Value, ...]]
Ints = npt.NDArray[np.int64]
PROGRESS_EVERY = 1 << 15
CHECK_EVERY = 1 << 10   # configurations between looks at the queue's width
LEVEL_MIN: int | None = 512   # unexplored configurations that switch to batches (None: never); measured
LEVEL_LOW = 64   # and back to the scalar loop below this many (hysteresis against flapping)
AHEAD_AT: int | None = 1 << 14   # configurations after which a narrow space is explored ahead (None: never)
MEMO_LIMIT = 4096
# Where an exploration stops unless told otherwise, so that a huge bound ends with a message
# rather than a machine out of memory (docs/verifier.md, "Resource limits").
DEFAULT_MAX_CONFIGURATIONS = 5_000_000
DEFAULT_NOTE = "the default limit; raise it with --max-configurations N"


@dataclass(frozen=True)
class StepError:
    """A step that broke the table's rules: ``config`` and ``label`` are indices."""

    config: int
    label: int
    kind: str
    message: str
    rows: tuple[int, ...]


class ExplorationLimit(Exception):
    """The exploration stopped early: past ``--max-configurations`` or out of memory.

    Carries how far it got (configurations found, transitions, breadth-first depth) so
    that the command can say what was explored and how to narrow the bounds."""

    def __init__(self, reason: str, configurations: int, transitions: int, depth: int) -> None:
        super().__init__(reason)
        self.reason = reason
        self.configurations = configurations
        self.transitions = transitions
        self.depth = depth


class Packing:
    """Bit-field packing of configurations: the state, then each variable."""

    def __init__(self, table: Table) -> None:
        self.nstates = len(table.states)
        self.state_bits = max(1, (self.nstates - 1).bit_length())
        self.state_mask = (1 << self.state_bits) - 1
        self.los = [0 if v.type == "bool" else v.lo for v in table.variables]
        self.sizes = [v.size for v in table.variables]
        self.bools = [v.type == "bool" for v in table.variables]
        shifts, masks, at = [], [], self.state_bits
        for size in self.sizes:
            bits = (size - 1).bit_length()
            shifts.append(at)
            masks.append((1 << bits) - 1)
            at += bits
        self.shifts = shifts
        self.masks = masks
        self.all = (1 << at) - 1

    def pack(self, state: int, values: tuple[Value, ...]) -> int:
        code = state
        for value, lo, shift in zip(values, self.los, self.shifts, strict=True):
            code |= (int(value) - lo) << shift
        return code

    def unpack(self, code: int) -> tuple[int, tuple[Value, ...]]:
        return code & self.state_mask, self.decode(code)

    def decode(self, code: int) -> tuple[Value, ...]:
        return tuple((code >> shift) & 1 == 1 if is_bool else ((code >> shift) & mask) + lo
                     for shift, mask, lo, is_bool in zip(self.shifts, self.masks, self.los, self.bools, strict=True))

    def field(self, slot: int) -> int:
        return self.masks[slot] << self.shifts[slot]

    def in_range(self, values: tuple[Value, ...]) -> bool:
        return all(0 <= int(v) - lo < size for v, lo, size in zip(values, self.los, self.sizes, strict=True))


MAX_LABELS = 1 << 20


def labels_of(table: Table) -> list[Label]:
    """Every (event, parameter values) combination, events in table order, values ascending.

    Parameter values are enumerated (each is an event the verifier delivers), so a range
    too wide to enumerate stops with ``ExplorationLimit`` before anything is built."""
    total = 0
    for event in table.events:
        count = 1
        for p in event.params:
            count *= p.size
        total += count
        if total > MAX_LABELS:
            raise ExplorationLimit(f"event {event.name} has {count:,} parameter value combinations (the verifier "
                                   f"delivers each; more than {MAX_LABELS:,} in all)", 0, 0, 0)
    return [(event.name, values) for event in table.events
            for values in itertools.product(*(p.domain for p in event.params))]


def var_slots(expr: Expr | None) -> set[int]:
    """Positions (0-based, in ``table.variables``) of the variables an expression reads."""
    if expr is None or isinstance(expr, Lit | InStates):
        return set()
    if isinstance(expr, Ref):
        return {expr.slot - 1} if expr.kind == "var" else set()
    if isinstance(expr, Unary):
        return var_slots(expr.operand)
    assert isinstance(expr, Binary)
    return var_slots(expr.left) | var_slots(expr.right)


def reads(table: Table, rows: Iterable[Row]) -> set[int]:
    """Variables a step through ``rows`` may read (guards, updates and emitted arguments,
    which ``step`` range-checks), following transient targets."""
    slots: set[int] = set()
    todo, seen = list(rows), set()
    while todo:
        row = todo.pop()
        if row.index in seen:
            continue
        seen.add(row.index)
        slots |= var_slots(row.guard)
        for update in row.updates:
            slots |= var_slots(update.expr)
        for args in row.emit_args:
            for argument in args:
                slots |= var_slots(argument.expr)
        target = table.state_index[row.target]
        if table.states[target].transient:
            todo.extend(table.eventless_rows.get(target, ()))
    return slots


@dataclass
class _Direct:
    """One candidate row compiled for the direct path."""

    index: int
    guard: Callable[[int], Any] | None
    keep: int
    add: int
    stable: bool
    updates: tuple[tuple[int, int, int, Callable[[int], Any]], ...]   # (shift, lo, hi, fn of the code)
    emits_args: bool   # emitted arguments must be range-checked: left to ``step``


@dataclass
class _Plan:
    """What to do for one (state, label) that has candidate rows."""

    label: int
    params: tuple[Value, ...]
    rmask: int   # the fields of the memo key (not the one ``fold`` keys by interval)
    rows: tuple[_Direct, ...]
    fold: Fold | None = None
    memo: dict[int, tuple[int, int]] = field(default_factory=dict)   # key -> (keep, add); keep = ~outcome: no edge
    outcomes: dict[int, int] = field(default_factory=dict)   # key -> outcome, kept when the memo is emptied
    direct_from: int | None = None   # the first configuration evaluated directly

    def key(self, code: int) -> int:
        return code & self.rmask if self.fold is None else self.fold.key(code, self.rmask)


class Exploration:
    """The reachable configuration graph of a table, with parents for shortest paths."""

    def __init__(self, table: Table) -> None:
        self.table = table
        self.packing = Packing(table)
        self.labels: list[Label] = labels_of(table)
        self.codes: list[int] | npt.NDArray[np.int64] = []   # an array once explored in batches
        self.index: dict[int, int] = {}   # the visited set of the scalar loop ...
        self.code_index: CodeIndex | DenseIndex | None = None   # ... or of the batches
        self.parent = array("q")
        self.parent_label = array("q")
        self.offsets = array("q", [0])
        self.edge_label = array("i")
        self.edge_target = array("q")
        self.stutter = array("q")   # indices of the edges that are ignored events, ascending
        self.kept_edges = True   # False: edge_label and edge_target are empty, only counted in the offsets
        self.reached = (1, 0, 0)   # (configurations, transitions, depth) after the last whole chunk
        self.errors: list[StepError] = []
        self.error_count = 0
        self.row_fires: dict[int, int] = dict.fromkeys((r.index for r in table.rows), 0)
        self.unhandled: dict[tuple[int, int], int] = {}   # (state, label) -> configurations
        self._seen_errors: set[tuple[str, tuple[int, ...]]] = set()
        # Memoised step outcomes, by id. Outcome 0 is "nothing" (the direct path's NO_EDGE is
        # ~0), outcome 1 "ignored" (the direct path's STUTTER is ~1); neither is tallied.
        self._outcome_rows: list[tuple[int, ...]] = [(), ()]
        self._outcome_site: list[tuple[int, int] | None] = [None, None]   # (state, label) when unhandled
        self._outcome_error: list[SemanticError | None] = [None, None]
        self._outcome_ignored: list[bool] = [False, True]
        self._hits: list[int] = [0, 0]
        self.columns: dict[str, Any] = {}   # numpy views of the codes, filled by ``columns``

    def code_array(self) -> npt.NDArray[Any]:
        """The codes as a numpy array (int64, or Python ints past 63 bits), made once."""
        cached = self.columns.get("codes")
        if cached is None and isinstance(self.codes, np.ndarray):
            cached = self.codes
        elif cached is None:
            cached = np.array(self.codes, dtype=object if self.packing.all >= 1 << 63 else np.int64)
            self.columns["codes"] = cached
        return cached

    @property
    def count(self) -> int:
        return len(self.codes)

    @property
    def transitions(self) -> int:
        return self.offsets[-1]

    def config(self, i: int) -> tuple[int, tuple[Value, ...]]:
        return self.packing.unpack(int(self.codes[i]))

    def compact(self) -> None:
        """Hand back the visited set (the scalar loop's dict and list of codes, or the batches'
        index) for the array of the codes, which the checks read anyway: about 110 bytes a
        configuration returned before the checks allocate theirs. ``verify`` does this;
        ``index_of`` makes an index again on first use. Nothing when the codes need Python
        ints (past 63 bits)."""
        if isinstance(self.codes, list):
            if self.packing.all >= 1 << 63:
                return
            self.codes = np.array(self.codes, dtype=np.int64)
            self.columns.pop("codes", None)
        self.index, self.code_index = {}, None

    def index_of(self, state: int, values: tuple[Value, ...]) -> int | None:
        if not 0 <= state < self.packing.nstates or len(values) != len(self.packing.los):
            return None
        if not self.packing.in_range(values):
            return None
        code = self.packing.pack(state, values)
        if self.code_index is None and not self.index:   # compacted: a batch visited set, made once
            self.code_index = code_index(self.packing.all + 1, self.count)
            self.code_index.insert(np.asarray(self.codes, dtype=np.int64), np.arange(self.count, dtype=np.int64))
        if self.code_index is not None:
            found = int(self.code_index.lookup(np.array([code], dtype=np.int64))[0])
            return found if found >= 0 else None
        return self.index.get(code)

    def path(self, i: int) -> list[Label]:
        """A shortest event sequence from the initial configuration to configuration ``i``."""
        labels: list[Label] = []
        while i > 0:
            labels.append(self.labels[self.parent_label[i]])
            i = self.parent[i]
        labels.reverse()
        return labels

    def edges(self, i: int) -> Iterator[tuple[int, int]]:
        self.need_edges()
        lo, hi = self.offsets[i], self.offsets[i + 1]
        return zip(self.edge_label[lo:hi], self.edge_target[lo:hi], strict=True)

    def need_edges(self) -> None:
        """Fail loudly where an analysis reads edges an exploration was told not to keep."""
        if not self.kept_edges:
            raise ValueError(f"{self.table.machine}: explored without its edges (explore(..., edges=False)), "
                             "which this analysis reads")

    def record_error(self, i: int, label: int, err: SemanticError) -> None:
        """Keep the first (in breadth-first order, so shallowest) error per kind and rows."""
        self.error_count += 1
        rows = tuple(r.index for r in err.rows)
        if (err.kind, rows) not in self._seen_errors:
            self._seen_errors.add((err.kind, rows))
            self.errors.append(StepError(i, label, err.kind, err.message, rows))

    def _outcome(self, result: StepResult | SemanticError, state: int, label: int) -> int:
        error = result if isinstance(result, SemanticError) else None
        rows = tuple(r.index for r in result.rows) if not isinstance(result, SemanticError) else ()
        unhandled = not isinstance(result, SemanticError) and result.status in ("rejected", "ignored")
        self._outcome_error.append(error)
        self._outcome_rows.append(rows)
        self._outcome_site.append((state, label) if unhandled else None)
        self._outcome_ignored.append(not isinstance(result, SemanticError) and result.status == "ignored")
        self._hits.append(0)
        return len(self._hits) - 1


def explore(table: Table, progress: Callable[[int], None] | None = None,
            max_configurations: int | None = None, edges: bool = True) -> Exploration:
    """Explore breadth-first from the initial configuration; see the module docstring
    (``edges``: store the edges, or only count them).

    Raise ``ExplorationLimit`` when more than ``max_configurations`` are found (by default
    ``DEFAULT_MAX_CONFIGURATIONS``; checked between chunks or batches, so the count may
    overshoot by one's successors) or when memory runs out; the partial graph is dropped
    before raising, so the caller has room to report."""
    ex = Exploration(table)
    ex.kept_edges = edges
    try:
        _run(ex, progress, max_configurations)
    except ExplorationLimit:
        ex.codes, ex.index, ex.code_index = [], {}, None
        raise
    except MemoryError:
        ex.codes, ex.index, ex.code_index = [], {}, None
        raise ExplorationLimit("out of memory", *ex.reached) from None
    return ex


def _run(ex: Exploration, progress: Callable[[int], None] | None, limit: int | None,
         seeds: Ints | None = None) -> None:
    """The scalar loop, and past ``LEVEL_MIN`` waiting configurations the batches, back to
    the scalar loop when fewer than ``LEVEL_LOW`` wait (a wide space's narrow tail). A
    narrow space still unexplored after ``AHEAD_AT`` configurations is explored ahead
    (``_ahead``) when its counter allows. ``seeds`` (the closing step of ``_ahead``):
    explore from these codes, the initial configuration's first, in batches from the start."""
    table = ex.table
    packing = ex.packing
    plans, unhandled_labels = _plans(table, ex.labels, packing)
    entries = [[(plan.label, plan.rmask, plan.memo, plan, None if plan.fold is None else
                 (plan.fold.shift, plan.fold.mask, plan.fold.classes)) for plan in state_plans]
               for state_plans in plans]
    memos = [state_memo([(plan.rmask, plan.fold) for plan in state_plans], packing) for state_plans in plans]
    whole: list[StateEntry | None] = [None if m is None else m.entry() for m in memos]
    ignore = table.unhandled.policy == "ignore"
    codes: list[int] = []
    ex.codes, index = codes, ex.index
    built: list[MutableSequence[int]] = [codes, array("q", [-1]), array("q", [-1]), array("q", [0]), array("i"),
                                         array("q"), array("q")]   # as batched.Graph
    first = packing.pack(table.initial.index, table.initial_vars())
    codes.append(first)
    index[first] = 0
    wide = LEVEL_MIN if LEVEL_MIN is not None and batched.applicable(table, len(ex.labels)) else None
    reported = 0
    depth = Depth()
    scalar: list[tuple[int, int]] = []   # the ranges of configurations the scalar loop explored
    cap = DEFAULT_MAX_CONFIGURATIONS if limit is None else limit

    def report(count: int, transitions: int, last: int, finished: bool) -> None:
        nonlocal reported
        if seeds is not None:   # closing a guess: numbers, parents and depth are not yet the explorer's
            if count > cap:
                raise ExplorationLimit(_past(limit), count, transitions, 0)
            return
        if finished and last + 1 == reported:   # told already: the loop that ends and its caller both report
            return
        if finished or last + 1 - reported >= PROGRESS_EVERY or count > cap:
            reported = last + 1
            _report(ex, count, transitions, last, built[1], progress, limit, depth)

    at, counter = AHEAD_AT, None
    if wide is not None and at is not None and seeds is None:
        counter = _counter(table, packing, plans)
    if seeds is not None:
        i = 0
        del codes[:]
        seeded = array("q")
        batched.extend(seeded, seeds)
        built[0] = seeded
        built[1] = array("q", [-1]) * len(seeds)
        built[2] = array("q", [-1]) * len(seeds)
    else:
        i = _scalar(ex, entries, whole, unhandled_labels, ignore, index, built, 0, wide, report,
                    None if counter is None else at)
        if (counter is not None and at is not None and wide is not None and i < len(codes) and len(codes) >= at
                and len(codes) - i < wide):
            if _ahead(ex, plans, unhandled_labels, counter, np.array(codes, dtype=np.int64), limit, progress):
                return
            i = _scalar(ex, entries, whole, unhandled_labels, ignore, index, built, i, wide, report)
        scalar.append((0, i))
    if i < len(built[0]):
        graph = batched.Graph(*(part if isinstance(part, array) else array("q", part) for part in built))
        for part in built:
            if not isinstance(part, array):
                del part[:]
        built[:] = [graph.codes, graph.parent, graph.parent_label, graph.offsets, graph.edge_label,
                    graph.edge_target, graph.stutter]
        index.clear()   # the batches keep their own visited set, which the scalar loop then shares
        visited = batched.visited_set(packing, graph)
        levels = _levels(ex, plans, unhandled_labels)
        while i < len(graph.codes):
            i = batched.run(levels, i, graph, visited, report, LEVEL_LOW, ex.kept_edges)
            if i < len(graph.codes):
                start = i
                i = _scalar(ex, entries, whole, unhandled_labels, ignore, visited, built, i, wide, report)
                scalar.append((start, i))
        ex.code_index = visited
        ex.codes = graph.view("codes")
    parts = built[1:]
    assert all(isinstance(part, array) for part in parts)
    ex.parent, ex.parent_label, ex.offsets, ex.edge_label, ex.edge_target, ex.stutter = cast("list[array[int]]", parts)
    _tally(ex, plans, unhandled_labels, scalar)


def _levels(ex: Exploration, plans: list[list[_Plan]], unhandled_labels: list[list[int]]) -> batched.Levels:
    """The batches' plans, counting into ``ex``."""
    table = ex.table
    eventless = {state: tuple(_arm(ex, row, ()) for row in rows) for state, rows in table.eventless_rows.items()}
    return batched.Levels(ex.packing, _groups(ex, plans), unhandled_labels, table.unhandled.policy == "ignore",
                          ex.row_fires, ex.unhandled, eventless, [s.transient for s in table.states])


@dataclass(frozen=True)
class _Counter:
    """The one variable every plan that reads it keys by interval, for ``ahead.guess``."""

    shift: int
    mask: int
    intervals: Ints


def _counter(table: Table, packing: Packing, plans: list[list[_Plan]]) -> _Counter | None:
    """The counter to guess ahead along: one variable some plans key by interval and no plan
    keys by value (which would tell its values apart); ``None`` when there is none."""
    folds = [plan.fold for state_plans in plans for plan in state_plans if plan.fold is not None]
    if not folds or len({f.slot for f in folds}) > 1:
        return None
    slot = folds[0].slot
    field = packing.field(slot)
    if any(plan.fold is None and plan.rmask & field for state_plans in plans for plan in state_plans):
        return None
    size = table.variables[slot].size
    return _Counter(packing.shifts[slot], packing.masks[slot],
                    ahead.interval_of(size, list(dict.fromkeys(f.classes for f in folds))))


def _ahead(ex: Exploration, plans: list[list[_Plan]], unhandled_labels: list[list[int]], counter: _Counter,
           prefix: Ints, limit: int | None, progress: Callable[[int], None] | None) -> bool:
    """Explore the rest of the space ahead along ``counter`` from the scalar loop's ``prefix``
    (see ``ahead``): fill ``ex`` as the plain exploration would and return True, or return
    False with ``ex`` untouched when the guess is empty or the closed set passes the limit
    (the plain exploration then goes on, and stops where it always did)."""
    cap = DEFAULT_MAX_CONFIGURATIONS if limit is None else limit
    guessed = ahead.guess(prefix, int(prefix[0]), counter.shift, counter.mask, counter.intervals, cap - len(prefix))
    if not len(guessed):
        return False
    seeds = np.concatenate((prefix, guessed[~np.isin(guessed, prefix)]))
    del guessed
    closed = Exploration(ex.table)
    try:
        _run(closed, None, cap + len(seeds) - len(prefix), seeds)
    except ExplorationLimit:
        return False
    del seeds
    closed.code_index, closed.parent, closed.parent_label = None, array("q"), array("q")   # not read from here on
    offsets = np.frombuffer(closed.offsets, dtype=np.int64)
    targets = np.frombuffer(closed.edge_target, dtype=np.int64)
    order = ahead.bfs_order(offsets, targets)
    if len(order) > cap:
        return False
    codes = closed.code_array()[order]
    if len(order) == closed.count and not closed.error_count:   # the guess held nothing unreachable
        moved, targets, labels, stutter = ahead.renumbered(order, offsets, targets,
                                                           np.frombuffer(closed.edge_label, dtype=np.int32),
                                                           np.frombuffer(closed.stutter, dtype=np.int64))
        ex.row_fires, ex.unhandled = closed.row_fires, closed.unhandled
        del closed, offsets, order
        parent, label = ahead.parents(moved, targets, labels)
        ex.codes, ex.index, ex.code_index = codes, {}, None   # ``index_of`` makes an index on first use
        for name, kind, values in (("parent", "q", parent), ("parent_label", "q", label), ("offsets", "q", moved),
                                   ("stutter", "q", stutter), ("edge_label", "i", labels),
                                   ("edge_target", "q", targets)):
            typed = array(kind)
            if ex.kept_edges or name not in ("edge_label", "edge_target"):
                batched.extend(typed, values)
            setattr(ex, name, typed)
    else:   # explore again in that order: tallies and errors of the reachable configurations alone
        del closed, offsets, targets
        _again(ex, plans, unhandled_labels, codes)
    ex.reached = (ex.count, ex.transitions, len(ex.path(ex.count - 1)))   # the last configuration is a deepest
    if progress is not None:
        progress(ex.count)
    return True


def _again(ex: Exploration, plans: list[list[_Plan]], unhandled_labels: list[list[int]], codes: Ints) -> None:
    """Fill ``ex`` from ``codes``, a closed set in breadth-first order, explored as one batch:
    edges, tallies and errors as the plain exploration gives them, each parent the first edge."""
    ex.errors, ex.error_count, ex._seen_errors = [], 0, set()
    ex.row_fires = dict.fromkeys(ex.row_fires, 0)
    ex.unhandled = {}
    graph = batched.Graph(array("q"), array("q"), array("q"), array("q", [0]), array("i"), array("q"), array("q"))
    batched.extend(graph.codes, codes)
    visited = batched.visited_set(ex.packing, graph)
    batched.run(_levels(ex, plans, unhandled_labels), 0, graph, visited, lambda *_: None, 0, True)
    if len(graph.codes) != len(codes):
        raise AssertionError("the reachable configurations of a closed set are closed")
    parent, label = ahead.parents(graph.view("offsets"), graph.view("edge_target"),
                                  np.frombuffer(graph.edge_label, dtype=np.int32))
    graph.parent.frombytes(parent.tobytes())
    graph.parent_label.frombytes(label.tobytes())
    if not ex.kept_edges:
        graph.edge_label, graph.edge_target = array("i"), array("q")
    ex.index, ex.code_index, ex.codes = {}, visited, graph.view("codes")
    ex.parent, ex.parent_label, ex.offsets = graph.parent, graph.parent_label, graph.offsets
    ex.edge_label, ex.edge_target, ex.stutter = graph.edge_label, graph.edge_target, graph.stutter
    _tally(ex, plans, unhandled_labels, [])


Entry = tuple[int, int, dict[int, tuple[int, int]], _Plan, tuple[int, int, tuple[int, ...]] | None]
StateEntry = tuple[int, int, int, tuple[int, ...], dict[int, Edges]]   # ``StateMemo.entry``


def _scalar(ex: Exploration, entries: list[list[Entry]], whole: list[StateEntry | None],
            unhandled_labels: list[list[int]], ignore: bool, index: dict[int, int] | CodeIndex | DenseIndex,
            built: list[MutableSequence[int]], i: int, wide: int | None,
            report: Callable[[int, int, int, bool], None], stop: int | None = None) -> int:
    """Explore from configuration ``i`` until nothing is left, (``wide``) that many wait or
    (``stop``) that many are found; return where it stopped.

    The loop is the verifier's hot path; it is written for CPython's interpreter: plans
    unpacked from tuples into locals, the growing ``codes`` iterated directly (its iterator
    sees appended items, so it is the breadth-first queue), parents and edges appended to
    typed arrays and progress reported between chunks rather than
    tested per configuration. A state memo's edges (``state_memo``) and the per-label loop
    append a successor the same way, written out twice: a call per edge would cost more than
    the work it shares."""
    codes, parent, parent_label, offsets, edge_label, edge_target, stutter = built
    base = offsets[-1] - len(edge_target)   # edges counted but not kept (none unless ``kept_edges`` is False)
    smask = ex.packing.state_mask
    outcome_error, outcome_ignored = ex._outcome_error, ex._outcome_ignored
    queue = islice(codes, i, None)   # stops for good once it reaches the end: then nothing is left to explore
    while True:
        start = i
        for code in islice(queue, CHECK_EVERY):
            state = code & smask
            at = whole[state]
            if at is not None:   # the state's memo: every edge at one lookup (``state_memo``)
                wmask, wshift, wfield, wclasses, wmemo = at
                key = (code & wmask) | wclasses[code >> wshift & wfield]
                found = wmemo.get(key)
                if found is None:
                    found = _fill(ex, entries[state], whole, state, key, i, code)
                if found is not None:
                    labels, steps = found
                    edge_label.extend(labels)
                    for label, keep, add in steps:
                        new = (code & keep) + add
                        j = index.get(new)
                        if j is None:
                            j = index[new] = len(codes)
                            codes.append(new)
                            parent.append(i)
                            parent_label.append(label)
                        edge_target.append(j)
                    if ignore:
                        for label in unhandled_labels[state]:
                            stutter.append(base + len(edge_target))
                            edge_label.append(label)
                            edge_target.append(i)
                    offsets.append(base + len(edge_target))
                    i += 1
                    continue
            for label, rmask, memo, plan, fold in entries[state]:
                if fold is None:
                    hit = memo.get(code & rmask)
                else:
                    shift, mask, classes = fold
                    hit = memo.get((code & rmask) | classes[code >> shift & mask])
                if hit is None:
                    hit = _miss(ex, plan, i, state, code)
                keep, add = hit
                if keep < 0:
                    err = outcome_error[~keep]
                    if err is not None:
                        ex.record_error(i, label, err)
                    elif outcome_ignored[~keep]:
                        stutter.append(base + len(edge_target))
                        edge_label.append(label)
                        edge_target.append(i)
                    continue
                new = (code & keep) + add
                j = index.get(new)
                if j is None:
                    j = index[new] = len(codes)
                    codes.append(new)
                    parent.append(i)
                    parent_label.append(label)
                edge_label.append(label)
                edge_target.append(j)
            if ignore:
                for label in unhandled_labels[state]:
                    stutter.append(base + len(edge_target))
                    edge_label.append(label)
                    edge_target.append(i)
            offsets.append(base + len(edge_target))
            i += 1
        if not ex.kept_edges:   # counted in the offsets; the chunk's edges go
            base += len(edge_target)
            del edge_label[:], edge_target[:]
        if i == start or (wide is not None and len(codes) - i >= wide) or (stop is not None and len(codes) >= stop):
            break
        report(len(codes), offsets[-1], i - 1, i == len(codes))
    if i == len(codes):
        report(len(codes), offsets[-1], i - 1, True)
    return i


def _fill(ex: Exploration, state_entries: list[Entry], whole: list[StateEntry | None], state: int, key: int,
          i: int, code: int) -> Edges | None:
    """Every edge of configuration ``i`` (``code``, state memo key ``key``) from its plans,
    memoised for the state; or ``None``, and the state's memo off for good, when an outcome
    is not plain (an error or an ignored event, which the per-label loop records) or a plan
    is evaluated directly, or about to be (its outcomes are then counted as it goes, so the
    per-label loop must be the one to evaluate it)."""
    edges: list[Edge] = []
    for label, _, memo, plan, _ in state_entries:
        hit = memo.get(plan.key(code))
        if hit is None:
            if plan.direct_from is not None or len(memo) >= MEMO_LIMIT:
                whole[state] = None
                return None
            hit = _miss(ex, plan, i, state, code)
        keep, add = hit
        if keep >= 0:
            edges.append((label, keep, add))
        elif ex._outcome_error[~keep] is not None or ex._outcome_ignored[~keep]:
            whole[state] = None
            return None
    at = whole[state]
    assert at is not None
    if len(at[4]) >= MEMO_LIMIT:
        whole[state] = None
    found = at[4][key] = (array("i", [label for label, _, _ in edges]), tuple(edges))
    return found


def _groups(ex: Exploration, plans: list[list[_Plan]]) -> list[list[batched.Group]]:
    """The plans for the array path, each with ``_slow`` as its fallback."""
    groups = []
    for state, state_plans in enumerate(plans):
        groups.append([batched.Group(
            plan.label, plan.params, k,
            tuple(_arm(ex, row, plan.params) for row in ex.table.candidates(state, ex.labels[plan.label][0])),
            functools.partial(_slow, ex, plan)) for k, plan in enumerate(state_plans)])
    return groups


def _arm(ex: Exploration, row: Row, params: tuple[Value, ...]) -> batched.Arm:
    """``row`` for the array path, with the masks the scalar path compiles."""
    direct = _compile_row(ex.table, ex.packing, row, params)
    return batched.arm(ex.table, ex.packing, row, direct.keep, direct.add, direct.stable)


class Depth:
    """The breadth-first depth of the configurations explored so far, level by level.

    Walking the parent chain at each report cost the depth at every report: quadratic on a
    deep, narrow space. In breadth-first numbering parents never decrease, so the level after
    the one starting at ``start`` begins at the first configuration whose parent is ``start``
    or later (one bisection), and each level is found once in a whole exploration."""

    def __init__(self) -> None:
        self.start = 0   # where level ``depth`` begins
        self.depth = 0

    def of(self, last: int, parent: Sequence[int]) -> int:
        """The depth of configuration ``last`` (not less than at the previous call)."""
        while True:
            following = bisect_left(parent, self.start, self.start + 1)
            if following > last:
                return self.depth
            self.start, self.depth = following, self.depth + 1


def _report(ex: Exploration, count: int, transitions: int, last: int, parent: Sequence[int],
            progress: Callable[[int], None] | None, limit: int | None, depth: Depth) -> None:
    """Record how far the exploration got, tell ``progress``, and stop past ``limit``."""
    ex.reached = (count, transitions, depth.of(last, parent))
    if progress is not None:
        progress(count)
    if count > (DEFAULT_MAX_CONFIGURATIONS if limit is None else limit):
        raise ExplorationLimit(_past(limit), *ex.reached)


def _past(limit: int | None) -> str:
    """Why an exploration stopped at ``limit`` (``None``: the default one)."""
    if limit is None:
        return f"more than {DEFAULT_MAX_CONFIGURATIONS:,} configurations ({DEFAULT_NOTE})"
    return f"more than {limit:,} configurations (--max-configurations {limit})"


def _plans(table: Table, labels: list[Label], packing: Packing) -> tuple[list[list[_Plan]], list[list[int]]]:
    """Per state: the labels with candidate rows, and the labels without any."""
    plans: list[list[_Plan]] = []
    unhandled: list[list[int]] = []
    for state in table.states:
        plan: list[_Plan] = []
        rest: list[int] = []
        if not state.final:
            for k, (event, params) in enumerate(labels):
                rows = table.candidates(state.index, event)
                if not rows:
                    rest.append(k)
                    continue
                slots = reads(table, rows)
                folded = intervals.fold(table, packing, rows, params, slots) if packing.all < 1 << 63 else None
                rmask = 0
                for slot in slots - ({folded.slot} if folded else set()):
                    rmask |= packing.field(slot)
                plan.append(_Plan(k, params, rmask, tuple(_compile_row(table, packing, r, params) for r in rows),
                                  folded))
        plans.append(plan)
        unhandled.append(rest)
    return plans, unhandled


def _compile_row(table: Table, packing: Packing, row: Row, params: tuple[Value, ...]) -> _Direct:
    target = table.state_index[row.target]
    keep = packing.all & ~packing.state_mask
    updates = []
    for update in row.updates:
        slot = update.slot - 1
        keep &= ~packing.field(slot)
        var = table.variables[slot]
        fn = compile_packed(update.expr, packing, params)
        updates.append((packing.shifts[slot], packing.los[slot], var.hi if var.type == "int" else 1, fn))
    guard = None if row.guard is None else compile_packed(row.guard, packing, params)
    return _Direct(row.index, guard, keep, target, not table.states[target].transient, tuple(updates),
                   bool(row.emit_args))


def _miss(ex: Exploration, plan: _Plan, i: int, state: int, code: int) -> tuple[int, int]:
    """A key the memo lacks: compute and memoise its outcome, or, once the memo has grown
    past ``MEMO_LIMIT`` (and been emptied, so that every key misses), evaluate directly."""
    if plan.direct_from is not None:
        new = _direct(ex, plan, i, state, code)
        return (new, 0) if new < 0 else (0, new)   # NO_EDGE, STUTTER: outcomes 0 and 1
    hit = _compute(ex, plan, state, code)
    if len(plan.memo) > MEMO_LIMIT:
        plan.direct_from = i + 1
        plan.memo.clear()
    return hit


def _compute(ex: Exploration, plan: _Plan, state: int, code: int) -> tuple[int, int]:
    """Run the reference semantics once for this key and memoise the outcome."""
    event = ex.labels[plan.label][0]
    packing = ex.packing
    result: StepResult | SemanticError
    try:
        result = step(ex.table, state, packing.decode(code), event, plan.params)
    except SemanticError as err:
        result = err
    oid = ex._outcome(result, state, plan.label)
    hit = (~oid, 0)
    if not isinstance(result, SemanticError) and result.status == "fired":
        keep = packing.all & ~packing.state_mask
        for row in result.rows:
            for update in row.updates:
                keep &= ~packing.field(update.slot - 1)
        add = packing.pack(result.state, result.vars) & ~keep
        counted = plan.fold is not None and result.rows[0].index in plan.fold.counts
        if plan.fold is not None and counted:   # the same count from any value of the interval
            field = packing.field(plan.fold.slot)
            keep |= field
            add = (add & ~field) + (plan.fold.counts[result.rows[0].index] << plan.fold.shift)
        hit = (keep, add)
    key = plan.key(code)
    plan.memo[key] = hit
    plan.outcomes[key] = oid
    return hit


def _direct(ex: Exploration, plan: _Plan, i: int, state: int, code: int) -> int:
    """The plain case evaluated from the compiled rows; everything else through ``step``."""
    chosen: _Direct | None = None
    for row in plan.rows:
        if row.guard is None or row.guard(code):
            if chosen is not None:
                return _slow(ex, plan, i, state, code)
            chosen = row
    if chosen is None or not chosen.stable or chosen.emits_args:
        return _slow(ex, plan, i, state, code)
    new = (code & chosen.keep) | chosen.add
    for shift, lo, hi, fn in chosen.updates:
        value = fn(code)
        if value < lo or value > hi:
            return _slow(ex, plan, i, state, code)
        new |= (value - lo) << shift
    ex.row_fires[chosen.index] += 1
    return new


def _slow(ex: Exploration, plan: _Plan, i: int, state: int, code: int) -> int:
    try:
        result = step(ex.table, state, ex.packing.decode(code), ex.labels[plan.label][0], plan.params)
    except SemanticError as err:
        ex.record_error(i, plan.label, err)
        return NO_EDGE
    if result.status in ("rejected", "ignored"):
        site = (state, plan.label)
        ex.unhandled[site] = ex.unhandled.get(site, 0) + 1
    if result.status == "ignored":
        return STUTTER
    for row in result.rows:
        ex.row_fires[row.index] += 1
    return ex.packing.pack(result.state, result.vars) if result.accepted else NO_EDGE


def _tally(ex: Exploration, plans: list[list[_Plan]], unhandled_labels: list[list[int]],
           scalar: list[tuple[int, int]]) -> None:
    """Count how often each memoised outcome was used, after the fact (the hot loop does
    not count): for each (state, label) plan, the configurations of that state the scalar
    loop explored (the ``scalar`` ranges: batches count as they go) up to the plan's
    switch to the direct path, grouped by memo key. Then fold the counts into row fire
    counts and the unhandled report, and count the labels without rows over every
    configuration."""
    codes = ex.code_array()
    states = codes & ex.packing.state_mask
    in_state = [np.flatnonzero(states == s) for s in range(ex.packing.nstates)]
    looped = np.zeros(ex.count, dtype=np.bool_)
    for a, b in scalar:
        looped[a:b] = True
    hits = ex._hits
    for state, state_plans in enumerate(plans):
        for plan in state_plans:
            which = in_state[state]
            if plan.direct_from is not None:
                which = which[: np.searchsorted(which, plan.direct_from)]
            which = which[looped[which]]
            if not len(which):
                continue
            if not plan.rmask and plan.fold is None:
                hits[plan.outcomes[0]] += len(which)
                continue
            keys = codes[which] & plan.rmask
            if plan.fold is not None:
                f = plan.fold
                keys |= np.array(f.classes, dtype=np.int64)[(codes[which] >> f.shift) & f.mask]
            keys, counts = np.unique(keys, return_counts=True)
            for key, count in zip(keys.tolist(), counts.tolist(), strict=True):
                hits[plan.outcomes[key]] += count
    fires = ex.row_fires
    for rows, site, n in zip(ex._outcome_rows, ex._outcome_site, hits, strict=True):
        for row in rows:
            fires[row] += n
        if site is not None and n:
            ex.unhandled[site] = ex.unhandled.get(site, 0) + n
    for state, labels in enumerate(unhandled_labels):
        if len(in_state[state]):
            for label in labels:
                ex.unhandled[(state, label)] = ex.unhandled.get((state, label), 0) + len(in_state[state])
