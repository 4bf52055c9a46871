"""A vibework sub-agent runs durably as a child run of its parent's spawn effect: its own LLM
calls and tools are journaled, and a crash anywhere resumes it where it stopped.

The script's sub-agent appends to ``ledger.txt`` with two commands; the second one SIGKILLs
the whole process the first time it runs (before it writes), so the crash is inside the
sub-agent's tool, deterministically.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from agentfsm.faults.crash_agent import AgentCrash, effects_problem
from agentfsm.impl.agents.vibework import VibeworkAgent, VibeworkConfig
from agentfsm.impl.durable.children import child_run_id, decisions_of, owner, parent_effect
from agentfsm.impl.durable.driver import DurableLink
from agentfsm.impl.llm.client import ScriptedLlm
from agentfsm.impl.script import AgentScript, load_script
from agentfsm.impl.stores.journal import Entry, Record
from agentfsm.impl.stores.sqlite import SqliteStore
from agentfsm.spec import load_table
from conftest import ROOT
from pg_support import fresh_schema
from test_durable_agents import fresh, outcome, trail

from agentfsm.cli import main

AGENTFSM = str(Path(sys.executable).parent / "agentfsm")
TABLE = str(ROOT / "spec" / "vibework-agent.yaml")
KILL_ONCE = "test -e killed || { touch killed; kill -9 $PPID; exit 1; }"


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


def demo(cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    """The bundled vibework demo (its sub-agent reads the notes), in ``cwd/w``."""
    return agentfsm(cwd, *argv, script=str(ROOT / "examples" / "vibework-agent-agent.yaml"))


def notes(out: str, kind: str) -> list[str]:
    return [line["text"] for line in map(json.loads, out.splitlines()) if line["kind"] == kind]


def decision_ids(out: str) -> list[str]:
    return [text.split(":")[0].split()[-1] for text in notes(out, "decision")]


def setup(tmp_path: Path, script: dict[str, Any]) -> Path:
    (tmp_path / "w").mkdir(parents=True)
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(script))
    return tmp_path


def journal(cwd: Path, store: str = "j.db") -> list[dict[str, Any]]:
    view = subprocess.run([AGENTFSM, "journal", "--store", store, "--json"], capture_output=True, text=True,
                          cwd=cwd, timeout=60)
    assert view.returncode == 0, view.stderr
    runs: list[dict[str, Any]] = json.loads(view.stdout)["runs"]
    return runs


def test_a_kill_inside_a_sub_agents_tool_resumes_the_sub_agent_where_it_stopped(tmp_path: Path) -> None:
    """The defect: the sub-agent was one effect of its parent, so this kill left the spawn unknown
    and `rerun` ran the sub-agent again, its first command included. Now the decision is the
    killed command's own (its outcome is unknown), and the first command never runs again."""
    kill_inside_a_sub_agent_and_resume(setup(tmp_path, ledger_script()), "j.db")


def test_the_same_on_postgresql(tmp_path: Path, pg_url: str) -> None:
    with fresh_schema(pg_url) as schema:
        kill_inside_a_sub_agent_and_resume(setup(tmp_path, ledger_script()), f"{pg_url}?schema={schema}")


def kill_inside_a_sub_agent_and_resume(cwd: Path, store: str) -> None:
    killed = agentfsm(cwd, "--store", store)
    assert killed.returncode == -signal.SIGKILL
    ledger = cwd / "w" / "ledger.txt"
    assert ledger.read_text() == "a\n"
    resumed = agentfsm(cwd, "--store", store, "--resume")
    [decision] = decision_ids(resumed.stdout)
    assert resumed.returncode == 1 and owner(decision, [r["run_id"] for r in journal(cwd, store)]) is not None, \
        "the decision is the sub-agent's command, in its child run, not the parent's spawn"
    resumed = agentfsm(cwd, "--store", store, "--resume", f"--decide={decision}=rerun")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert ledger.read_text() == "a\nb\n", "the sub-agent's first command ran once"
    assert notes(resumed.stdout, "done")[-1].startswith("final state Done")
    runs = {r["run_id"]: r for r in journal(cwd, store)}
    [child] = [r for r in runs if parent_effect(r) is not None]
    spawn = parent_effect(child)
    assert spawn is not None and spawn.startswith("run/") and child == child_run_id(spawn)
    parent_effects = {e["key"]: e for e in runs["run"]["current"]["effects"]}
    assert parent_effects[spawn]["status"] == "completed" and parent_effects[spawn]["result"]["result"]["content"] \
        == "Ledger written."
    commands = [e for e in runs[child]["current"]["effects"] if e["action"] == "ExecuteTool"]
    assert [e["attempts"] for e in commands] == [1, 2] and all(e["status"] == "completed" for e in commands)
    assert not [d for r in runs.values() for d in r["decisions"]]
    again = agentfsm(cwd, "--store", store, "--resume", f"--decide={decision}=rerun")
    assert again.returncode == 2 and "is not being resumed" in again.stderr, "a decision never silently dropped"


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



