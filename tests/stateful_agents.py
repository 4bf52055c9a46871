"""What the agents' stateful tests share: an event loop per run, bounded awaits, replies
queued by the test, and the rules every agent answers the same way (time, interrupt)."""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections import deque
from collections.abc import AsyncIterator
from pathlib import Path

from agentfsm.impl.driver import Driver
from agentfsm.impl.llm.client import LlmChunk, LlmRequest, ReplyStep, Say, ScriptedLlm
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule


class QueuedReplies:
    """Replies pushed by the test as it goes; an empty queue answers a plain text."""

    def __init__(self) -> None:
        self.replies: deque[list[ReplyStep]] = deque()

    async def stream(self, request: LlmRequest) -> AsyncIterator[LlmChunk]:
        reply = self.replies.popleft() if self.replies else [Say("fine")]
        async for chunk in ScriptedLlm([reply]).stream(request):
            yield chunk


class AgentMachine(RuleBasedStateMachine):
    """Runs the agent that ``make_agent`` builds on a private loop; subclasses add rules."""

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.workdir = Path(tempfile.mkdtemp(prefix="agentfsm-stateful-"))
        self.agent = self.make_agent()
        self.loop.run_until_complete(self._start())
        self.shut = False

    def make_agent(self) -> Driver:
        raise NotImplementedError

    async def _start(self) -> None:
        self.agent.start()

    def _run(self, coro: object, limit: float = 10.0) -> None:
        async def bounded() -> None:
            async with asyncio.timeout(limit):
                await coro  # type: ignore[misc]
        self.loop.run_until_complete(bounded())

    @precondition(lambda self: not self.shut)
    @rule(seconds=st.sampled_from([0.0, 0.003, 0.015]))
    def time_passes(self, seconds: float) -> None:
        self._run(asyncio.sleep(seconds))

    @precondition(lambda self: not self.shut)
    @rule()
    def interrupt(self) -> None:
        self._run(self.agent.interrupt())

    def teardown(self) -> None:
        try:
            if not self.shut:
                self._run(self.agent.shutdown(), limit=5.0)
            pending = asyncio.all_tasks(self.loop)
            if pending:
                self.loop.run_until_complete(asyncio.wait(pending, timeout=5))
        finally:
            self.loop.close()
            shutil.rmtree(self.workdir, ignore_errors=True)
