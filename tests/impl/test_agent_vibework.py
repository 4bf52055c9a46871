"""The vibework agent (seed 002) end to end: the seed's flows as exact state sequences seen
through ``subscribe()``, permissions, sub-agents, questions and the interrupt rules per state."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from agent_runs import Watcher, run
from agentfsm.impl.agents.loom import INTERRUPTED, Transcript
from agentfsm.impl.agents.prompts import (
    ScriptedAnswer,
    ScriptedPermissions,
    ScriptedQuestions,
    ScriptedVerdict,
    Verdict,
)
from agentfsm.impl.agents.vibework import VibeworkAgent, VibeworkConfig
from agentfsm.impl.llm.client import Call, Fail, ReplyStep, Say, ScriptedLlm, Wait
from agentfsm.spec import Table, load_table
from conftest import SPEC


@pytest.fixture(scope="module")
def vibework() -> Table:
    return load_table(SPEC / "vibework-agent.yaml")


class Session:
    def __init__(self, table: Table, replies: Sequence[Sequence[ReplyStep]], workdir: Path,
                 verdicts: Sequence[ScriptedVerdict | Verdict] = (), answers: Sequence[Any] = (),
                 **config: Any) -> None:
        self.llm = ScriptedLlm(replies)
        self.permissions = ScriptedPermissions(verdicts)
        self.questions = ScriptedQuestions(answers)
        self.display = Transcript()
        self.agent = VibeworkAgent(table, self.llm, config=VibeworkConfig(workdir=workdir, **config),
                                   permissions=self.permissions, questions=self.questions, display=self.display)

    async def turns(self, *inputs: str, interrupt_after: float | None = None) -> list[str]:
        """Send each input once the agent settled; return the exact state sequence observed."""
        agent = self.agent
        agent.start()
        watcher = Watcher(agent)
        for text in inputs:
            await agent.wait_settled()
            agent.send_input(text)
            if interrupt_after is not None:
                await asyncio.sleep(interrupt_after)
                await agent.interrupt()
        await agent.wait_settled()
        await agent.shutdown()
        await watcher.stop()
        assert all(change.accepted for change in watcher.changes), [c for c in watcher.changes if not c.accepted]
        assert not agent.failures and not agent.engine.anomalies
        return watcher.states("Idle")

    def results(self) -> list[str]:
        return [m["content"] for m in self.agent.conversation if m["role"] == "tool"]


def test_simple_text_response(vibework: Table, tmp_path: Path) -> None:
    s = Session(vibework, [[Say("hello")]], tmp_path)
    assert run(s.turns("hi")) == ["Idle", "Processing", "Idle", "Done"]  # the last is shutdown from Idle
    assert s.agent.conversation[-1] == {"role": "assistant", "content": "hello"}


def test_tool_execution_with_permission(vibework: Table, tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("alpha\n")
    s = Session(vibework, [[Call("write_file", {"path": "b.txt", "content": "x"})], [Say("wrote it")]],
                tmp_path, verdicts=["grant"])
    assert run(s.turns("go")) == ["Idle", "Processing", "WaitingForPermission", "ExecutingTool", "Processing",
                                  "Idle", "Done"]
    assert (tmp_path / "b.txt").read_text() == "x"
    assert [r.tool_name for r in s.permissions.requests] == ["write_file"]


def test_multiple_tools_auto_allowed(vibework: Table, tmp_path: Path) -> None:
    replies: list[list[ReplyStep]] = [[Call("list_dir", {})], [Call("list_dir", {})], [Say("two listings")]]
    s = Session(vibework, replies, tmp_path)
    assert run(s.turns("look")) == ["Idle", "Processing", "ExecutingTool", "Processing", "ExecutingTool",
                                    "Processing", "Idle", "Done"]
    assert not s.permissions.requests


def test_with_subagent(vibework: Table, tmp_path: Path) -> None:
    replies: list[list[ReplyStep]] = [[Call("spawn_agent", {"task": "count files"})], [Say("there are none")],
                                      [Say("the sub-agent says: none")]]
    s = Session(vibework, replies, tmp_path, allow=("spawn_agent",))
    assert run(s.turns("delegate")) == ["Idle", "Processing", "ExecutingTool", "WaitingForSubAgent", "Processing",
                                        "Idle", "Done"]
    assert s.results() == ["there are none"]
    child = s.agent.sessions.get("session-2")
    assert child is not None and [m["content"] for m in child.conversation] == ["count files", "there are none"]
    assert not any(t["function"]["name"] == "spawn_agent" for t in s.llm.requests[1].tools)  # depth limit


def test_with_questions(vibework: Table, tmp_path: Path) -> None:
    replies: list[list[ReplyStep]] = [[Call("AskUserQuestion", {"questions": ["Which colour?"]})], [Say("blue it is")]]
    s = Session(vibework, replies, tmp_path, answers=[["blue"]])
    assert run(s.turns("paint")) == ["Idle", "Processing", "WaitingForUserInput", "Processing", "Idle", "Done"]
    assert s.results() == ["Q: Which colour?\nA: blue"]
    assert s.questions.requests[0].questions == ("Which colour?",)


def test_task_finished_and_new_input_leaves_done(vibework: Table, tmp_path: Path) -> None:
    replies: list[list[ReplyStep]] = [[Say("done."), Call("complete_task", {})], [Say("again")]]
    s = Session(vibework, replies, tmp_path)
    # seed 002: Done "Transitions to Idle (if new input sent)": Done -> Idle -> Processing
    assert run(s.turns("finish", "more")) == ["Idle", "Processing", "Done", "Idle", "Processing", "Idle", "Done"]
    assert s.results() == ["Task complete."]
    assert [m["content"] for m in s.agent.conversation if m["role"] == "user"] == ["finish", "more"]


def test_permission_denied_ends_the_task_and_answers_the_rest(vibework: Table, tmp_path: Path) -> None:
    replies: list[list[ReplyStep]] = [[Call("write_file", {"path": "x", "content": ""}), Call("list_dir", {})]]
    s = Session(vibework, replies, tmp_path, verdicts=["deny"])
    assert run(s.turns("go")) == ["Idle", "Processing", "WaitingForPermission", "Done"]
    assert s.results() == ["error: Permission denied by the user", f"error: {INTERRUPTED}"]
    assert not (tmp_path / "x").exists()


def test_permission_failure_answers_the_call_and_continues(vibework: Table, tmp_path: Path) -> None:
    replies: list[list[ReplyStep]] = [[Call("write_file", {"path": "x", "content": ""}), Call("list_dir", {})],
                                      [Say("ok")]]
    s = Session(vibework, replies, tmp_path, verdicts=["fail"])
    assert run(s.turns("go")) == ["Idle", "Processing", "WaitingForPermission", "ExecutingTool", "Processing",
                                  "Idle", "Done"]
    assert s.results()[0].startswith("error: permission handling failed")


def test_second_call_needs_permission_after_an_allowed_first(vibework: Table, tmp_path: Path) -> None:
    replies: list[list[ReplyStep]] = [[Call("list_dir", {}), Call("write_file", {"path": "y", "content": "1"})],
                                      [Say("ok")]]
    s = Session(vibework, replies, tmp_path, verdicts=["grant"])
    assert run(s.turns("go")) == ["Idle", "Processing", "ExecutingTool", "WaitingForPermission", "ExecutingTool",
                                  "Processing", "Idle", "Done"]
    assert (tmp_path / "y").read_text() == "1"


@pytest.mark.parametrize(("allow", "asked"), [(("write_*",), False), (("read_file", "write_file"), False),
                                              (("read_*", "write", "*_file_"), True), ((), True)])
def test_allow_rules_are_patterns(vibework: Table, tmp_path: Path, allow: tuple[str, ...], asked: bool) -> None:
    """WaitingForPermission exactly when no permission rule matches the tool (seed 002)."""
    s = Session(vibework, [[Call("write_file", {"path": "z", "content": ""})], [Say("ok")]], tmp_path,
                verdicts=["grant"] if asked else [], allow=allow)
    waited = ["WaitingForPermission"] if asked else []
    assert run(s.turns("go")) == ["Idle", "Processing", *waited, "ExecutingTool", "Processing", "Idle", "Done"]
    assert [r.tool_name for r in s.permissions.requests] == (["write_file"] if asked else [])


def test_llm_failure_is_error_and_new_input_clears_it(vibework: Table, tmp_path: Path) -> None:
    s = Session(vibework, [[Fail("401 invalid key", False)], [Say("fine now")]], tmp_path)
    # seed 002: Error "Transitions to Idle (if new input clears error)"
    assert run(s.turns("a", "b")) == ["Idle", "Processing", "Error", "Idle", "Processing", "Idle", "Done"]
    assert s.display.errors == ["401 invalid key"] and s.agent.error is None


def test_tool_failure_is_error(vibework: Table, tmp_path: Path) -> None:
    s = Session(vibework, [[Call("read_file", {"path": "missing"}), Call("list_dir", {})]], tmp_path)
    # the session's shutdown ends it in Done from Error too (seed 002: Done "When: shutdown requested")
    assert run(s.turns("read")) == ["Idle", "Processing", "ExecutingTool", "Error", "Done"]
    assert s.results() == ["error: missing is not a file", f"error: {INTERRUPTED}"]
    assert s.agent.error == "read_file: missing is not a file"
    assert s.display.errors == ["read_file: missing is not a file"]


def test_subagent_failure_is_the_parents_error(vibework: Table, tmp_path: Path) -> None:
    replies: list[list[ReplyStep]] = [[Call("spawn_agent", {"task": "t"})], [Fail("503", False)]]
    s = Session(vibework, replies, tmp_path, allow=("spawn_agent",))
    assert run(s.turns("delegate")) == ["Idle", "Processing", "ExecutingTool", "WaitingForSubAgent", "Error", "Done"]
    assert s.results() == ["error: sub-agent session-2 failed: 503"]
    assert s.agent.error == "spawn_agent: sub-agent session-2 failed: 503"


# -- interrupts, per state -------------------------------------------------------------


def test_interrupt_while_processing_keeps_partial_text(vibework: Table, tmp_path: Path) -> None:
    # "Partial text preserved, incomplete thinking discarded, all tool calls removed": the
    # model's next request holds the text streamed so far and nothing of the call streamed
    # with it (no assistant tool_calls, no tool result); the call never runs.
    s = Session(vibework, [[Say("well it starts"), Call("list_dir", {}), Wait(5), Say("never")]], tmp_path)
    assert run(s.turns("explain", interrupt_after=0.1)) == ["Idle", "Processing", "Done"]
    assert s.agent.conversation == [{"role": "user", "content": "explain"},
                                    {"role": "assistant", "content": "well it starts"}]
    assert s.display.texts == ["well it starts"] and s.display.tools == []


def test_interrupt_while_waiting_for_permission(vibework: Table, tmp_path: Path) -> None:
    replies: list[list[ReplyStep]] = [[Call("write_file", {"path": "x", "content": ""}), Call("list_dir", {})]]
    s = Session(vibework, replies, tmp_path, verdicts=[ScriptedVerdict("grant", delay=5)])
    assert run(s.turns("go", interrupt_after=0.1)) == ["Idle", "Processing", "WaitingForPermission", "Done"]
    assert s.results() == [f"error: {INTERRUPTED}", f"error: {INTERRUPTED}"]
    assert not (tmp_path / "x").exists()


def test_interrupt_while_executing_tool_lets_it_complete(vibework: Table, tmp_path: Path) -> None:
    replies: list[list[ReplyStep]] = [[Call("run_command", {"argv": ["sh", "-c", "sleep 0.3; echo hi > out"]}),
                                       Call("list_dir", {}), Call("list_dir", {})]]
    s = Session(vibework, replies, tmp_path, allow=("*",))
    assert run(s.turns("go", interrupt_after=0.1)) == ["Idle", "Processing", "ExecutingTool", "ExecutingTool",
                                                      "Done"]
    assert (tmp_path / "out").read_text() == "hi\n"
    assert s.results()[0].startswith("exit status 0") and s.results()[1:] == [f"error: {INTERRUPTED}"] * 2


def test_interrupt_while_waiting_for_user_input(vibework: Table, tmp_path: Path) -> None:
    s = Session(vibework, [[Call("AskUserQuestion", {"questions": ["?"]})]], tmp_path,
                answers=[ScriptedAnswer(("late",), delay=5)])
    assert run(s.turns("ask", interrupt_after=0.1)) == ["Idle", "Processing", "WaitingForUserInput", "Done"]
    assert s.results() == [f"error: {INTERRUPTED}"]


def test_interrupt_while_waiting_for_subagent_interrupts_the_child(vibework: Table, tmp_path: Path) -> None:
    replies: list[list[ReplyStep]] = [[Call("spawn_agent", {"task": "slow"})], [Say("partial child"), Wait(5)]]
    s = Session(vibework, replies, tmp_path, allow=("spawn_agent",))
    assert run(s.turns("delegate", interrupt_after=0.2)) == ["Idle", "Processing", "ExecutingTool",
                                                            "WaitingForSubAgent", "WaitingForSubAgent", "Done"]
    assert s.results() == ["partial child"]


def test_interrupt_when_settled_changes_nothing(vibework: Table, tmp_path: Path) -> None:
    s = Session(vibework, [[Say("hi")]], tmp_path)
    assert run(s.turns("x", interrupt_after=0.1)) == ["Idle", "Processing", "Idle", "Done"]


def test_monitoring_api(vibework: Table, tmp_path: Path) -> None:
    replies: list[list[ReplyStep]] = [[Call("write_file", {"path": "x", "content": ""})], [Say("ok")]]
    s = Session(vibework, replies, tmp_path, verdicts=[ScriptedVerdict("grant", delay=0.2)])
    seen: list[tuple[str, bool, bool, bool, Any]] = []

    async def main() -> None:
        agent = s.agent
        async with agent:
            assert agent.is_idle() and not agent.is_processing() and not agent.is_done()
            agent.send_input("go")
            await agent.wait_until(lambda: agent.state() == "WaitingForPermission")
            seen.append((agent.state(), agent.is_idle(), agent.is_processing(), agent.is_done(), agent.detail()))
            await agent.wait_settled()
            assert agent.is_idle()
        assert agent.is_done()
    run(main())
    state, idle, processing, done, detail = seen[0]
    assert (state, idle, processing, done) == ("WaitingForPermission", False, False, False)
    assert detail.tool_name == "write_file" and detail.tool_use_id == "call_1"
