"""The committed pictures as a reader's browser draws them (headless Chromium).

Graphviz's own PNG is not enough: GitHub, documentation sites and editors draw the SVG
in a browser, and Mermaid text with Mermaid's renderer in the page.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from agentfsm.diagrams.mermaid import to_mermaid
from agentfsm.diagrams.model import build
from agentfsm.diagrams.render import keep_spaces
from agentfsm.spec import load_table
from conftest import ROOT, TABLES
from headless import page_result

PAGES = ROOT / "tests" / "browser"
MERMAID_JS = ROOT / "tests" / "mermaid" / "node_modules" / "mermaid" / "dist" / "mermaid.min.js"
BOLD_THEN_SPACE = ('<text x="0" y="20" font-weight="bold">UserInput</text>'
                   '<text x="60" y="20"> / SendLlmRequest</text>')


def collapsed(pictures: list[str]) -> list[list[str]]:
    page = (PAGES / "svg-spaces.html").read_text().replace("PICTURES_JSON", json.dumps(pictures))
    result: list[list[str]] = page_result(page)
    return result


def test_committed_svgs_keep_every_space() -> None:
    pictures = sorted((ROOT / "diagrams").glob("*.svg"))
    assert len(pictures) == len(TABLES)
    found = collapsed([p.read_text() for p in pictures])
    assert found == [[] for _ in pictures], {p.name: f for p, f in zip(pictures, found, strict=True) if f}


def test_the_browser_check_sees_a_collapsed_space() -> None:
    """dot's split runs as dot writes them lose their space in a browser; keep_spaces keeps it."""
    raw = f'<svg xmlns="http://www.w3.org/2000/svg" width="300" height="40">{BOLD_THEN_SPACE}</svg>'
    before, after = collapsed([raw, keep_spaces(raw.encode()).decode()])
    assert before == ['" / SendLlmRequest": 16 of 17 drawn'] and after == []


def overlapping_labels(texts: list[str]) -> list[dict[str, Any]]:
    assert MERMAID_JS.is_file(), "Mermaid is not installed: run scripts/setup.sh (npm ci in tests/mermaid)"
    page = ((PAGES / "mermaid-layout.html").read_text().replace("MERMAID_JS", MERMAID_JS.as_uri())
            .replace("TEXTS_JSON", json.dumps(texts)))
    result: list[dict[str, Any]] = page_result(page)
    return result


@pytest.fixture(scope="module")
def laid_out() -> dict[str, dict[str, Any]]:
    """Every bundled table's Mermaid as Chromium lays it out, by file name (one browser run)."""
    results = overlapping_labels([to_mermaid(build(load_table(path))) for path in TABLES])
    return {path.name: result for path, result in zip(TABLES, results, strict=True)}


@pytest.mark.parametrize("path", TABLES, ids=lambda p: p.name)
def test_mermaid_edge_labels_do_not_overlap(path: Path, laid_out: dict[str, dict[str, Any]]) -> None:
    result = laid_out[path.name]
    assert "error" not in result and result["labels"], result
    assert result["overlaps"] == []


@pytest.mark.parametrize("path", TABLES, ids=lambda p: p.name)
def test_mermaid_shows_every_state_s_name(path: Path, laid_out: dict[str, dict[str, Any]]) -> None:
    """A state whose box lists rows shows its name above them (Mermaid shows a box's only row in
    place of an undeclared state's name)."""
    table = load_table(path)
    shown = {line.strip() for text in laid_out[path.name]["nodes"] for line in text.split("\n")}
    missing = [s.name for s in table.states if s.name not in shown and f"{s.name} (transient)" not in shown]
    assert missing == []


def test_the_name_check_sees_a_box_without_its_name() -> None:
    [result] = overlapping_labels(["stateDiagram-v2\n    [*] --> Idle\n    Idle : Poke / Wake\n"])
    assert "Idle" not in {line.strip() for text in result["nodes"] for line in text.split("\n")}


def test_the_overlap_check_sees_overlapping_labels() -> None:
    """The Loom table's Mermaid as it was committed before labels wrapped and self-loops moved
    into their state's box: its labels overlapped on GitHub, and the check says so."""
    [result] = overlapping_labels([(PAGES / "overlapping-loom-agent.mmd").read_text()])
    assert len(result["overlaps"]) >= 3, result
