"""The Loom agent's error origins (seed 000: "The `origin` field (`Llm`, `Tool`, or `Io`)
determines retry strategy"), from real failures: a tool call that could not be executed
(a process that could not be spawned, an idempotent tool's I/O error) is retried alone; a
post-tools hook that git refused (a held index.lock) is run again; both bounded, with
backoff, in memory and durably alike, and a resumed run retries what its journal says.
"""

from __future__ import annotations

import asyncio
import errno
import json
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from agentfsm.impl.agents.loom import LoomAgent, LoomConfig, Transcript
from agentfsm.impl.agents.tools import Tool, Toolbox, ToolUnavailable, builtin_tools
from agentfsm.impl.driver import StateChange
from agentfsm.impl.durable.driver import DurableLink
from agentfsm.impl.llm.client import Call, ReplyStep, Say, ScriptedLlm, ToolCall
from agentfsm.impl.stores.memory import MemoryStore
from agentfsm.impl.stores.sqlite import SqliteStore
from agentfsm.spec import Table
from conftest import ROOT, run_cli
from test_driver_loom import run

FAST = {"retry_base": 0.001, "retry_max": 0.01}
SPEC = ROOT / "spec"


class Flaky:
    """An idempotent tool whose first ``failures`` runs hit an I/O error, counting its runs."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.ran: Counter[str] = Counter()

    def toolbox(self, workdir: Path) -> Toolbox:
        async def fetch(arguments: dict[str, Any]) -> str:
            self.ran["fetch"] += 1
            if self.failures:
                self.failures -= 1
                raise OSError(errno.EIO, "Input/output error")
            return "fetched"
        return Toolbox([*builtin_tools(workdir), Tool("fetch", "reads a resource", {"type": "object"}, fetch,
                                                      idempotent=True)])


@dataclass
class Waits(LoomConfig):
    """The real backoff schedule, recorded instead of slept."""

    waits: list[float] = field(default_factory=list)

    def backoff(self, attempt: int, retry_after: float | None = None) -> float:
        self.waits.append(super().backoff(attempt, retry_after))
        return 0.0


def agent_for(loom: Table, replies: list[list[ReplyStep]], workdir: Path, toolbox: Toolbox | None = None,
              **config: Any) -> LoomAgent:
    return LoomAgent(loom, ScriptedLlm(replies), config=LoomConfig(workdir=workdir, **{**FAST, **config}),
                     toolbox=toolbox, display=Transcript())


async def one_turn(agent: LoomAgent, text: str = "go") -> None:
    async with agent:
        agent.send_input(text, event_id="input-1")
        await agent.wait_idle()


def steps(agent: LoomAgent) -> list[tuple[str, str]]:
    return [(change.event, change.state) for change in agent.history if change.accepted]


def origins(loom: Table, agent: LoomAgent) -> list[str]:
    names = {loom.constants[n]: n for n in ("Llm", "Tool", "Io")}
    return [names[change.vars["origin"]] for change in agent.history if change.state == "Error"]


def tool_messages(agent: LoomAgent) -> list[str]:
    return [str(m["content"]) for m in agent.conversation if m["role"] == "tool"]


def git_repo(path: Path) -> Path:
    path.mkdir()
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    return path


def release_lock_on_hook_failure(agent: LoomAgent, lock: Path, times: int = 1) -> None:
    """Another process holds git's index lock until the hook has failed ``times`` times."""
    seen = Counter[str]()

    def listener(change: StateChange) -> None:
        if change.event == "PostToolsHookFailed":
            seen["failed"] += 1
            if seen["failed"] == times:
                lock.unlink()
    agent.add_listener(listener)


def test_an_idempotent_tools_io_error_is_retried_alone_and_its_own_errors_go_to_the_model(
        loom: Table, tmp_path: Path) -> None:
    world = Flaky(failures=1)
    replies: list[list[ReplyStep]] = [[Call("fetch", {}, "c0"), Call("read_file", {"path": "missing.txt"}, "c1")],
                                      [Say("done")]]
    agent = agent_for(loom, replies, tmp_path, world.toolbox(tmp_path))
    run(one_turn(agent))
    assert world.ran == {"fetch": 2}
    assert ("ToolExecutionFailed", "ExecutingTools") in steps(agent) and origins(loom, agent) == ["Tool"]
    retry = next(c for c in agent.history if c.event == "RetryTimeoutFired")
    assert (retry.state, retry.actions, retry.vars["pending"]) == ("ExecutingTools", ("ExecuteTools",), 1)
    completed = [c for c in agent.history if c.event == "ToolCompleted"]
    assert len(completed) == 2, "the call that ran (a missing file: the model's error) is not run again"
    assert sorted(tool_messages(agent)) == ["error: missing.txt is not a file", "fetched"]
    assert agent.state() == "ShuttingDown" and agent.conversation[-1] == {"role": "assistant", "content": "done"}


