"""The HTML report without a browser: what ``--html`` writes, the data its script draws from (checked
against the reference replay), the tagged diagrams, the job summary, and bad input."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from agentfsm.diagrams.model import build
from agentfsm.diagrams.report_page import embedded_json, html_page, table_picture
from agentfsm.spec import load_table
from agentfsm.spec.system_load import load_system
from agentfsm.spec.system_trace import load_system_trace
from agentfsm.spec.trace import load_trace, walk
from agentfsm.verify.system.paths import replay
from conformance_helpers import ADAPTERS
from conftest import TABLES
from report_pages import BROKEN_SYSTEM, BROKEN_TABLE, LOOM, page_data, shared_pages, stepped

from agentfsm.cli import main

REMOTE = re.compile(r"""(?:src|href|action|xlink:href)\s*=\s*["']?\s*(?:https?:|//|ftp:)""", re.I)


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return shared_pages(tmp_path_factory)


def _value(v: Any) -> str:
    return ("true" if v else "false") if isinstance(v, bool) else str(v)


def test_a_page_is_self_contained(pages: dict[str, Path]) -> None:
    for page in pages.values():
        text = page.read_text(encoding="utf-8")
        assert "default-src 'none'" in text and "script-src 'sha256-" in text
        assert not REMOTE.search(text), REMOTE.search(text)
        assert "<link" not in text and "@import" not in text and "url(" not in text


def test_table_counterexamples_are_the_replayed_traces(pages: dict[str, Path], tmp_path: Path) -> None:
    traces = tmp_path / "traces"
    assert main(["verify", str(BROKEN_TABLE), "--trace-out", f"{traces}/"]) == 1
    table = load_table(str(BROKEN_TABLE))
    data = page_data(pages["table"])
    [entry] = data["entries"]
    assert entry["ok"] is False and entry["name"] == "report-broken"
    assert [c["ok"] for c in entry["checks"]] == sorted(c["ok"] for c in entry["checks"])  # failures first
    written = sorted(traces.iterdir())
    assert len(written) == len(stepped(data)) == 2
    for path in written:
        trace = load_trace(table, path.read_text())
        [check] = [c for c in entry["checks"] if c["trace"] and c["title"].endswith(trace.check or trace.kind or "")]
        steps = check["trace"]["steps"]
        assert check["trace"]["loop_start"] == trace.loop_start
        assert len(steps) == len(trace.steps)
        for step, walked in zip(steps, walk(table, trace.steps), strict=True):
            result = walked.result
            assert result is not None
            assert step["state"] == table.states[result.state].name
            assert step["rows"] == [row.index for row in result.rows]
            assert step["vars"] == [_value(v) for v in result.vars]
    assert entry["coverage"] == {str(row.index): entry["coverage"][str(row.index)] for row in table.rows}
    [small] = [c for c in entry["checks"] if c["title"] == "invariant small"]
    assert [step["broken"] for step in small["trace"]["steps"]] == [[], ["small"]]


def test_a_step_that_raises_ends_the_trace_with_its_error(tmp_path: Path) -> None:
    """Two rows enabled at once: the determinism counterexample's last step is the error, its rows both."""
    busy = "  - {from: Busy, on: Inc, to: Busy}"
    text = BROKEN_TABLE.read_text().replace("machine: report-broken", "machine: two-rows").replace(
        busy, f"{busy}\n  - {{from: Busy, on: Inc, to: Done}}")
    path, html = tmp_path / "two-rows.yaml", tmp_path / "two-rows.html"
    path.write_text(text)
    assert main(["verify", str(path), "--html", str(html)]) == 1
    [entry] = page_data(html)["entries"]
    [check] = [c for c in entry["checks"] if c["title"] == "determinism"]
    *_, last = check["trace"]["steps"]
    assert last["status"] == "determinism error" and last["rows"] == [3, 4] and last["state"] == "Busy"


def test_a_table_that_does_not_load_is_a_failed_entry(tmp_path: Path) -> None:
    bad, html = tmp_path / "bad.yaml", tmp_path / "bad.html"
    bad.write_text("format: 1\nmachine: bad\nstates: {}\n")
    assert main(["verify", str(bad), str(BROKEN_TABLE), "--html", str(html)]) == 2
    entries = page_data(html)["entries"]
    assert [(e["name"], e["ok"]) for e in entries] == [(str(bad), False), ("report-broken", False)]
    assert entries[0]["checks"][0]["title"] == "did not load" and entries[0]["checks"][0]["trace"] is None


