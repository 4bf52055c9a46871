"""Playing agent scripts against the bundled tables' own agents (``agentfsm run``), chosen by machine name.

The Loom table keeps ``play.play_agent``; the vibework agent, the explorer/evaluator
loop and the tool-call runner are played here. Each reports every step and what the
agent shows, and returns 0 when the run completed cleanly, 1 otherwise.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Literal

from agentfsm.impl.agents.explorer_evaluator import ExplorerConfig, ExplorerEvaluatorAgent
from agentfsm.impl.agents.prompts import (
    PermissionPrompt,
    PermissionRequest,
    QuestionRequest,
    ScriptedPermissions,
    ScriptedQuestions,
    TerminalPrompt,
    UserQuestionPrompt,
)
from agentfsm.impl.agents.tool_call import ToolCallRunner, runner_plan
from agentfsm.impl.agents.vibework import VibeworkAgent, VibeworkConfig, vibework_config
from agentfsm.impl.llm.client import LlmClient, ScriptedLlm
from agentfsm.impl.play import Reporter, play_turns, report_failures, report_unused
from agentfsm.impl.script import AgentScript
from agentfsm.spec import Table


@dataclass(frozen=True)
class Run:
    """What every player gets: the script, where tools work, how to report, limits and the model."""

    table: Table
    script: AgentScript
    workdir: Path
    reporter: Reporter
    timeout: float
    model: LlmClient | None = None
    policy: Literal["grant", "deny"] = "deny"  # unscripted permission requests off a terminal


Player = Callable[[Run], Coroutine[Any, Any, int]]


class ReportedPermissions:
    """Passes permission requests to a prompt and reports each request and its answer."""

    def __init__(self, prompt: PermissionPrompt, reporter: Reporter) -> None:
        self.prompt, self.reporter = prompt, reporter

    async def ask(self, request: PermissionRequest) -> bool:
        self.reporter.note("permission", f"{request.tool_name} {request.arguments}?")
        try:
            granted = await self.prompt.ask(request)
        except Exception as exc:
            self.reporter.note("permission", f"failed: {exc}")
            raise
        self.reporter.note("permission", "granted" if granted else "denied")
        return granted


class ReportedQuestions:
    """Passes questions to a prompt and reports them with the answers."""

    def __init__(self, prompt: UserQuestionPrompt, reporter: Reporter) -> None:
        self.prompt, self.reporter = prompt, reporter

    async def ask(self, request: QuestionRequest) -> tuple[str, ...]:
        self.reporter.note("questions", " / ".join(request.questions))
        answers = await self.prompt.ask(request)
        self.reporter.note("answers", " / ".join(answers))
        return answers


def _permissions(run: Run) -> ReportedPermissions:
    scripted = run.script.permissions
    prompt = ScriptedPermissions(scripted) if scripted is not None else TerminalPrompt(policy=run.policy)
    return ReportedPermissions(prompt, run.reporter)


def _unused(run: Run, llm: ScriptedLlm) -> None:
    if run.model is None:
        report_unused(llm, run.reporter)


async def play_vibework(run: Run) -> int:
    """Each input once the agent settled (Idle, Done or Error); ``interrupt_after`` interrupts the turn."""
    script, reporter = run.script, run.reporter
    llm = ScriptedLlm(script.replies)
    questions = ScriptedQuestions(script.answers) if script.answers is not None else TerminalPrompt()
    agent = VibeworkAgent(run.table, run.model or llm, config=vibework_config(run.workdir, dict(script.settings),
                                                                                script.allow),
                          permissions=_permissions(run), questions=ReportedQuestions(questions, reporter),
                          display=reporter)
    agent.add_listener(reporter.step)
    async with agent:
        completed = await play_turns(agent, script.inputs, reporter, run.timeout, agent.wait_settled)
    failed = report_failures(agent, reporter) or not completed
    _unused(run, llm)
    reporter.note("done", f"final state {agent.state()}, {len(agent.engine.anomalies)} anomalies")
    return 1 if failed else 0


async def play_explorer(run: Run) -> int:
    """Each input is one task, run through its own loop to Answered or OutOfTurns."""
    script, reporter = run.script, run.reporter
    llm = ScriptedLlm(script.replies)
    config = ExplorerConfig(workdir=run.workdir, **script.settings)
    failed = False
    for number, turn in enumerate(script.inputs, 1):
        agent = ExplorerEvaluatorAgent(run.table, run.model or llm, config=config, narrator=reporter,
                                       name=f"task-{number}")
        agent.add_listener(reporter.step)
        reporter.note("task", f"{turn.text}{' (--plan)' if script.plan else ''}")
        async with agent:
            try:
                async with asyncio.timeout(run.timeout):
                    agent.ask(turn.text, script.plan)
                    await agent.wait_done()  # the pump stops in Answered or OutOfTurns
            except TimeoutError:
                reporter.note("error", f"task {number} did not finish within {run.timeout:g}s")
                failed = True
        failed = report_failures(agent, reporter) or failed
        reporter.note("result", f"task {number}: {agent.state()}: {agent.answer or 'no answer'}")
    _unused(run, llm)
    return 1 if failed else 0


async def play_tool_call(run: Run) -> int:
    """The script's replies are tool calls; each goes through its own tool-call trace."""
    script, reporter = run.script, run.reporter
    permissions = _permissions(run)
    failed = False
    for number, call in enumerate(runner_plan(script.replies), 1):
        runner = ToolCallRunner(run.table, run.workdir, permissions, allow=script.allow or (),
                                settings=dict(script.settings), reporter=reporter, name=f"call-{number}")
        runner.add_listener(reporter.step)
        reporter.note("call", f"{call.name} {call.arguments}")
        try:
            async with asyncio.timeout(run.timeout):
                result = await runner.run(call)
        except TimeoutError:
            reporter.note("error", f"tool call {number} did not finish within {run.timeout:g}s")
            failed = True
            continue
        first = result.content.splitlines()[0] if result.content else ""
        reporter.note("result", f"{call.name}: {runner.state()}: {first}")
        failed = report_failures(runner, reporter) or failed
    return 1 if failed else 0


PLAYERS: dict[str, Player] = {"vibework-agent": play_vibework, "explorer-evaluator": play_explorer,
                              "tool-call": play_tool_call}

# The ``settings`` each player's agent takes (the script's own keys cover the rest).
_OWN = {"workdir", "allow"}
SETTINGS_OF: dict[str, frozenset[str]] = {
    "vibework-agent": frozenset(f.name for f in fields(VibeworkConfig)) - _OWN,
    "explorer-evaluator": frozenset(f.name for f in fields(ExplorerConfig)) - _OWN,
    "tool-call": frozenset({"call_timeout", "command_timeout"})}
