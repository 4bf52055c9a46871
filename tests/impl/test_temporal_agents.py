"""The bundled agents on Temporal (`agentfsm temporal start TABLE --agent-script FILE`): the table's
own agent, its scripted model and its real tools run in activities of a real worker process, and
the run ends as the same script ends in memory (`agentfsm run`): the same final state, the same
files in the work directory, and the same effects, each run once, as the durable run on SQLite
journals them (tests/impl/test_durable_agents.py holds that one to the in-memory run)."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, run_cli
from temporal_support import AGENTFSM, queue, worker_process

EXAMPLES = ROOT / "examples"
AGENTS = [("loom-agent", "loom-demo.yaml"), ("explorer-evaluator", "explorer-evaluator-agent.yaml"),
          ("tool-call", "tool-call-durable.yaml"), ("vibework-agent", "vibework-agent-agent.yaml")]
SLACK = {"vibework-agent-agent.yaml": ("interrupt_after: 0.3", "interrupt_after: 2")}
"""The vibework demo interrupts 0.3 s after its last input, while the permission it asks for waits
(5 s): on Temporal that input's model call is an activity scheduled after the input's own, so on a
loaded machine 0.3 s can fall before the request; both runs get 2 s instead."""


@pytest.fixture(scope="module")
def agent_worker(temporal_address: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """One worker process serving every agent run of this module: (address, task queue)."""
    task_queue = queue()
    log = tmp_path_factory.mktemp("worker") / "worker.log"
    proc = worker_process(temporal_address, task_queue, log=log)
    try:
        yield temporal_address, task_queue
    finally:
        proc.terminate()
        proc.wait(30)


def agentfsm(*argv: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(AGENTFSM), *argv], capture_output=True, text=True, cwd=cwd, timeout=240,
                          env={**os.environ, **(env or {})})


def fresh(where: Path) -> Path:
    shutil.copytree(EXAMPLES / "demo-workdir", where / "w")
    return where


def files(workdir: Path) -> dict[str, str]:
    return {p.relative_to(workdir).as_posix(): p.read_text(errors="replace") for p in sorted(workdir.rglob("*"))
            if p.is_file()}


def effects(found: list[dict[str, Any]]) -> Counter[tuple[str, str, str]]:
    return Counter((e["action"], e.get("tool") or "", e["status"]) for e in found)


def final_state(out: str) -> str:
    done = [json.loads(line)["text"] for line in out.splitlines() if '"kind": "done"' in line]
    return str(done[-1]).split("final state ")[1].split(",")[0]


def played(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """``agentfsm ARGV`` in this process (cheaper than a process of its own); its output."""
    code, out, err = run_cli(argv, capsys)
    assert code == 0, out + err
    return out


def ended(address: str, run_id: str) -> dict[str, Any]:
    """A completed run's result (its configuration, effects, journal; an agent's units)."""
    from agentfsm.impl.temporal.worker import connect

    async def main() -> dict[str, Any]:
        result: dict[str, Any] = await (await connect(address)).get_workflow_handle(run_id).result()
        return result
    return asyncio.run(main())


def results(out: str) -> list[str]:
    """An explorer's or tool-call runner's results (``task N: STATE: ANSWER``), without the unit's name."""
    return [json.loads(line)["text"].split(": ", 1)[1] for line in out.splitlines() if '"kind": "result"' in line]