def test_a_nested_sub_agent_killed_in_its_tool_resumes_on_its_own_child_run(tmp_path: Path) -> None:
    """With sub-agents of sub-agents allowed (max_depth 2), the grandchild is a child run of the
    child's spawn: the kill's decision is the grandchild's, and nothing ran twice."""
    script = ledger_script()
    replies = script["replies"]
    script["settings"] = {"max_depth": 2}
    script["replies"] = [replies[0], [{"tool_call": {"name": "spawn_agent", "arguments": {"task": "Delegate it."}}}],
                         *replies[1:4], "The grandchild wrote it.", replies[4]]
    cwd = setup(tmp_path, script)
    assert agentfsm(cwd, "--store", "j.db").returncode == -signal.SIGKILL
    resumed = agentfsm(cwd, "--store", "j.db", "--resume")
    [decision] = decision_ids(resumed.stdout)
    child_runs = [r["run_id"] for r in journal(cwd) if parent_effect(r["run_id"]) is not None]
    assert len(child_runs) == 2 and owner(decision, child_runs) == max(child_runs, key=len)
    resumed = agentfsm(cwd, "--store", "j.db", "--resume", f"--decide={decision}=rerun")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert (cwd / "w" / "ledger.txt").read_text() == "a\nb\n"
    runs = journal(cwd)
    assert all(e["status"] == "completed" for r in runs for e in r["current"]["effects"])
    assert [r.get("parent_effect") for r in runs] == [None, *map(parent_effect, child_runs)]
    spawns = [e for r in runs for e in r["current"]["effects"] if child_run_id(e["key"]) in child_runs]
    assert [e["result"]["result"]["content"] for e in spawns] == ["The grandchild wrote it.", "Ledger written."]
    again = agentfsm(cwd, "--store", "j.db", "--resume")
    assert again.returncode == 0 and not notes(again.stdout, "decision")


