"""Playing a conversation script end to end, reporting every step (``agentfsm run``)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from agentfsm.impl.agents.loom import LoomAgent, LoomConfig
from agentfsm.impl.agents.tools import ToolResult
from agentfsm.impl.driver import Driver, StateChange
from agentfsm.impl.durable.children import decisions_of, parent_effect
from agentfsm.impl.durable.driver import DurableLink, EffectAgent
from agentfsm.impl.durable.run import DurableRun
from agentfsm.impl.engine import Engine, UnknownEvent
from agentfsm.impl.llm.client import LlmClient, ScriptedLlm, close_client
from agentfsm.impl.script import AgentScript, EventScript, Turn
from agentfsm.impl.stores.journal import Store
from agentfsm.spec import Table
from agentfsm.spec.semantics import SemanticError

Emit = Callable[[str], None]


class PlayRefused(Exception):
    """A play that cannot go ahead as asked (a run to resume or decide on that the store does not
    hold); the command line reports it as bad input."""


class Reporter:
    """Prints steps and what the agent displays, as text lines or JSON Lines."""

    def __init__(self, emit: Emit, as_json: bool = False) -> None:
        self.emit = emit
        self.as_json = as_json
        self.errors = 0  # errors the agent displayed: turns that ended in an error

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
        self.errors += 1
        self.note("error", message)

    def retry(self, reason: str, attempt: int, delay: float) -> None:
        self.note("retry", f"LLM request again (retry {attempt}) in {delay:.2f}s after: {reason}")

    def tool(self, result: ToolResult) -> None:
        first = result.content.splitlines()[0] if result.content else ""
        self.note("tool", f"{result.name} {'failed' if result.is_error else 'ok'}: {first[:100]}")


class Conversing(Protocol):
    """An agent that takes user input."""

    def send_input(self, text: str) -> None: ...
    def state(self) -> str: ...
    async def interrupt(self) -> None: ...


async def play_turns(agent: Conversing, turns: Sequence[Turn], reporter: Reporter, timeout: float,
                     ready: Callable[[], Awaitable[None]], ended: Callable[[], bool] = lambda: False) -> bool:
    """Send each turn once ``ready()`` returns (until ``ended()``), interrupting where the script says.

    Returns False when the run did not finish within ``timeout`` seconds.
    """
    try:
        async with asyncio.timeout(timeout):
            for turn in turns:
                await ready()
                if ended():
                    break
                reporter.note("user", turn.text)
                agent.send_input(turn.text)
                if turn.interrupt_after is not None:
                    await asyncio.sleep(turn.interrupt_after)
                    reporter.note("interrupt", f"after {turn.interrupt_after:g}s in {agent.state()}")
                    await agent.interrupt()
            await ready()
    except TimeoutError:
        reporter.note("error", f"the run did not finish within {timeout:g}s (state {agent.state()})")
        return False
    return True


def report_failures(agent: Driver, reporter: Reporter) -> bool:
    """Report the agent's failed activities; True when there were any."""
    if agent.failures:
        reporter.note("error", f"{len(agent.failures)} failure(s): {agent.failures[0]}")
    return bool(agent.failures)


def report_unused(llm: ScriptedLlm, reporter: Reporter) -> None:
    if llm.remaining > 0:
        reporter.note("warning", f"{llm.remaining} scripted repl{'y' if llm.remaining == 1 else 'ies'} not used")


@dataclass(frozen=True)
class Durability:
    """Play durably: journal in ``store`` as run ``run_id``; ``resume`` recovers it first,
    applying the user's ``decisions`` (``{id: completed|failed|rerun|continue}``)."""

    store: Store
    run_id: str
    resume: bool = False
    decisions: Mapping[str, str] = field(default_factory=dict)

    def link(self, driver: Driver, agent: EffectAgent, reporter: Reporter) -> DurableLink:
        """Attach ``agent`` to the run: recovered (``--resume`` of a run the store holds, said so)
        or created. Resuming never starts a run the store does not hold (a mistyped id, or
        records lost with a deleted log, would perform every effect again): ``PlayRefused``."""
        runs = self.store.runs()
        exists = self.resume and in_store(self.run_id, runs)
        if self.decisions and not exists:
            raise PlayRefused(f"--decide: run {self.run_id} is not in the store, so it has nothing to decide")
        if self.resume and not exists:
            raise PlayRefused(f"no run {self.run_id!r} to resume: {held_runs(runs)}")
        link = DurableLink.open(driver, agent, self.store, self.run_id, exists,
                                decisions_of(None, self.decisions, runs))  # child runs' decisions: theirs
        if exists:
            reporter.note("resume", f"run {self.run_id} recovered at version {link.run.version} in {link.run.state}")
        return link


