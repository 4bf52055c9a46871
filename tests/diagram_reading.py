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


def mermaid_edges(text: str) -> tuple[dict[tuple[str, str], list[str]], Counter[tuple[str, str]]]:
    edges: dict[tuple[str, str], list[str]] = {}
    counts: Counter[tuple[str, str]] = Counter()
    for line in text.splitlines():
        match = MERMAID_EDGE.match(line)
        if match:
            key = (match.group(1), match.group(2))
            edges.setdefault(key, []).extend(match.group(3).split("<br/>"))
            counts[key] += 1
    return edges, counts


def source_of(row: Row) -> str:
    return ANY if row.wildcard else row.source


def svg_row_text(table: Table, row: Row, nodes: dict[str, str], edges: dict[tuple[str, str], str]) -> str:
    """Where the SVG draws a row: a state's own box for a self-loop, else its edge."""
    if row.source == row.target and not table.state(row.source).transient:
        return nodes[row.source]
    return edges[(source_of(row), row.target)]


def expected_mermaid(row: Row) -> list[str]:
    line = line_of(row)
    return [mermaid_escape(line.head)] + ([f"{{{mermaid_escape(line.tail)}}}"] if line.tail else [])


def wildcard_targets(table: Table) -> set[str]:
    return {row.target for row in table.rows if row.wildcard}
