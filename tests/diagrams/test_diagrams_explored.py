"""--explored: the verifier's configuration graph of the Loom table, grouped by state."""

from __future__ import annotations

from pathlib import Path

import pytest
from agentfsm.diagrams.explored import config_graph, explored_dot, explored_mermaid
from agentfsm.diagrams.output import picture
from agentfsm.spec import Table, load_table
from agentfsm.verify.table.explore import explore
from conftest import SPEC
from diagram_reading import svg_graph

from agentfsm.cli import main

LOOM = str(SPEC / "loom-agent.yaml")


def test_every_configuration_sits_in_its_states_cluster(loom: Table) -> None:
    exploration = explore(loom)
    graph = config_graph(loom, exploration)
    assert sum(len(members) for _, members in graph.groups) == exploration.count == len(graph.values)
    for state, members in graph.groups:
        assert all(loom.states[exploration.config(i)[0]].name == state for i in members)
    source = explored_dot(graph)
    assert source.count("subgraph cluster_") == len(graph.groups) == sum(not s.transient for s in loom.states)
    nodes, edges, _ = svg_graph(picture(graph, "svg"))
    assert {f"c{i}" for i in range(exploration.count)} <= nodes.keys()
    drawn = sum(len(texts) for _, _, texts in graph.edges) + sum(len(loop) for loop in graph.loops)
    assert drawn == exploration.transitions
    assert "retries=0, pending=2, failed=0, mutated=false, origin=0" in nodes["c" + str(
        next(i for i in range(exploration.count) if exploration.config(i) == (3, (0, 2, 0, False, 0))))]
    assert "LlmCompleted(tool_calls=2)" in " ".join(edges.values())


def test_self_loops_are_listed_in_the_configuration(loom: Table) -> None:
    graph = config_graph(loom, explore(loom))
    assert graph.loops[1] == ("TextDelta", "ToolCallDelta")
    assert "↻ TextDelta, ToolCallDelta" in explored_mermaid(graph)


def test_too_many_configurations_are_refused_with_advice(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    big = load_table(LOOM, {"max_tools": 12, "max_retries": 16})
    with pytest.raises(ValueError, match="--set"):
        config_graph(big, explore(big))
    assert main(["diagram", LOOM, "--explored", "--set", "max_tools=12", "--set", "max_retries=16"]) == 2
    assert "too many to draw" in capsys.readouterr().err
    assert main(["diagram", LOOM, "--explored", "-o", str(tmp_path / "x.dot")]) == 0
    assert (tmp_path / "x.dot").read_text().startswith('digraph "loom-agent-explored"')
