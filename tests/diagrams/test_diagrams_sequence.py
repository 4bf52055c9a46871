"""A system counterexample's sequence chart shows the bug: parameters by name, a lasso's cycle
as a loop block, and a closing note naming the violated check and the values it reads."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from agentfsm.diagrams.sequence import sequence_mermaid, sequence_svg
from agentfsm.diagrams.violation import read_values
from agentfsm.spec.system_load import load_system
from agentfsm.verify.system.step import initial_config
from conftest import ROOT
from system_charts import AS_WAS, counterexamples, walk

POOL = ROOT / "spec" / "systems" / "durable-run-as-it-was-pool.yaml"


def svg_text(data: bytes) -> str:
    return data.decode().replace("&gt;", ">").replace("&lt;", "<")


@pytest.mark.parametrize("path", AS_WAS, ids=lambda p: p.stem)
def test_each_counterexample_chart_ends_on_the_violated_check(path: Path) -> None:
    found = counterexamples(path)
    assert found
    for system, trace, steps in found:
        mermaid = sequence_mermaid(system, steps, trace)
        svg = svg_text(sequence_svg(system, steps, trace))
        broken = f"{trace.kind} {trace.check} broken"
        last = mermaid.splitlines()[-1]
        assert last.startswith("    Note over environment,") and f"✗ {broken}" in last
        assert broken in svg


def test_the_reused_token_and_the_second_run_are_shown() -> None:
    """The pool's duplicate run: both grants carry token 0 by name, and the closing note reads tool.runs = 2."""
    [(system, trace, steps)] = [c for c in counterexamples(POOL) if c[1].check == "tool-runs-at-most-once"]
    for text in (sequence_mermaid(system, steps, trace), svg_text(sequence_svg(system, steps, trace))):
        assert "Granted(token=0, journal=0)" in text and "Granted(token=0, journal=1)" in text
        assert "Run(who=1, token=0)" in text
        assert "tool.runs <= 1 is" in text and "(tool.runs = 2)" in text


def test_a_lasso_s_cycle_is_a_loop_block() -> None:
    lassos = [c for c in counterexamples(POOL) if c[1].loop_start is not None]
    assert lassos
    for system, trace, steps in lassos:
        assert trace.loop_start is not None
        lines = sequence_mermaid(system, steps, trace).splitlines()
        start = lines.index(f"    loop repeats forever (from step {trace.loop_start + 1})")
        assert f": {trace.loop_start + 1}. " in lines[start + 1], "the loop starts with the cycle's first step"
        assert lines[-2] == "    end" and all(line.startswith("        ") for line in lines[start + 1:-2])
        assert f"loop: repeats forever (from step {trace.loop_start + 1})" in svg_text(
            sequence_svg(system, steps, trace))


def test_a_chart_without_a_trace_has_no_verdict_or_loop() -> None:
    system = load_system(POOL)
    text = sequence_mermaid(system, walk(system, 3))
    assert "✗" not in text and "loop" not in text and "title" not in text
    assert "    environment->>i_worker_0_: 1. Resume" in text.splitlines()


def test_values_read_by_an_expression() -> None:
    system = load_system(ROOT / "spec" / "systems" / "loom-with-tools.yaml")
    start = initial_config(system)
    assert read_values(system, start, "agent.state in (ExecutingTools, ShuttingDown) or "
                                      "count(call[*], state == Running) == 0") == [
        "agent.state = WaitingForUserInput", "call[0].state = Idle", "call[1].state = Idle"]
    assert read_values(system, start, "call[1].stalled or agent.mailbox > 0 or agent.pending <= 2") == [
        "call[1].stalled = false", "agent.mailbox = 0", "agent.pending = 0"]
    agent = system.instance("agent").index
    assert read_values(system, start, "pending <= 2 or state == Idle", agent) == [
        "pending = 0", "state = WaitingForUserInput"]
    assert read_values(system, start, "not (", None) == []


@pytest.mark.parametrize("path", AS_WAS, ids=lambda p: p.stem)
def test_every_box_of_a_chart_lies_inside_the_picture(path: Path) -> None:
    """A note on the rightmost lifeline is moved left rather than cut off at the picture's edge."""
    for system, trace, steps in counterexamples(path):
        svg = sequence_svg(system, steps, trace).decode()
        width = int(re.search(r'<svg [^>]*width="(\d+)"', svg).group(1))  # type: ignore[union-attr]
        boxes = [(int(x), int(w)) for x, w in re.findall(r'<rect x="(-?\d+)" y="-?\d+" width="(\d+)"', svg)]
        assert boxes and all(x >= 0 and x + w <= width for x, w in boxes), trace.check