def test_system_counterexamples_show_every_instance(pages: dict[str, Path], tmp_path: Path) -> None:
    traces = tmp_path / "traces"
    assert main(["verify", str(BROKEN_SYSTEM), "--trace-out", f"{traces}/"]) == 1
    system = load_system(str(BROKEN_SYSTEM))
    [entry] = page_data(pages["system"])["entries"]
    assert entry["kind"] == "system" and entry["ok"] is False
    checked = 0
    for path in sorted(traces.iterdir()):
        trace = load_system_trace(system, path.read_text())
        [check] = [c for c in entry["checks"] if c["trace"] and c["title"].endswith(trace.check or trace.kind or "")]
        shown = check["trace"]
        assert shown["lifelines"] == [inst.name for inst in system.instances]
        for step, (label, config, _) in zip(shown["steps"], replay(system, trace.steps), strict=True):
            assert step["fault"] == (label[0] in ("crash", "lose", "duplicate", "stall"))
            for inst, column, (state, values) in zip(system.instances, step["instances"], config[0], strict=True):
                assert column["state"] == inst.table.states[state].name
                assert column["vars"] == [_value(v) for v in values]
            assert [item["text"].startswith("⚠") for item in step["items"]] == [False] * len(step["items"])
        checked += 1
        assert shown["verdict"]
    assert checked >= 1
    assert any(step["fault"] for c in entry["checks"] if c["trace"] for step in c["trace"]["steps"])


def test_conformance_page_steps_the_shortest_failing_vector(pages: dict[str, Path]) -> None:
    table = load_table(str(LOOM))
    [entry] = page_data(pages["conform"])["entries"]
    assert entry["kind"] == "conform" and entry["ok"] is False
    [(_, c)] = stepped({"entries": [entry]})
    trace = entry["checks"][c]["trace"]
    *agreed, failed = trace["steps"]
    assert failed["status"] == "failed" and failed["problems"] and failed["actual"] is not None
    assert all(step["status"] == "agreed" and step["actual"] is None for step in agreed)
    assert failed["expected"]["state"] == failed["state"]
    assert {row["row"] for row in entry["rows"]} == {row.index for row in table.rows}


def test_every_state_and_row_of_a_picture_is_tagged() -> None:
    for path in TABLES:
        table = load_table(str(path))
        picture = table_picture(table)
        assert picture.startswith("<svg") and "<!--" not in picture and ' id="node' not in picture
        states = re.findall(r'data-state="([^"]*)"', picture)
        assert sorted(states) == sorted([s.name for s in table.states]
                                        + (["(any state)"] if any(r.wildcard for r in table.rows) else []))
        rows = [int(n) for group in re.findall(r'data-rows="([^"]*)"', picture) for n in group.split()]
        assert sorted(rows) == [row.index for row in table.rows], table.machine
        assert build(table).title in picture


def test_embedded_data_cannot_close_its_script() -> None:
    tricky = {"message": "</script><script>alert(1)</script> <!-- & \u2028"}
    text = embedded_json(tricky)
    assert "</" not in text and "<!--" not in text and json.loads(text) == tricky
    page = html_page({"format": 1, "command": "verify", "ok": False, "entries": [], "pictures": {}}).decode()
    assert page.count("<script") == 2


def test_summary_markdown_links_the_page_and_appends(tmp_path: Path) -> None:
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    html = tmp_path / "agentfsm report.html"
    assert main(["verify", str(BROKEN_TABLE), "--html", str(html), "--summary-md", str(summary)]) == 1
    text = summary.read_text()
    assert text.startswith("earlier step\n### agentfsm verify: FAILED")
    assert "(agentfsm%20report.html)" in text
    failing = [line for line in text.splitlines() if line.startswith("| ❌")]
    assert len(failing) == 2 and "invariant small" in failing[0] + failing[1]
    assert main(["verify", str(TABLES[0]), "--summary-md", str(summary)]) == 0
    assert summary.read_text().count("### agentfsm verify") == 2 and "ok\n" in summary.read_text()


def test_crash_page_lists_the_campaign(tmp_path: Path) -> None:
    html, summary = tmp_path / "crash.html", tmp_path / "summary.md"
    table = Path(__file__).parent.parent / "tables" / "approval-demo.yaml"
    assert main(["crash", str(table), "--depth", "1", "--jobs", "1", "--html", str(html),
                 "--summary-md", str(summary)]) == 0
    [entry] = page_data(html)["entries"]
    assert entry["kind"] == "crash" and entry["ok"] is True
    assert dict(entry["figures"])["scenarios"] > 0
    assert summary.read_text().startswith("### agentfsm crash: ok") and "(crash.html)" in summary.read_text()


def test_conform_summary_without_a_page(tmp_path: Path) -> None:
    """--summary-md alone: the verdicts without a link; an adapter that implements nothing fails every vector."""
    summary = tmp_path / "summary.md"
    adapter = f"{sys.executable} {ADAPTERS / 'adapter_broken.py'} unsupported"
    assert main(["conform", str(LOOM), "--adapter", adapter, "--sets", "rows", "--walks", "0",
                 "--summary-md", str(summary)]) == 1
    text = summary.read_text()
    assert text.startswith("### agentfsm conform: FAILED") and "](" not in text
    assert "| ❌ | conform Loom agent conversation loop | vector loom-agent/" in text and "✅" not in text


def test_unwritable_report_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "no" / "such" / "dir" / "r.html"
    assert main(["verify", str(BROKEN_TABLE), "--html", str(missing)]) == 2
    assert f"cannot write {missing}" in capsys.readouterr().err
