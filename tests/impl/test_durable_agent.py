"""The async Loom agent as a durable run: every step journaled, every tool call an effect.

In process over a ``MemoryStore`` (a crash is the store's durable contents at a moment,
``clone()``), and end to end with ``agentfsm run --store`` children killed by SIGKILL.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from agentfsm.impl.agents.loom import LoomAgent, LoomConfig, Transcript
from agentfsm.impl.agents.tools import Tool, Toolbox, builtin_tools
from agentfsm.impl.durable.driver import DurableLink
from agentfsm.impl.llm.client import Call, Fail, ReplyStep, Say, ScriptedLlm
from agentfsm.impl.stores.journal import Store
from agentfsm.impl.stores.memory import MemoryStore
from agentfsm.spec import Table
from test_driver_loom import run

ROOT = Path(__file__).resolve().parent.parent.parent
LOOM = str(ROOT / "spec" / "loom-agent.yaml")
AGENTFSM = str(Path(sys.executable).parent / "agentfsm")
FAST = {"retry_base": 0.001, "retry_max": 0.01, "commit_hook": False}


def agent_for(loom: Table, replies: list[list[ReplyStep]], workdir: Path,
              toolbox: Toolbox | None = None) -> LoomAgent:
    return LoomAgent(loom, ScriptedLlm(replies), config=LoomConfig(workdir=workdir, **FAST),  # type: ignore[arg-type]
                     toolbox=toolbox, display=Transcript())


def kinds(store: Store) -> list[str]:
    return [r.kind for r in store.records("r")]


def test_every_step_and_tool_call_is_journaled_and_the_context_is_rebuilt(loom: Table, tmp_path: Path) -> None:
    for name in ("plain", "durable"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "notes.txt").write_text("three notes\n")
    replies: list[list[ReplyStep]] = [
        [Say("looking"), Call("read_file", {"path": "notes.txt"}), Call("list_dir", {"path": "."})],
        [Fail("429 Too Many Requests")],
        [Call("write_file", {"path": "out.txt", "content": "x"})],
        [Say("done")]]
    plain = agent_for(loom, replies, tmp_path / "plain")
    durable = agent_for(loom, replies, tmp_path / "durable")
    store = MemoryStore()
    link = DurableLink.create(durable, durable, store, "r")

    async def main(agent: LoomAgent) -> None:
        async with agent:
            agent.send_input("go", event_id="input-1")
            await agent.wait_idle()
    run(main(plain))
    run(main(durable))
    assert durable.conversation == plain.conversation and durable.state() == "ShuttingDown"
    records = store.records("r")
    assert [r.seq for r in records] == list(range(1, len(records) + 1))
    steps = [r for r in records if r.kind == "step"]
    assert len(steps) == len(durable.history) and not durable.failures
    # one effect per tool call, keyed RUN/SEQ/CALL-ID; started durable before, completed after
    effects = link.run.st.effects
    tools = {e.tool: e for e in effects.values() if e.action == "ExecuteTools"}
    assert set(tools) == {"read_file", "list_dir", "write_file"}
    assert tools["read_file"].idempotent and not tools["write_file"].idempotent
    assert tools["read_file"].key == f"r/{tools['read_file'].seq}/call_1"
    for effect in effects.values():
        position = {r.kind: r.seq for r in records if r.body.get("key") == effect.key}
        assert position["started"] < position["completed"], effect.key
        assert effect.reported and effect.status in ("completed", "failed")
    assert Counter(e.action for e in effects.values()) == {"SendLlmRequest": 4, "ExecuteTools": 3,
                                                           "RunPostToolsHook": 1}
    # a fresh process rebuilds the conversation from the journal alone
    again = agent_for(loom, [], tmp_path)
    view = DurableLink.attach(again, again, store, "r")
    assert again.conversation == durable.conversation and again.state() == "ShuttingDown"
    assert view.run.terminal and view.run.unreported() == []


class Blocking:
    """Tools that wait for a release, counting real executions (the ledger outside the store)."""

    def __init__(self) -> None:
        self.ran: Counter[str] = Counter()
        self.release = asyncio.Event()

    def toolbox(self, workdir: Path) -> Toolbox:
        async def probe(arguments: dict[str, Any]) -> str:
            self.ran["probe"] += 1
            await self.release.wait()
            return "probed"

        async def poke(arguments: dict[str, Any]) -> str:
            self.ran["poke"] += 1
            await self.release.wait()
            return "poked"
        schema = {"type": "object", "properties": {}}
        return Toolbox([*builtin_tools(workdir), Tool("probe", "read-only", schema, probe, idempotent=True),
                        Tool("poke", "acts once", schema, poke, mutating=True)])


def test_a_crash_mid_tool_retries_the_idempotent_call_and_asks_about_the_other(loom: Table, tmp_path: Path) -> None:
    replies: list[list[ReplyStep]] = [[Call("probe", {}), Call("poke", {})], [Say("ok")]]
    world = Blocking()
    first = agent_for(loom, replies, tmp_path, world.toolbox(tmp_path))
    store = MemoryStore()
    DurableLink.create(first, first, store, "r")

    async def crash() -> MemoryStore:
        async with first:
            first.send_input("go", event_id="input-1")
            while kinds(store).count("started") < 3:  # the request, then both tools
                await asyncio.sleep(0.001)
            crashed = store.clone()   # what was durable when the process died
            first.cancel_all()
        return crashed
    crashed = run(crash())
    assert world.ran == {"probe": 1, "poke": 1}

    world.release.set()
    second = agent_for(loom, replies, tmp_path, world.toolbox(tmp_path))
    assert isinstance(second.llm, ScriptedLlm)
    second.llm.skip(1)
    link = DurableLink.open(second, second, crashed, "r", resume=True)
    [decision] = link.run.decisions()
    poke = link.run.st.effects[decision.id]
    assert (poke.tool, poke.status, decision.kind) == ("poke", "unknown", "unknown-effect")

    async def resume() -> None:
        async with second:
            link.resume()   # probe: retried with its key; poke: waits for the user
            while not any(r.kind == "completed" for r in crashed.records("r")[-2:]):
                await asyncio.sleep(0.001)
            link.decide(poke.key, "failed")
            await second.wait_idle()
    run(resume())
    assert world.ran == {"probe": 2, "poke": 1}, "the idempotent call ran again, the other never did"
    probe = next(e for e in link.run.st.effects.values() if e.tool == "probe")
    retry = [r.body for r in crashed.records("r") if r.kind == "started" and r.body["key"] == probe.key]
    assert [b["retry"] for b in retry] == [False, True] and probe.status == "completed"
    results = {m["content"] for m in second.conversation if m["role"] == "tool"}
    assert "probed" in results and any("settled it as failed" in r for r in results)
    assert second.state() == "ShuttingDown" and second.conversation[-1] == {"role": "assistant", "content": "ok"}


def agentfsm(*argv: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([AGENTFSM, "run", LOOM, *argv], capture_output=True, text=True, cwd=cwd, timeout=60)


def journal(cwd: Path) -> dict[str, Any]:
    view = subprocess.run([AGENTFSM, "journal", "--store", "j.db", "--json"], capture_output=True, text=True, cwd=cwd,
                          timeout=60)
    assert view.returncode == 0, view.stderr
    [entry] = json.loads(view.stdout)["runs"]
    assert [r["seq"] for r in entry["records"]] == list(range(1, len(entry["records"]) + 1))
    result: dict[str, Any] = entry
    return result


MID_TOOL = """workdir: work
settings: {commit_hook: false, tool_concurrency: 2}
inputs: [Run it, Again]
replies:
  - - {tool_call: {name: read_file, arguments: {path: notes.txt}}}
    - {tool_call: {name: run_command, arguments: {argv: [sh, -c, "echo ran >> ../ledger; sleep 20"]}}}
  - - {text: done}
  - - {text: second}
