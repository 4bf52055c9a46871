"""The tool-call agent's unknown path on Temporal with real worker processes and real kills (no mock
of Temporal): ``agentfsm temporal start spec/tool-call.yaml --agent-script FILE`` plays one
``run_command`` call (non-idempotent, no status query) as the unit run ``RUN/call-1``, and a worker
is SIGKILLed at the four points of the SQLite scenarios: before the attempt's start is recorded,
after it (before the tool), during the tool (it acted and lingers), and after the tool but before
its completion reaches the server. The tool (a line appended to ``count.txt``) runs at most once
without a decision; an unknown outcome waits for the operator, whom no timer replaces, and the
operator's ``rerun``, sent with the run's own id from the CLI, runs it exactly once more. About 20 s
each: marked slow."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
from agentfsm.faults.temporal_audit import auditor
from agentfsm.impl.durable.beat import stopped
from agentfsm.impl.durable.protocol_log import ENV
from agentfsm.impl.temporal.activities import REFUSED
from conftest import ROOT
from temporal_support import AGENTFSM, queue, until, worker_process

TOOL_CALL = ROOT / "spec" / "tool-call.yaml"
SCRIPT = """allow: [run_command]
inputs: []
replies:
  - - tool_call:
        name: run_command
        arguments: {argv: [sh, -c, "echo ran >> count.txt; [ ! -e linger ] || sleep 30"]}
"""
STICKY = ("--sticky-timeout", "1")
AUDITOR = auditor()


class AgentScenario:
    """One tool-call agent run on its own task queue, its work folder and its worker processes."""

    def __init__(self, address: str, folder: Path, name: str) -> None:
        self.address = address
        self.folder = folder
        self.workdir = folder / "w"
        self.workdir.mkdir()
        self.script = folder / "script.yaml"
        self.script.write_text(SCRIPT)
        self.queue = queue()
        self.run_id = f"{name}-{self.queue}"
        self.unit = f"{self.run_id}/call-1"
        self.protocol = folder / "temporal.protocol.jsonl"
        self.workers: list[subprocess.Popen[bytes]] = []

    def worker(self, *extra: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        child = worker_process(self.address, self.queue, *STICKY, *extra, env={ENV: str(self.protocol), **(env or {})},
                               log=self.folder / "workers.log")
        self.workers.append(child)
        return child

    def cli(self, *argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(AGENTFSM), "temporal", *argv, "--address", self.address], capture_output=True,
                              text=True, timeout=120, cwd=self.folder)

    def start(self) -> None:
        done = self.cli("start", str(TOOL_CALL), "--agent-script", str(self.script), "--workdir", "w",
                        "--task-queue", self.queue, "--run-id", self.run_id, "--heartbeat", "1", "--timeout", "30")
        assert done.returncode == 0, done.stderr

    def runs(self) -> int:
        count = self.workdir / "count.txt"
        return len(count.read_text().splitlines()) if count.exists() else 0

    def pending(self) -> list[dict[str, Any]]:
        """The open decisions, as `agentfsm temporal trace RUN --json` lists them for the run started."""
        done = self.cli("trace", self.run_id, "--json")
        found: list[dict[str, Any]] = json.loads(done.stdout)["pending"] if done.returncode == 0 else []
        return found

    def decide(self, key: str, decision: str) -> None:
        done = self.cli("decide", self.run_id, f"{key}={decision}")
        assert done.returncode == 0, done.stderr

    def ask(self, run_id: str, what: str) -> Any:
        from agentfsm.impl.temporal.worker import connect
        from temporalio.service import RPCError

        async def main() -> Any:
            handle = (await connect(self.address)).get_workflow_handle(run_id)
            if what == "result":
                return await asyncio.wait_for(handle.result(), 120)
            try:
                described = await handle.describe()
            except RPCError:   # not started yet
                return 0
            return len(described.raw_description.pending_activities)
        return asyncio.run(main())

    def close(self) -> None:
        for child in self.workers:
            if child.poll() is None:
                os.killpg(child.pid, signal.SIGKILL)
            child.wait(30)


@pytest.fixture
def scenario(temporal_address: str, tmp_path: Path, request: pytest.FixtureRequest) -> Any:
    made = AgentScenario(temporal_address, tmp_path, request.node.name.removeprefix("test_")[:20])
    yield made
    made.close()


def killed(child: subprocess.Popen[bytes]) -> None:
    assert child.wait(60) == -signal.SIGKILL


def invocation(unit: dict[str, Any]) -> dict[str, Any]:
    [tool] = [e for e in unit["effects"] if e.get("tool") == "run_command"]
    return dict(tool)


def ended(s: AgentScenario) -> tuple[dict[str, Any], list[str]]:
    """The call's end as the run started reports it (its unit's state and run_command's effect), and the
    unit's journal kinds."""
    result = s.ask(s.run_id, "result")
    [unit] = result["units"]
    assert unit["run_id"] == s.unit and unit["state"] == "Returned"
    kinds = [r["kind"] for r in s.ask(s.unit, "result")["records"]]
    return invocation(unit), kinds