@pytest.mark.parametrize(("machine", "demo"), AGENTS, ids=[m for m, _ in AGENTS])
def test_an_agent_on_temporal_ends_as_in_memory(machine: str, demo: str, agent_worker: tuple[str, str],
                                                tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    address, task_queue = agent_worker
    table, script = str(ROOT / "spec" / f"{machine}.yaml"), str(EXAMPLES / demo)
    if demo in SLACK:
        script = str(tmp_path / demo)
        Path(script).write_text((EXAMPLES / demo).read_text().replace(*SLACK[demo]))
    memory = played(["run", table, "--script", script, "--workdir", str(fresh(tmp_path / "memory") / "w"), "--json"],
                    capsys)
    db = str(tmp_path / "j.db")
    played(["run", table, "--script", script, "--workdir", str(fresh(tmp_path / "durable") / "w"), "--store", db],
           capsys)
    journal = json.loads(played(["journal", db, "--json"], capsys))["runs"]
    run_id = f"{machine}-{task_queue}"
    started = agentfsm("temporal", "start", table, "--agent-script", script, "--workdir", "w", "--address", address,
                       "--task-queue", task_queue, "--run-id", run_id, "--wait", "--timeout", "60",
                       cwd=fresh(tmp_path / "temporal"))
    assert started.returncode == 0, started.stdout + started.stderr
    config = ended(address, run_id)
    units = config.get("units")
    if units is None:   # one run: it ends in the in-memory run's final state
        assert config["state"] == final_state(memory)
        found = config["effects"]
    else:   # a run per task or call (a child workflow each): each ends with the in-memory result
        assert [f"{u['state']}: {u['outcome']['answer']}" for u in units] == results(memory)
        found = [e for u in units for e in u["effects"]]
    assert files(tmp_path / "temporal" / "w") == files(tmp_path / "memory" / "w")
    top = [e for r in journal if "/sub-agent" not in r["run_id"] for e in r["current"]["effects"]]
    assert found and effects(found) == effects(top)
    assert all(e["attempts"] == 1 for e in found), "no effect ran twice"


@pytest.mark.slow
def test_the_loom_agent_on_temporal_with_an_openai_compatible_model(agent_worker: tuple[str, str],
                                                                    tmp_path: Path) -> None:
    """`--openai URL --model NAME`: the worker's activities call the model (a third-party mock server),
    each request once, and the run ends as the same conversation in memory ends."""
    from test_llm_mock_server import always, mock_server, no_tool_result, tool_reply

    address, task_queue = agent_worker
    requests: list[int] = []

    def setup(server: Any) -> None:
        def counted(request: Any) -> bool:
            requests.append(1)
            return no_tool_result(request)
        server.when(counted).reply(tool_reply("read_file", path="notes.txt"))
        server.when(always).reply("The notes are about state machines.")
    script = tmp_path / "script.yaml"
    script.write_text("settings: {retry_base: 0.01, commit_hook: false}\ninputs: [\"what is in notes.txt?\"]\n")
    table = str(ROOT / "spec" / "loom-agent.yaml")
    with mock_server(setup) as url:
        memory = agentfsm("run", table, "--script", str(script), "--workdir", "w", "--json", "--openai", url,
                          "--model", "mock-model", cwd=fresh(tmp_path / "memory"), env={"OPENAI_API_KEY": "sk-t"})
        in_memory = len(requests)
        run_id = f"openai-{task_queue}"
        started = agentfsm("temporal", "start", table, "--agent-script", str(script), "--workdir", "w",
                           "--openai", url, "--model", "mock-model", "--address", address, "--task-queue",
                           task_queue, "--run-id", run_id, "--wait", "--timeout", "60",
                           cwd=fresh(tmp_path / "temporal"))
    assert memory.returncode == 0 and started.returncode == 0, memory.stdout + started.stdout + started.stderr
    config = ended(address, run_id)
    assert config["state"] == final_state(memory.stdout)
    assert effects(config["effects"]) == Counter({("SendLlmRequest", "", "completed"): 2,
                                                  ("ExecuteTools", "read_file", "completed"): 1})
    assert in_memory == 2 and len(requests) == 4, "each model call was sent once, in memory as on Temporal"


SLOW_SUB_AGENT = """allow: [spawn_agent]
inputs:
  - text: Ask a sub-agent.
    interrupt_after: 3
replies:
  - - {tool_call: {name: spawn_agent, arguments: {task: Take your time.}}}
  - - {delay: 10}
    - {text: "too late"}
"""


def test_an_interrupt_of_the_parent_reaches_its_sub_agents_child_workflow(
        agent_worker: tuple[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The parent waits on its sub-agent's child workflow; the user's interrupt is journaled by the
    parent and reaches the child, which stops its model call; both end as in memory."""
    address, task_queue = agent_worker
    script = tmp_path / "slow.yaml"
    script.write_text(SLOW_SUB_AGENT)
    table = str(ROOT / "spec" / "vibework-agent.yaml")
    memory = played(["run", table, "--script", str(script), "--workdir", str(fresh(tmp_path / "m") / "w"), "--json"],
                    capsys)
    run_id = f"parent-{task_queue}"
    started = agentfsm("temporal", "start", table, "--agent-script", str(script), "--workdir", "w", "--address",
                       address, "--task-queue", task_queue, "--run-id", run_id, "--wait", "--timeout", "60",
                       cwd=fresh(tmp_path / "t"))
    assert started.returncode == 0, started.stdout + started.stderr
    parent = ended(address, run_id)
    [spawn] = [e for e in parent["effects"] if e.get("tool") == "spawn_agent"]
    child = ended(address, spawn["key"] + "/sub-agent")
    events = [[r["body"].get("event") for r in run["records"] if r["kind"] == "step"] for run in (parent, child)]
    assert "SubAgentSpawned" in events[0] and "Interrupt" in events[0], events[0]
    assert events[1][0] == "UserInput" and "Interrupt" in events[1], "the interrupt reached the child workflow"
    assert [e["status"] for e in child["effects"] if e["action"] == "CallLlm"] == ["failed"]
    assert parent["state"] == final_state(memory)
    replayed(address, run_id, spawn["key"] + "/sub-agent")


def replayed(address: str, *run_ids: str) -> None:
    """Temporal's replayer carries the runs' recorded histories through this code without a
    nondeterminism error (timers, a child workflow, signals, cancelled activities). In debug mode: the
    first task compiles the table, which on a loaded machine can outlast the deadlock detector."""
    from agentfsm.impl.temporal.worker import connect, runner
    from agentfsm.impl.temporal.workflow import TableWorkflow
    from temporalio.worker import Replayer

    async def main() -> None:
        client = await connect(address)
        for run_id in run_ids:
            replayer = Replayer(workflows=[TableWorkflow], workflow_runner=runner(), debug_mode=True)
            await replayer.replay_workflow(await client.get_workflow_handle(run_id).fetch_history())
    asyncio.run(main())


COUNTING = """settings: {commit_hook: false}
inputs: ["Count once."]
replies:
  - - {tool_call: {name: run_command, arguments: {argv: [sh, -c, "echo ran >> count.txt"]}}}
  - "Counted."
"""


@pytest.mark.slow
def test_an_agents_tool_whose_worker_died_is_unknown_until_the_operator_decides(
        temporal_address: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The worker dies right before the agent runs a non-idempotent tool: the effect is unknown (the
    Loom agent's tools have no status query), nothing re-runs it; the operator's ``rerun`` runs it
    exactly once, and the turn ends."""
    from temporal_support import until

    task_queue = queue()
    script = tmp_path / "count.yaml"
    script.write_text(COUNTING)
    fresh(tmp_path)
    log = tmp_path / "workers.log"
    doomed = worker_process(temporal_address, task_queue, "--sticky-timeout", "1",
                            env={"AGENTFSM_TEMPORAL_KILL": "before-tool"}, log=log)
    run_id = f"killed-{task_queue}"
    start = subprocess.Popen([str(AGENTFSM), "temporal", "start", str(ROOT / "spec" / "loom-agent.yaml"),
                              "--agent-script", str(script), "--workdir", "w", "--address", temporal_address,
                              "--task-queue", task_queue, "--run-id", run_id, "--wait", "--heartbeat", "1",
                              "--timeout", "30"], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
    survivor = None
    try:
        assert doomed.wait(120) == -9, "the worker killed itself before the tool"
        survivor = worker_process(temporal_address, task_queue, "--sticky-timeout", "1", log=log)

        def decision() -> str:
            code, out, _ = run_cli(["temporal", "trace", run_id, "--json", "--address", temporal_address], capsys)
            pending = json.loads(out)["pending"] if code == 0 else []
            return str(pending[0]["id"]) if pending else ""
        key = until(decision, 120, "the operator's decision")
        assert not (tmp_path / "w" / "count.txt").exists(), "nothing ran the tool again by itself"
        code, _, err = run_cli(["temporal", "decide", run_id, f"{key}=rerun", "--address", temporal_address], capsys)
        assert code == 0, err
        out, err = start.communicate(timeout=120)
        assert start.returncode == 0, out + err
    finally:
        for proc in (doomed, survivor, start):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(30)
    assert (tmp_path / "w" / "count.txt").read_text() == "ran\n", "exactly once after rerun"
    config = ended(temporal_address, run_id)
    assert config["state"] == "ShuttingDown"
    [tool] = [e for e in config["effects"] if e["action"] == "ExecuteTools"]
    assert tool["status"] == "completed" and tool["attempts"] == 2


def test_an_open_agent_run_takes_more_input(agent_worker: tuple[str, str], tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """``--open``: after its script the run waits; ``send RUN input --param text=...`` is the user's next
    turn, any other event is refused with a note."""
    from temporal_support import until

    address, task_queue = agent_worker
    script = tmp_path / "open.yaml"
    script.write_text("settings: {commit_hook: false}\ninputs: [hi]\nreplies: [hello, again]\n")
    fresh(tmp_path)
    run_id = f"open-{task_queue}"
    started = agentfsm("temporal", "start", str(ROOT / "spec" / "loom-agent.yaml"), "--agent-script", str(script),
                       "--workdir", "w", "--open", "--address", address, "--task-queue", task_queue, "--run-id",
                       run_id, cwd=tmp_path)
    assert started.returncode == 0, started.stderr
    for argv in (["input", "--param", "text=more"], ["ShutdownRequested"]):
        played(["temporal", "send", run_id, *argv, "--address", address], capsys)

    def config() -> dict[str, Any]:
        found: dict[str, Any] = json.loads(played(["temporal", "trace", run_id, "--json", "--address", address],
                                                  capsys))["config"]
        return found if found.get("notes") else {}
    seen = until(config, 120, "the refused event's note")
    assert seen["state"] == "WaitingForUserInput" and "ShutdownRequested refused" in seen["notes"][0]
    inputs = [r["body"]["payload"] for r in json.loads(played(["temporal", "trace", run_id, "--json", "--address",
                                                               address], capsys))["records"]
              if r["kind"] == "step" and r["body"]["event"] == "UserInput"]
    assert inputs == ["hi", "more"]
    asyncio.run(terminate(address, run_id))


async def terminate(address: str, run_id: str) -> None:
    from agentfsm.impl.temporal.worker import connect
    await (await connect(address)).get_workflow_handle(run_id).terminate("the test is over")