def test_a_process_that_cannot_be_spawned_is_retried_with_backoff_then_handed_to_the_model(
        loom: Table, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spawned: list[tuple[str, ...]] = []

    async def no_processes_left(*argv: str, **options: Any) -> Any:
        spawned.append(argv)
        raise BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable")
    monkeypatch.setattr(asyncio, "create_subprocess_exec", no_processes_left)
    replies: list[list[ReplyStep]] = [[Call("run_command", {"argv": ["true"]}, "c0")], [Say("I could not run it")]]
    config = Waits(workdir=tmp_path)
    agent = LoomAgent(loom, ScriptedLlm(replies), config=config, display=Transcript())
    run(one_turn(agent))
    max_retries = int(loom.constants["max_retries"])
    assert len(spawned) == max_retries + 1 and origins(loom, agent) == ["Tool"] * max_retries
    assert config.waits == [0.5, 1.0, 2.0], "exponential backoff, as for the LLM's retries"
    [message] = tool_messages(agent)
    assert message.startswith("error: could not be executed, retries spent: could not start true: BlockingIOError")
    assert agent.conversation[-1] == {"role": "assistant", "content": "I could not run it"}
    assert agent.display.errors == []  # type: ignore[attr-defined]  # the model was told, not the user


def test_a_tool_that_started_is_never_retried_by_the_agent(loom: Table, tmp_path: Path) -> None:
    ran: Counter[str] = Counter()

    async def deploy(arguments: dict[str, Any]) -> str:
        ran["deploy"] += 1
        raise OSError(errno.EIO, "Input/output error")
    toolbox = Toolbox([Tool("deploy", "acts once", {"type": "object"}, deploy, mutating=True)])
    agent = agent_for(loom, [[Call("deploy", {}, "c0")], [Say("it failed")]], tmp_path, toolbox, commit_hook=False)
    run(one_turn(agent))
    assert ran == {"deploy": 1} and origins(loom, agent) == []
    assert tool_messages(agent) == ["error: OSError: Input/output error"]


def test_toolbox_raises_unavailable_only_for_what_the_arguments_did_not_cause(tmp_path: Path) -> None:
    async def lookup(arguments: dict[str, Any]) -> str:
        raise FileNotFoundError(errno.ENOENT, "No such file or directory")
    toolbox = Flaky(failures=1).toolbox(tmp_path)
    toolbox.tools["lookup"] = Tool("lookup", "reads", {"type": "object"}, lookup, idempotent=True)
    with pytest.raises(ToolUnavailable, match="Input/output error"):
        asyncio.run(toolbox.execute(ToolCall("a", "fetch", "{}")))
    assert asyncio.run(toolbox.execute(ToolCall("b", "fetch", "{}"))).content == "fetched"
    missing = asyncio.run(toolbox.execute(ToolCall("c", "lookup", "{}")))
    assert missing.is_error and missing.content == "FileNotFoundError: No such file or directory"


def test_a_git_hook_blocked_by_an_index_lock_is_run_again(loom: Table, tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo")
    lock = repo / ".git" / "index.lock"
    lock.write_text("")
    agent = agent_for(loom, [[Call("write_file", {"path": "a.txt", "content": "a"})], [Say("written")]], repo)
    release_lock_on_hook_failure(agent, lock)
    run(one_turn(agent))
    assert origins(loom, agent) == ["Io"]
    events = [e for e, _ in steps(agent)]
    hook = events.index("PostToolsHookFailed")
    assert events[hook:hook + 4] == ["PostToolsHookFailed", "RetryTimeoutFired", "PostToolsHookCompleted", "TextDelta"]
    done = next(c for c in agent.history if c.event == "PostToolsHookCompleted")
    assert done.params == {"action_taken": True} and agent.display.errors == []  # type: ignore[attr-defined]
    log = subprocess.run(["git", "-C", str(repo), "log", "--format=%s"], capture_output=True, text=True, check=True)
    assert log.stdout.splitlines() == ["agent: changes by write_file"]


def test_a_hook_that_keeps_failing_is_skipped_with_an_error_shown(loom: Table, tmp_path: Path) -> None:
    repo = git_repo(tmp_path / "repo")
    (repo / ".git" / "index.lock").write_text("")
    agent = agent_for(loom, [[Call("write_file", {"path": "a.txt", "content": "a"})], [Say("written")]], repo)
    run(one_turn(agent))
    max_retries = int(loom.constants["max_retries"])
    assert origins(loom, agent) == ["Io"] * max_retries
    [error] = agent.display.errors  # type: ignore[attr-defined]
    assert error.startswith("post-tools hook failed: git add failed (status 128)") and "index.lock" in error
    assert agent.conversation[-1] == {"role": "assistant", "content": "written"}


def test_durable_and_in_memory_runs_retry_alike(loom: Table, tmp_path: Path) -> None:
    replies: list[list[ReplyStep]] = [[Call("fetch", {}, "c0"), Call("write_file", {"path": "a.txt", "content": "a"},
                                                                       "c1")], [Say("done")]]
    worlds, agents = [], []
    for name in ("plain", "durable"):
        repo = git_repo(tmp_path / name)
        (repo / ".git" / "index.lock").write_text("")
        world = Flaky(failures=1)
        agent = agent_for(loom, replies, repo, world.toolbox(repo))
        release_lock_on_hook_failure(agent, repo / ".git" / "index.lock")
        worlds.append(world)
        agents.append(agent)
    plain, durable = agents
    store = MemoryStore()
    link = DurableLink.create(durable, durable, store, "r")
    run(one_turn(plain))
    run(one_turn(durable))
    assert steps(durable) == steps(plain) and durable.conversation == plain.conversation
    assert origins(loom, durable) == origins(loom, plain) == ["Tool", "Io"]
    assert worlds[0].ran == worlds[1].ran == {"fetch": 2}
    effects = Counter((e.action, e.tool, e.status) for e in link.run.st.effects.values())
    assert effects == {("SendLlmRequest", "", "completed"): 2, ("ExecuteTools", "fetch", "failed"): 1,
                       ("ExecuteTools", "fetch", "completed"): 1, ("ExecuteTools", "write_file", "completed"): 1,
                       ("RunPostToolsHook", "", "failed"): 1, ("RunPostToolsHook", "", "completed"): 1}
    assert all(e.reported for e in link.run.st.effects.values()) and not durable.failures


def test_a_run_resumed_in_error_retries_only_the_calls_that_could_not_run(loom: Table, tmp_path: Path) -> None:
    replies: list[list[ReplyStep]] = [[Call("fetch", {}, "c0"), Call("list_dir", {"path": "."}, "c1")],
                                      [Say("done")]]
    world = Flaky(failures=1)
    first = agent_for(loom, replies, tmp_path, world.toolbox(tmp_path), retry_base=60, retry_max=60)
    store = MemoryStore()
    DurableLink.create(first, first, store, "r")

    async def crash() -> MemoryStore:
        async with first:
            first.send_input("go", event_id="input-1")
            await first.wait_until(lambda: first.state() == "Error")  # the retry timer waits a minute
            crashed = store.clone()  # what was durable when the process died
            first.cancel_all()
        return crashed
    crashed = run(crash())
    second = agent_for(loom, replies, tmp_path, world.toolbox(tmp_path))
    assert isinstance(second.llm, ScriptedLlm)
    second.llm.skip(1)
    link = DurableLink.open(second, second, crashed, "r", resume=True)
    assert second.state() == "Error" and second.executions == {"c0": "Pending", "c1": "Completed"}

    async def resume() -> None:
        async with second:
            link.resume()  # re-arms the retry timer of the journaled Error
            await second.wait_idle()
    run(resume())
    assert world.ran == {"fetch": 2} and [e for e, _ in steps(second)][:2] == ["RetryTimeoutFired", "ToolProgress"]
    listed = [e for e in link.run.st.effects.values() if e.tool == "list_dir"]
    assert len(listed) == 1, "the call that completed before the crash is not run again"
    assert tool_messages(second).count("fetched") == 1 and len(tool_messages(second)) == 2
    assert second.conversation[-1] == {"role": "assistant", "content": "done"} and second.state() == "ShuttingDown"


def test_a_crash_at_any_write_of_a_tool_retry_resumes_to_the_same_conversation(loom: Table, tmp_path: Path) -> None:
    replies: list[list[ReplyStep]] = [[Call("fetch", {}, "c0"), Call("list_dir", {"path": "."}, "c1")],
                                      [Say("done")]]
    durable_states: list[MemoryStore] = []
    store = MemoryStore(on_boundary=lambda phase, label: durable_states.append(store.clone()) if phase == "after"
                        else None)
    first = agent_for(loom, replies, tmp_path, Flaky(failures=1).toolbox(tmp_path))
    DurableLink.create(first, first, store, "r")
    run(one_turn(first))
    assert origins(loom, first) == ["Tool"] and len(durable_states) > 10
    for crashed in durable_states:
        records = crashed.records("r")
        failed_before = any(r.body.get("event") == "ToolExecutionFailed" for r in records)
        again = agent_for(loom, replies, tmp_path, Flaky(failures=0 if failed_before else 1).toolbox(tmp_path))
        link = DurableLink.open(again, again, crashed, "r", resume=True)
        assert isinstance(again.llm, ScriptedLlm) and not link.run.decisions()  # every effect here is idempotent
        again.llm.skip(sum(1 for e in link.run.st.effects.values()
                           if e.action == "SendLlmRequest" and e.status == "completed"))

        async def resume(agent: LoomAgent = again, link: DurableLink = link) -> None:
            async with agent:
                link.resume()
                if "input-1" not in link.run.st.events:
                    agent.send_input("go", event_id="input-1")
                await agent.wait_idle()
        if not link.run.terminal:
            run(resume())
        assert again.conversation == first.conversation, f"crashed after record {records[-1].seq}"


def test_an_interrupt_abandons_a_tool_retry(loom: Table, tmp_path: Path) -> None:
    world = Flaky(failures=1)
    agent = agent_for(loom, [[Call("fetch", {}, "c0")], [Say("never asked")]], tmp_path, world.toolbox(tmp_path),
                      retry_base=60, retry_max=60)

    async def main() -> None:
        async with agent:
            agent.send_input("go")
            await agent.wait_until(lambda: agent.state() == "Error")  # the retry would wait a minute
            await agent.interrupt()
            await agent.wait_idle()
    run(main())
    assert world.ran == {"fetch": 1} and tool_messages(agent) == ["error: Interrupted"]
    assert isinstance(agent.llm, ScriptedLlm) and len(agent.llm.requests) == 1  # the turn ended without the model
    assert agent.state() == "ShuttingDown" and agent.history[-2].state == "WaitingForUserInput"


def test_agentfsm_run_store_journals_a_hook_that_git_keeps_refusing(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    repo = git_repo(tmp_path / "repo")
    (repo / ".git" / "index.lock").write_text("")
    script = tmp_path / "s.yaml"
    script.write_text(json.dumps({"inputs": ["write it"], "settings": {"retry_base": 0.001, "retry_max": 0.01},
                                  "replies": [[{"tool_call": {"name": "write_file",
                                                              "arguments": {"path": "a.txt", "content": "a"}}}],
                                              "written"]}))
    code, out, err = run_cli(["run", str(SPEC / "loom-agent.yaml"), "--script", str(script), "--workdir", str(repo),
                              "--store", str(tmp_path / "j.db"), "--json"], capsys)
    lines = [json.loads(line) for line in out.splitlines()]
    failed = [line for line in lines if line.get("event") == "PostToolsHookFailed"]
    assert code == 1 and "Traceback" not in err  # the agent displayed an error: the work is not committed
    assert [f["state"] for f in failed] == ["Error", "Error", "Error", "CallingLlm"]
    assert any(line["kind"] == "error" and "git add failed" in line["text"] for line in lines)
    assert lines[-1]["text"].startswith("final state ShuttingDown")
    store = SqliteStore(tmp_path / "j.db")
    try:
        [run_id] = store.runs()
        events = [r.body.get("event") for r in store.records(run_id) if r.kind == "step"]
    finally:
        store.close()
    assert events.count("PostToolsHookFailed") == 4 and events.count("RetryTimeoutFired") == 3


def test_a_hook_the_user_settles_as_failed_after_a_crash_is_an_io_error_retried(loom: Table, tmp_path: Path) -> None:
    """A crash while the hook ran leaves it unknown; the user's ``failed`` is the hook failing (origin
    Io: the hook runs again), not a hook that did nothing."""
    replies: list[list[ReplyStep]] = [[Call("write_file", {"path": "a.txt", "content": "a"})], [Say("written")]]
    repo = git_repo(tmp_path / "repo")
    durable_states: list[MemoryStore] = []

    def keep(phase: str, label: str) -> None:
        if phase == "after" and label == "started":
            durable_states.append(store.clone())
    store = MemoryStore(on_boundary=keep)
    first = agent_for(loom, replies, repo)
    DurableLink.create(first, first, store, "r")
    run(one_turn(first))
    [crashed] = [s for s in durable_states
                 if any(e.action == "RunPostToolsHook" and e.status == "started"
                        for e in DurableLink.attach(first, first, s.clone(), "r").run.st.effects.values())]
    subprocess.run(["git", "-C", str(repo), "reset", "-q", "--soft", "HEAD~1"], check=False)  # as if it never ran
    again = agent_for(loom, replies, repo)
    assert isinstance(again.llm, ScriptedLlm)
    again.llm.skip(1)
    hook = next(e.key for e in DurableLink.attach(again, again, crashed.clone(), "r").run.st.effects.values()
                if e.action == "RunPostToolsHook")
    link = DurableLink.open(again, again, crashed, "r", resume=True, decisions={hook: "failed"})

    async def resume() -> None:
        async with again:
            link.resume()
            await again.wait_idle()
    run(resume())
    events = [e for e, _ in steps(again)]
    assert events[:3] == ["PostToolsHookFailed", "RetryTimeoutFired", "PostToolsHookCompleted"]
    assert origins(loom, again) == ["Io"] and again.conversation[-1] == {"role": "assistant", "content": "written"}
