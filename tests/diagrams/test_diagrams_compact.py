"""The compact view: row numbers on the arrows, the rows spelled out once in a table under the picture."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from agentfsm.diagrams.dot import to_dot
from agentfsm.diagrams.model import build, internal_edges
from agentfsm.diagrams.output import picture
from agentfsm.diagrams.overlay import trace_overlay
from agentfsm.diagrams.render import svg_size
from agentfsm.spec import Table, load_table
from conftest import SPEC, TABLES
from diagram_reading import SVG, squash, svg_graph
from test_diagrams_overlay import TOOLS

from agentfsm.cli import main


def rows_table(data: bytes) -> list[str]:
    """The texts of the graph's own label (the compact view's table of rows), in drawing order."""
    graph = next(ET.fromstring(data).iter(f"{SVG}g"))
    return [t.text or "" for t in graph.findall(f"{SVG}text")]


@pytest.mark.parametrize("path", TABLES, ids=lambda p: p.stem)
def test_arrows_carry_row_numbers_and_the_table_spells_each_row_out_once(path: Path) -> None:
    table = load_table(path)
    diagram = build(table)
    data = picture(diagram, "svg", compact=True)
    nodes, edges, _ = svg_graph(data)
    inside = internal_edges(diagram)
    for edge in diagram.edges:
        numbers = ", ".join(map(str, edge.rows))
        if edge.source in inside and edge.source == edge.target:
            assert f"↻ {numbers}" in nodes[edge.source]
        else:
            assert squash(edges[(edge.source, edge.target)]) == squash(numbers)
    texts = rows_table(data)
    assert [int(t) for t in texts if t.isdigit()] == [row.index for row in table.rows]
    for row in table.rows:
        if row.event:
            assert row.event in texts, f"row {row.index}'s event is not in the table of rows"


def test_a_trace_marks_the_rows_of_the_table_and_weights_the_arrows(loom: Table) -> None:
    source = to_dot(build(loom, trace_overlay(loom, json.dumps(TOOLS))), compact=True)
    fired = next(line for line in source.splitlines() if line.startswith("\tExecutingTools -> PostToolsHook ["))
    assert "penwidth=2.8" in fired and "label=" in fired and "<table" not in fired
    caption = next(line for line in source.splitlines() if line.startswith("\tgraph ["))
    assert "<b>5</b></font></td>" in caption   # step 5's badge, in the table of rows


def test_cli_draws_the_compact_view_and_refuses_it_where_it_has_no_meaning(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    vibework = str(SPEC / "vibework-agent.yaml")
    assert main(["diagram", vibework, "--compact", "-o", str(tmp_path / "c.svg")]) == 0
    assert main(["diagram", vibework, "-o", str(tmp_path / "full.svg")]) == 0
    assert svg_size((tmp_path / "c.svg").read_bytes())[0] < svg_size((tmp_path / "full.svg").read_bytes())[0]
    assert main(["diagram", vibework, "--compact", "--format", "mermaid"]) == 2
    assert "--compact is a Graphviz view" in capsys.readouterr().err
    assert main(["diagram", str(SPEC / "systems" / "loom-with-tools.yaml"), "--compact"]) == 2
    assert main(["diagram", vibework, "--compact", "--out-dir", str(tmp_path)]) == 2
    assert "takes no -o, --format, --compact" in capsys.readouterr().err
