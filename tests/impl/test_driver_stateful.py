"""Stateful test of the driver: random inputs, replies, timing, interrupts and shutdown.

After every step the engine's configuration satisfies the table's invariants and is
never transient; shutdown succeeds from whatever state the run is in.
"""

from __future__ import annotations

from agentfsm.impl.agents.loom import LoomAgent, LoomConfig
from agentfsm.impl.llm.client import Call, Fail, ReplyStep, Say, Wait
from agentfsm.spec import load_table
from conftest import SPEC
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import invariant, precondition, rule
from stateful_agents import AgentMachine, QueuedReplies

LOOM = load_table(SPEC / "loom-agent.yaml")

steps = st.one_of(
    st.builds(Say, st.sampled_from(["ok", "two words", ""])),
    st.builds(Wait, st.sampled_from([0.0, 0.005, 0.02])),
    st.builds(Fail, st.sampled_from(["503", "429"])),
    st.sampled_from([Call("list_dir", {}), Call("read_file", {"path": "missing"}),
                     Call("run_command", {"argv": ["sleep", "0.01"]}),
                     Call("write_file", {"path": "f.txt", "content": "x"}), Call("nope", {})]),
)


class DriverMachine(AgentMachine):
    agent: LoomAgent

    def make_agent(self) -> LoomAgent:
        self.llm = QueuedReplies()
        return LoomAgent(LOOM, self.llm, config=LoomConfig(
            workdir=self.workdir, retry_base=0.001, retry_max=0.004, tool_concurrency=1, commit_hook=False))

    @precondition(lambda self: not self.shut)
    @rule(reply=st.lists(steps, max_size=4))
    def model_will_reply(self, reply: list[ReplyStep]) -> None:
        self.llm.replies.append(reply)

    @precondition(lambda self: not self.shut and self.agent.is_idle())
    @rule(text=st.sampled_from(["hi", "do it"]))
    def send_input(self, text: str) -> None:
        self.agent.send_input(text)

    @precondition(lambda self: not self.shut)
    @rule()
    def settle(self) -> None:
        """Without new input the turn ends: every state leads back to idle (tool batches and retries end)."""
        self._run(self.agent.wait_idle())
        assert self.agent.state() == "WaitingForUserInput"

    @precondition(lambda self: not self.shut)
    @rule()
    def shutdown(self) -> None:
        self._run(self.agent.shutdown(), limit=5.0)
        self.shut = True
        assert self.agent.is_done() and self.agent.state() == "ShuttingDown"
        last = self.agent.history[-1]
        assert (last.event, last.accepted, last.actions) == ("ShutdownRequested", True, ("Shutdown",))
        assert not self.agent.running()

    @rule()
    def monitoring_agrees(self) -> None:
        state = self.agent.state()
        assert self.agent.is_done() == (state == "ShuttingDown")
        assert self.agent.is_processing() == (state == "CallingLlm")
        if self.agent.is_idle():
            assert state == "WaitingForUserInput"

    @invariant()
    def configuration_satisfies_the_table(self) -> None:
        engine = self.agent.engine
        assert not LOOM.state(engine.state).transient
        env = (engine.state_index, *engine.values)
        for inv in LOOM.invariants:
            assert inv.fn(env), f"invariant {inv.name} broken in {engine.state} {engine.vars}"
        assert not self.agent.failures
        assert not engine.anomalies, "the driver only feeds events the table accepts"
        assert all(not LOOM.state(change.state).transient for change in self.agent.history)


DriverMachine.TestCase.settings = settings(max_examples=40, stateful_step_count=25, deadline=None)
TestDriver = DriverMachine.TestCase