def in_store(run_id: str, runs: Sequence[str]) -> bool:
    """Whether the store holds the run: itself, or runs an agent journals under its id (the
    explorer's ``RUN/task-N``, the tool-call runner's ``RUN/call-N``)."""
    return run_id in runs or any(r.startswith(run_id + "/") for r in runs)


def held_runs(runs: Sequence[str]) -> str:
    """What a store holds, for a message about a run it does not (a mistyped id)."""
    runs = [r for r in runs if parent_effect(r) is None]  # a sub-agent's child run is not resumed itself
    if not runs:
        return "the store holds no run (to start one, leave out --resume)"
    shown = ", ".join(repr(r) for r in runs[:5]) + (f" and {len(runs) - 5} more" if len(runs) > 5 else "")
    return f"the store holds {shown} (to start a new run, leave out --resume)"


class Numbering(Conversing, Protocol):
    """An agent whose inputs can carry event ids (a durable run's)."""

    def send_input(self, text: str, event_id: str | None = None) -> None: ...


class NumberedInputs:
    """Sends a script's inputs as events ``input-N`` (from ``first``), so a resumed run knows which
    inputs its journal already holds."""

    def __init__(self, agent: Numbering, first: int) -> None:
        self.agent = agent
        self.number = first

    def send_input(self, text: str) -> None:
        self.number += 1
        self.agent.send_input(text, event_id=f"input-{self.number}")

    def state(self) -> str:
        return self.agent.state()

    async def interrupt(self) -> None:
        await self.agent.interrupt()


def _models_answered(run: DurableRun) -> int:
    """How many scripted replies the journal's settled LLM requests used (one the user interrupted
    and a crash left open was settled without an answer, but had been sent)."""
    return sum(1 for e in run.st.effects.values() if e.action == "SendLlmRequest"
               and e.status in ("completed", "failed") and isinstance(e.result, dict)
               and (e.result.get("called") or (e.via == "interrupt" and e.attempts > 0)))


def report_decisions(run: DurableRun | Sequence[DurableRun], reporter: Reporter) -> bool:
    """Print what only the user can decide (in a run, or in a run and its child runs); whether there
    was anything."""
    decisions = [d for r in ([run] if isinstance(run, DurableRun) else run) for d in r.decisions()]
    for decision in decisions:
        reporter.note("decision", f"{decision.kind} {decision.id}: {decision.message}")
    if decisions:
        reporter.note("hint", "decide with --resume --decide ID=DECISION (completed, failed, rerun; continue "
                              "for an anomaly)")
    return bool(decisions)


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
    turns: Sequence[Turn] = script.inputs
    speaker: Conversing = agent
    if durable is not None:
        link = durable.link(agent, agent, reporter)
        run = link.run
        if run.terminal:
            reporter.note("done", f"the run has ended in {run.state}; nothing to do")
            return 0
        if report_decisions(run, reporter):
            return 1
        llm.skip(_models_answered(run))
        sent = sum(1 for n in range(1, len(turns) + 1) if f"input-{n}" in run.st.events)
        turns, speaker = turns[sent:], NumberedInputs(agent, sent)
    agent.add_listener(reporter.step)
    async with agent:
        if link is not None:
            link.resume()
        completed = await play_turns(speaker, turns, reporter, timeout, agent.wait_idle, agent.is_done)
    await close_client(model)
    failed = report_failures(agent, reporter) or not completed
    if reporter.errors:
        reporter.note("error", f"{reporter.errors} turn(s) ended in an error")
        failed = True
    if link is not None and report_decisions(link.run, reporter):
        failed = True
    if model is None:
        report_unused(llm, reporter)
    reporter.note("done", f"final state {agent.state()}, {len(agent.engine.anomalies)} anomalies"
                  + ("" if link is None else f", journal version {link.run.version}"))
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
        if outcome.status == "rejected" and table.unhandled.anomaly == "halt":  # as a durable run ends
            reporter.note("blocked", f"state {engine.state}: event {seq} ({event}) was rejected and the table "
                                     f"halts on an anomaly; {len(engine.anomalies)} anomalies")
            return 1
    final = table.states[table.state_index[engine.state]].final
    reporter.note("done", f"{'final state' if final else 'state'} {engine.state}, {len(engine.anomalies)} anomalies")
    return 0
