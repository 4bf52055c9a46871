"""Reading rendered diagrams back (SVG, DOT, Mermaid) so tests check what a reader sees."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass, field

from agentfsm.diagrams.mermaid import escape as mermaid_escape
from agentfsm.diagrams.model import ANY, line_of
from agentfsm.spec.model import Row, Table

SVG = "{http://www.w3.org/2000/svg}"


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


@dataclass
class MermaidDiagram:
    """A ``stateDiagram-v2`` as a reader sees it. Labels are plain text: ``<br/>`` line breaks
    become spaces. ``[*]`` inside a composite state is ``PARENT/[*]``."""

    states: dict[str, str] = field(default_factory=dict)          # id -> shown name
    kinds: dict[str, str] = field(default_factory=dict)           # id -> choice, fork, join, ...
    descriptions: dict[str, list[str]] = field(default_factory=dict)  # id -> lines listed in its box
    edges: list[tuple[str, str, str]] = field(default_factory=list)   # (source, target, label), in order
    notes: dict[str, list[str]] = field(default_factory=dict)      # id -> note texts
    parents: dict[str, str] = field(default_factory=dict)          # id -> the composite state holding it

    def labels(self, source: str, target: str) -> list[str]:
        """Every text that draws a move from ``source`` to ``target``: the edges' labels, and the
        lines listed in the source's box: for a self-loop those that stay, for another target
        those ending ``→ target`` (the rows of an edge drawn unlabeled, the suffix cut off)."""
        found = [label for s, t, label in self.edges if (s, t) == (source, target)]
        for line in self.descriptions.get(source, []):
            row, arrow, goes_to = line.rpartition("→")
            if not arrow and source == target:
                found.append(line)
            elif arrow and goes_to.strip() in (target, self.states.get(target)):
                found.append(row.strip())
        return found


_ID = r"[^\s:{}\"]+"
_MERMAID_LINES: list[tuple[str, re.Pattern[str]]] = [(name, re.compile(pattern)) for name, pattern in [
    ("ignore", r"^(%%.*|classDef\s.*|class\s.*|style\s.*|direction\s+\w+|acc(Title|Descr)\b.*|--|)$"),
    ("close", r"^\}$"),
    ("note_block", rf"^note\s+(?:left|right)\s+of\s+({_ID})$"),
    ("note", rf"^note\s+(?:left|right)\s+of\s+({_ID})\s*:\s*(.*)$"),
    ("alias", rf'^state\s+"([^"]*)"\s+as\s+({_ID})(\s*\{{)?$'),
    ("kind", rf"^state\s+({_ID})\s+<<(\w+)>>$"),
    ("composite", rf"^state\s+({_ID})\s*\{{$"),
    ("bare", rf"^state\s+({_ID})$"),
    ("edge", rf"^({_ID})\s*-->\s*({_ID})(?:\s*:\s*(.*))?$"),
    ("inside", rf"^({_ID})\s*:\s*(.*)$"),
    ("alone", rf"^({_ID})$"),
]]


def _plain(label: str) -> str:
    return " ".join(re.split(r"<br\s*/?>|\\n", label)).strip()


def read_mermaid(text: str) -> MermaidDiagram:
    """Parse a Mermaid state diagram: front matter, states (plain, aliased, ``<<choice>>`` and
    the like, composite), transitions with or without labels, rows listed in a state's box, notes
    (one line or a block). A line it cannot read is a ``ValueError``, not skipped."""
    body = text.split("\n")
    if body and body[0].strip() == "---":
        body = body[body.index("---", 1) + 1:]
    lines = iter(enumerate(body, start=1))
    diagram = MermaidDiagram()
    stack: list[str] = []
    header = False

    def state(name: str) -> str:
        name = name.split(":::")[0]
        if name == "[*]":
            return f"{stack[-1]}/[*]" if stack else name
        diagram.states.setdefault(name, name)
        if stack and name != stack[-1]:
            diagram.parents.setdefault(name, stack[-1])
        return name

    for number, raw in lines:
        line = raw.strip()
        if not header:
            if line.startswith("stateDiagram"):
                header = True
            elif line and not line.startswith("%%"):
                raise ValueError(f"line {number}: expected stateDiagram-v2, got {raw!r}")
            continue
        kind, match = next(((k, m) for k, p in _MERMAID_LINES if (m := p.match(line))), ("", None))
        if match is None:
            raise ValueError(f"line {number}: not Mermaid state-diagram syntax this reader knows: {raw!r}")
        if kind == "close":
            if not stack:
                raise ValueError(f"line {number}: '}}' closes no composite state")
            stack.pop()
        elif kind == "note_block":
            texts = []
            for _, more in lines:
                if more.strip() == "end note":
                    break
                texts.append(more.strip())
            diagram.notes.setdefault(state(match.group(1)), []).append(_plain(" ".join(texts)))
        elif kind == "note":
            diagram.notes.setdefault(state(match.group(1)), []).append(_plain(match.group(2)))
        elif kind == "alias":
            name = state(match.group(2))
            diagram.states[name] = match.group(1)
            if match.group(3):
                stack.append(name)
        elif kind == "kind":
            diagram.kinds[state(match.group(1))] = match.group(2)
        elif kind == "composite":
            stack.append(state(match.group(1)))
        elif kind in ("bare", "alone"):
            state(match.group(1))
        elif kind == "edge":
            diagram.edges.append((state(match.group(1)), state(match.group(2)), _plain(match.group(3) or "")))
        elif kind == "inside":
            diagram.descriptions.setdefault(state(match.group(1)), []).append(_plain(match.group(2)))
    if stack:
        raise ValueError(f"composite state {stack[-1]} is never closed")
    return diagram


def mermaid_edges(text: str) -> tuple[dict[tuple[str, str], str], Counter[tuple[str, str]]]:
    """Each edge's label text as a reader sees it, by (source, target); the rows listed in a
    state's box count as that state's one edge to itself."""
    diagram = read_mermaid(text)
    edges: dict[tuple[str, str], str] = {}
    counts: Counter[tuple[str, str]] = Counter()
    for source, target, label in diagram.edges:
        counts[(source, target)] += 1
        edges[(source, target)] = " ".join(filter(None, [edges.get((source, target), ""), label]))
    for name, texts in diagram.descriptions.items():
        counts[(name, name)] = 1
        edges[(name, name)] = " ".join(filter(None, [edges.get((name, name), ""), *texts]))
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