def unknown_then(s: AgentScenario, ran: int, decision: str = "rerun") -> None:
    """After the kill: a fresh worker carries the call to the unknown effect's decision; the tool ran
    ``ran`` times and nothing runs it again by itself; on ``rerun`` it runs exactly once more, on
    ``completed`` or ``failed`` never again; either way the call returns its answer."""
    s.worker()
    [pending] = until(s.pending, 120, "the unknown effect's decision")
    assert pending["kind"] == "unknown-effect" and pending["run"] == s.unit
    assert s.runs() == ran, "the tool ran at most once without a decision"
    s.decide(pending["id"], decision)
    tool, kinds = ended(s)
    again = decision == "rerun"
    assert s.runs() == ran + again, "exactly once more after rerun, never after another decision"
    assert tool["status"] == ("completed" if again else decision) and tool["attempts"] == 1 + again
    assert tool["key"] == pending["id"] and kinds.count("unknown") == 1 and kinds.count("decided") == 1
    explained(s)


def explained(s: AgentScenario) -> None:
    """The workers' protocol log: the call's window explained by temporal-run.yaml."""
    verdict = AUDITOR.audit_log(s.protocol)
    assert verdict.ok and verdict.explained >= 1, verdict.unexplained


@pytest.mark.slow
def test_killed_before_the_attempt_s_start_is_recorded(scenario: AgentScenario) -> None:
    """The only workflow worker dies with the call's first agent task scheduled; that task's reply (the
    call is valid and allowed: the tool is due) reaches the server with no worker to journal the tool's
    ``started``; the next worker does, and runs the tool once, with no decision."""
    s = scenario
    first = s.worker("--workflows-only")
    s.start()
    until(lambda: s.ask(s.unit, "pending"), 60, "the call's first agent task")
    first.send_signal(signal.SIGKILL)
    killed(first)
    s.worker("--activities-only")
    until(lambda: s.ask(s.unit, "pending") == 0, 60, "the agent task's reply")
    assert s.runs() == 0
    s.worker()
    tool, kinds = ended(s)
    assert s.runs() == 1 and tool["attempts"] == 1
    assert "unknown" not in kinds and "decided" not in kinds


@pytest.mark.slow
def test_killed_after_the_start_before_the_tool(scenario: AgentScenario) -> None:
    s = scenario
    first = s.worker(env={"AGENTFSM_TEMPORAL_KILL": "before-tool"})
    s.start()
    killed(first)
    unknown_then(s, ran=0)


@pytest.mark.slow
def test_killed_during_the_tool(scenario: AgentScenario) -> None:
    s = scenario
    (s.workdir / "linger").touch()
    first = s.worker()
    s.start()
    until(lambda: s.runs() == 1, 60, "the tool's execution")
    os.killpg(first.pid, signal.SIGKILL)
    killed(first)
    (s.workdir / "linger").unlink()
    unknown_then(s, ran=1)


@pytest.mark.slow
def test_killed_after_the_tool_before_its_completion_is_recorded(scenario: AgentScenario) -> None:
    s = scenario
    first = s.worker(env={"AGENTFSM_TEMPORAL_KILL": "after-tool"})
    s.start()
    killed(first)
    assert s.runs() == 1
    unknown_then(s, ran=1)


@pytest.mark.slow
@pytest.mark.parametrize("decision", ["completed", "failed"])
def test_killed_after_the_tool_the_operator_settles_it(scenario: AgentScenario, decision: str) -> None:
    """The operator says how the lost attempt ended: the call goes on from that outcome (its status
    query reads the decision from the journal) to its answer, and the tool never runs again."""
    s = scenario
    first = s.worker(env={"AGENTFSM_TEMPORAL_KILL": "after-tool"})
    s.start()
    killed(first)
    unknown_then(s, 1, decision)


@pytest.mark.slow
def test_stopped_before_the_tool_resumed_after_the_rerun(scenario: AgentScenario) -> None:
    """A worker SIGSTOPped right before its tool acts: the attempt times out, the call is ``unknown``,
    the operator decides ``rerun`` and another worker runs the tool. Then the stopped worker resumes
    (SIGCONT): its attempt is stale and must not act, so the tool ran exactly once."""
    s = scenario
    first = s.worker(env={"AGENTFSM_TEMPORAL_STOP": "before-tool"})
    s.start()
    until(lambda: stopped(first.pid), 60, "the worker stopping right before the tool")
    s.worker()
    [pending] = until(s.pending, 120, "the unknown effect's decision")
    assert pending["kind"] == "unknown-effect" and s.runs() == 0
    s.decide(pending["id"], "rerun")
    tool, _ = ended(s)
    assert s.runs() == 1 and tool["status"] == "completed" and tool["attempts"] == 2
    first.send_signal(signal.SIGCONT)
    log = s.folder / "workers.log"
    until(lambda: s.runs() > 1 or REFUSED in log.read_text(errors="replace"), 60,
          "the resumed worker acting or refusing")
    assert s.runs() == 1, "the stale attempt acted after the rerun"
    until(lambda: '"result":"refused"' in s.protocol.read_text(), 30, "the stale attempt's refusal logged")
    explained(s)
