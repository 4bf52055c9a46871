"""Mermaid renderer: the drawing model as a ``stateDiagram-v2`` that GitHub renders.

Mermaid cannot style one transition, so overlays go into the text of the labels (trace
step numbers, coverage counts) and into state classes. Characters Mermaid gives meaning
to are kept out of labels: ``<``/``>`` become the entity codes ``#lt;``/``#gt;`` (an HTML
tag could otherwise start), and ``;`` and ``#`` cannot occur in table expressions.
"""

from __future__ import annotations

import re

from agentfsm.diagrams.model import ANY, Diagram, Line, Node

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
    text = escape(line.head)
    if line.tail:
        text += "<br/>{" + escape(line.tail) + "}"
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
    out = ["---", f"title: {_title(diagram)}", "---", "stateDiagram-v2"]
    for node in diagram.nodes:
        out += _declare(node, ids[node.id])
    out += [f"    [*] --> {ids[n.id]}" for n in diagram.nodes if n.initial]
    for edge in diagram.edges:
        label = "<br/>".join(line_text(diagram, line) for line in edge.lines)
        out.append(f"    {ids[edge.source]} --> {ids[edge.target]} : {label}")
    out += [f"    {ids[n.id]} --> [*]" for n in diagram.nodes if n.final]
    out += _classes(diagram, ids)
    return "\n".join(out) + "\n"


def _title(diagram: Diagram) -> str:
    notes = diagram.overlay.notes[:1] if diagram.overlay else ()
    text = " · ".join((diagram.title, *notes))
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
