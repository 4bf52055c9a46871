"""Playing a conversation script end to end, reporting every step (``agentfsm run``)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from agentfsm.impl.driver import StateChange
from agentfsm.impl.durable import DurableRun
from agentfsm.impl.durable_driver import DurableLink
from agentfsm.impl.engine import Engine, UnknownEvent
from agentfsm.impl.journal import Store
from agentfsm.impl.llm import LlmClient, ScriptedLlm
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


@dataclass(frozen=True)
class Durability:
    """Play durably: journal in ``store`` as run ``run_id``; ``resume`` recovers it first,
    applying the user's ``decisions`` (``{id: completed|failed|rerun|continue}``)."""

    store: Store
    run_id: str
    resume: bool = False
    decisions: Mapping[str, str] = field(default_factory=dict)


def _models_answered(run: DurableRun) -> int:
    """How many scripted replies the journal's settled LLM requests used."""
    return sum(1 for e in run.st.effects.values() if e.action == "SendLlmRequest"
               and e.status in ("completed", "failed") and isinstance(e.result, dict) and e.result.get("called"))


async def play_agent(table: Table, script: AgentScript, workdir: Path, reporter: Reporter,
                     timeout: float, model: LlmClient | None = None, durable: Durability | None = None) -> int:
    """Send each input once the agent is idle; 0 when the run completed cleanly, 1 otherwise.

    The scripted replies answer unless ``model`` (a real client) is given. A durable run
    that resumes skips the inputs and replies its journal holds, and stops (1) when a
    decision is the user's to make.
    """
    llm = ScriptedLlm(script.replies)
    config = LoomConfig(workdir=workdir, **script.settings)
    agent = LoomAgent(table, model or llm, config=config, display=reporter)
    link = None
    if durable is not None:
        link = DurableLink.open(agent, agent, durable.store, durable.run_id, durable.resume, durable.decisions)
        run = link.run
        if durable.resume:
            reporter.note("resume", f"run {durable.run_id} recovered at version {run.version} in {run.state}")
        if run.terminal:
            reporter.note("done", f"the run has ended in {run.state}; nothing to do")
            return 0
        if report_decisions(run, reporter):
            return 1
        llm.skip(_models_answered(run))
    agent.add_listener(reporter.step)
    failed = False
    async with agent:
        if link is not None:
            link.resume()
        try:
            async with asyncio.timeout(timeout):
                for number, turn in enumerate(script.inputs, 1):
                    if link is not None and f"input-{number}" in link.run.st.events:
                        continue
                    await agent.wait_idle()
                    if agent.is_done():
                        break
                    reporter.note("user", turn.text)
                    agent.send_input(turn.text, event_id=None if link is None else f"input-{number}")
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
    if model is None and llm.remaining > 0:
        reporter.note("warning", f"{llm.remaining} scripted repl{'y' if llm.remaining == 1 else 'ies'} not used")
    if link is not None and report_decisions(link.run, reporter):
        failed = True
    reporter.note("done", f"final state {agent.state()}, {len(agent.engine.anomalies)} anomalies"
                  + ("" if link is None else f", journal version {link.run.version}"))
    return 1 if failed else 0


def report_decisions(run: DurableRun, reporter: Reporter) -> bool:
    """Print what only the user can decide; whether there was anything."""
    decisions = run.decisions()
    for decision in decisions:
        reporter.note("decision", f"{decision.kind} {decision.id}: {decision.message}")
    if decisions:
        reporter.note("hint", "decide with --resume --decide ID=DECISION (completed, failed, rerun; continue "
                              "for an anomaly)")
    return bool(decisions)


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
