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
from agentfsm.diagrams.sequence import sequence_mermaid
from agentfsm.diagrams.violation import verdict
from agentfsm.spec import load_table
from conftest import ROOT, TABLES
from headless import page_result
from system_charts import AS_WAS, counterexamples

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
    assert len(pictures) == 2 * len(TABLES)   # the full view and the compact view of each
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


COMMITTED_MERMAID = sorted((ROOT / "diagrams").glob("**/*.mmd"))


@pytest.fixture(scope="module")
def committed_laid_out() -> dict[str, dict[str, Any]]:
    """Every committed Mermaid file (tables and systems) as Chromium draws it, by path (one browser run)."""
    results = overlapping_labels([path.read_text() for path in COMMITTED_MERMAID])
    return {str(path.relative_to(ROOT)): result for path, result in zip(COMMITTED_MERMAID, results, strict=True)}


@pytest.mark.parametrize("path", COMMITTED_MERMAID, ids=lambda p: str(p.relative_to(ROOT / "diagrams")))
def test_committed_mermaid_draws_without_overlaps(path: Path, committed_laid_out: dict[str, dict[str, Any]]) -> None:
    """What GitHub shows: a picture (not a syntax error) whose labels lie on no other label and,
    in a system's flowchart, under no other edge's line."""
    result = committed_laid_out[str(path.relative_to(ROOT))]
    assert "error" not in result and result["labels"], result
    assert result["overlaps"] == [] and result["crossings"] == []


def test_the_crossing_check_sees_a_line_through_a_label() -> None:
    """The vibework system's flowchart as it was committed: the environment's edge to the
    sub-agent ran through the label of the sub-agent's results, and its durable-run pictures
    stacked the labels of parallel edges."""
    crossing, overlapping = overlapping_labels([(PAGES / "crossing-vibework-with-user.mmd").read_text(),
                                                (PAGES / "overlapping-durable-run.mmd").read_text()])
    assert crossing["crossings"] and len(overlapping["overlaps"]) >= 3, (crossing, overlapping)


def test_counterexample_charts_draw_with_their_verdict() -> None:
    """Each bundled as-was system's counterexample, as a sequence chart, shows the check it breaks."""
    charts = [(sequence_mermaid(system, steps, trace), verdict(system, trace, steps))
              for path in AS_WAS for system, trace, steps in counterexamples(path)]
    assert charts and all(shown for _, shown in charts)
    results = overlapping_labels([text for text, _ in charts])
    for (text, shown), result in zip(charts, results, strict=True):
        assert "error" not in result, (text, result)
        assert shown is not None and "".join(shown.split()) in "".join(result["text"].split()), shown
