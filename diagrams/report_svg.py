"""A table's picture as the HTML report embeds it: Graphviz's SVG with each state and edge named.

Graphviz numbers its groups (``node3``, ``edge7``) and names them only in a ``<title>``; the
report's script must find "state Idle" and "the edge of row 4" without guessing, so every
state's group gets ``data-state`` and every edge's ``data-rows`` (a self-loop drawn inside its
state's box puts its rows on the state). Graphviz's ids are dropped: several pictures share
one page. Pure text work; drawing the SVG is :func:`agentfsm.diagrams.render.svg`'s.
"""

from __future__ import annotations

import re
from html import escape, unescape

from agentfsm.diagrams.dot import START
from agentfsm.diagrams.model import Diagram, internal_edges

_GROUP = re.compile(r'<g id="(?:node|edge)\d+" class="(node|edge)">\s*<title>(.*?)</title>', re.S)
_PROLOGUE = re.compile(r"^.*?(?=<svg\b)", re.S)
_COMMENT = re.compile(r"<!--.*?-->\s*", re.S)
_IDS = re.compile(r' id="(?:graph|clust)\d+"')
_SIZE = re.compile(r'<svg width="([0-9.]+)pt" height="([0-9.]+)pt"')


def tag_svg(svg_text: str, diagram: Diagram) -> str:
    """``svg_text`` (Graphviz's SVG of ``diagram``) for inlining: no prologue, comments or
    Graphviz ids; states and edges tagged; a ``role="img"`` with the machine as its label."""
    inside = internal_edges(diagram)
    rows_between = {(edge.source, edge.target): edge.rows for edge in diagram.edges}

    def group(match: re.Match[str]) -> str:
        kind, title = match.group(1), unescape(match.group(2))
        if kind == "node":
            if title == START:
                return f'<g class="node start"><title>{escape(title)}</title>'
            rows = inside[title].rows if title in inside else ()
            return (f'<g class="node" data-state="{escape(title)}" data-rows="{_numbers(rows)}">'
                    f"<title>{escape(title)}</title>")
        source, _, target = title.partition("->")
        rows = rows_between.get((source, target), ())
        return f'<g class="edge" data-rows="{_numbers(rows)}"><title>{escape(title)}</title>'

    text = _COMMENT.sub("", _PROLOGUE.sub("", svg_text, count=1))
    text = _IDS.sub("", _GROUP.sub(group, text))
    size = _SIZE.search(text)
    if size:  # drawn at most at its natural size, narrower on a narrow page
        text = (text[:size.start()] + f'<svg role="img" aria-label="{escape(diagram.title)}" '
                f'style="max-width:{size.group(1)}pt" width="100%"' + text[size.end():])
    return text.strip()


def _numbers(rows: tuple[int, ...]) -> str:
    return " ".join(map(str, rows))
