"""Auditing recorded logs: a faithful log passes, the first divergent step is named."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from agentfsm.spec import Table
from agentfsm.verify.conformance.audit import LogError, audit, read_log
from conformance_helpers import LOOM, log_of, write
from json_envelope import enveloped

from agentfsm.cli import main


def test_a_faithful_log_follows_the_table(loom: Table, tmp_path: Path) -> None:
    path = write(tmp_path / "log.jsonl", log_of(loom))
    result = audit(loom, read_log(path))
    assert result.divergence is None and result.runs == 3 and result.steps == 90


def test_minimal_records_without_accepted_or_vars(loom: Table, tmp_path: Path) -> None:
    lines = [{k: v for k, v in line.items() if k not in ("accepted", "vars")} for line in log_of(loom)]
    assert audit(loom, read_log(write(tmp_path / "log.jsonl", lines))).divergence is None


def test_the_first_divergent_step_is_reported(loom: Table, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    lines = log_of(loom)
    target = next(i for i, line in enumerate(lines) if line.get("actions") == ["SendLlmRequest"] and i > 40)
    lines[target]["actions"] = ["SendLlmRequest", "SendLlmRequest"]
    lines[-1]["state"] = "Nowhere"
    path = write(tmp_path / "log.jsonl", lines)
    result = audit(loom, read_log(path))
    assert result.divergence is not None
    assert result.divergence.record.line == target + 1
    assert result.divergence.problems == ("actions: expected ['SendLlmRequest'], got "
                                          "['SendLlmRequest', 'SendLlmRequest']",)
    assert main(["audit", str(LOOM), str(path)]) == 1
    out = capsys.readouterr().out
    assert f"{path}:{target + 1}: step" in out
    assert f"the log parts from the table at line {target + 1}" in out


def test_every_diverging_session_is_reported(loom: Table, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    # Sessions 1 and 3 part from the table (session 1 twice: only its first step counts);
    # session 2 follows it, and is still checked after session 1 parted.
    lines = log_of(loom, walks=3)
    resets = [i for i, line in enumerate(lines) if line.get("reset")]
    bad = [2, 5, resets[1] + 4]
    for i in bad:
        lines[i]["state"] = "Nowhere"
    path = write(tmp_path / "log.jsonl", lines)
    result = audit(loom, read_log(path))
    assert [d.record.line for d in result.divergences] == [bad[0] + 1, bad[2] + 1]
    assert [d.run_start for d in result.divergences] == [1, resets[1] + 2]
    assert result.runs == 3 and result.steps == 90
    assert main(["audit", str(LOOM), str(path), "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["line"] == bad[0] + 1
    assert [d["line"] for d in data["diverging"]] == [bad[0] + 1, bad[2] + 1]
    assert main(["audit", str(LOOM), str(path)]) == 1
    assert "2 of 3 sessions part from the table" in capsys.readouterr().out


def test_a_reset_record_starts_a_session_not_an_extra_run(loom: Table, tmp_path: Path) -> None:
    lines = [{"reset": True}, *log_of(loom, walks=2), {"reset": True}, {"reset": True}]
    result = audit(loom, read_log(write(tmp_path / "log.jsonl", lines)))
    assert result.divergence is None and result.runs == 2 and result.steps == 60


def test_the_output_of_run_json_is_a_log(loom: Table, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "script.yaml"
    script.write_text("events:\n  - UserInput\n  - TextDelta\n  - {LlmCompleted: {tool_calls: 1}}\n"
                      "  - {ToolCompleted: {mutating: false}}\n")
    assert main(["run", str(LOOM), "--script", str(script), "--json"]) == 0
    log = tmp_path / "run.jsonl"
    log.write_text(capsys.readouterr().out)
    kinds = {json.loads(line)["kind"] for line in log.read_text().splitlines()}
    assert "step" in kinds
    result = audit(loom, read_log(log))
    assert result.divergence is None and result.steps == 4 and result.runs == 1
    text = log.read_text().replace('"state": "ExecutingTools"', '"state": "CallingLlm"')
    log.write_text(text)
    assert audit(loom, read_log(log)).divergence is not None


def test_unknown_events_and_bad_params_diverge(loom: Table, tmp_path: Path) -> None:
    cases: list[tuple[dict[str, Any], str]] = [
        ({"event": "Explode", "state": "CallingLlm", "actions": []}, "event 'Explode' is not in table"),
        ({"event": "LlmCompleted", "params": {"tool_calls": 9}, "state": "CallingLlm", "actions": []},
         "parameter 'tool_calls' of LlmCompleted must be an integer in 0..2"),
    ]
    for record, problem in cases:
        result = audit(loom, read_log(write(tmp_path / "log.jsonl", [record])))
        assert result.divergence is not None and problem in result.divergence.problems[0]


@pytest.mark.parametrize(("text", "message"), [
    ("{not json\n", ":1: error: not JSON"),
    ('{"event": "UserInput"}\n', ":1: error: not a step record: 'state'"),
    ('{"reset": true}\n{"event": "UserInput", "state": "CallingLlm", "actions": "x"}\n', ":2: error: not a step"),
])
def test_malformed_logs_are_bad_input(loom: Table, tmp_path: Path, text: str, message: str,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "log.jsonl"
    path.write_text(text)
    with pytest.raises(LogError, match=message):
        audit(loom, read_log(path))
    assert main(["audit", str(LOOM), str(path)]) == 2
    assert message in capsys.readouterr().err


def test_json_output(loom: Table, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path / "log.jsonl", log_of(loom, walks=1))
    assert main(["audit", str(LOOM), str(path), "--json"]) == 0
    data = enveloped(json.loads(capsys.readouterr().out), "audit")
    assert data == {"format": 1, "kind": "audit", "machine": "loom-agent", "steps": 30, "runs": 1, "ok": True,
                    "line": None, "problems": [], "diverging": []}
    assert main(["audit", str(LOOM), str(tmp_path / "missing.jsonl")]) == 2
