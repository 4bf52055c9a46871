"""``agentfsm run``: the shipped demo end to end, event scripts, and bad input."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from agentfsm.impl.script import AgentScript, ScriptError, load_script
from conftest import ROOT
from json_envelope import run_line

AGENTFSM = str(ROOT / ".venv" / "bin" / "agentfsm")
LOOM = str(ROOT / "spec" / "loom-agent.yaml")
DEMO = ROOT / "examples" / "loom-demo.yaml"


def agentfsm(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([AGENTFSM, *args], capture_output=True, text=True, timeout=120)


def test_the_demo_runs_end_to_end(tmp_path: Path) -> None:
    shutil.copytree(DEMO.parent / "demo-workdir", tmp_path / "w")
    result = agentfsm("run", LOOM, "--script", str(DEMO), "--workdir", str(tmp_path / "w"), "--json")
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    for line in lines:
        run_line(line)
    steps = [line for line in lines if line["kind"] == "step"]
    assert all(step["accepted"] for step in steps)
    visited = {step["state"] for step in steps}
    assert visited == {"CallingLlm", "ExecutingTools", "PostToolsHook", "Error", "WaitingForUserInput",
                       "ShuttingDown"}
    assert next(line["text"] for line in lines if line["kind"] == "user") == "What is in this directory?"
    assert any(line["kind"] == "interrupt" for line in lines)
    assert (tmp_path / "w" / "out" / "summary.txt").read_text() == "Three notes on state machines.\n"
    assert lines[-1] == {"kind": "done", "text": "final state ShuttingDown, 0 anomalies"}


def test_the_demo_script_parses() -> None:
    script = load_script(DEMO)
    assert isinstance(script, AgentScript) and len(script.inputs) == 4 and script.inputs[2].interrupt_after


def test_event_script_drives_any_table(tmp_path: Path) -> None:
    script = tmp_path / "events.yaml"
    script.write_text("events:\n  - UserInput\n  - LlmCompleted: {tool_calls: 0}\n  - RetryTimeoutFired\n")
    result = agentfsm("run", LOOM, "--script", str(script))
    assert result.returncode == 0, result.stderr
    assert "WaitingForUserInput --UserInput--> CallingLlm  [SendLlmRequest]" in result.stdout
    assert "--RetryTimeoutFired--> WaitingForUserInput  [WaitForInput]  (rejected)" in result.stdout
    assert "1 anomalies" in result.stdout


@pytest.mark.parametrize(("text", "message"), [
    ("inputs: [hi]\n", "'replies' must be a list"),
    ("inputs: [hi]\nreplies: [[{sing: la}]]\n", "reply 1, step 1: bad 'sing' step"),
    ("inputs: [hi]\nreplies: []\nsettings: {retry_base: fast}\n", "setting 'retry_base' must be float"),
    ("inputs: [hi]\nreplies: []\nbogus: 1\n", "unknown key 'bogus'"),
    ("events: [{LlmCompleted: {tool_calls: x}}]\n", "event 1"),
    ("- just a list\n", "a script is a mapping"),
    ("inputs: [\n", "YAML syntax"),
])
def test_bad_scripts_exit_2_without_traceback(tmp_path: Path, text: str, message: str) -> None:
    script = tmp_path / "s.yaml"
    script.write_text(text)
    with pytest.raises(ScriptError, match=message.replace("[", r"\[")):
        load_script(script)
    result = agentfsm("run", LOOM, "--script", str(script))
    assert result.returncode == 2 and message in result.stderr and "Traceback" not in result.stderr


def test_missing_script_and_unknown_event_in_event_script(tmp_path: Path) -> None:
    result = agentfsm("run", LOOM, "--script", str(tmp_path / "none.yaml"))
    assert result.returncode == 2 and "cannot read" in result.stderr
    script = tmp_path / "events.yaml"
    script.write_text("events: [Fly]\n")
    result = agentfsm("run", LOOM, "--script", str(script))
    assert result.returncode == 2 and "event 1: loom-agent has no event 'Fly'" in result.stderr  # as for submit
