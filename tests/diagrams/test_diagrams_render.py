"""Every bundled table, in every format: all states and rows drawn, wildcards once, stable bytes."""

from __future__ import annotations

import re

import pytest
from agentfsm.diagrams.dot import to_dot
from agentfsm.diagrams.mermaid import returning_edges, state_ids, to_mermaid
from agentfsm.diagrams.model import ANY, build, internal_edges, line_of
from agentfsm.diagrams.output import dot_source, picture
from agentfsm.diagrams.render import run_dot, svg_size
from agentfsm.spec import Table, load_table, load_table_bytes
from conftest import SPEC, TABLES
from diagram_reading import expected_mermaid, mermaid_edges, source_of, squash, svg_graph, svg_row_text

WILD = b"""
format: 1
machine: wild
states:
  Idle: {initial: true}
  Busy: {}
  Check: {transient: true}
  Stopped: {final: true}
  Broken: {}
events:
  Go: {}
  Stop: {}
  Kill: {}
  Fail: {}
transitions:
  - {from: Idle, on: Go, to: Busy}
  - {from: Busy, on: Go, to: Check}
  - {from: Check, to: Idle}
  - {from: "*", on: Stop, to: Stopped}
  - {from: "*", on: Kill, to: Stopped}
  - {from: "*", on: Fail, to: Broken}
"""


@pytest.fixture(scope="module", params=[p.name for p in TABLES])
def table(request: pytest.FixtureRequest) -> Table:
    return load_table(next(p for p in TABLES if p.name == request.param))


@pytest.fixture(scope="module")
def wild() -> Table:
    return load_table_bytes(WILD, "wild.yaml")


def test_svg_draws_every_state_and_row(table: Table) -> None:
    nodes, edges, _ = svg_graph(picture(build(table), "svg"))
    assert {s.name for s in table.states} <= nodes.keys()
    for row in table.rows:
        text = squash(svg_row_text(table, row, nodes, edges))
        line = line_of(row)
        assert squash(line.head) in text, f"row {row.index} missing from its edge"
        assert squash(line.tail) in text


def test_dot_draws_every_state_and_row(table: Table) -> None:
    source = to_dot(build(table))
    for state in table.states:
        assert f"\n\t{state.name} [" in source
    for row in table.rows:
        internal = row.source == row.target and not table.state(row.source).transient
        edge = next(line for line in source.splitlines()
                    if line.startswith(f'\t"{ANY}" -> {row.target} [' if row.wildcard
                                       else f"\t{row.source} [" if internal
                                       else f"\t{row.source} -> {row.target} ["))
        assert f"<b>{row.event}</b>" in edge if row.event else "<b>" not in edge.split("<td")[1]
        for action in row.emit:
            assert action in edge


def test_mermaid_draws_every_state_and_row(table: Table) -> None:
    diagram = build(table)
    text = to_mermaid(diagram)
    ids = state_ids(diagram)
    edges, _ = mermaid_edges(text)
    drawn = {ids[s.name] for s in table.states} & {name for pair in edges for name in pair}
    assert drawn == {ids[s.name] for s in table.states}
    back = {(e.source, e.target) for e in returning_edges(diagram)}
    for row in table.rows:
        source, target = ids[source_of(row)], ids[row.target]
        if (source_of(row), row.target) in back:  # listed in its source's box, ending "→ target"
            assert f"    {source} --> {target}\n" in text
            box = squash(edges[(source, source)])
            assert "".join(expected_mermaid(row)) + f"→{row.target}" in box, f"row {row.index} not in {box}"
            continue
        label = squash(edges[(source, target)])
        for expected in expected_mermaid(row):
            assert expected in label, f"row {row.index}: {expected!r} not in {label}"


def test_of_two_states_joined_both_ways_one_edge_is_labeled(table: Table) -> None:
    """Mermaid draws the two edges side by side, each label at its edge's middle: the returning
    edge goes unlabeled, its rows listed in a plain state's box, and the title says so."""
    diagram = build(table)
    pairs = {(e.source, e.target) for e in diagram.edges if e.source != e.target}
    back = returning_edges(diagram)
    kinds = {node.id: node.kind for node in diagram.nodes}
    assert all((e.target, e.source) in pairs and kinds[e.source] == "state" for e in back)
    assert len({frozenset((e.source, e.target)) for e in back}) == len(back)
    title = next(line for line in to_mermaid(diagram).splitlines() if line.startswith("title: "))
    assert ("→ State leaves by the unlabeled arrow" in title) == bool(back)


def test_initial_final_and_transient_marks(table: Table) -> None:
    source = to_dot(build(table))
    text = to_mermaid(build(table))
    ids = state_ids(build(table))
    assert f'"(start)" -> {table.initial.name}\n' in source
    assert f"    [*] --> {ids[table.initial.name]}\n" in text
    for state in table.states:
        declaration = next(line for line in source.splitlines() if line.startswith(f"\t{state.name} ["))
        assert ("peripheries=2" in declaration) == state.final
        assert ("shape=diamond" in declaration) == state.transient
        assert (f"    {ids[state.name]} --> [*]\n" in text) == state.final
        assert (f"    state {ids[state.name]} <<choice>>\n" in text) == state.transient