def test_two_resumers_of_one_parent_run_one_wins_the_other_is_refused(tmp_path: Path) -> None:
    """The parent's lease covers its child runs: while one process resumes the run (its sub-agent's
    command running), a second is refused (exit 2, no traceback) and writes nothing."""
    waits = "touch b-running; while ! test -e go; do sleep 0.1; done; echo b >> ledger.txt"
    cwd = setup(tmp_path, ledger_script(waits))
    assert agentfsm(cwd, "--store", "j.db").returncode == -signal.SIGKILL
    [decision] = decision_ids(agentfsm(cwd, "--store", "j.db", "--resume").stdout)
    first = subprocess.Popen([AGENTFSM, "run", TABLE, "--script", "s.yaml", "--workdir", "w", "--json", "--store",
                              "j.db", "--resume", f"--decide={decision}=rerun"], cwd=cwd, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 90
        while not (cwd / "w" / "b-running").exists():
            assert first.poll() is None and time.monotonic() < deadline, "the first resumer never ran the command"
            time.sleep(0.1)
        versions = {r["run_id"]: r["current"]["version"] for r in journal(cwd)}
        second = agentfsm(cwd, "--store", "j.db", "--resume")
        assert second.returncode == 2 and "is owned by" in second.stderr and "Traceback" not in second.stderr
        assert {r["run_id"]: r["current"]["version"] for r in journal(cwd)} == versions
    finally:
        (cwd / "w" / "go").touch()
        out, err = first.communicate(timeout=120)
    assert first.returncode == 0, out + err
    assert (cwd / "w" / "ledger.txt").read_text() == "a\nb\n"


def test_the_journal_shows_child_runs_and_run_refuses_to_resume_one_alone(tmp_path: Path) -> None:
    cwd = setup(tmp_path, ledger_script())
    assert agentfsm(cwd, "--store", "j.db").returncode == -signal.SIGKILL
    [child] = [r["run_id"] for r in journal(cwd) if parent_effect(r["run_id"]) is not None]
    view = subprocess.run([AGENTFSM, "journal", "--store", "j.db", "--run", "run"], capture_output=True, text=True,
                          cwd=cwd, timeout=60)
    assert "run run (vibework-agent)" in view.stdout, "--run names the top run and shows its child runs too"
    assert f"run {child} (vibework-agent, the sub-agent of effect {parent_effect(child)})" in view.stdout
    alone = agentfsm(cwd, "--store", "j.db", "--resume", "--run-id", child)
    assert alone.returncode == 2 and "a sub-agent's child run" in alone.stderr


def old_journal(name: str, cwd: Path) -> Path:
    """A journal written before sub-agents had child runs (tests/old_journals, exported from the
    demo run SIGKILLed by the code of that time), loaded into a store at ``cwd/j.db``."""
    data = json.loads((ROOT / "tests" / "old_journals" / f"{name}.json").read_text())
    entries = [Entry(r["kind"], r["body"], r["time"]) for r in data["records"]]
    store = SqliteStore(cwd / "j.db")
    try:
        store.create(data["run_id"], data["machine"], entries[0])
        store.append(data["run_id"], 1, entries[1:])
    finally:
        store.close()
    return cwd


def test_an_old_journal_killed_while_its_sub_agent_worked_still_asks_the_user(tmp_path: Path) -> None:
    """The sub-agent ran inside the spawn effect, unjournaled: the spawn is a decision as it was,
    and `rerun` runs the sub-agent again (now on a child run) to the crash-free run's end."""
    reference = demo(fresh(tmp_path / "ref"))
    cwd = old_journal("vibework-killed-while-sub-agent-works", fresh(tmp_path / "old"))
    resumed = demo(cwd, "--store", "j.db", "--resume")
    assert resumed.returncode == 1 and decision_ids(resumed.stdout) == ["run/19/0"]
    resumed = demo(cwd, "--store", "j.db", "--resume", "--decide=run/19/0=rerun")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert outcome(resumed.stdout) == outcome(reference.stdout)
    assert [r["run_id"] for r in journal(cwd)] == ["run", "run/19/0/sub-agent"]


def test_an_old_journal_whose_spawn_completed_resumes_with_the_replies_its_sub_agent_used(tmp_path: Path) -> None:
    """The spawn's result kept what the sub-agent consumed of the script: a resumed run skips it."""
    reference = demo(fresh(tmp_path / "ref"))
    cwd = old_journal("vibework-killed-after-sub-agent-answered", fresh(tmp_path / "old"))
    resumed = demo(cwd, "--store", "j.db", "--resume")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert outcome(resumed.stdout) == outcome(reference.stdout) and not notes(resumed.stdout, "warning")


def test_the_crash_campaign_flags_a_stuck_run_and_an_effect_run_again_silently() -> None:
    data = json.loads((ROOT / "tests" / "old_journals" / "vibework-killed-while-sub-agent-works.json").read_text())
    records = [Record("run", seq, r["kind"], r["time"], r["body"], "") for seq, r in enumerate(data["records"], 1)]
    table = load_table(TABLE)
    served = load_table(TABLE, table.runtime)
    assert effects_problem(served, records, ["run"]) == \
        "effect run/19/0 (ExecuteTool) is left started: the run is stuck"
    spawned = next(r.seq for r in records if r.kind == "started" and r.body["key"] == "run/19/0")
    again = records[:spawned] + [Record("run", spawned + 1, "started", 0.0,
                                        {"key": "run/19/0", "attempt": 2, "retry": True}, "")]
    assert "started 2 times with 0 rerun decision(s)" in str(effects_problem(served, again, ["run"]))
    assert "left started" in str(effects_problem(served, again, ["run", "run/19/0/sub-agent"])), \
        "a spawn resumed on its child run is no silent re-run"


@pytest.mark.parametrize(("argv", "final"), [(["sh", "-c", "echo b >> ledger.txt"], "Done"),
                                            (["no-such-program"], "Error")])
def test_a_durable_sub_agent_ends_as_in_memory(argv: list[str], final: str, tmp_path: Path) -> None:
    """A sub-agent that answers (the parent finishes) and one that fails (its command is not found:
    the child's Error is the parent's SubAgentFailed) end alike in memory and on a child run."""
    script = ledger_script()
    script["replies"][2] = [{"tool_call": {"name": "run_command", "arguments": {"argv": argv}}}]
    plain = agentfsm(setup(tmp_path / "plain", script))
    durable = agentfsm(setup(tmp_path / "durable", script), "--store", "j.db")
    assert plain.returncode == durable.returncode and trail(plain.stdout) == trail(durable.stdout)
    assert outcome(plain.stdout) == outcome(durable.stdout)
    event = "SubAgentCompleted" if final == "Done" else "SubAgentFailed"
    assert [step for step in trail(durable.stdout) if step[1] == event] == \
        [("WaitingForSubAgent", event, "Processing" if final == "Done" else "Error", True)]
    runs = journal(tmp_path / "durable")
    [spawn] = [e for e in runs[0]["current"]["effects"] if child_run_id(e["key"]) == runs[1]["run_id"]]
    assert spawn["status"] == ("completed" if final == "Done" else "failed") and spawn["reported"]
    assert all(e["attempts"] == 1 and e["reported"] for r in runs for e in r["current"]["effects"])


@pytest.mark.slow  # some 20 kills of a run whose command sleeps: minutes on two loaded cores
def test_sigkill_at_every_boundary_of_an_interrupted_sub_agent(tmp_path: Path) -> None:
    """The user interrupts while the sub-agent's command runs: the parent's Interrupt and the
    child's are two writes to two runs. Killed at every boundary of the sub-agent's work, the
    resumed run ends as the crash-free one (the child is interrupted even when only the parent's
    interrupt was journaled: else it would go on to the reply the crash-free run leaves unused), with
    no stuck run and nothing run again silently."""
    slow = {"name": "run_command", "arguments": {"argv": ["sh", "-c", "sleep 1.5; echo a >> ledger.txt"]}}
    script = {"allow": ["run_command", "spawn_agent"], "inputs": [{"text": "Delegate.", "interrupt_after": 0.7}],
              "replies": [[{"tool_call": {"name": "spawn_agent", "arguments": {"task": "Write it."}}}],
                          [{"tool_call": slow}], "Unused: the interrupt ends the task before this reply."]}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(script))
    loaded = load_script(str(path))
    assert isinstance(loaded, AgentScript)
    campaign = AgentCrash(TABLE, str(path), loaded, "vibework-agent", main)
    try:
        report = campaign.check(1)
    finally:
        campaign.close()
    assert report.ok, report.violations
    assert report.kills >= len(campaign.children) > 8


