"""The bundled demos run durably (`agentfsm run --store`) and end as they do in memory; a run
SIGKILLed at a write boundary resumes (`--resume`) to the same end.

Every agent runs durably: the Loom agent (tests/impl/test_durable_agent.py has its own tests), the
vibework agent, the explorer/evaluator loop and the tool-call runner.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from agentfsm.impl.agents.explorer_evaluator import ExplorerConfig, ExplorerEvaluatorAgent
from agentfsm.impl.agents.play import PLAYERS, vibework_used
from agentfsm.impl.agents.prompts import ScriptedPermissions, ScriptedVerdict
from agentfsm.impl.agents.vibework import VibeworkAgent, VibeworkConfig
from agentfsm.impl.durable.driver import DurableLink
from agentfsm.impl.llm.client import Call, ReplyStep, Say, ScriptedLlm
from agentfsm.impl.script import AgentScript, load_script
from agentfsm.impl.stores.memory import MemoryStore
from agentfsm.spec import load_table
from conftest import ROOT, run_cli
from test_driver_loom import run

AGENTFSM = str(Path(sys.executable).parent / "agentfsm")
EXAMPLES = ROOT / "examples"
DEMOS = {"loom-agent": "loom-demo.yaml", "explorer-evaluator": "explorer-evaluator-agent.yaml",
         "tool-call": "tool-call-durable.yaml", "vibework-agent": "vibework-agent-agent.yaml"}
# Every bundled agent demo, and the exit code of its durable run: the tool-call demo's last call
# times out unkeyed and halts for an operator, a decision the durable run leaves open (exit 1).
BUNDLED = [("loom-agent", "loom-demo.yaml", 0), ("explorer-evaluator", "explorer-evaluator-agent.yaml", 0),
           ("tool-call", "tool-call-durable.yaml", 0), ("tool-call", "tool-call-agent.yaml", 1),
           ("vibework-agent", "vibework-agent-agent.yaml", 0)]


def agentfsm(machine: str, *argv: str, cwd: Path, demo: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([AGENTFSM, "run", str(ROOT / "spec" / f"{machine}.yaml"), "--script",
                           str(EXAMPLES / (demo or DEMOS[machine])), "--workdir", "w", "--json", *argv],
                          capture_output=True, text=True, cwd=cwd, timeout=120)


def lines(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines()]


def outcome(out: str) -> list[tuple[str, str]]:
    """What a run ends with, whatever path it took: results, answers and the final state."""
    return [(line["kind"], line["text"].split(", journal version")[0]) for line in lines(out)
            if line["kind"] in ("result", "answer") or (line["kind"] == "done" and "final state" in line["text"])]


def trail(out: str) -> list[tuple[str, str, str, bool]]:
    return [(s["previous"], s["event"], s["state"], s["accepted"]) for s in lines(out) if s["kind"] == "step"]


def fresh(tmp_path: Path) -> Path:
    shutil.copytree(EXAMPLES / "demo-workdir", tmp_path / "w")
    return tmp_path


def test_every_agent_has_a_durable_demo() -> None:
    assert set(PLAYERS) | {"loom-agent"} == set(DEMOS)


def test_every_bundled_agent_demo_is_covered() -> None:
    scripts = {p.name for p in EXAMPLES.glob("*.yaml") if "inputs" in p.read_text()}
    assert scripts == {demo for _, demo, _ in BUNDLED}


@pytest.mark.parametrize(("machine", "demo", "code"), BUNDLED)
def test_durable_and_in_memory_runs_of_each_demo_end_alike(machine: str, demo: str, code: int,
                                                           tmp_path: Path) -> None:
    plain = agentfsm(machine, cwd=fresh(tmp_path / "plain"), demo=demo)
    durable = agentfsm(machine, "--store", "j.db", cwd=fresh(tmp_path / "durable"), demo=demo)
    assert plain.returncode == 0 and durable.returncode == code, durable.stdout + durable.stderr
    assert trail(durable.stdout) == trail(plain.stdout) and outcome(durable.stdout) == outcome(plain.stdout)
    view = subprocess.run([AGENTFSM, "journal", "j.db", "--json"], capture_output=True, text=True,
                          cwd=tmp_path / "durable", timeout=60)
    runs = json.loads(view.stdout)["runs"]
    effects = [e for r in runs for e in r["current"]["effects"]]
    settled = [e for e in effects if e["status"] in ("completed", "failed")]
    assert settled and all(e["attempts"] <= 1 for e in effects), "no effect ran twice"
    assert all(e["reported"] or e["via"] != "run" or e["action"] == "CancelExecution" for e in settled), \
        "every outcome a run produced was fed back by its event"
    open_decisions = [d for r in runs for d in r["decisions"]]
    assert len(open_decisions) == code, "a durable run that exits 1 left exactly its one decision open"


def test_explorer_context_is_rebuilt_from_the_journal(tmp_path: Path) -> None:
    """A resumed agent sees what the crash-free one saw: task, plan, working memory, answer."""
    table = load_table(ROOT / "spec" / "explorer-evaluator.yaml", {"max_turns": 12})
    script = load_script(str(EXAMPLES / DEMOS["explorer-evaluator"]))
    assert isinstance(script, AgentScript)
    workdir = fresh(tmp_path) / "w"
    config = ExplorerConfig(workdir=workdir)
    first = ExplorerEvaluatorAgent(table, ScriptedLlm(script.replies), config=config)
    store = MemoryStore()
    DurableLink.create(first, first, store, "r")

    async def main() -> None:
        async with first:
            first.ask(script.inputs[0].text, script.plan)
            await first.wait_done()
    run(main())
    again = ExplorerEvaluatorAgent(table, ScriptedLlm([]), config=config)
    DurableLink.attach(again, again, store, "r")
    assert again.state() == first.state() == "Answered" and again.answer == first.answer
    assert (again.task, again.plan, again.last_remark) == (first.task, first.plan, first.last_remark)
    assert again.evaluator_context() == first.evaluator_context()
    assert again.explorer_context(True) == first.explorer_context(True)


@pytest.mark.parametrize(("machine", "kill_at"), [("explorer-evaluator", 5), ("explorer-evaluator", 14),
                                                 ("explorer-evaluator", 21), ("explorer-evaluator", 40),
                                                 ("vibework-agent", 1), ("vibework-agent", 12),
                                                 ("vibework-agent", 33), ("vibework-agent", 74),
                                                 ("loom-agent", 1)])
def test_an_agent_sigkilled_at_a_boundary_resumes_to_the_same_end(machine: str, kill_at: int, tmp_path: Path) -> None:
    """Vibework and Loom at 1: killed before the first write, --resume refuses (nothing to resume) and
    the run is started again without it; at
    33: killed while its sub-agent works, its child run resumes where it stopped; at 74: killed
    while the last input waits for permission, before its scripted interrupt, which the resumed
    run then delivers (a late verdict would grant the call)."""
    reference = agentfsm(machine, cwd=fresh(tmp_path / "ref"))
    cwd = fresh(tmp_path / "killed")
    killed = agentfsm(machine, "--store", "j.db", "--kill-at", str(kill_at), cwd=cwd)
    assert killed.returncode == -signal.SIGKILL
    resumed = agentfsm(machine, "--store", "j.db", "--resume", cwd=cwd)
    if kill_at == 1:  # nothing journaled: --resume starts nothing (defect 3, issue 25); the user starts it
        assert resumed.returncode == 2 and "no run 'run' to resume" in resumed.stderr, resumed.stderr
        resumed = agentfsm(machine, "--store", "j.db", cwd=cwd)
    decisions = [line["text"].split(":")[0].split()[-1] for line in lines(resumed.stdout) if line["kind"] == "decision"]
    if decisions:  # an effect cut short: not re-run silently; the user says rerun
        assert resumed.returncode == 1
        resumed = agentfsm(machine, "--store", "j.db", "--resume", *[f"--decide={d}=rerun" for d in decisions],
                           cwd=cwd)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert [r for r in outcome(resumed.stdout) if r[0] != "answer"] == \
        [r for r in outcome(reference.stdout) if r[0] != "answer"]
    assert trail(resumed.stdout)[-1:] == trail(reference.stdout)[-1:] and '"kind": "error"' not in resumed.stdout
    again = agentfsm(machine, "--store", "j.db", "--resume", cwd=cwd)
    assert again.returncode == 0 and not trail(again.stdout), "ended runs are not played again"


def test_crash_agent_script_kills_resumes_and_compares(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(["crash", str(ROOT / "spec" / "explorer-evaluator.yaml"), "--agent-script",
                              str(EXAMPLES / DEMOS["explorer-evaluator"]), "--kill", "1", "--json"], capsys)
    report = json.loads(out)
    assert code == 0, out + err
    assert report["ok"] and report["kills"] == 1 and report["boundaries"] > 20 and report["violations"] == []


def test_scenarios_run_side_by_side_report_as_one_after_the_other(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two scenarios at a time find what one at a time finds, merged in boundary order: a planted
    journal problem makes every scenario (each in its own forked process) report one violation
    naming its boundary, and what the report holds must not depend on ``jobs``."""
    from agentfsm.faults import crash_agent

    from agentfsm.cli.main import main

    monkeypatch.setattr(crash_agent.AgentCrash, "journal_problem", lambda self, where: f"planted in {where.name}")
    script = load_script(str(EXAMPLES / DEMOS["tool-call"]))
    assert isinstance(script, AgentScript)
    reports = []
    for jobs in (1, 2):
        campaign = crash_agent.AgentCrash(str(ROOT / "spec" / "tool-call.yaml"), str(EXAMPLES / DEMOS["tool-call"]),
                                          script, "tool-call", main)
        try:
            reports.append(campaign.check(2, jobs=jobs).to_json())
        finally:
            campaign.close()
    assert reports[0] == reports[1]
    points = [int(v["scenario"].split()[-1]) for v in reports[0]["violations"]]
    assert reports[0]["kills"] == 2 and len(points) == 2 and points == sorted(points)
    assert [v["message"] for v in reports[0]["violations"]] == [f"planted in kill-{p}" for p in points]


