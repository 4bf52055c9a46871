"""The drawing model: what a picture of a table shows, independent of any renderer.

A table is reduced to boxes (states, plus one "any state" box for wildcard rows) and
edges (parallel rows between the same two boxes merged into one edge with one line per
row). Overlays (a trace, a coverage run) only annotate rows and states here; renderers
decide how annotations look. Every renderer reads this model, so what appears in one
format appears in all of them.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from agentfsm.spec.expr import Binary, Lit, Ref, to_source
from agentfsm.spec.model import Row, Table, Update

ANY = "(any state)"
"""Node id of the box wildcard rows start from; not a valid state name, so never clashes."""

NodeKind = Literal["state", "transient", "any"]


@dataclass(frozen=True)
class RowMark:
    """What overlays say about one row: trace steps that fired it, coverage count."""

    steps: tuple[int, ...] = ()
    count: int | None = None
    faulty: bool = False


@dataclass(frozen=True)
class Overlay:
    """Annotations from a trace or a coverage run, keyed by row index and state name."""

    kind: Literal["trace", "coverage"]
    marks: Mapping[int, RowMark]
    visited: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    """Caption lines: what the trace is, how coverage is read."""

    @property
    def max_count(self) -> int:
        return max((m.count or 0 for m in self.marks.values()), default=0)


@dataclass(frozen=True)
class Line:
    """One row as drawn: ``Event [guard] / actions`` then its updates, compactly."""

    row: int
    event: str | None
    guard: str | None
    actions: tuple[str, ...]
    updates: tuple[str, ...]
    description: str
    mark: RowMark = RowMark()

    @property
    def head(self) -> str:
        text = self.event or ""
        if self.guard:
            text += f" [{self.guard}]" if text else f"[{self.guard}]"
        if self.actions:
            text += (" / " if text else "/ ") + ", ".join(self.actions)
        return text

    @property
    def tail(self) -> str:
        return ", ".join(self.updates)


@dataclass(frozen=True)
class Node:
    id: str
    label: str
    kind: NodeKind
    initial: bool = False
    final: bool = False
    description: str = ""
    visited: tuple[int, ...] = ()
    """Trace steps (0 = the start) after which the machine rested here."""


@dataclass(frozen=True)
class Edge:
    source: str
    target: str
    lines: tuple[Line, ...]

    @property
    def rows(self) -> tuple[int, ...]:
        return tuple(line.row for line in self.lines)


@dataclass(frozen=True)
class Diagram:
    machine: str
    title: str
    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]
    overlay: Overlay | None = None

    def node(self, node_id: str) -> Node:
        return next(n for n in self.nodes if n.id == node_id)


WRAP = 44
"""Characters of a row's line before it wraps: a long guard would otherwise widen its whole rank."""


def wrap(text: str, width: int = WRAP) -> list[str]:
    """``text`` in lines of at most ``width`` characters (longer words stay whole), later ones indented."""
    return textwrap.wrap(text, width, break_long_words=False, break_on_hyphens=False,
                         subsequent_indent="    ") or [""]


def internal_edges(diagram: Diagram) -> dict[str, Edge]:
    """Self-loops of (non-transient) states, drawn inside their box rather than as loops.

    A small loop with a long label crowds the box and collides with edges arriving on the
    same side; listed under the state's name (UML's internal transitions; tables have no
    entry or exit actions, so nothing is lost) the rows read as a list instead.
    """
    kinds = {node.id: node.kind for node in diagram.nodes}
    return {e.source: e for e in diagram.edges if e.source == e.target and kinds[e.source] == "state"}


def compact_update(update: Update) -> str:
    """``x = x + 1`` as ``x += 1``; anything else as ``x = expr``."""
    expr = update.expr
    if (isinstance(expr, Binary) and expr.op in ("+", "-") and isinstance(expr.left, Ref)
            and expr.left.name == update.var and isinstance(expr.right, Lit | Ref)):
        return f"{update.var} {expr.op}= {to_source(expr.right)}"
    return f"{update.var} = {to_source(expr)}"


def line_of(row: Row, mark: RowMark = RowMark()) -> Line:
    guard = to_source(row.guard) if row.guard is not None else None
    return Line(row=row.index, event=row.event, guard=guard, actions=row.emit,
                updates=tuple(compact_update(u) for u in row.updates),
                description=row.description, mark=mark)


def build(table: Table, overlay: Overlay | None = None) -> Diagram:
    """The diagram of ``table``, annotated with ``overlay`` when given."""
    marks = overlay.marks if overlay else {}
    visited = overlay.visited if overlay else {}
    nodes = [Node(id=s.name, label=s.name, kind="transient" if s.transient else "state",
                  initial=s.initial, final=s.final, description=s.description,
                  visited=tuple(visited.get(s.name, ())))
             for s in table.states]
    if any(row.wildcard for row in table.rows):
        nodes.append(Node(id=ANY, label="any state", kind="any",
                          description="wildcard rows: they apply in every state that is neither final "
                                      "nor transient"))
    grouped: dict[tuple[str, str], list[Line]] = {}
    for row in table.rows:
        source = ANY if row.wildcard else row.source
        grouped.setdefault((source, row.target), []).append(line_of(row, marks.get(row.index, RowMark())))
    edges = tuple(Edge(source, target, tuple(lines)) for (source, target), lines in grouped.items())
    return Diagram(machine=table.machine, title=table.title or table.machine, nodes=tuple(nodes), edges=edges,
                   overlay=overlay)
