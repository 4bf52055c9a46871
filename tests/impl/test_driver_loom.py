"""The async Loom driver end to end with the scripted LLM, real tools and a real git hook."""

from __future__ import annotations

import asyncio
import logging
import subprocess
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pytest
from agentfsm.impl.agents.loom import INTERRUPTED, LoomAgent, LoomConfig, Transcript
from agentfsm.impl.driver import StateChange
from agentfsm.impl.llm.client import Call, Fail, ReplyStep, Say, ScriptedLlm, Wait
from agentfsm.spec import Table

T = TypeVar("T")
FAST = {"retry_base": 0.001, "retry_max": 0.01}


def run(coro: Awaitable[T]) -> T:
    async def bounded() -> T:
        async with asyncio.timeout(20):
            return await coro
    return asyncio.run(bounded())


def make(loom: Table, replies: Sequence[Sequence[ReplyStep]], workdir: Path,
         **config: Any) -> tuple[LoomAgent, ScriptedLlm, Transcript]:
    llm, display = ScriptedLlm(replies), Transcript()
    agent = LoomAgent(loom, llm, config=LoomConfig(workdir=workdir, **{**FAST, **config}), display=display)
    return agent, llm, display


async def turn(agent: LoomAgent, text: str) -> None:
    agent.send_input(text)
    await agent.wait_idle()


def states(agent: LoomAgent) -> list[str]:
    return [change.state for change in agent.history]


