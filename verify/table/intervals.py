"""The values of a wide counter that one step cannot tell apart, for the explorer's memo.

The explorer memoises a (state, label)'s outcome on the variables the step reads. A
counter such as Loom's ``retries`` (grown to thousands) is read by every retry row, so
its memo would miss on each new value and the step would run through ``step`` once per
configuration. Yet such rows only compare the counter with constants (``retries <
max_retries``) and count it up or down (``retries: retries + 1``): between consecutive
breakpoints (the constants compared with, and where the count would leave the range)
every value enables the same rows, makes the same errors, and leads to the same
successor up to that count. So the memo is keyed on the value's interval instead of the
value, and an outcome that counts the variable by ``k`` adds ``k`` to its field.

``fold`` finds, for one plan's rows, the variable to key by interval (or none): an int
variable whose every read is one side of a comparison with a constant (constants, event
parameters and arithmetic of them) inside ``and``/``or``/``not``, or its own update
``v + k``, ``k + v`` or ``v - k``; no other update and no emitted argument may read it,
and every row's target must be stable (an eventless row would read the counted value).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import chain, pairwise, repeat

from agentfsm.spec.expr import Binary, Expr, InStates, Ref, Unary, Value
from agentfsm.spec.model import Row, Table
from agentfsm.verify.kernel.compiled import Packing, compile_packed

COMPARISONS = frozenset(("==", "!=", "<", "<=", ">", ">="))
MIN_SIZE = 8   # narrower variables are keyed by value: the memo fills at once anyway
MAX_SIZE = 1 << 20   # the interval of each value is a table this long


@dataclass(frozen=True)
class Fold:
    """Key one variable by interval: ``classes[field]`` (the interval's number, in the
    field's place) replaces the field in the memo key; ``counts`` holds, per row that
    counts the variable, the ``k`` of ``v + k``."""

    slot: int
    shift: int
    mask: int
    classes: tuple[int, ...]
    counts: dict[int, int]

    def key(self, code: int, rmask: int) -> int:
        return (code & rmask) | self.classes[code >> self.shift & self.mask]


def fold(table: Table, packing: Packing, rows: tuple[Row, ...], params: tuple[Value, ...],
         slots: set[int]) -> Fold | None:
    """The variable among ``slots`` (those the rows read) whose intervals merge the most
    values (the first of equals), or ``None`` when none can be keyed by interval or merges
    any value."""
    if any(table.states[table.state_index[row.target]].transient for row in rows):
        return None
    best: Fold | None = None
    merged = 0
    for slot in sorted(slots):
        var = table.variables[slot]
        if var.type != "int" or not MIN_SIZE <= var.size <= MAX_SIZE:
            continue
        found = _breaks(table, packing, rows, params, slot)
        if found is None:
            continue
        breaks, counts = found
        lo, shift = var.lo, packing.shifts[slot]
        points = sorted(b for b in breaks if lo < b <= var.hi)
        if var.size - (len(points) + 1) > merged:
            merged = var.size - (len(points) + 1)
            edges = [lo, *points, var.hi + 1]
            classes = tuple(chain.from_iterable(repeat(k << shift, b - a) for k, (a, b) in enumerate(pairwise(edges))))
            best = Fold(slot, shift, packing.masks[slot], classes, counts)
    return best


def _breaks(table: Table, packing: Packing, rows: tuple[Row, ...], params: tuple[Value, ...],
            slot: int) -> tuple[set[int], dict[int, int]] | None:
    """Where the rows' behaviour may change along variable ``slot`` (the lowest value of
    each new interval), and the rows that count it; ``None`` if some read is not plain."""
    var = table.variables[slot]
    breaks: set[int] = set()
    counts: dict[int, int] = {}
    for row in rows:
        if row.guard is not None and not _compared(row.guard, slot, packing, params, breaks):
            return None
        for args in row.emit_args:
            if any(_reads(arg.expr, slot) for arg in args):
                return None
        for update in row.updates:
            if not _reads(update.expr, slot):
                continue
            k = _count(update.expr, slot, packing, params) if update.slot - 1 == slot else None
            if k is None:
                return None
            counts[row.index] = k
            breaks |= {var.lo - k, var.hi - k + 1}
    return breaks, counts


def _reads(expr: Expr, slot: int) -> bool:
    if isinstance(expr, Ref):
        return expr.kind == "var" and expr.slot - 1 == slot
    if isinstance(expr, Unary):
        return _reads(expr.operand, slot)
    if isinstance(expr, Binary):
        return _reads(expr.left, slot) or _reads(expr.right, slot)
    return False


def _constant(expr: Expr, packing: Packing, params: tuple[Value, ...]) -> int | None:
    """The expression's value when it reads no variable and no state, as an int."""
    if isinstance(expr, InStates) or _any_var(expr):
        return None
    value = compile_packed(expr, packing, params)(0)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _any_var(expr: Expr) -> bool:
    if isinstance(expr, Ref):
        return expr.kind == "var"
    if isinstance(expr, Unary):
        return _any_var(expr.operand)
    if isinstance(expr, Binary):
        return _any_var(expr.left) or _any_var(expr.right)
    return isinstance(expr, InStates)


def _is_var(expr: Expr, slot: int) -> bool:
    return isinstance(expr, Ref) and expr.kind == "var" and expr.slot - 1 == slot


def _compared(expr: Expr, slot: int, packing: Packing, params: tuple[Value, ...], breaks: set[int]) -> bool:
    """Whether ``slot`` is read in ``expr`` only as one side of comparisons with constants;
    adds each constant ``c`` and ``c + 1`` to ``breaks`` (where any comparison may flip)."""
    if not _reads(expr, slot):
        return True
    if isinstance(expr, Unary) and expr.op == "not":
        return _compared(expr.operand, slot, packing, params, breaks)
    if isinstance(expr, Binary) and expr.op in ("and", "or"):
        return (_compared(expr.left, slot, packing, params, breaks)
                and _compared(expr.right, slot, packing, params, breaks))
    if isinstance(expr, Binary) and expr.op in COMPARISONS:
        other = expr.right if _is_var(expr.left, slot) else expr.left if _is_var(expr.right, slot) else None
        c = None if other is None else _constant(other, packing, params)
        if c is not None:
            breaks |= {c, c + 1}
            return True
    return False


def _count(expr: Expr, slot: int, packing: Packing, params: tuple[Value, ...]) -> int | None:
    """``k`` when ``expr`` is ``v + k``, ``k + v`` or ``v - k`` for the variable ``slot``."""
    if not isinstance(expr, Binary) or expr.op not in ("+", "-"):
        return None
    if _is_var(expr.left, slot):
        k = _constant(expr.right, packing, params)
        return None if k is None else k if expr.op == "+" else -k
    if expr.op == "+" and _is_var(expr.right, slot):
        return _constant(expr.left, packing, params)
    return None
