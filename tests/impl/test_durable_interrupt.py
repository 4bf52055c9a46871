"""Issue 13, defect 2: an interrupt is a journaled fact of a durable Loom run.

The crash is the store's durable contents at a moment (``MemoryStore.clone()``), taken once
the interrupt was handled; the resumed agent must neither run a tool the user interrupted
(the one still waiting its turn, nor the one in flight whose outcome the crash lost) nor
call the model for the interrupted turn.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
from pathlib import Path

from agentfsm.impl.agents.loom import INTERRUPTED, LoomAgent, LoomConfig, Transcript
from agentfsm.impl.agents.tools import Toolbox
from agentfsm.impl.durable.driver import DurableLink
from agentfsm.impl.durable.state import RunState
from agentfsm.impl.llm.client import Call, ReplyStep, Say, ScriptedLlm, Wait
from agentfsm.impl.stores.journal import INTERRUPT
from agentfsm.impl.stores.memory import MemoryStore
from agentfsm.spec import Table
from test_driver_loom import run
from test_durable_agent import Blocking, kinds
from test_durable_agents import AGENTFSM, agentfsm, fresh, lines, outcome

REPLIES: list[list[ReplyStep]] = [[Call("probe", {}), Call("poke", {})], [Say("the interrupted turn goes on")],
                                  [Say("second turn")]]


def agent_for(loom: Table, workdir: Path, toolbox: Toolbox) -> LoomAgent:
    config = LoomConfig(workdir=workdir, retry_base=0.001, retry_max=0.01, commit_hook=False, tool_concurrency=1)
    return LoomAgent(loom, ScriptedLlm(REPLIES), config=config, toolbox=toolbox,
                     display=Transcript())


def interrupted_then_crashed(loom: Table, tmp_path: Path, world: Blocking) -> MemoryStore:
    """probe runs (poke waits its turn: one tool at a time), the user interrupts, the process dies."""
    first = agent_for(loom, tmp_path, world.toolbox(tmp_path))
    store = MemoryStore()
    DurableLink.create(first, first, store, "r")

    async def main() -> MemoryStore:
        async with first:
            first.send_input("go", event_id="input-1")
            while kinds(store).count("started") < 2:  # the request, then probe
                await asyncio.sleep(0.001)
            await first.interrupt()
            crashed = store.clone()
            first.cancel_all()
        return crashed
    crashed = run(main())
    assert world.ran == {"probe": 1}
    return crashed


def resumed_state(agent: LoomAgent, link: DurableLink) -> str:
    """Resume the recovered run and let it settle: the state it rests in."""
    async def resume() -> str:
        async with agent:
            link.resume()
            await agent.wait_idle()
            return agent.state()
    return run(resume())


def test_a_resume_after_an_interrupt_runs_no_interrupted_tool_and_never_calls_the_model(
        loom: Table, tmp_path: Path) -> None:
    world = Blocking()
    crashed = interrupted_then_crashed(loom, tmp_path, world)
    assert kinds(crashed)[-1] == INTERRUPT, "the interrupt is durable before it takes effect"

    world.release.set()
    second = agent_for(loom, tmp_path, world.toolbox(tmp_path))
    assert isinstance(second.llm, ScriptedLlm)
    second.llm.skip(1)
    link = DurableLink.open(second, second, crashed, "r", resume=True)
    assert link.run.decisions() == [], "the user already said stop: nothing to decide"
    assert resumed_state(second, link) == "WaitingForUserInput" and not second.failures
    assert world.ran == {"probe": 1}, "neither the tool in flight nor the waiting one ran again"
    assert second.llm.requests == [], "the model was not called for the interrupted turn"
    assert isinstance(second.display, Transcript)
    results = {r.name: (r.is_error, r.content) for r in second.display.tools}
    assert results["poke"] == (True, INTERRUPTED), "answered as live: it never started"
    assert results["probe"][0] and "whether it completed is unknown" in results["probe"][1]
    effects = {e.tool: e for e in link.run.st.effects.values() if e.action == "ExecuteTools"}
    assert {e.status for e in effects.values()} == {"failed"} and {e.via for e in effects.values()} == {"interrupt"}


def test_the_next_turn_after_an_interrupted_one_calls_the_model_again(loom: Table, tmp_path: Path) -> None:
    world = Blocking()
    crashed = interrupted_then_crashed(loom, tmp_path, world)
    world.release.set()
    second = agent_for(loom, tmp_path, world.toolbox(tmp_path))
    assert isinstance(second.llm, ScriptedLlm)
    second.llm.skip(2)
    link = DurableLink.open(second, second, crashed, "r", resume=True)

    async def resume() -> None:
        async with second:
            link.resume()
            await second.wait_idle()
            second.send_input("again", event_id="input-2")
            await second.wait_idle()
    run(resume())
    assert len(second.llm.requests) == 1
    assert second.conversation[-1] == {"role": "assistant", "content": "second turn"}


def test_a_crash_right_after_an_interrupt_mid_stream_ends_the_turn_without_the_model(
        loom: Table, tmp_path: Path) -> None:
    replies: list[list[ReplyStep]] = [[Say("well it"), Wait(5), Say("goes on")], [Say("a second request")]]
    first = LoomAgent(loom, ScriptedLlm(replies), config=LoomConfig(workdir=tmp_path, commit_hook=False),
                      display=Transcript())
    store = MemoryStore()
    DurableLink.create(first, first, store, "r")

    async def main() -> MemoryStore:
        async with first:
            first.send_input("go", event_id="input-1")
            await first.wait_until(lambda: any(c.event == "TextDelta" for c in first.history))
            await first.interrupt()
            crashed = store.clone()
            first.cancel_all()
        return crashed
    crashed = run(main())
    [mark] = [r.seq for r in crashed.records("r") if r.kind == INTERRUPT]
    crashed.discard_tail("r", mark + 1)  # the process died before the interrupted stream's step was written

    second = LoomAgent(loom, ScriptedLlm(replies[1:]), config=LoomConfig(workdir=tmp_path, commit_hook=False),
                       display=Transcript())
    link = DurableLink.open(second, second, crashed, "r", resume=True)
    assert resumed_state(second, link) == "WaitingForUserInput" and not second.failures
    assert isinstance(second.llm, ScriptedLlm) and second.llm.requests == [], "the request was not sent again"
    assert second.conversation[-1] == {"role": "assistant", "content": "well it"}, "the streamed text is kept"
    [request] = [e for e in link.run.st.effects.values() if e.action == "SendLlmRequest"]
    assert (request.status, request.via, request.reported) == ("failed", "interrupt", True)


def test_a_snapshot_keeps_the_interrupt_and_an_old_snapshot_still_loads(loom: Table) -> None:
    st = RunState(0, loom.initial_vars(), version=7, interrupted=5)
    body = st.to_json(loom)
    assert RunState.from_json(loom, body).interrupted == 5
    del body["interrupted"]  # a snapshot written before interrupts were journaled
    assert RunState.from_json(loom, body).interrupted == 0


def test_the_loom_demo_killed_right_after_its_interrupt_resumes_to_the_same_end(tmp_path: Path) -> None:
    """A real process SIGKILLed at the write boundary right after the interrupt became durable."""
    reference = agentfsm("loom-agent", "--store", "j.db", "--kill-at", str(10 ** 9), cwd=fresh(tmp_path / "ref"))
    [marks] = [line["text"] for line in lines(reference.stdout) if line["kind"] == "interrupt-boundaries"]
    cwd = fresh(tmp_path / "killed")
    killed = agentfsm("loom-agent", "--store", "j.db", "--kill-at", marks.split()[0], cwd=cwd)
    assert killed.returncode == -signal.SIGKILL
    resumed = agentfsm("loom-agent", "--store", "j.db", "--resume", cwd=cwd)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert not [line for line in lines(resumed.stdout) if line["kind"] == "warning"], "each reply answered its turn"
    assert outcome(resumed.stdout)[-1] == outcome(reference.stdout)[-1]
    view = subprocess.run([AGENTFSM, "journal", "--store", "j.db", "--json"], capture_output=True, text=True, cwd=cwd,
                          timeout=60)
    records = json.loads(view.stdout)["runs"][0]["records"]
    at = next(i for i, r in enumerate(records) if r["kind"] == "interrupt")
    assert [(r["kind"], r["body"].get("via")) for r in records[at + 1:at + 4]] == [
        ("unknown", None), ("completed", "interrupt"), ("step", None)], "settled, never requested again"