@pytest.mark.parametrize(("args", "message"), [
    (["spec/explorer-evaluator.yaml", "--agent-script", "examples/explorer-evaluator-agent.yaml"], "--kill N"),
    (["spec/tool-call.yaml", "--agent-script", "examples/tool-call-demo.yaml", "--kill", "1"], "an event script"),
    (["spec/loom-agent.yaml", "--agent-script", "examples/loom-demo.yaml", "--kill", "1", "--depth", "2"],
     "takes only --kill"),
])
def test_crash_agent_script_bad_input(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(["crash", *[str(ROOT / a) if a.endswith(".yaml") else a for a in args]], capsys)
    assert code == 2 and message in err and "Traceback" not in err


def test_a_hanging_child_is_reported_not_a_traceback(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from agentfsm.faults import crash_agent

    def hangs(argv: Sequence[str]) -> int:
        time.sleep(30)
        return 0
    monkeypatch.setattr(crash_agent, "CHILD_TIMEOUT", 0.5)
    script = load_script(str(EXAMPLES / DEMOS["tool-call"]))
    assert isinstance(script, AgentScript)
    campaign = crash_agent.AgentCrash(str(ROOT / "spec" / "tool-call.yaml"), str(EXAMPLES / DEMOS["tool-call"]),
                                      script, "tool-call", hangs)   # the forked child runs this command line
    try:
        child = campaign.play(tmp_path)
        campaign.scenario(3, [])
    finally:
        campaign.close()
    assert child.returncode == 124 and "hung" in child.stderr
    assert campaign.report.violations and "exit 124" in campaign.report.violations[0][1]


def test_vibework_conversation_is_rebuilt_from_the_journal(tmp_path: Path) -> None:
    """A resumed vibework agent sees the conversation the crash-free one had: inputs, replies, results."""
    table = load_table(ROOT / "spec" / "vibework-agent.yaml")
    workdir = fresh(tmp_path) / "w"
    replies: list[list[ReplyStep]] = [[Call("list_dir", {"path": "."})], [Call("run_command", {"argv": ["ls"]})],
                                      [Say("unused: the denial ends the task")]]
    config = VibeworkConfig(workdir=workdir)
    first = VibeworkAgent(table, ScriptedLlm(replies), config=config, permissions=ScriptedPermissions(["deny"]))
    store = MemoryStore()
    DurableLink.create(first, first, store, "r")

    async def main() -> None:
        async with first:
            first.send_input("look")
            await first.wait_settled()
    run(main())
    again = VibeworkAgent(table, ScriptedLlm([]), config=config)
    DurableLink.attach(again, again, store, "r")
    assert again.state() == first.state() and again.conversation == first.conversation
    assert again.conversation[-1]["content"] == "error: Permission denied by the user"


def test_a_withdrawn_permission_request_used_its_scripted_verdict(tmp_path: Path) -> None:
    """An interrupt withdraws a pending permission request: its verdict was taken all the same, so a
    resumed run skips it (else the next request would get it)."""
    table = load_table(ROOT / "spec" / "vibework-agent.yaml")
    replies: list[list[ReplyStep]] = [[Call("run_command", {"argv": ["ls"]})]]
    agent = VibeworkAgent(table, ScriptedLlm(replies), config=VibeworkConfig(workdir=fresh(tmp_path) / "w"),
                          permissions=ScriptedPermissions([ScriptedVerdict("grant", 5.0), "deny"]))
    link = DurableLink.create(agent, agent, MemoryStore(), "r")

    async def main() -> None:
        async with agent:
            agent.send_input("go")
            await agent.wait_until(lambda: agent.state() == "WaitingForPermission")
            await asyncio.sleep(0.1)
            await agent.interrupt()
            await agent.wait_settled()
    run(main())
    assert agent.state() == "Done" and vibework_used(link.run) == {"permissions": 1, "answers": 0, "llm": 1}


def test_decisions_for_a_run_the_store_does_not_hold_are_bad_input(tmp_path: Path) -> None:
    cwd = fresh(tmp_path)
    killed = agentfsm("vibework-agent", "--store", "j.db", "--kill-at", "1", cwd=cwd)
    assert killed.returncode == -signal.SIGKILL
    decided = agentfsm("vibework-agent", "--store", "j.db", "--resume", "--decide", "run/1/0=failed", cwd=cwd)
    assert decided.returncode == 2 and "nothing to decide" in decided.stderr and not trail(decided.stdout)