@pytest.mark.parametrize("fmt", ["svg", "dot", "mermaid"])
def test_output_is_byte_for_byte_stable(table: Table, fmt: str) -> None:
    again = load_table(table.file)
    assert picture(build(table), fmt) == picture(build(again), fmt)


def test_wildcard_rows_leave_one_any_state_box(wild: Table) -> None:
    diagram = build(wild)
    nodes, edges, counts = svg_graph(picture(diagram, "svg"))
    assert ANY in nodes
    assert counts[(ANY, "Stopped")] == 1 and counts[(ANY, "Broken")] == 1
    assert not any(target == "Stopped" and source != ANY for source, target in counts)
    assert {"Stop", "Kill"} <= set(edges[(ANY, "Stopped")].split())
    _, mcounts = mermaid_edges(to_mermaid(diagram))
    assert mcounts[("any_state", "Stopped")] == 1
    assert sum(n for (_, target), n in mcounts.items() if target == "Stopped") == 1


def test_parallel_rows_share_one_edge_with_a_line_each(table: Table) -> None:
    diagram = build(table)
    pairs = [(e.source, e.target) for e in diagram.edges]
    assert len(pairs) == len(set(pairs))
    assert sum(len(e.lines) for e in diagram.edges) == len(table.rows)
    _, _, counts = svg_graph(picture(diagram, "svg"))
    internal = {(e.source, e.target) for e in internal_edges(diagram).values()}
    assert all(counts[pair] == (pair not in internal) for pair in pairs)


def test_loom_merges_its_streaming_self_loop(loom: Table) -> None:
    edge = next(e for e in build(loom).edges if e.source == e.target == "CallingLlm")
    assert [line.head for line in edge.lines] == ["TextDelta / DisplayMessage", "ToolCallDelta / WaitForInput"]


def test_updates_are_shown_compactly(loom: Table) -> None:
    tails = {line.row: line.tail for edge in build(loom).edges for line in edge.lines}
    assert tails[5] == "retries += 1"
    assert tails[10] == "pending -= 1, mutated = mutated or mutating"
    assert tails[4] == "retries = 0, pending = tool_calls, mutated = false"


def test_state_named_like_a_mermaid_keyword_gets_a_safe_id() -> None:
    table = load_table_bytes(b"""
format: 1
machine: kw
states: {state: {initial: true}, end: {final: true}, any_state: {}}
events: {Go: {}, Quit: {}}
transitions:
  - {from: state, on: Go, to: any_state}
  - {from: "*", on: Quit, to: end}
""", "kw.yaml")
    diagram = build(table)
    ids = state_ids(diagram)
    assert ids["state"] == "s_state" and ids["end"] == "s_end"
    assert ids[ANY] not in {"any_state", "s_state", "s_end"}
    text = to_mermaid(diagram)
    assert '    state "state" as s_state\n' in text
    assert f"    {ids[ANY]} --> s_end : Quit\n" in text


def test_every_picture_has_a_legend_of_the_marks_it_uses(table: Table) -> None:
    diagram = build(table)
    caption = squash(to_dot(diagram).split("label=<", 1)[1].split(">>", 1)[0])
    title = next(line for line in to_mermaid(diagram).splitlines() if line.startswith("title: "))
    assert "Legend:" in caption and "legend: Event [guard] / Action" in title
    transient = any(s.transient for s in table.states)
    assert ("transientstate" in caption) == transient and ("◇ transient state" in title) == transient
    assert ("doubleborder:finalstate" in caption) == any(s.final for s in table.states)
    assert ("dashed:anystate" in caption) == any(row.wildcard for row in table.rows)


def test_the_narrower_layout_is_kept() -> None:
    """Of the two layouts, top to bottom and left to right, the picture keeps the narrower.
    Which one that is depends on the fonts behind Helvetica, so the widths are measured here."""
    chosen = {}
    for name in ("loom-agent", "vibework-agent"):
        diagram = build(load_table(SPEC / f"{name}.yaml"))
        widths = {rankdir: svg_size(run_dot(to_dot(diagram, rankdir), "svg"))[0] for rankdir in ("TB", "LR")}
        match = re.search(r"rankdir=(\w+)", dot_source(diagram))
        assert match is not None
        chosen[name] = match.group(1)
        assert widths[chosen[name]] == min(widths.values()), (name, widths)
    assert chosen["loom-agent"] == "TB", "the Loom table reads top to bottom under every font tried"


def test_dot_source_needs_no_graphviz(monkeypatch: pytest.MonkeyPatch) -> None:
    """--format dot without Graphviz installed: the top-to-bottom source, as before layouts were compared."""
    monkeypatch.setattr("agentfsm.diagrams.render.shutil.which", lambda name: None)
    diagram = build(load_table(SPEC / "vibework-agent.yaml"))
    assert dot_source(diagram) == to_dot(diagram, "TB")
