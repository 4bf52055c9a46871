"""A vibework sub-agent runs durably as a child run of its parent's spawn effect: its own LLM
calls and tools are journaled, and a crash anywhere resumes it where it stopped.

The script's sub-agent appends to ``ledger.txt`` with two commands; the second one SIGKILLs
the whole process the first time it runs (before it writes), so the crash is inside the
sub-agent's tool, deterministically.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from agentfsm.impl.durable.children import child_run_id, decisions_of, owner, parent_effect
from conftest import ROOT

AGENTFSM = str(Path(sys.executable).parent / "agentfsm")
TABLE = str(ROOT / "spec" / "vibework-agent.yaml")
KILL_ONCE = "test -e killed || { touch killed; kill -9 $PPID; sleep 5; }"


def ledger_script(second: str = "echo b >> ledger.txt") -> dict[str, Any]:
    """A parent that spawns a sub-agent; the sub-agent runs two commands, the second killing the
    process on its first run, then answers; the parent finishes."""
    command = {"name": "run_command", "arguments": {"argv": ["sh", "-c", "echo a >> ledger.txt"]}}
    killer = {"name": "run_command", "arguments": {"argv": ["sh", "-c", f"{KILL_ONCE}; {second}"]}}
    return {"allow": ["run_command", "spawn_agent"], "inputs": ["Delegate the ledger."],
            "replies": [[{"tool_call": {"name": "spawn_agent", "arguments": {"task": "Write the ledger."}}}],
                        [{"tool_call": command}], [{"tool_call": killer}], "Ledger written.",
                        [{"tool_call": {"name": "complete_task", "arguments": {"summary": "done"}}}]]}


def agentfsm(cwd: Path, *argv: str, script: str = "s.yaml", timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([AGENTFSM, "run", TABLE, "--script", script, "--workdir", "w", "--json", *argv],
                          capture_output=True, text=True, cwd=cwd, timeout=timeout)


def notes(out: str, kind: str) -> list[str]:
    return [line["text"] for line in map(json.loads, out.splitlines()) if line["kind"] == kind]


def decision_ids(out: str) -> list[str]:
    return [text.split(":")[0].split()[-1] for text in notes(out, "decision")]


def setup(tmp_path: Path, script: dict[str, Any]) -> Path:
    (tmp_path / "w").mkdir()
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(script))
    return tmp_path


def journal(cwd: Path) -> list[dict[str, Any]]:
    view = subprocess.run([AGENTFSM, "journal", "--store", "j.db", "--json"], capture_output=True, text=True,
                          cwd=cwd, timeout=60)
    assert view.returncode == 0, view.stderr
    runs: list[dict[str, Any]] = json.loads(view.stdout)["runs"]
    return runs


def test_a_kill_inside_a_sub_agents_tool_resumes_the_sub_agent_where_it_stopped(tmp_path: Path) -> None:
    """The defect: the sub-agent was one effect of its parent, so this kill left the spawn unknown
    and `rerun` ran the sub-agent again, its first command included. Now the decision is the
    killed command's own (its outcome is unknown), and the first command never runs again."""
    cwd = setup(tmp_path, ledger_script())
    killed = agentfsm(cwd, "--store", "j.db")
    assert killed.returncode == -signal.SIGKILL
    ledger = cwd / "w" / "ledger.txt"
    assert ledger.read_text() == "a\n"
    resumed = agentfsm(cwd, "--store", "j.db", "--resume")
    [decision] = decision_ids(resumed.stdout)
    assert resumed.returncode == 1 and owner(decision, [r["run_id"] for r in journal(cwd)]) is not None, \
        "the decision is the sub-agent's command, in its child run, not the parent's spawn"
    resumed = agentfsm(cwd, "--store", "j.db", "--resume", f"--decide={decision}=rerun")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert ledger.read_text() == "a\nb\n", "the sub-agent's first command ran once"
    assert notes(resumed.stdout, "done")[-1].startswith("final state Done")
    runs = {r["run_id"]: r for r in journal(cwd)}
    [child] = [r for r in runs if parent_effect(r) is not None]
    spawn = parent_effect(child)
    assert spawn is not None and spawn.startswith("run/") and child == child_run_id(spawn)
    parent_effects = {e["key"]: e for e in runs["run"]["current"]["effects"]}
    assert parent_effects[spawn]["status"] == "completed" and parent_effects[spawn]["result"]["result"]["content"] \
        == "Ledger written."
    commands = [e for e in runs[child]["current"]["effects"] if e["action"] == "ExecuteTool"]
    assert [e["attempts"] for e in commands] == [1, 2] and all(e["status"] == "completed" for e in commands)
    assert not [d for r in runs.values() for d in r["decisions"]]


def test_decisions_are_routed_to_the_run_that_owns_the_effect() -> None:
    runs = ["run", "run/3/0/sub-agent", "run/3/0/sub-agent/4/0/sub-agent", "other"]
    decisions = {"run/5/0": "failed", "run/3/0/sub-agent/2/0": "rerun",
                 "run/3/0/sub-agent/4/0/sub-agent/1/0": "completed", "7": "continue"}
    assert decisions_of(None, decisions, runs) == {"run/5/0": "failed", "7": "continue"}
    assert decisions_of("run/3/0/sub-agent", decisions, runs) == {"run/3/0/sub-agent/2/0": "rerun"}
    assert decisions_of("run/3/0/sub-agent/4/0/sub-agent", decisions, runs) == \
        {"run/3/0/sub-agent/4/0/sub-agent/1/0": "completed"}
    assert parent_effect("run/3/0/sub-agent/4/0/sub-agent") == "run/3/0/sub-agent/4/0"
    assert parent_effect("run/task-1") is None

