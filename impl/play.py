"""Playing a conversation script end to end, reporting every step (``agentfsm run``)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from agentfsm.impl.driver import StateChange
from agentfsm.impl.engine import Engine, UnknownEvent
from agentfsm.impl.llm import ScriptedLlm
from agentfsm.impl.loom import LoomAgent, LoomConfig
from agentfsm.impl.script import AgentScript, EventScript
from agentfsm.impl.tools import ToolResult
from agentfsm.spec import Table
from agentfsm.spec.semantics import SemanticError

Emit = Callable[[str], None]


class Reporter:
    """Prints steps and what the agent displays, as text lines or JSON Lines."""

    def __init__(self, emit: Emit, as_json: bool = False) -> None:
        self.emit = emit
        self.as_json = as_json

    def _json(self, kind: str, **fields: Any) -> None:
        self.emit(json.dumps({"kind": kind, **fields}))

    def step(self, change: StateChange) -> None:
        if self.as_json:
            self._json("step", **asdict(change))
            return
        mark = "" if change.accepted else f"  ({change.status})"
        actions = " ".join(change.actions) or "-"
        params = f"({', '.join(f'{k}={json.dumps(v)}' for k, v in change.params.items())})" if change.params else ""
        self.emit(f"{change.seq:4d}  {change.previous} --{change.event}{params}--> {change.state}  [{actions}]{mark}")

    def note(self, kind: str, text: str) -> None:
        if self.as_json:
            self._json(kind, text=text)
        else:
            self.emit(f"      {kind}: {text}")

    # Display protocol
    def text(self, delta: str) -> None:
        self.note("text", json.dumps(delta))

    def error(self, message: str) -> None:
        self.note("error", message)

    def tool(self, result: ToolResult) -> None:
        first = result.content.splitlines()[0] if result.content else ""
        self.note("tool", f"{result.name} {'failed' if result.is_error else 'ok'}: {first[:100]}")


async def play_agent(table: Table, script: AgentScript, workdir: Path, reporter: Reporter,
                     timeout: float) -> int:
    """Send each input once the agent is idle; 0 when the run completed cleanly, 1 otherwise."""
    llm = ScriptedLlm(script.replies)
    config = LoomConfig(workdir=workdir, **script.settings)
    agent = LoomAgent(table, llm, config=config, display=reporter)
    agent.add_listener(reporter.step)
    failed = False
    async with agent:
        try:
            async with asyncio.timeout(timeout):
                for turn in script.inputs:
                    await agent.wait_idle()
                    if agent.is_done():
                        break
                    reporter.note("user", turn.text)
                    agent.send_input(turn.text)
                    if turn.interrupt_after is not None:
                        await asyncio.sleep(turn.interrupt_after)
                        reporter.note("interrupt", f"after {turn.interrupt_after:g}s in {agent.state()}")
                        await agent.interrupt()
                await agent.wait_idle()
        except TimeoutError:
            reporter.note("error", f"the run did not finish within {timeout:g}s (state {agent.state()})")
            failed = True
    if agent.failures:
        reporter.note("error", f"{len(agent.failures)} failure(s): {agent.failures[0]}")
        failed = True
    if llm.remaining > 0:
        reporter.note("warning", f"{llm.remaining} scripted repl{'y' if llm.remaining == 1 else 'ies'} not used")
    reporter.note("done", f"final state {agent.state()}, {len(agent.engine.anomalies)} anomalies")
    return 1 if failed else 0


def play_events(table: Table, script: EventScript, reporter: Reporter) -> int:
    """Feed events straight to the engine; 1 if the table broke one of its rules or an event is bad."""
    engine = Engine(table)
    for seq, (event, params) in enumerate(script.events, 1):
        previous = engine.state
        try:
            outcome = engine.step(event, **params)
        except (UnknownEvent, ValueError) as exc:
            reporter.note("error", f"event {seq}: {exc}")
            return 1
        except SemanticError as exc:
            reporter.note("error", f"event {seq}: {exc.kind}: {exc.message}")
            return 1
        reporter.step(StateChange(seq, previous, outcome.state, event, dict(params), outcome.accepted,
                                  outcome.status, outcome.actions, outcome.vars))
    reporter.note("done", f"final state {engine.state}, {len(engine.anomalies)} anomalies")
    return 0
