"""Mermaid renderer: the drawing model as a ``stateDiagram-v2`` that GitHub renders.

Mermaid cannot style one transition, so overlays go into the text of the labels (trace
step numbers, coverage counts) and into state classes. Characters Mermaid gives meaning
to are kept out of labels: ``<``/``>`` become the entity codes ``#lt;``/``#gt;`` (an HTML
tag could otherwise start), and ``;`` and ``#`` cannot occur in table expressions.
"""

from __future__ import annotations

import re

from agentfsm.diagrams.model import ANY, Diagram, Edge, Line, Node, internal_edges, wrap

WRAP = 24  # Mermaid's labels are wider than Graphviz's at the same size
# More room between states and ranks than Mermaid's default: an edge label sits at the middle
# of its edge, whatever else is there, so the labels of edges leaving or reaching one state
# meet unless the ranks are far apart. Measured in Chromium on the bundled tables (the browser
# test): wrapped at 24 characters, node spacing 80 to 120 and rank spacing 180 overlap nowhere;
# a rank spacing of 120 or 150 left one overlap in the tool-call or vibework table.
SPACING = ["config:", "  state:", "    nodeSpacing: 100", "    rankSpacing: 180"]
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_RESERVED = {"as", "choice", "class", "classdef", "click", "default", "direction", "end", "fork", "hide",
             "join", "left", "note", "of", "over", "right", "scale", "state", "style"}


def state_ids(diagram: Diagram) -> dict[str, str]:
    """A Mermaid id for every node: the state's own name unless Mermaid reads it as a keyword."""
    taken = {n.id for n in diagram.nodes}
    ids: dict[str, str] = {}
    for node in diagram.nodes:
        base = node.id if node.id != ANY else "any_state"
        if node.id == ANY or not _IDENT.match(base) or base.lower() in _RESERVED:
            base = base if node.id == ANY else "s_" + re.sub(r"\W", "_", base)
            while base in taken:
                base += "_"
        ids[node.id] = base
        taken.add(base)
    return ids


def escape(text: str) -> str:
    """Label text with Mermaid's entity codes where a character would be read as syntax."""
    return text.replace("#", "#35;").replace(";", "#59;").replace("<", "#lt;").replace(">", "#gt;")


def line_text(diagram: Diagram, line: Line, width: int = WRAP) -> str:
    text = "<br/>".join(escape(part.strip()) for part in wrap(line.head, width))
    if line.tail:
        text += "<br/>" + "<br/>".join(escape(part.strip()) for part in wrap("{" + line.tail + "}", width))
    overlay = diagram.overlay
    if overlay and overlay.kind == "trace" and line.mark.steps:
        text = f"({'✗ ' if line.mark.faulty else ''}{', '.join(map(str, line.mark.steps))}) " + text
    elif overlay and overlay.kind == "coverage":
        count = line.mark.count or 0
        text += " (never)" if count == 0 else f" ×{count}"
    return text


def to_mermaid(diagram: Diagram) -> str:
    """Mermaid source for ``diagram``; the same diagram always gives the same text."""
    ids = state_ids(diagram)
    inside = internal_edges(diagram)
    back = returning_edges(diagram)
    boxed = set(inside) | {edge.source for edge in back}
    out = ["---", f"title: {_title(diagram)}", *SPACING, "---", "stateDiagram-v2"]
    for node in diagram.nodes:
        out += _declare(node, ids[node.id], node.id in boxed)
    out += [f"    [*] --> {ids[n.id]}" for n in diagram.nodes if n.initial]
    for edge in diagram.edges:
        if inside.get(edge.source) is edge:  # listed in the state's box, as the Graphviz picture does
            out += [f"    {ids[edge.source]} : {line_text(diagram, line)}" for line in edge.lines]
            continue
        if edge in back:
            out += [f"    {ids[edge.source]} : {line_text(diagram, line)} → {edge.target}" for line in edge.lines]
            out.append(f"    {ids[edge.source]} --> {ids[edge.target]}")
            continue
        label = "<br/>".join(line_text(diagram, line) for line in edge.lines)
        out.append(f"    {ids[edge.source]} --> {ids[edge.target]} : {label}")
    out += [f"    {ids[n.id]} --> [*]" for n in diagram.nodes if n.final]
    out += _classes(diagram, ids)
    return "\n".join(out) + "\n"


def returning_edges(diagram: Diagram) -> list[Edge]:
    """Of two states joined both ways, the edge that comes back (the later one, unless only the
    earlier one starts at a plain state's box). Mermaid draws the two edges side by side with
    each label at its edge's middle, so at the same height and on top of each other: the
    returning edge is drawn unlabeled, its rows listed in its source's box as ``row → Target``."""
    boxes = {node.id for node in diagram.nodes if node.kind == "state"}
    first: dict[tuple[str, str], Edge] = {}
    back: list[Edge] = []
    for edge in diagram.edges:
        pair = tuple(sorted((edge.source, edge.target)))
        other = first.setdefault((pair[0], pair[1]), edge)
        if other is edge or edge.source == edge.target or other.source == edge.source:
            continue
        if edge.source in boxes:
            back.append(edge)
        elif other.source in boxes:
            back.append(other)
    return back


def legend(diagram: Diagram) -> str:
    """How to read the picture, in one line (Mermaid has no caption but the title)."""
    marks = ["legend: Event [guard] / Action", "{updates}", "[*] start and end"]
    if any(node.kind == "transient" for node in diagram.nodes):
        marks.append("◇ transient state")
    if internal_edges(diagram):
        marks.append("rows inside a box stay in that state")
    if returning_edges(diagram):
        marks.append("a row in a box ending → State leaves by the unlabeled arrow to State")
    return ", ".join(marks)


def _title(diagram: Diagram) -> str:
    notes = diagram.overlay.notes if diagram.overlay else ()
    text = " · ".join((diagram.title, *notes, legend(diagram)))
    return '"' + text.replace("\\", "\\\\").replace('"', "'") + '"'


def _declare(node: Node, mid: str, boxed: bool) -> list[str]:
    """The state's declaration, when it needs one. A box with rows is always declared with its
    name: Mermaid otherwise shows a box's only row in place of the name."""
    if node.kind == "transient":
        return [f"    state {mid} <<choice>>", f"    note right of {mid} : {escape(node.label)} (transient)"]
    if node.kind == "any":
        return [f'    state "any state" as {mid}']
    if mid != node.label or boxed:
        return [f'    state "{node.label}" as {mid}']
    return []


def _classes(diagram: Diagram, ids: dict[str, str]) -> list[str]:
    out: list[str] = []
    anys = [ids[n.id] for n in diagram.nodes if n.kind == "any"]
    if anys:
        out += ["    classDef anyState stroke-dasharray: 5 5, fill: none", f"    class {','.join(anys)} anyState"]
    overlay = diagram.overlay
    if overlay and overlay.kind == "trace":
        visited = [ids[n.id] for n in diagram.nodes if n.visited and n.kind == "state"]
        if visited:
            out += ["    classDef visited stroke-width: 3px, font-weight: bold",
                    f"    class {','.join(visited)} visited"]
    return out
