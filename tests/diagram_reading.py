"""Reading rendered diagrams back (SVG, DOT, Mermaid) so tests check what a reader sees."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections import Counter

from agentfsm.diagrams.mermaid import escape as mermaid_escape
from agentfsm.diagrams.model import ANY, line_of
from agentfsm.spec.model import Row, Table

SVG = "{http://www.w3.org/2000/svg}"
MERMAID_EDGE = re.compile(r"^    (\S+) --> (\S+) : (.*)$")
MERMAID_INSIDE = re.compile(r"^    (\S+) : (.*)$")  # a self-loop's row, listed in its state's box


def squash(text: str) -> str:
    return re.sub(r"\s+", "", text)


def svg_graph(data: bytes) -> tuple[dict[str, str], dict[tuple[str, str], str], Counter[tuple[str, str]]]:
    """Node texts by title, edge texts by (source, target), and how many edges each pair has."""
    root = ET.fromstring(data)
    nodes: dict[str, str] = {}
    edges: dict[tuple[str, str], str] = {}
    counts: Counter[tuple[str, str]] = Counter()
    for group in root.iter(f"{SVG}g"):
        title = group.findtext(f"{SVG}title") or ""
        text = "\n".join(t.text or "" for t in group.iter(f"{SVG}text"))
        if group.get("class") == "node":
            nodes[title] = text
        elif group.get("class") == "edge":
            source, _, target = title.partition("->")
            edges[(source, target)] = edges.get((source, target), "") + text
            counts[(source, target)] += 1
    return nodes, edges, counts


def mermaid_edges(text: str) -> tuple[dict[tuple[str, str], str], Counter[tuple[str, str]]]:
    """Each edge's label text as a reader sees it (wrapped lines joined by spaces), by (source,
    target); self-loops listed in a state's box count as that state's edge to itself."""
    edges: dict[tuple[str, str], str] = {}
    counts: Counter[tuple[str, str]] = Counter()
    for line in text.splitlines():
        match = MERMAID_EDGE.match(line)
        inside = None if match else MERMAID_INSIDE.match(line)
        if match:
            key, label = (match.group(1), match.group(2)), match.group(3)
            counts[key] += 1
        elif inside and not inside.group(1).startswith("["):
            key, label = (inside.group(1), inside.group(1)), inside.group(2)
            counts[key] = 1
        else:
            continue
        edges[key] = " ".join(filter(None, [edges.get(key, ""), *label.split("<br/>")]))
    return edges, counts


def source_of(row: Row) -> str:
    return ANY if row.wildcard else row.source


def svg_row_text(table: Table, row: Row, nodes: dict[str, str], edges: dict[tuple[str, str], str]) -> str:
    """Where the SVG draws a row: a state's own box for a self-loop, else its edge."""
    if row.source == row.target and not table.state(row.source).transient:
        return nodes[row.source]
    return edges[(source_of(row), row.target)]


def expected_mermaid(row: Row) -> list[str]:
    """A row's texts as they read in a Mermaid label, spaces squashed (lines may wrap anywhere)."""
    line = line_of(row)
    return [squash(mermaid_escape(line.head))] + ([squash(f"{{{mermaid_escape(line.tail)}}}")] if line.tail else [])


def wildcard_targets(table: Table) -> set[str]:
    return {row.target for row in table.rows if row.wildcard}
