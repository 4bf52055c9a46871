"""Stateful test of the vibework agent: random replies, permission verdicts, answers, inputs,
timing, interrupts and shutdown. The table's invariants hold after every step (checked
on each step as it happens, not only between rules), the agent only feeds events the
table accepts, and once settled every tool call in the conversation has exactly one result.
"""

from __future__ import annotations

import asyncio
from collections import Counter, deque

from agentfsm.impl.agents.prompts import PermissionRequest, QuestionRequest
from agentfsm.impl.agents.vibework import SETTLED, VibeworkAgent, VibeworkConfig
from agentfsm.impl.driver import StateChange
from agentfsm.impl.llm.client import Call, Fail, ReplyStep, Say, Wait
from agentfsm.spec import load_table
from conftest import SPEC
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import invariant, precondition, rule
from stateful_agents import AgentMachine, QueuedReplies

VIBEWORK = load_table(SPEC / "vibework-agent.yaml")

calls = st.sampled_from([
    Call("list_dir", {}), Call("read_file", {"path": "missing"}), Call("run_command", {"argv": ["sleep", "0.01"]}),
    Call("write_file", {"path": "f.txt", "content": "x"}), Call("nope", {}),
    Call("AskUserQuestion", {"questions": ["why?"]}), Call("complete_task", {}),
    Call("spawn_agent", {"task": "help"})])
steps = st.one_of(st.builds(Say, st.sampled_from(["ok", "two words"])), st.builds(Wait, st.sampled_from([0.0, 0.01])),
                  st.builds(Fail, st.sampled_from(["503"])), calls)


class Queued(QueuedReplies):
    """Replies and permission verdicts pushed by the test; an empty queue answers at once and plainly."""

    def __init__(self) -> None:
        super().__init__()
        self.verdicts: deque[tuple[bool, float]] = deque()


class Verdicts:
    def __init__(self, queued: Queued) -> None:
        self.queued = queued

    async def ask(self, request: PermissionRequest) -> bool:
        granted, delay = self.queued.verdicts.popleft() if self.queued.verdicts else (True, 0.0)
        await asyncio.sleep(delay)
        return granted


class Answers:
    async def ask(self, request: QuestionRequest) -> tuple[str, ...]:
        await asyncio.sleep(0.005)
        return tuple("yes" for _ in request.questions)


class VibeworkMachine(AgentMachine):
    agent: VibeworkAgent

    def make_agent(self) -> VibeworkAgent:
        self.queued = Queued()
        agent = VibeworkAgent(VIBEWORK, self.queued, config=VibeworkConfig(
            workdir=self.workdir, allow=("list_dir", "read_file")), permissions=Verdicts(self.queued),
            questions=Answers())
        self.broken: list[str] = []
        agent.add_listener(self._check_step)
        return agent

    def _check_step(self, change: StateChange) -> None:
        state = VIBEWORK.state(change.state)
        env = (state.index, *(change.vars[v.name] for v in VIBEWORK.variables))
        if state.transient:
            self.broken.append(f"observed transient {change.state}")
        self.broken += [f"{inv.name} after {change.event} in {change.state} {change.vars}"
                        for inv in VIBEWORK.invariants if not inv.fn(env)]
        if not change.accepted:
            self.broken.append(f"{change.event} rejected in {change.previous}")

    @precondition(lambda self: not self.shut)
    @rule(reply=st.lists(steps, max_size=4))
    def model_will_reply(self, reply: list[ReplyStep]) -> None:
        self.queued.replies.append(reply)

    @precondition(lambda self: not self.shut)
    @rule(granted=st.booleans(), delay=st.sampled_from([0.0, 0.02]))
    def user_will_decide(self, granted: bool, delay: float) -> None:
        self.queued.verdicts.append((granted, delay))

    @precondition(lambda self: not self.shut and self.agent.settled())
    @rule(text=st.sampled_from(["hi", "do it"]))
    def send_input(self, text: str) -> None:
        self.agent.send_input(text)

    @precondition(lambda self: not self.shut)
    @rule()
    def settle(self) -> None:
        """Without new input every task ends in Idle, Done or Error, with every tool call answered."""
        self._run(self.agent.wait_settled())
        assert self.agent.state() in SETTLED
        asked = Counter(call["id"] for m in self.agent.conversation if m["role"] == "assistant"
                        for call in m.get("tool_calls", ()))
        answered = Counter(m["tool_call_id"] for m in self.agent.conversation if m["role"] == "tool")
        assert asked == answered, (asked, answered)

    @precondition(lambda self: not self.shut)
    @rule()
    def shutdown(self) -> None:
        self._run(self.agent.shutdown(), limit=5.0)
        self.shut = True
        assert self.agent.is_done() and not self.agent.running()

    @rule()
    def monitoring_agrees(self) -> None:
        state = self.agent.state()
        assert self.agent.is_processing() == (state == "Processing")
        assert self.agent.detail().name == state
        if self.agent.is_idle():
            assert state == "Idle"

    @invariant()
    def every_step_kept_the_rules(self) -> None:
        assert not self.broken, self.broken
        assert not self.agent.failures and not self.agent.engine.anomalies


VibeworkMachine.TestCase.settings = settings(max_examples=40, stateful_step_count=25, deadline=None)
TestVibework = VibeworkMachine.TestCase
