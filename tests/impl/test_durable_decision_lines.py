"""A decision about an effect whose outcome is unknown names the tool call and its arguments, the
same way for every bundled agent (issue 25, defect 6: the vibework line said only
``ExecuteTool (KEY)``; the Loom one said ``run_command {"argv": [...]} (KEY)``).

The calls are journaled with their effects (``journal --json``: ``tool`` and ``args``), so the
line is the same whichever process prints it and whatever the agent's context holds then."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from agentfsm.impl.durable.run import describe_call
from agentfsm.impl.durable.state import Effect
from conftest import ROOT
from test_durable_agents import AGENTFSM, DEMOS, agentfsm, fresh

KILL_ONCE = "test -e killed || { touch killed; kill -9 $PPID; exit 1; }"
ARGV = ["sh", "-c", f"{KILL_ONCE}; echo b >> ledger.txt"]
SHOWN = 'run_command {"argv": ' + json.dumps(ARGV) + "}"
# The actions that run a tool call (or the explorer's commands), per agent.
TOOL_ACTIONS = {"loom-agent": {"ExecuteTools"}, "vibework-agent": {"ExecuteTool"},
                "explorer-evaluator": {"RunCommands"}, "tool-call": {"InvokeTool", "RetryWithSameKey"}}


def killed_mid_call(machine: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """A response of two calls, both allowed: the second SIGKILLs the run the first time it runs.
    The Loom agent runs a response's calls at once; vibework one after the other."""
    first = {"tool_call": {"name": "run_command", "arguments": {"argv": ["sh", "-c", "echo a >> ledger.txt"]}}}
    second = {"tool_call": {"name": "run_command", "arguments": {"argv": ARGV}}}
    script: dict[str, Any] = {"inputs": ["Write the ledger."], "replies": [[first, second], "Written."]}
    if machine == "vibework-agent":
        script["allow"] = ["run_command"]
    else:
        script["settings"] = {"commit_hook": False, "tool_concurrency": 1}
    (cwd / "w").mkdir()
    (cwd / "s.yaml").write_text(yaml.safe_dump(script))
    argv = [AGENTFSM, "run", str(ROOT / "spec" / f"{machine}.yaml"), "--script", "s.yaml", "--workdir", "w",
            "--store", "j.db"]
    killed = subprocess.run(argv, capture_output=True, text=True, cwd=cwd, timeout=120)
    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
    return subprocess.run([*argv, "--resume"], capture_output=True, text=True, cwd=cwd, timeout=120)


@pytest.mark.parametrize("machine", ["loom-agent", "vibework-agent"])
def test_the_decision_line_names_the_call_and_its_arguments(machine: str, tmp_path: Path) -> None:
    resumed = killed_mid_call(machine, tmp_path)
    assert resumed.returncode == 1, resumed.stdout + resumed.stderr
    [line] = [line for line in resumed.stdout.splitlines() if "decision: unknown-effect" in line and "kill" in line]
    key = line.split("decision: unknown-effect ")[1].split(":")[0]
    assert f"{SHOWN} ({key}) may or may not have run" in line, line


def journaled_effects(cwd: Path) -> list[dict[str, Any]]:
    view = subprocess.run([AGENTFSM, "journal", "--store", "j.db", "--json"], capture_output=True, text=True,
                          cwd=cwd, timeout=60)
    assert view.returncode == 0, view.stderr
    return [e for run in json.loads(view.stdout)["runs"] for e in run["current"]["effects"]]


@pytest.mark.parametrize("machine", sorted(DEMOS))
def test_every_agent_journals_the_call_each_tool_effect_runs(machine: str, tmp_path: Path) -> None:
    """Each effect that runs a tool call carries the call it ran: the tool (or the action) and
    the arguments the model gave, and, where the outcome names its call, that very call."""
    ran = agentfsm(machine, "--store", "j.db", cwd=fresh(tmp_path))
    assert ran.returncode in (0, 1), ran.stdout + ran.stderr
    effects = [e for e in journaled_effects(tmp_path) if e["action"] in TOOL_ACTIONS[machine]]
    assert effects
    for e in effects:
        shown = describe_call(Effect(e["key"], e["action"], e["seq"], e["call_id"], e["idempotent"],
                                     tool=e["tool"], args=e["args"]))
        assert e["args"] and shown.startswith(f"{e['tool'] or e['action']} ") and len(shown) > len(e["action"]) + 3, e
        result = e["result"].get("result") if isinstance(e["result"], dict) else None
        if isinstance(result, dict) and "call_id" in result:
            assert result["call_id"] == e["args"]["id"], ("the journaled call is the one that ran", e)