def test_a_child_run_waiting_for_a_decision_is_not_resumed_and_the_parent_does_not_hang(tmp_path: Path) -> None:
    """Through the API (no player to stop first): the parent leaves the sub-agent where it is,
    settles as blocked, and its decisions name the child's command."""
    cwd = setup(tmp_path, ledger_script())
    assert agentfsm(cwd, "--store", "j.db").returncode == -signal.SIGKILL
    table = load_table(TABLE)
    agent = VibeworkAgent(load_table(TABLE, table.runtime), ScriptedLlm([]),
                          config=VibeworkConfig(workdir=cwd / "w", allow=("run_command", "spawn_agent")))
    store = SqliteStore(cwd / "j.db")
    try:
        versions = {run_id: store.version(run_id) for run_id in store.runs()}
        link = DurableLink.open(agent, agent, store, "run", True)
        [decision] = agent.decisions()
        child = owner(decision.id, store.runs())
        assert child is not None

        async def main() -> dict[str, int]:
            async with agent:
                link.resume()
                await asyncio.wait_for(agent.wait_settled(), 60)
                assert agent.state() == "WaitingForSubAgent"
                return {run_id: store.version(run_id) for run_id in store.runs()}
        after = asyncio.run(main())
    finally:
        store.close()
    assert (cwd / "w" / "ledger.txt").read_text() == "a\n"
    assert {run_id: after[run_id] - versions[run_id] for run_id in versions} == {"run": 1, child: 1}, \
        "recovery wrote one 'unknown' record in each run, the blocked parent nothing more"
