"""Graphviz renderer: the drawing model as DOT source (pure), styled to print in grey.

States are rounded boxes, the initial state is pointed at by a dot, final states have a
double border, transient states are diamonds (decision points), and wildcard rows leave
one dashed "any state" box. Edge labels are HTML: one line per merged row, updates in a
smaller second line. Overlays change only weights and shades, never the layout inputs
that do not depend on them, so a trace over a table still looks like the table.
"""

from __future__ import annotations

import math
from html import escape

import graphviz
from agentfsm.diagrams.model import ANY, Diagram, Edge, Line, Node, internal_edges, wrap

FONT = "Helvetica,Arial,sans-serif"
START = "(start)"
INK = "#222222"
MUTED = "#9a9a9a"
FILL = "#f0f0f0"
TRANSIENT_FILL = "#ffffff"
HIGHLIGHT = "#000000"


def to_dot(diagram: Diagram, rankdir: str = "TB", compact: bool = False) -> str:
    """DOT source for ``diagram``, ranked top to bottom or (``LR``) left to right; the same
    diagram always gives the same text.

    ``compact`` is the view for a narrow column: edges carry only their row numbers and the
    rows are spelled out once, in a numbered table under the picture (the graph's label; the
    title and legend then label a borderless cluster around the states). A row's text widens
    that table, not a rank, so a table with many long labels side by side fits; short labels
    also let the states sit closer.
    """
    graph = graphviz.Digraph(name=diagram.machine)
    graph.attr("graph", rankdir=rankdir, fontname=FONT, fontsize="13", labelloc="b" if compact else "t",
               labeljust="l", nodesep="0.3" if compact else "0.45", ranksep="0.55", pad="0.2", newrank="true",
               label=_rows_table(diagram) if compact else _caption(diagram))
    graph.attr("node", shape="box", style="rounded,filled", fillcolor=FILL, color=INK, fontcolor=INK,
               fontname=FONT, fontsize="12", margin="0.18,0.08", penwidth="1.2")
    graph.attr("edge", fontname=FONT, fontsize="10", color=INK, fontcolor=INK, arrowsize="0.7", penwidth="1.1")
    states = graphviz.Digraph(name="cluster_states") if compact else graph
    if compact:
        states.attr(label=_caption(diagram, compact), labelloc="t", labeljust="l", pencolor="none")
    states.node(START, label="", shape="circle", style="filled", fillcolor=INK, width="0.16", fixedsize="true")
    inside = internal_edges(diagram)
    for node in diagram.nodes:
        states.node(node.id, **_node_attrs(diagram, node, inside.get(node.id), compact))
        if node.initial:
            states.edge(START, node.id)
    if compact:
        graph.subgraph(states)
    for edge in diagram.edges:
        if edge.source not in inside or edge.target != edge.source:
            graph.edge(edge.source, edge.target, **_edge_attrs(diagram, edge, compact))
    source: str = graph.source
    return source


def _caption(diagram: Diagram, compact: bool = False) -> str:
    lines = [f"<b>{escape(diagram.title)}</b>"]
    if diagram.overlay:
        lines += [f'<font point-size="11">{escape(note)}</font>' for note in diagram.overlay.notes]
    lines += [f'<font point-size="9">{escape(item)}</font>' for item in legend(diagram, compact)]
    return "<" + '<br align="left"/>'.join(lines) + '<br align="left"/>>'


def legend(diagram: Diagram, compact: bool = False) -> list[str]:
    """How to read this picture: the marks it uses, two or three short lines under the title."""
    kinds = {node.kind for node in diagram.nodes}
    marks = ["● points at the initial state",
             "arrow label: its rows' numbers, spelled out in the table below" if compact
             else "arrow label: Event [guard] / Action, ... (one line per row)"]
    if any(line.tail for edge in diagram.edges for line in edge.lines):
        marks.append("italic: the row's updates")
    shapes = []
    if "transient" in kinds:
        shapes.append("◇ transient state (left at once)")
    if any(node.final for node in diagram.nodes):
        shapes.append("double border: final state")
    if "any" in kinds:
        shapes.append("dashed: any state (wildcard rows)")
    if internal_edges(diagram):
        shapes.append("↻ rows under a state's name: its self-loops" if compact
                      else "rows under a state's name: its self-loops")
    return ["Legend: " + " · ".join(marks), *([" · ".join(shapes)] if shapes else [])]


