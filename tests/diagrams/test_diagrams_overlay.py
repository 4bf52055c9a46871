"""Trace and coverage overlays on the Loom table, through the model, the renderers and the CLI."""

from __future__ import annotations

import json
from html import escape
from pathlib import Path
from typing import Any

import pytest
from agentfsm.diagrams.dot import to_dot
from agentfsm.diagrams.mermaid import to_mermaid
from agentfsm.diagrams.model import build
from agentfsm.diagrams.output import picture
from agentfsm.diagrams.overlay import OverlayError, coverage_overlay, trace_overlay
from agentfsm.spec import Table, load_table_bytes
from conftest import SPEC
from diagram_reading import svg_graph

from agentfsm.cli import main

LOOM = str(SPEC / "loom-agent.yaml")


def loom_trace(*steps: tuple[str, dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"machine": "loom-agent", "check": None, "kind": None, "loop_start": None,
            "steps": [{"event": e, "params": p} for e, p in steps], **extra}


TOOLS = loom_trace(("UserInput", {}), ("TextDelta", {}), ("LlmCompleted", {"tool_calls": 2}),
                   ("ToolCompleted", {"mutating": True}), ("ToolCompleted", {"mutating": False}),
                   ("PostToolsHookCompleted", {"action_taken": True}), check="demo", kind="example")


def test_trace_marks_the_rows_it_fires_with_step_numbers(loom: Table) -> None:
    overlay = trace_overlay(loom, json.dumps(TOOLS))
    steps = {row: mark.steps for row, mark in overlay.marks.items()}
    # LlmCompleted fires row 4 and, in the same step, the transient state's row 7.
    assert steps == {1: (1,), 2: (2,), 4: (3,), 7: (3,), 10: (4,), 11: (5,), 18: (6,)}
    assert overlay.visited["CallingLlm"] == (1, 2, 6)
    assert overlay.visited["ProcessingLlmResponse"] == (3,)
    assert overlay.visited["WaitingForUserInput"] == (0,)
    assert overlay.notes == ("trace of 6 steps: demo (example)",)


def test_a_rejected_step_and_a_loop_are_noted(loom: Table) -> None:
    trace = loom_trace(("UserInput", {}), ("LlmError", {}), ("RetryTimeoutFired", {}), ("UserInput", {}),
                       loop_start=1)
    overlay = trace_overlay(loom, json.dumps(trace))
    assert "step 4: UserInput rejected in CallingLlm" in overlay.notes
    assert overlay.notes[-1] == "steps 2..4 repeat forever"
    assert overlay.marks[5].steps == (2,) and overlay.marks[21].steps == (3,)
    # the caption, lasso included, in both formats
    diagram = build(loom, overlay)
    source = to_dot(diagram)
    title = next(line for line in to_mermaid(diagram).splitlines() if line.startswith("title: "))
    for note in overlay.notes:
        assert escape(note) in source and note in title


def test_a_step_that_breaks_the_table_is_drawn_as_the_violation() -> None:
    table = load_table_bytes(b"""
format: 1
machine: clash
states: {A: {initial: true}, B: {}, C: {}}
events: {Go: {}}
transitions:
  - {from: A, on: Go, to: B}
  - {from: A, on: Go, to: C}
""", "clash.yaml")
    overlay = trace_overlay(table, '{"machine": "clash", "steps": [{"event": "Go", "params": {}}]}')
    assert {row for row, mark in overlay.marks.items() if mark.faulty} == {1, 2}
    assert overlay.notes[-1].startswith("step 1: Go: determinism violation")
    assert "✗ 1" in to_mermaid(build(table, overlay))


def test_trace_is_highlighted_in_every_format(loom: Table) -> None:
    diagram = build(loom, trace_overlay(loom, json.dumps(TOOLS)))
    source = to_dot(diagram)
    fired = next(line for line in source.splitlines() if line.startswith("\tExecutingTools -> PostToolsHook ["))
    idle = next(line for line in source.splitlines() if line.startswith("\tError -> CallingLlm ["))
    assert "penwidth=2.8" in fired and "<b>5</b>" in fired
    assert "penwidth" not in idle and "#9a9a9a" in idle
    nodes, edges, _ = svg_graph(picture(diagram, "svg"))
    assert "5" in edges[("ExecutingTools", "PostToolsHook")].split()
    assert "after steps 1, 2, 6" in nodes["CallingLlm"]
    text = to_mermaid(diagram)
    assert "    ExecutingTools --> PostToolsHook : (5) ToolCompleted" in text
    assert "class WaitingForUserInput,CallingLlm,ExecutingTools,PostToolsHook visited" in text


def test_coverage_colours_rows_and_marks_dead_ones(loom: Table) -> None:
    counts = {str(row.index): 3 for row in loom.rows if row.index not in (9, 21)}
    counts["2"] = 300
    overlay = coverage_overlay(loom, {"machine": "loom-agent", "rows": counts})
    assert overlay.marks[9].count == 0 and overlay.marks[2].count == 300
    assert overlay.notes == ("coverage: 22 of 24 rows exercised, 363 firings",
                             "never exercised (grey, marked never): rows 9, 21")
    source = to_dot(build(loom, overlay))
    dead = next(line for line in source.splitlines() if line.startswith("\tError -> CallingLlm ["))
    busy = next(line for line in source.splitlines() if line.startswith("\tCallingLlm ["))
    light = next(line for line in source.splitlines() if line.startswith("\tWaitingForUserInput -> CallingLlm ["))
    assert "style=dashed" in dead and ">never<" in dead
    assert "×300" in busy and "×3" in light
    assert 'color="#000000"' in busy and "color=\"#000000\"" not in light
    text = to_mermaid(build(loom, overlay))
    returning = "    Error : RetryTimeoutFired<br/>[origin == Llm] /<br/>SendLlmRequest (never) → CallingLlm"
    assert returning in text  # the returning edge
    assert "    CallingLlm : TextDelta /<br/>DisplayMessage ×300" in text


@pytest.mark.parametrize(("data", "message"), [
    ({"machine": "other", "rows": {}}, "is for machine 'other'"),
    ({"machine": "loom-agent", "rows": {"99": 1}}, "no row '99'"),
    ({"machine": "loom-agent", "rows": {"1": -1}}, "non-negative"),
    ({"machine": "loom-agent", "rows": []}, "expected a JSON object"),
])
def test_bad_coverage_is_refused(loom: Table, data: object, message: str) -> None:
    with pytest.raises(OverlayError, match=message):
        coverage_overlay(loom, data)


@pytest.mark.parametrize(("data", "message"), [
    (loom_trace(("Nope", {})), "unknown event 'Nope'"),
    (loom_trace(("LlmCompleted", {"tool_calls": 9})), "must be an integer in 0..2"),
    (loom_trace(("UserInput", {}), loop_start=5), "loop_start"),
    ({"machine": "loom-agent", "steps": "x"}, "'steps' list"),
    ({"machine": "other", "steps": []}, "is for machine 'other'"),
])
def test_bad_trace_is_refused(loom: Table, data: object, message: str) -> None:
    with pytest.raises(OverlayError, match=message):
        trace_overlay(loom, json.dumps(data))


def test_cli_draws_overlays_and_reports_bad_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps(TOOLS))
    out = tmp_path / "trace.mmd"
    assert main(["diagram", LOOM, "--trace", str(trace), "-o", str(out)]) == 0
    assert "(5) ToolCompleted" in out.read_text()
    trace.write_text("{not json")
    assert main(["diagram", LOOM, "--trace", str(trace)]) == 2
    assert "trace: not JSON" in capsys.readouterr().err
    coverage = tmp_path / "cov.json"
    coverage.write_text(json.dumps({"machine": "loom-agent", "rows": {"1": 2}}))
    assert main(["diagram", LOOM, "--coverage", str(coverage), "--format", "dot", "-o", str(tmp_path / "c.dot")]) == 0
    assert "never" in (tmp_path / "c.dot").read_text()
    coverage.write_text("{not json")
    assert main(["diagram", LOOM, "--coverage", str(coverage)]) == 2
    assert "not valid JSON" in capsys.readouterr().err
    assert main(["diagram", LOOM, "--trace", str(tmp_path / "missing.json")]) == 2
    assert main(["diagram", LOOM, "-o", str(tmp_path / "x.jpeg")]) == 2
    assert "cannot tell the format" in capsys.readouterr().err


def test_cli_writes_every_format(tmp_path: Path) -> None:
    for suffix, magic in ((".svg", b"<?xml"), (".png", b"\x89PNG"), (".dot", b"digraph"), (".mmd", b"---")):
        path = tmp_path / f"loom{suffix}"
        assert main(["diagram", LOOM, "-o", str(path)]) == 0
        assert path.read_bytes().startswith(magic)
    assert main(["diagram", LOOM, "--out-dir", str(tmp_path / "all")]) == 0
    assert sorted(p.name for p in (tmp_path / "all").iterdir()) == ["loom-agent.compact.svg", "loom-agent.mmd",
                                                                    "loom-agent.svg"]
