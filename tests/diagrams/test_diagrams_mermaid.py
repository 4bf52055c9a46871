"""Generated Mermaid parses with Mermaid's own parser (installed by scripts/setup.sh via npm)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from agentfsm.diagrams.explored import config_graph, explored_mermaid
from agentfsm.diagrams.mermaid import to_mermaid
from agentfsm.diagrams.model import build
from agentfsm.diagrams.overlay import coverage_overlay, trace_overlay
from agentfsm.diagrams.sequence import sequence_mermaid, structure_mermaid
from agentfsm.spec import Table, load_table, load_table_bytes
from agentfsm.verify.table.explore import explore
from conftest import ROOT, TABLES
from system_charts import AS_WAS, KEYWORDS, counterexamples, keyword_system, walk

CHECKER = ROOT / "tests" / "mermaid"
PICTURES = ROOT / "diagrams"


def mermaid_results(texts: list[str]) -> list[dict[str, str]]:
    """For each text the type of diagram Mermaid parses it as ({"type": ...}), else its error ({"error": ...})."""
    if shutil.which("npm") is None or shutil.which("node") is None:
        pytest.skip("npm is not installed: cannot run Mermaid's parser")
    assert (CHECKER / "node_modules" / "mermaid").is_dir(), \
        "Mermaid's parser is not installed: run scripts/setup.sh (npm ci in tests/mermaid)"
    proc = subprocess.run(["node", str(CHECKER / "check.mjs")], input=json.dumps(texts), capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    result: list[dict[str, str]] = json.loads(proc.stdout)
    return result


def mermaid_errors(texts: list[str]) -> list[str | None]:
    """Mermaid's parse error for each text (None: it parses as a state diagram)."""
    return [None if result.get("type") == "stateDiagram" else result.get("error", f"parsed as {result.get('type')}")
            for result in mermaid_results(texts)]


def overlays(loom: Table) -> list[str]:
    trace = {"machine": "loom-agent", "check": "demo", "kind": "trace", "loop_start": None,
             "steps": [{"event": "UserInput", "params": {}}, {"event": "LlmCompleted", "params": {"tool_calls": 1}},
                       {"event": "ToolCompleted", "params": {"mutating": True}}]}
    coverage = {"machine": "loom-agent", "rows": {"1": 4, "2": 1}}
    return [to_mermaid(build(loom, trace_overlay(loom, json.dumps(trace)))),
            explored_mermaid(config_graph(loom, explore(loom))),
            to_mermaid(build(loom, coverage_overlay(loom, coverage)))]


AWKWARD = b"""
format: 1
machine: awkward
title: 'Quotes " and # hashes; semicolons: all in a title'
variables: {n: {type: int, min: 0, max: 3, init: 0}}
states: {state: {initial: true}, end: {final: true}, note: {}, Pick: {transient: true}}
events: {Go: {params: {k: {type: int, min: 0, max: 3}}}, Quit: {}}
transitions:
  - {from: state, on: Go, when: k > n and n < 3, to: Pick, set: {n: n + 1}}
  - {from: Pick, when: n >= 2, to: note}
  - {from: Pick, when: n < 2, to: state}
  - {from: note, on: Go, when: k != n, to: note, set: {n: k - n}}
  - {from: "*", on: Quit, to: end}
"""


def test_generated_mermaid_parses(loom: Table) -> None:
    texts = [to_mermaid(build(load_table(p))) for p in TABLES]
    texts += overlays(loom)
    texts.append(to_mermaid(build(load_table_bytes(AWKWARD, "awkward.yaml"))))
    errors = mermaid_errors(texts)
    assert errors == [None] * len(texts), "\n\n".join(f"{text}\n=> {error}" for text, error in zip(texts, errors,
                                                                                                    strict=True)
                                                          if error)


def test_the_parser_rejects_broken_mermaid() -> None:
    """The check can fail: text that GitHub would show as a syntax error is refused."""
    errors = mermaid_errors(["stateDiagram-v2\n    A --> : no target\n", "stateDiagram-v2\n    A --> B : x; y {z}\n",
                             "flowchart LR\n    A --> B\n"])
    assert errors[0] is not None and "Parse error" in errors[0]
    assert errors[1] is not None
    assert errors[2] == "parsed as flowchart-v2"


def committed_mermaid() -> list[Path]:
    return sorted(PICTURES.glob("**/*.mmd"))


def test_every_committed_mermaid_file_parses() -> None:
    """Tables (state diagrams) and systems (flowcharts): what GitHub shows is a picture, not an error."""
    paths = committed_mermaid()
    assert len(paths) > len(TABLES)
    kinds = {"stateDiagram-v2": "stateDiagram", "flowchart": "flowchart-v2", "sequenceDiagram": "sequence"}
    texts = [p.read_text() for p in paths]
    results = mermaid_results(texts)
    wanted = [{"type": kinds[text.split("\n")[0].split()[0] if not text.startswith("---") else "stateDiagram-v2"]}
              for text in texts]
    assert results == wanted, {p.name: r for p, r, w in zip(paths, results, wanted, strict=True) if r != w}


def test_instances_named_after_mermaid_keywords_draw(tmp_path: Path) -> None:
    """A node id or participant never clashes with a word of Mermaid's grammar (``call`` did)."""
    texts = []
    for first, second in zip(KEYWORDS, KEYWORDS[1:] + KEYWORDS[:1], strict=True):
        system = keyword_system(tmp_path, first, second)
        texts += [structure_mermaid(system), sequence_mermaid(system, walk(system, 4))]
    results = mermaid_results(texts)
    wanted = [{"type": "flowchart-v2"}, {"type": "sequence"}] * len(KEYWORDS)
    assert results == wanted, "\n\n".join(f"{text}\n=> {r}" for text, r, w in zip(texts, results, wanted, strict=True)
                                          if r != w)


@pytest.mark.parametrize("path", AS_WAS, ids=lambda p: p.stem)
def test_counterexample_charts_parse(path: Path) -> None:
    texts = [sequence_mermaid(system, steps) for system, _, steps in counterexamples(path)]
    assert texts and mermaid_results(texts) == [{"type": "sequence"}] * len(texts)