def _node_attrs(diagram: Diagram, node: Node, inside: Edge | None, compact: bool) -> dict[str, str]:
    attrs = {"label": node.label, "tooltip": node.description or node.label}
    overlay = diagram.overlay
    if inside is not None:
        lit = overlay is not None and overlay.kind == "trace" and bool(node.visited)
        dim = overlay is not None and overlay.kind == "trace" and not node.visited
        rows = "".join(f"row {line.row}" + (f": {line.description}" if line.description else "") + "; "
                       for line in inside.lines)
        attrs.update(shape="plain", tooltip=f"{node.description or node.label}; {rows}".strip("; "),
                     label=_compartments(diagram, node, inside, lit, dim, compact))
        return attrs
    if node.kind == "transient":
        attrs.update(shape="diamond", fillcolor=TRANSIENT_FILL, fontsize="10", margin="0.02",
                     tooltip=f"transient: {node.description or node.label}")
    elif node.kind == "any":
        attrs.update(style="rounded,dashed", fillcolor="none", fontcolor=INK, label="any state")
    if node.final:
        attrs["peripheries"] = "2"
    if overlay and overlay.kind == "trace":
        if node.visited and node.kind == "transient":
            attrs.update(penwidth="2.6", color=HIGHLIGHT)
        elif node.visited:
            attrs.update(penwidth="2.6", color=HIGHLIGHT, label=f"<{_name(node)}>")
        elif node.kind != "any":
            attrs.update(color=MUTED, fontcolor=MUTED)
    return attrs


def _name(node: Node) -> str:
    """A state's name, with the trace steps after which the machine rested there."""
    if not node.visited:
        return escape(node.label)
    later = [str(n) for n in node.visited if n > 0]
    parts = ["start"] if 0 in node.visited else []
    if later:
        parts.append(("steps " if len(later) > 1 else "step ") + ", ".join(later))
    steps = ", ".join(parts)
    return f'<b>{escape(node.label)}</b><br/><font point-size="9">after {escape(steps)}</font>'


def _compartments(diagram: Diagram, node: Node, inside: Edge, lit: bool, dim: bool, compact: bool) -> str:
    """A box with the state's name over a line, and its self-loop rows below (their numbers, compact)."""
    colour = HIGHLIGHT if lit else MUTED if dim else INK
    name = f'<font color="{MUTED}">{_name(node)}</font>' if dim else _name(node)
    rows = f"↻ {_numbers(inside)}" if compact else _label(diagram, inside, inline=True)
    return (f'<<table border="{2 if lit else 1}" style="rounded" bgcolor="{FILL}" color="{colour}" '
            f'cellborder="0" cellspacing="0" cellpadding="3">'
            f'<tr><td cellpadding="6"><font point-size="12">{name}</font></td></tr><hr/>'
            f'<tr><td align="left"><font point-size="10">{rows}</font></td></tr>'
            "</table>>")


def _numbers(edge: Edge) -> str:
    return ", ".join(map(str, edge.rows))


def _edge_attrs(diagram: Diagram, edge: Edge, compact: bool = False) -> dict[str, str]:
    attrs = {"label": _numbers(edge) if compact else "<" + _label(diagram, edge) + ">",
             "tooltip": "; ".join(f"row {line.row}" + (f": {line.description}" if line.description else "")
                                  for line in edge.lines)}
    if edge.source == ANY:
        attrs.update(style="dashed")
    overlay = diagram.overlay
    if overlay and overlay.kind == "trace":
        if any(line.mark.steps for line in edge.lines):
            attrs.update(penwidth="2.8", color=HIGHLIGHT, arrowsize="0.9")
        else:
            attrs.update(color=MUTED, fontcolor=MUTED)
    elif overlay and overlay.kind == "coverage":
        total = sum(line.mark.count or 0 for line in edge.lines)
        if total == 0:
            attrs.update(style="dashed", color=MUTED)
        else:
            width = 1 + 2.5 * _share(total, overlay.max_count)
            attrs.update(penwidth=f"{width:.2f}", color=_shade(total, overlay.max_count))
    return attrs