def test_completes_full_conversation_cycle(loom: Table, tmp_path: Path) -> None:
    agent, llm, display = make(loom, [[Say("hello there")]], tmp_path)

    async def main() -> None:
        async with agent:
            assert agent.is_idle() and not agent.is_processing()
            await turn(agent, "hi")
        assert agent.is_done()
    run(main())
    assert states(agent) == ["CallingLlm", "CallingLlm", "CallingLlm", "WaitingForUserInput", "ShuttingDown"]
    assert "".join(display.texts) == "hello there"
    assert agent.conversation == [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello there"}]
    assert llm.requests[0].messages == ({"role": "user", "content": "hi"},)
    assert {t["function"]["name"] for t in llm.requests[0].tools} >= {"read_file", "list_dir", "run_command"}


def test_tools_run_concurrently_and_the_hook_commits_to_git(loom: Table, tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "a.txt").write_text("alpha\n")
    replies: list[list[ReplyStep]] = [
        [Call("write_file", {"path": "b.txt", "content": "beta\n"}),
         Call("run_command", {"argv": ["sh", "-c", "sleep 0.2; cat a.txt"]})],
        [Say("done")]]
    agent, llm, display = make(loom, replies, tmp_path)

    async def main() -> None:
        async with agent:
            await turn(agent, "work")
    run(main())
    assert [c.state for c in agent.history if c.event in ("LlmCompleted", "ToolCompleted", "PostToolsHookCompleted")
            ] == ["ExecutingTools", "ExecutingTools", "PostToolsHook", "CallingLlm", "WaitingForUserInput"]
    hook = next(c for c in agent.history if c.event == "PostToolsHookCompleted")
    assert hook.params == {"action_taken": True}
    log = subprocess.run(["git", "-C", str(tmp_path), "log", "--format=%s", "--name-only"], capture_output=True,
                         text=True, check=True).stdout
    assert "agent: changes by run_command, write_file" in log and "b.txt" in log
    # write_file finished first although it was called first with the slower command beside it
    assert [r.name for r in display.tools] == ["write_file", "run_command"]
    second = llm.requests[1].messages
    assert [m["role"] for m in second] == ["user", "assistant", "tool", "tool"]
    assert "exit status 0\nalpha" in second[-1]["content"]


def test_retries_back_off_then_give_up(loom: Table, tmp_path: Path) -> None:
    replies: list[list[ReplyStep]] = [[Fail(f"503 attempt {i}")] for i in range(4)]
    agent, llm, display = make(loom, replies, tmp_path, retry_base=0.01, retry_factor=2.0, retry_max=1.0)
    assert [agent.config.backoff(n) for n in (1, 2, 3)] == [0.01, 0.02, 0.04]

    async def main() -> float:
        async with agent:
            start = asyncio.get_running_loop().time()
            await turn(agent, "hi")
            return asyncio.get_running_loop().time() - start
    elapsed = run(main())
    assert elapsed >= 0.07
    assert len(llm.requests) == 4
    assert states(agent).count("Error") == 3
    assert agent.history[-2].state == "WaitingForUserInput" and agent.history[-2].actions == ("DisplayError",)
    assert display.errors == ["503 attempt 3"]


def test_interrupt_while_streaming_keeps_partial_text_and_drops_tool_calls(loom: Table, tmp_path: Path) -> None:
    replies: list[list[ReplyStep]] = [[Say("partial answer"), Wait(5), Call("list_dir", {}), Say("never")],
                                      [Say("next")]]
    agent, llm, _ = make(loom, replies, tmp_path)

    async def main() -> None:
        async with agent:
            agent.send_input("go")
            await agent.wait_until(lambda: len(agent.history) >= 3)
            assert agent.is_processing()
            await agent.interrupt()
            await agent.wait_idle()
            assert agent.state() == "WaitingForUserInput"
            await turn(agent, "again")
    run(main())
    assert agent.conversation[:3] == [{"role": "user", "content": "go"},
                                      {"role": "assistant", "content": "partial answer"},
                                      {"role": "user", "content": "again"}]
    assert not any(c.event == "ToolCompleted" for c in agent.history)
    assert len(llm.requests) == 2 and agent.engine.anomalies == ()


def test_interrupt_while_tools_run_lets_the_current_one_finish(loom: Table, tmp_path: Path) -> None:
    replies: list[list[ReplyStep]] = [[Call("run_command", {"argv": ["sleep", "0.3"]}),
                                       Call("read_file", {"path": "missing.txt"})]]
    agent, llm, display = make(loom, replies, tmp_path, tool_concurrency=1, commit_hook=False)

    async def main() -> None:
        async with agent:
            agent.send_input("go")
            await agent.wait_until(lambda: agent.state() == "ExecutingTools")
            await agent.interrupt()
            await agent.wait_idle()
    run(main())
    assert [(r.name, r.is_error, r.content.split("\n")[0]) for r in display.tools] == [
        ("run_command", False, "exit status 0"), ("read_file", True, INTERRUPTED)]
    assert len(llm.requests) == 1, "an interrupted turn does not call the model again"
    assert agent.history[-2].state == "WaitingForUserInput"


def test_interrupt_abandons_a_pending_retry(loom: Table, tmp_path: Path) -> None:
    agent, llm, _ = make(loom, [[Fail("overloaded")]], tmp_path, retry_base=5.0)

    async def main() -> None:
        async with agent:
            agent.send_input("go")
            await agent.wait_until(lambda: agent.state() == "Error")
            await agent.interrupt()
            await agent.wait_idle()
    run(main())
    assert len(llm.requests) == 1
    assert [c.state for c in agent.history][-3:] == ["CallingLlm", "WaitingForUserInput", "ShuttingDown"]


@pytest.mark.parametrize("where", ["WaitingForUserInput", "CallingLlm", "ExecutingTools", "PostToolsHook", "Error"])
def test_shutdown_succeeds_from_any_state(loom: Table, tmp_path: Path, where: str) -> None:
    scripts: dict[str, list[list[ReplyStep]]] = {
        "WaitingForUserInput": [],
        "CallingLlm": [[Say("slow"), Wait(30)]],
        "ExecutingTools": [[Call("run_command", {"argv": ["sleep", "30"]})]],
        "PostToolsHook": [[Call("write_file", {"path": "x", "content": "x"})]],
        "Error": [[Fail("boom")]],
    }
    replies = scripts[where]

    async def slow_hook(workdir: Path, results: Sequence[Any]) -> bool:
        await asyncio.sleep(30)
        return False
    llm = ScriptedLlm(replies)
    agent = LoomAgent(loom, llm, config=LoomConfig(workdir=tmp_path, retry_base=30), post_tools_hook=slow_hook)

    async def main() -> float:
        async with agent:
            if where != "WaitingForUserInput":
                agent.send_input("go")
            await agent.wait_until(lambda: agent.state() == where)
            start = asyncio.get_running_loop().time()
            await agent.shutdown()
            return asyncio.get_running_loop().time() - start
    elapsed = run(main())
    assert agent.is_done() and agent.state() == "ShuttingDown"
    assert agent.history[-1].actions == ("Shutdown",) and agent.history[-1].previous == where
    assert elapsed < 5 and not agent.running()


def test_subscribe_and_structured_logs(loom: Table, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    agent, _, _ = make(loom, [[Say("ok")]], tmp_path)
    seen: list[StateChange] = []

    async def main() -> None:
        async with agent:
            subscription = agent.subscribe()

            async def consume() -> None:
                async for change in subscription:
                    seen.append(change)
            consumer = asyncio.create_task(consume())
            await turn(agent, "hi")
        await consumer
    with caplog.at_level(logging.INFO, logger="agentfsm.driver"):
        run(main())
    assert [c.state for c in seen] == states(agent) and seen[-1].state == "ShuttingDown"
    records = [r for r in caplog.records if hasattr(r, "to_state")]
    assert len(records) == len(seen)
    first: Any = records[0]
    assert (first.machine, first.event, first.from_state, first.to_state, first.actions) == (
        "loom-agent", "UserInput", "WaitingForUserInput", "CallingLlm", ["SendLlmRequest"])


def test_rejected_events_are_logged_as_warnings_and_recorded(loom: Table, tmp_path: Path,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    agent, _, _ = make(loom, [], tmp_path)

    async def main() -> None:
        async with agent:
            agent.feed("RetryTimeoutFired")
            await agent.wait_until(lambda: len(agent.history) == 1)
            with pytest.raises(ValueError, match="no event"):
                agent.feed("Nope")
            with pytest.raises(ValueError, match="tool_calls"):
                agent.feed("LlmCompleted", tool_calls=7)
    with caplog.at_level(logging.WARNING, logger="agentfsm.driver"):
        run(main())
    assert agent.history[0].status == "rejected" and len(agent.engine.anomalies) == 1
    assert any(r.levelno == logging.WARNING and getattr(r, "status", None) == "rejected" for r in caplog.records)


def test_extra_tool_calls_beyond_the_table_bound_get_an_error(loom: Table, tmp_path: Path) -> None:
    calls: list[ReplyStep] = [Call("list_dir", {}) for _ in range(3)]
    agent, llm, display = make(loom, [calls, [Say("ok")]], tmp_path)

    async def main() -> None:
        async with agent:
            await turn(agent, "go")
    run(main())
    assert next(c for c in agent.history if c.event == "LlmCompleted").params == {"tool_calls": 2}
    assert sum(r.is_error for r in display.tools) == 1 and len(display.tools) == 3
    assert [m["role"] for m in llm.requests[1].messages].count("tool") == 3


def test_a_failing_activity_shuts_the_agent_down(loom: Table, tmp_path: Path) -> None:
    async def broken_hook(workdir: Path, results: Sequence[Any]) -> bool:
        raise RuntimeError("hook bug")
    agent = LoomAgent(loom, ScriptedLlm([[Call("write_file", {"path": "x", "content": "x"})]]),
                      config=LoomConfig(workdir=tmp_path), post_tools_hook=broken_hook)

    async def main() -> None:
        async with agent:
            agent.send_input("go")
            await agent.wait_done()
    run(main())
    assert agent.state() == "ShuttingDown" and isinstance(agent.failures[0], RuntimeError)


def test_driver_rejects_handlers_for_names_the_table_lacks(loom: Table) -> None:
    from agentfsm.impl.driver import Driver
    from agentfsm.impl.engine import Engine
    noop: Callable[[Any], None] = lambda ctx: None  # noqa: E731
    with pytest.raises(ValueError, match="no action named 'Fly'"):
        Driver(Engine(loom), actions={"Fly": noop})
    with pytest.raises(ValueError, match="no state named 'Nowhere'"):
        Driver(Engine(loom), on_enter={"Nowhere": noop})
