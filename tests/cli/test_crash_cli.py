"""The commands users run: ``agentfsm crash``, ``agentfsm run --store [--resume]``, ``agentfsm journal``."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from json_envelope import enveloped

from agentfsm.cli import main

ROOT = Path(__file__).resolve().parent.parent.parent
LOOM = str(ROOT / "spec" / "loom-agent.yaml")
AGENTFSM = str(Path(sys.executable).parent / "agentfsm")
SCRIPT = """events:
  - UserInput
  - LlmCompleted: {tool_calls: 1}
  - ToolCompleted: {mutating: false}
  - ShutdownRequested
"""


def test_crash_json_with_real_kills(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["crash", LOOM, "--json", "--depth", "1", "--kill", "2"]) == 0
    report = enveloped(json.loads(capsys.readouterr().out), "crash")
    assert {"ok", "scenarios", "boundaries", "crashes", "double_crashes", "kills", "violations"} <= set(report)
    assert report["ok"] and report["kills"] == 2 and report["violations"] == []
    assert report["recovery_kills"] == 2, "each killed run's recovery was killed in turn"
    assert report["crashes"] == report["boundaries"] > 0 and report["double_crashes"] > 0


def test_crash_text_report_and_approvals(capsys: pytest.CaptureFixture[str]) -> None:
    table = str(ROOT / "tests" / "tables" / "approval-demo.yaml")
    assert main(["crash", table, "--approval", "AskApproval=30", "--snapshot-every", "2"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("approval-demo: 10 configurations") and out.rstrip().endswith("ok")


@pytest.mark.parametrize("argv, message", [
    (["--depth", "-1"], "--depth"),
    (["--approval", "Nope"], "no action 'Nope'"),
    (["--approval", "AskApproval=soon"], "SECONDS"),
])
def test_crash_bad_input_exits_2(capsys: pytest.CaptureFixture[str], argv: list[str], message: str) -> None:
    table = str(ROOT / "tests" / "tables" / "approval-demo.yaml")
    assert main(["crash", table, *argv]) == 2
    assert message in capsys.readouterr().err


def agentfsm(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([AGENTFSM, *argv], capture_output=True, text=True, cwd=cwd, timeout=60)


def test_a_killed_durable_run_resumes_without_running_an_effect_twice(tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_text(SCRIPT)
    # boundaries: created 1-2, step 3-4, started 5-6, completed 7-8, step 9-10, started 11-12: killed
    # just after ExecuteTools' started became durable
    killed = agentfsm("run", LOOM, "--script", "s.yaml", "--store", "j.db", "--kill-at", "12", cwd=tmp_path)
    assert killed.returncode == -signal.SIGKILL
    again = agentfsm("run", LOOM, "--script", "s.yaml", "--store", "j.db", cwd=tmp_path)
    assert again.returncode == 2 and "--resume" in again.stderr
    resumed = agentfsm("run", LOOM, "--script", "s.yaml", "--store", "j.db", "--resume", cwd=tmp_path)
    assert resumed.returncode == 1, resumed.stderr
    assert "effect: ExecuteTools" not in resumed.stdout
    assert "decision: unknown-effect run/5/0" in resumed.stdout
    assert "final state ShuttingDown" in resumed.stdout
    view = agentfsm("journal", "--store", "j.db", "--json", cwd=tmp_path)
    assert view.returncode == 0
    [run] = json.loads(view.stdout)["runs"]
    kinds = [r["kind"] for r in run["records"]]
    assert kinds[:7] == ["created", "step", "started", "completed", "step", "started", "unknown"]
    assert [r["seq"] for r in run["records"]] == list(range(1, len(kinds) + 1))
    assert run["current"]["state"] == "ShuttingDown"
    assert [d["kind"] for d in run["decisions"]] == ["unknown-effect"]


def test_journal_reports_a_torn_tail_and_bad_paths(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "s.yaml").write_text(SCRIPT)
    db = tmp_path / "j.db"
    assert main(["run", LOOM, "--script", str(tmp_path / "s.yaml"), "--store", str(db)]) == 0
    assert main(["journal", "--store", str(db)]) == 0
    out = capsys.readouterr().out
    assert "--LlmCompleted(tool_calls=1)--> ExecutingTools" in out and "now: ShuttingDown" in out
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE records SET body = body || ' ' WHERE seq = (SELECT max(seq) FROM records)")
    assert main(["journal", "--store", str(db)]) == 2
    err = capsys.readouterr().err
    assert f"{db}: run 'run': torn tail at sequence" in err and "checksum mismatch" in err
    assert main(["run", LOOM, "--script", str(tmp_path / "s.yaml"), "--store", str(db), "--resume"]) == 2
    assert f"{db}: run 'run': torn tail" in capsys.readouterr().err
    assert main(["journal", "--store", str(db), "--repair"]) == 0
    assert "repaired: records from 11 on discarded" in capsys.readouterr().out
    assert main(["journal", "--store", str(db), "--json"]) == 0
    kinds = [r["kind"] for r in json.loads(capsys.readouterr().out)["runs"][0]["records"]]
    assert kinds[-1] == "repaired" and len(kinds) == 11
    assert main(["journal", "--store", str(tmp_path / "missing.db")]) == 2
    (tmp_path / "junk.db").write_text("not a database at all, just text" * 100)
    assert main(["journal", "--store", str(tmp_path / "junk.db")]) == 2
    assert "not a journal store" in capsys.readouterr().err