def _share(count: int, most: int) -> float:
    """Where ``count`` sits between 0 and ``most`` on a log scale (coverage counts are skewed)."""
    return math.log1p(count) / math.log1p(most) if most > 0 else 0.0


def _shade(count: int, most: int) -> str:
    """Grey from light (rarely fired) to black (the most fired row): survives grey printing."""
    level = round(0x88 * (1 - _share(count, most)))
    return f"#{level:02x}{level:02x}{level:02x}"


def _label(diagram: Diagram, edge: Edge, inline: bool = False) -> str:
    # A self-loop is drawn small; an empty first column keeps its label clear of the loop.
    spacer = '<td width="8"></td>' if edge.source == edge.target and not inline else ""
    rows = "".join(_line(diagram, line, spacer) for line in edge.lines)
    return f'<table border="0" cellborder="0" cellspacing="0" cellpadding="2">{rows}</table>'


def _rows_table(diagram: Diagram) -> str:
    """The compact view's legend: every row once, numbered, with its source and target."""
    names = {node.id: node.label for node in diagram.nodes}
    lines = sorted(((line, edge) for edge in diagram.edges for line in edge.lines), key=lambda item: item[0].row)
    body = "".join(f'<tr><td align="right" valign="top"><b>{line.row}</b></td>'
                   f'<td align="left" valign="top">{escape(names[edge.source])} → {escape(names[edge.target])}</td>'
                   f'{_cells(diagram, line)}</tr>' for line, edge in lines)
    return (f'<<font point-size="10"><table border="0" cellborder="0" cellspacing="0" cellpadding="2">'
            f'{body}</table></font>>')


def _line(diagram: Diagram, line: Line, spacer: str) -> str:
    return f"<tr>{spacer}{_cells(diagram, line)}</tr>"


def _cells(diagram: Diagram, line: Line) -> str:
    parts = [escape(part) for part in wrap(line.head)] if line.head else [""]
    if line.event and parts[0].startswith(escape(line.event)):
        parts[0] = f"<b>{escape(line.event)}</b>" + parts[0][len(escape(line.event)):]
    head = '<br align="left"/>'.join(parts)
    tail = ('<br align="left"/><font point-size="9"><i>' + '<br align="left"/>'.join(
        escape(part) for part in wrap(line.tail)) + "</i></font>") if line.tail else ""
    overlay = diagram.overlay
    badge = ""
    if overlay and overlay.kind == "trace":
        if line.mark.steps:
            numbers = ", ".join(map(str, line.mark.steps))
            badge = (f'<td bgcolor="{HIGHLIGHT}" valign="top"><font color="white" point-size="9">'
                     f'<b>{"✗ " if line.mark.faulty else ""}{numbers}</b></font></td>')
        else:
            badge = "<td></td>"
            head, tail = _muted(head), _muted(tail)
    elif overlay and overlay.kind == "coverage":
        count = line.mark.count or 0
        text = "never" if count == 0 else f"×{count}"
        colour = MUTED if count == 0 else _shade(count, overlay.max_count)
        badge = f'<td valign="top" align="right"><font point-size="9" color="{colour}"><b>{text}</b></font></td>'
        if count == 0:
            head, tail = _muted(f"<i>{head}</i>" if head else ""), _muted(tail)
    return f'{badge}<td align="left" balign="left">{head}{tail}</td>'


def _muted(text: str) -> str:
    return f'<font color="{MUTED}">{text}</font>' if text else ""
