"""The committed pictures in diagrams/ show every state and every row of their table, checked
without the diagram code and whatever Graphviz is installed.

test_diagrams_fresh compares the committed files with what the renderer makes now, so a
renderer bug regenerated into the goldens would pass it, and under another Graphviz version
it compares only a digest. Here the committed SVG and Mermaid files are read as a reader
sees them and held to the table's plain YAML (tests/naive_semantics.read_yaml): every state
is a node; every row is an edge from its source (``any state`` for a wildcard row) to its
target, or a self-loop listed in its state's node, whose text names the row's event and
every action it emits, in order.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, TABLES
from diagram_reading import read_mermaid
from naive_semantics import read_yaml

SVG = "{http://www.w3.org/2000/svg}"
PICTURES = ROOT / "diagrams"


def svg_texts(path: Path) -> tuple[dict[str, str], dict[str, str]]:
    """Node texts and edge texts by their titles (``A`` and ``A->B``)."""
    nodes: dict[str, str] = {}
    edges: dict[str, str] = {}
    for group in ET.parse(path).getroot().iter(f"{SVG}g"):
        title = group.findtext(f"{SVG}title") or ""
        text = " ".join(t.text or "" for t in group.iter(f"{SVG}text"))
        if group.get("class") == "node":
            nodes[title] = text
        elif group.get("class") == "edge":
            edges[title] = edges.get(title, "") + " " + text
    return nodes, edges


def names_in_order(text: str, names: list[str]) -> bool:
    """``names`` appear in ``text`` as words, in this order."""
    at = 0
    for name in names:
        found = re.compile(rf"(?<![A-Za-z0-9_]){re.escape(name)}(?![A-Za-z0-9_])").search(text, at)
        if found is None:
            return False
        at = found.end()
    return True


def row_names(row: dict[str, Any]) -> list[str]:
    return ([row["on"]] if "on" in row else []) + list(row.get("emit") or [])


@pytest.mark.parametrize("path", TABLES, ids=lambda p: p.stem)
def test_the_committed_svg_shows_every_state_and_row(path: Path) -> None:
    data = read_yaml(path)
    nodes, edges = svg_texts(PICTURES / f"{data['machine']}.svg")
    assert set(data["states"]) <= set(nodes)
    for number, row in enumerate(data["transitions"], start=1):
        source = "(any state)" if row["from"] == "*" else row["from"]
        text = nodes[source] if source == row["to"] else edges.get(f"{source}->{row['to']}")
        assert text is not None, f"row {number}: no edge {source} -> {row['to']}"
        assert names_in_order(text, row_names(row)), f"row {number}: {row_names(row)} not in {text!r}"


@pytest.mark.parametrize("path", TABLES, ids=lambda p: p.stem)
def test_the_committed_mermaid_shows_every_row(path: Path) -> None:
    data = read_yaml(path)
    diagram = read_mermaid((PICTURES / f"{data['machine']}.mmd").read_text(encoding="utf-8"))
    assert set(data["states"]) <= set(diagram.states)
    for number, row in enumerate(data["transitions"], start=1):
        source = "any_state" if row["from"] == "*" else row["from"]
        labels = diagram.labels(source, row["to"])
        assert labels, f"row {number}: nothing draws {source} --> {row['to']}"
        assert any(names_in_order(label, row_names(row)) for label in labels), (
            f"row {number}: {row_names(row)} in no label of {labels!r}")
    initial = next(name for name, spec in data["states"].items() if (spec or {}).get("initial"))
    pairs = {(source, target) for source, target, _ in diagram.edges}
    assert ("[*]", initial) in pairs
    assert {(name, "[*]") for name, spec in data["states"].items() if (spec or {}).get("final")} <= pairs
    assert {name for name, spec in data["states"].items() if (spec or {}).get("transient")} == {
        name for name, kind in diagram.kinds.items() if kind == "choice"}


def without(picture: str, start: str, word: str) -> str:
    """``picture`` with ``word`` taken out of its one line that starts with ``start``."""
    lines = picture.split("\n")
    (at,) = [i for i, line in enumerate(lines) if line.strip().startswith(start)]
    assert word in lines[at]
    lines[at] = lines[at].replace(word, "")
    return "\n".join(lines)


def test_a_picture_missing_a_row_is_caught() -> None:
    picture = (PICTURES / "loom-agent.mmd").read_text(encoding="utf-8")
    names = ["PostToolsHookCompleted", "SendLlmRequest"]
    broken = read_mermaid(without(picture, "PostToolsHook --> CallingLlm", "SendLlmRequest"))
    assert not any(names_in_order(label, names) for label in broken.labels("PostToolsHook", "CallingLlm"))
    assert any(names_in_order(label, names) for label in read_mermaid(picture).labels("PostToolsHook", "CallingLlm"))


def test_a_self_loop_missing_from_its_box_is_caught() -> None:
    picture = (PICTURES / "loom-agent.mmd").read_text(encoding="utf-8")
    names = ["TextDelta", "DisplayMessage"]
    assert any(names_in_order(label, names) for label in read_mermaid(picture).labels("CallingLlm", "CallingLlm"))
    lines = [line for line in picture.split("\n") if not ("CallingLlm" in line and "TextDelta" in line)]
    broken = read_mermaid("\n".join(lines))
    assert not any(names_in_order(label, names) for label in broken.labels("CallingLlm", "CallingLlm"))


def test_a_row_listed_in_its_source_box_counts_for_its_target_only() -> None:
    """A returning edge is drawn unlabeled, its rows listed in the source's box ending '→ Target':
    such a row draws a move to Target, not a self-loop, and losing the line is caught."""
    picture = (PICTURES / "loom-agent.mmd").read_text(encoding="utf-8")
    diagram = read_mermaid(picture)
    names = ["RetryTimeoutFired", "SendLlmRequest"]
    assert any(names_in_order(label, names) for label in diagram.labels("Error", "CallingLlm"))
    assert not any(names_in_order(label, names) for label in diagram.labels("Error", "Error"))
    lines = [line for line in picture.split("\n") if not ("Error :" in line and "RetryTimeoutFired" in line)]
    broken = read_mermaid("\n".join(lines))
    assert not any(names_in_order(label, names) for label in broken.labels("Error", "CallingLlm"))


MERMAID_GRAMMAR = """---
title: "any front matter"
---
stateDiagram-v2
    %% a comment
    direction LR
    state "Waiting for input" as Waiting
    state Busy {
        [*] --> Inner
        Inner --> Inner : Tick / Count
        Inner : Poke / Noted
    }
    state Pick <<choice>>
    note right of Pick : Pick (transient)
    note left of Waiting
        a note of
        two lines
    end note
    Waiting --> Busy : Go<br/>/ Start
    Busy --> Pick
    Pick --> Waiting : [done]
    Waiting --> Waiting : Ping / Pong
    Busy --> [*]
    classDef anyState stroke-dasharray: 5 5
    class Waiting anyState
"""


def test_the_mermaid_reader_reads_the_grammar_not_one_layout() -> None:
    diagram = read_mermaid(MERMAID_GRAMMAR)
    assert diagram.states == {"Waiting": "Waiting for input", "Busy": "Busy", "Inner": "Inner", "Pick": "Pick"}
    assert diagram.kinds == {"Pick": "choice"} and diagram.parents == {"Inner": "Busy"}
    assert diagram.notes == {"Pick": ["Pick (transient)"], "Waiting": ["a note of two lines"]}
    assert diagram.labels("Inner", "Inner") == ["Tick / Count", "Poke / Noted"]
    assert diagram.labels("Waiting", "Waiting") == ["Ping / Pong"]
    assert diagram.labels("Waiting", "Busy") == ["Go / Start"]
    assert ("Busy/[*]", "Inner", "") in diagram.edges and ("Busy", "[*]", "") in diagram.edges
    with pytest.raises(ValueError, match="line 5: not Mermaid"):
        read_mermaid("stateDiagram-v2\n    A --> B\n    state B {\n    }\n    A ==> B\n")
    with pytest.raises(ValueError, match="never closed"):
        read_mermaid("stateDiagram-v2\n    state B {\n")