"""


def test_sigkill_mid_tool_then_resume_never_runs_the_tool_twice(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "notes.txt").write_text("notes\n")
    (tmp_path / "s.yaml").write_text(MID_TOOL)
    ledger = tmp_path / "ledger"
    child = subprocess.Popen([AGENTFSM, "run", LOOM, "--script", "s.yaml", "--store", "j.db"], cwd=tmp_path,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.monotonic() + 30
    while not ledger.exists() and time.monotonic() < deadline and child.poll() is None:
        time.sleep(0.02)
    # The two calls run concurrently: wait (under any load) until read_file's result is durable,
    # so that the kill lands while only run_command is in flight.
    while time.monotonic() < deadline and child.poll() is None and not any(
            e["tool"] == "read_file" and e["status"] == "completed" for e in journal(tmp_path)["current"]["effects"]):
        time.sleep(0.05)
    os.killpg(child.pid, signal.SIGKILL)  # the agent and the command it runs
    assert child.wait(10) == -signal.SIGKILL and ledger.read_text() == "ran\n"
    before = journal(tmp_path)["records"]

    resumed = agentfsm("--script", "s.yaml", "--store", "j.db", "--resume", cwd=tmp_path)
    assert resumed.returncode == 1, resumed.stdout + resumed.stderr
    after = journal(tmp_path)
    assert after["records"][:len(before)] == before, "recovery only appends"
    [decision] = after["decisions"]
    effect = next(e for e in after["current"]["effects"] if e["key"] == decision["id"])
    assert (effect["tool"], effect["status"]) == ("run_command", "unknown")
    assert f"decision: unknown-effect {decision['id']}: run_command" in resumed.stdout
    read = next(e for e in after["current"]["effects"] if e["tool"] == "read_file")
    assert read["status"] == "completed" and read["attempts"] == 1, "a completed result is reused, not re-run"

    decided = agentfsm("--script", "s.yaml", "--store", "j.db", "--resume", "--decide", f"{decision['id']}=failed",
                       cwd=tmp_path)
    assert decided.returncode == 0, decided.stdout + decided.stderr
    assert "user: Again" in decided.stdout and "user: Run it" not in decided.stdout
    assert ledger.read_text() == "ran\n", "the command never ran again"
    final = journal(tmp_path)
    assert final["current"]["state"] == "ShuttingDown" and final["decisions"] == []
    assert [r["kind"] for r in final["records"]].count("decided") == 1
    ended = agentfsm("--script", "s.yaml", "--store", "j.db", "--resume", cwd=tmp_path)
    assert ended.returncode == 0 and "nothing to do" in ended.stdout
    assert journal(tmp_path)["records"] == final["records"], "a terminal run is not re-executed"


def test_sigkill_mid_stream_retries_the_idempotent_request_with_its_key(tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_text("inputs: [hi]\nreplies: [[{text: hello there}]]\n")
    # boundaries: created 1-2, step UserInput 3-4, started SendLlmRequest 5-6: killed after it
    killed = agentfsm("--script", "s.yaml", "--store", "j.db", "--kill-at", "6", cwd=tmp_path)
    assert killed.returncode == -signal.SIGKILL
    resumed = agentfsm("--script", "s.yaml", "--store", "j.db", "--resume", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    records = journal(tmp_path)["records"]
    assert [r["kind"] for r in records[:5]] == ["created", "step", "started", "unknown", "started"]
    assert records[4]["body"] == {"key": "run/2/0", "attempt": 2, "retry": True}
    completed = next(r["body"] for r in records if r["kind"] == "completed")
    assert completed["result"]["response"]["text"] == "hello there"
    assert "user: hi" not in resumed.stdout, "the journaled input is not sent again"
