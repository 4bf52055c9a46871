"""``agentfsm run`` picks each bundled table's own agent for agent scripts; the shipped demos
run end to end; event scripts keep working; the new script keys are checked."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from agentfsm.impl.agents.prompts import ScriptedAnswer, ScriptedVerdict
from agentfsm.impl.agents.sandbox import probe
from agentfsm.impl.script import AgentScript, ScriptError, parse_script
from conftest import ROOT, run_cli
from naive_semantics import NaiveTable, read_yaml

EXAMPLES = ROOT / "examples"


def run_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[dict[str, Any]], str]:
    code, out, err = run_cli(["run", *args, "--json", "--timeout", "30"], capsys)
    return code, [json.loads(line) for line in out.splitlines()], err


def steps(lines: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [line for line in lines if line["kind"] == "step"]


@pytest.fixture()
def workdir(tmp_path: Path) -> Path:
    shutil.copytree(EXAMPLES / "demo-workdir", tmp_path / "w")
    return tmp_path / "w"


def test_vibework_demo(capsys: pytest.CaptureFixture[str], workdir: Path) -> None:
    code, lines, err = run_json(capsys, str(ROOT / "spec" / "vibework-agent.yaml"), "--script",
                                str(EXAMPLES / "vibework-agent-agent.yaml"), "--workdir", str(workdir))
    assert code == 0, err
    assert all(step["accepted"] for step in steps(lines))
    assert [s["state"] for s in steps(lines)] == [
        "Processing", "ExecutingTool", "WaitingForPermission", "ExecutingTool", "Processing", "Idle",
        "Processing", "ExecutingTool", "WaitingForSubAgent", "Processing", "Done",
        "Idle", "Processing", "WaitingForUserInput", "Processing", "Idle",
        "Processing", "WaitingForPermission", "Done"]
    assert {"kind": "answers", "text": "Short, please."} in lines
    assert {"kind": "tool", "text": "run_command failed: Interrupted"} in lines
    assert lines[-1] == {"kind": "done", "text": "final state Done, 0 anomalies"}


def test_explorer_evaluator_demo(capsys: pytest.CaptureFixture[str], workdir: Path) -> None:
    code, lines, err = run_json(capsys, str(ROOT / "spec" / "explorer-evaluator.yaml"), "--script",
                                str(EXAMPLES / "explorer-evaluator-agent.yaml"), "--workdir", str(workdir))
    assert code == 0, err
    assert lines[0] == {"kind": "confinement", "text": probe().describe()}  # said at start: which confinement
    assert {"kind": "command", "text": "run wc -l notes.txt -> exit status 0"} in lines
    results = [line["text"] for line in lines if line["kind"] == "result"]
    assert results == ["task 1: Answered: The driver performs: the engine decides, the driver acts.",
                       "task 2: Answered: 3"]
    assert [line["text"] for line in lines if line["kind"] == "violation"] == [
        "the evaluator may not explore; not run: `view notes.txt`", "the evaluator said 'Let me'; the seed forbids it"]
    assert not any(line["kind"] == "warning" for line in lines)


def test_tool_call_demo(capsys: pytest.CaptureFixture[str], workdir: Path) -> None:
    code, lines, err = run_json(capsys, str(ROOT / "spec" / "tool-call.yaml"), "--script",
                                str(EXAMPLES / "tool-call-agent.yaml"), "--workdir", str(workdir))
    assert code == 0, err
    assert [line["text"].split(":")[1].strip() for line in lines if line["kind"] == "result"] == [
        "Returned", "Returned", "Returned", "Returned", "Halted"]
    assert all(step["accepted"] for step in steps(lines))


@pytest.mark.parametrize("demo", sorted(p.name for p in EXAMPLES.glob("*-demo.yaml") if p.name != "loom-demo.yaml"))
def test_event_script_demos_still_run(capsys: pytest.CaptureFixture[str], demo: str) -> None:
    table = demo.removesuffix("-demo.yaml")
    code, lines, err = run_json(capsys, str(ROOT / "spec" / f"{table}.yaml"), "--script", str(EXAMPLES / demo))
    assert code == 0, err
    script = [(e, {}) if isinstance(e, str) else next(iter(e.items())) for e in read_yaml(EXAMPLES / demo)["events"]]
    ran = steps(lines)
    assert [(s["event"], s["params"] or {}) for s in ran] == [(e, p or {}) for e, p in script]
    oracle = NaiveTable.from_file(ROOT / "spec" / f"{table}.yaml")
    state, current = oracle.initial()
    for s in ran:
        want = oracle.step(state, current, s["event"], tuple(s["params"][n] for n, _ in oracle.events[s["event"]]))
        assert (s["state"], s["accepted"], s["actions"], s["vars"]) == (
            want.state, want.accepted, want.actions, want.vars), s
        state, current = want.state, want.vars


def test_a_setting_the_agent_does_not_take_is_bad_input(capsys: pytest.CaptureFixture[str],
                                                        tmp_path: Path) -> None:
    script = tmp_path / "s.yaml"
    script.write_text("inputs: [q]\nreplies: []\nsettings: {commit_hook: false}\n")
    code, _, err = run_cli(["run", str(ROOT / "spec" / "explorer-evaluator.yaml"), "--script", str(script)], capsys)
    assert code == 2 and "setting 'commit_hook' does not apply to explorer-evaluator" in err


def test_unscripted_permissions_follow_the_policy_off_a_terminal(capsys: pytest.CaptureFixture[str],
                                                                 workdir: Path) -> None:
    script = workdir / "s.yaml"
    script.write_text("inputs: [go]\nreplies:\n  - [{tool_call: {name: run_command, arguments: {argv: [ls]}}}]\n"
                      "  - ok\n")
    args = [str(ROOT / "spec" / "vibework-agent.yaml"), "--script", str(script), "--workdir", str(workdir)]
    code, lines, _ = run_json(capsys, *args, "--permission-policy", "grant")
    assert code == 0 and [s["state"] for s in steps(lines)] == [
        "Processing", "WaitingForPermission", "ExecutingTool", "Processing", "Idle", "Done"]  # Done: shutdown
    code, lines, _ = run_json(capsys, *args)
    assert code == 0 and [s["state"] for s in steps(lines)] == ["Processing", "WaitingForPermission", "Done"]
    assert any(line["kind"] == "warning" for line in lines)  # "ok" was never asked for


def test_agent_script_keys() -> None:
    script = parse_script({"inputs": ["x"], "replies": [], "permissions": ["grant", {"verdict": "deny", "delay": 1}],
                           "answers": ["a", ["b", "c"], {"answers": ["d"], "delay": 0.5}], "allow": ["read_*"],
                           "plan": True, "settings": {"run_allowed": ["ls"]}})
    assert isinstance(script, AgentScript)
    assert script.permissions == (ScriptedVerdict("grant"), ScriptedVerdict("deny", 1.0))
    assert script.answers == (ScriptedAnswer(("a",)), ScriptedAnswer(("b", "c")), ScriptedAnswer(("d",), 0.5))
    assert script.allow == ("read_*",) and script.plan and script.settings == {"run_allowed": ("ls",)}


@pytest.mark.parametrize(("data", "message"), [
    ({"permissions": ["maybe"]}, "permission 1: expected grant, deny, fail"),
    ({"answers": [3]}, "answer 1: expected a string"),
    ({"allow": "read_file"}, "'allow' must be a list"),
    ({"plan": "yes"}, "'plan' must be true or false"),
    ({"settings": {"run_allowed": "ls"}}, "setting 'run_allowed' must be tuple"),
])
def test_bad_agent_script_keys(data: dict[str, Any], message: str) -> None:
    with pytest.raises(ScriptError, match=message):
        parse_script({"inputs": [], "replies": [], **data})
