"""Mermaid renderer: the drawing model as a ``stateDiagram-v2`` that GitHub renders.

Mermaid cannot style one transition, so overlays go into the text of the labels (trace
step numbers, coverage counts) and into state classes. Characters Mermaid gives meaning
to are kept out of labels: ``<``/``>`` become the entity codes ``#lt;``/``#gt;`` (an HTML
tag could otherwise start), and ``;`` and ``#`` cannot occur in table expressions.
"""

from __future__ import annotations

import re

from agentfsm.diagrams.model import ANY, Diagram, Line, Node, internal_edges, wrap

WRAP = 32  # Mermaid's labels are wider than Graphviz's at the same size
# More room between states and ranks than Mermaid's default: edge labels sit at the middle of
# their edge, and at the default spacing the Loom table's labels overlap in a browser.
SPACING = ["config:", "  state:", "    nodeSpacing: 80", "    rankSpacing: 80"]
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


def line_text(diagram: Diagram, line: Line) -> str:
    text = "<br/>".join(escape(part.strip()) for part in wrap(line.head, WRAP))
    if line.tail:
        text += "<br/>" + "<br/>".join(escape(part.strip()) for part in wrap("{" + line.tail + "}", WRAP))
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
    out = ["---", f"title: {_title(diagram)}", *SPACING, "---", "stateDiagram-v2"]
    for node in diagram.nodes:
        out += _declare(node, ids[node.id])
    out += [f"    [*] --> {ids[n.id]}" for n in diagram.nodes if n.initial]
    inside = internal_edges(diagram)
    for edge in diagram.edges:
        if inside.get(edge.source) is edge:  # listed in the state's box, as the Graphviz picture does
            out += [f"    {ids[edge.source]} : {line_text(diagram, line)}" for line in edge.lines]
            continue
        label = "<br/>".join(line_text(diagram, line) for line in edge.lines)
        out.append(f"    {ids[edge.source]} --> {ids[edge.target]} : {label}")
    out += [f"    {ids[n.id]} --> [*]" for n in diagram.nodes if n.final]
    out += _classes(diagram, ids)
    return "\n".join(out) + "\n"


def legend(diagram: Diagram) -> str:
    """How to read the picture, in one line (Mermaid has no caption but the title)."""
    marks = ["legend: Event [guard] / Action", "{updates}", "[*] start and end"]
    if any(node.kind == "transient" for node in diagram.nodes):
        marks.append("◇ transient state")
    if internal_edges(diagram):
        marks.append("rows inside a box stay in that state")
    return ", ".join(marks)


def _title(diagram: Diagram) -> str:
    notes = diagram.overlay.notes if diagram.overlay else ()
    text = " · ".join((diagram.title, *notes, legend(diagram)))
    return '"' + text.replace("\\", "\\\\").replace('"', "'") + '"'


def _declare(node: Node, mid: str) -> list[str]:
    if node.kind == "transient":
        return [f"    state {mid} <<choice>>", f"    note right of {mid} : {escape(node.label)} (transient)"]
    if node.kind == "any":
        return [f'    state "any state" as {mid}']
    if mid != node.label:
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
