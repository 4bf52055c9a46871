"""Playing agent scripts against the bundled tables' own agents (``agentfsm run``), chosen by machine name.

The Loom table keeps ``play.play_agent``; the vibework agent, the explorer/evaluator
loop and the tool-call runner are played here. Each reports every step and what the
agent shows, and returns 0 when the run completed cleanly, 1 otherwise.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection, Coroutine, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, Literal

from agentfsm.impl.agents.explorer_evaluator import LLM_CALLS, ExplorerConfig, ExplorerEvaluatorAgent
from agentfsm.impl.agents.prompts import (
    PermissionPrompt,
    PermissionRequest,
    QuestionRequest,
    ScriptedPermissions,
    ScriptedQuestions,
    TerminalPrompt,
    UserQuestionPrompt,
)
from agentfsm.impl.agents.sandbox import probe
from agentfsm.impl.agents.tool_call import ToolCallRunner, runner_plan
from agentfsm.impl.agents.vibework import WAITING, VibeworkAgent, VibeworkConfig, vibework_config
from agentfsm.impl.driver import Driver
from agentfsm.impl.durable.children import child_runs, owner
from agentfsm.impl.durable.driver import DurableLink, EffectAgent
from agentfsm.impl.durable.run import DurableRun
from agentfsm.impl.llm.client import LlmClient, ScriptedLlm
from agentfsm.impl.play import (
    Conversing,
    Durability,
    NumberedInputs,
    PlayRefused,
    Reporter,
    play_turns,
    report_decisions,
    report_failures,
    report_unused,
)
from agentfsm.impl.script import AgentScript, Turn
from agentfsm.impl.stores.journal import STEP
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
    durable: Durability | None = None  # journal every step and effect (``--store``)


class DurableTask:
    """One unit of a script (a task, a tool call) as its own durable run ``RUN/NAME``.

    ``open`` creates it, or on resume recovers it (applying the user's decisions that name
    its effects) and skips the scripted replies its settled LLM calls used; ``skip`` says
    the unit is over (its run ended, or it needs a decision first)."""

    def __init__(self, durable: Durability, name: str, reporter: Reporter) -> None:
        self.durable, self.reporter = durable, reporter
        self.run_id = f"{durable.run_id}/{name}"
        self.link: DurableLink | None = None

    def open(self, driver: Driver, agent: EffectAgent, llm: ScriptedLlm | None = None,
             llm_calls: Collection[str] = (), table_decides: bool = False) -> str | None:
        """None: play the unit; ``"ended"`` or ``"decide"``: do not (already reported). With
        ``table_decides`` the unit plays even with decisions open: its table has rows for them."""
        durable = self.durable
        exists = durable.resume and self.run_id in durable.store.runs()
        mine = {k: v for k, v in durable.decisions.items() if k.startswith(self.run_id + "/")}
        link = self.link = DurableLink.open(driver, agent, durable.store, self.run_id, exists, mine)
        run = link.run
        if exists:
            if llm is not None:
                llm.skip(sum(1 for e in run.st.effects.values() if e.action in llm_calls and e.status == "completed"))
            self.reporter.note("resume", f"run {self.run_id} recovered at version {run.version} in {run.state}")
        if run.terminal:
            return "ended"
        if table_decides:
            return None
        return "decide" if report_decisions(run, self.reporter) else None

    def start(self) -> None:
        """Once the driver runs: start due effects, feed back settled outcomes."""
        if self.link is not None:
            self.link.resume()

    def pending(self) -> bool:
        """Report what only the user can decide after the unit ran; whether there was anything."""
        return self.link is not None and report_decisions(self.link.run, self.reporter)


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


def _unused(run: Run, llm: ScriptedLlm) -> None:
    if run.model is None:
        report_unused(llm, run.reporter)


def vibework_used(run: DurableRun) -> dict[str, int]:
    """What a durable vibework run consumed of its script: LLM replies (settled calls), permission
    verdicts and answers (the steps that took them), with what its sub-agents used: their child
    runs' (a journal older than child runs kept the counts with the spawn's result)."""
    used = dict.fromkeys([*WAITING, "llm"], 0)
    for run_id in [run.run_id, *child_runs(run.run_id, run.store.runs())]:
        one = run if run_id == run.run_id else DurableRun.attach(run.store, run.table, run_id, run.tools)
        steps = [r.body for r in run.store.records(run_id) if r.kind == STEP]
        for kind, waiting in WAITING.items():
            used[kind] += sum(1 for s in steps if s["prev"]["state"] == waiting != s["next"]["state"])
        used["llm"] += sum(1 for e in one.st.effects.values() if e.action == "CallLlm" and e.via in ("run", "cancel"))
        for effect in one.st.effects.values():
            if effect.action == "ExecuteTool" and isinstance(effect.result, dict):
                for kind in used:
                    used[kind] += int(effect.result.get(kind, 0))
    return used


def runs_to_resume(agent: VibeworkAgent, durable: Durability) -> list[DurableRun]:
    """The agent's run and the child runs its recovery opened (its sub-agents', resumed where they
    stopped); a decision given for a child run not among them would be silently dropped: bad input."""
    runs = agent.runs()
    opened = {run.run_id for run in runs}
    stored = durable.store.runs()
    for id in durable.decisions:
        run_id = owner(id, stored)
        if run_id is not None and run_id not in opened:
            raise PlayRefused(f"--decide {id}: its run {run_id} is not being resumed (its parent's effect is settled)")
    return runs


def _interrupt_due(run: DurableRun, turns: Sequence[Turn], sent: int) -> float | None:
    """The scripted interrupt of the last input the journal holds, when no interrupt followed it
    there (the process died first): the resumed run interrupts after that delay."""
    delay = turns[sent - 1].interrupt_after if sent else None
    if delay is None:
        return None
    records = run.store.records(run.run_id)
    at = next(r.seq for r in records if r.body.get("event_id") == f"input-{sent}")
    return None if any(r.body.get("event") == "Interrupt" for r in records if r.seq > at) else delay


async def play_vibework(run: Run) -> int:
    """Each input once the agent settled (Idle, Done or Error); ``interrupt_after`` interrupts the turn.
    Durably, a resumed run skips the inputs, replies, verdicts and answers its journal holds, and
    stops (1) when a decision is the user's to make."""
    script, reporter = run.script, run.reporter
    llm = ScriptedLlm(script.replies)
    questions: UserQuestionPrompt = TerminalPrompt()
    permissions: PermissionPrompt = TerminalPrompt(policy=run.policy)
    scripted = (ScriptedQuestions(script.answers) if script.answers is not None else None,
                ScriptedPermissions(script.permissions) if script.permissions is not None else None)
    questions = scripted[0] or questions
    permissions = scripted[1] or permissions
    agent = VibeworkAgent(run.table, run.model or llm, config=vibework_config(run.workdir, dict(script.settings),
                                                                                script.allow),
                          permissions=ReportedPermissions(permissions, reporter),
                          questions=ReportedQuestions(questions, reporter), display=reporter)
    link = None
    turns: Sequence[Turn] = script.inputs
    speaker: Conversing = agent
    durable = run.durable
    if durable is not None:
        agent.child_decisions = durable.decisions
        link = durable.link(agent, agent, reporter)
        runs = runs_to_resume(agent, durable)
        for child in runs[1:]:
            reporter.note("resume", f"sub-agent run {child.run_id} recovered at version {child.version} in "
                                    f"{child.state}")
        if report_decisions(runs, reporter):
            return 1
        used = vibework_used(link.run)
        llm.skip(used["llm"])
        for prompt, kind in zip(scripted, ("answers", "permissions"), strict=True):
            if prompt is not None:
                prompt.skip(used[kind])
        sent = sum(1 for n in range(1, len(turns) + 1) if f"input-{n}" in link.run.st.events)
        late = _interrupt_due(link.run, turns, sent)
        turns, speaker = turns[sent:], NumberedInputs(agent, sent)
    agent.add_listener(reporter.step)
    async with agent:
        if link is not None:
            link.resume()
            if late is not None and not agent.settled():
                await asyncio.sleep(late)
                reporter.note("interrupt", f"after {late:g}s in {agent.state()} (the crash came first)")
                await agent.interrupt()
        completed = await play_turns(speaker, turns, reporter, run.timeout, agent.wait_settled)
    failed = report_failures(agent, reporter) or not completed
    if link is not None and report_decisions(link.run, reporter):
        failed = True
    _unused(run, llm)
    reporter.note("done", f"final state {agent.state()}, {len(agent.engine.anomalies)} anomalies")
    return 1 if failed else 0


async def play_explorer(run: Run) -> int:
    """Each input is one task, run through its own loop to Answered or OutOfTurns (durably: each
    task its own run ``RUN/task-N``; a resumed task continues where its journal ends)."""
    script, reporter = run.script, run.reporter
    llm = ScriptedLlm(script.replies)
    config = ExplorerConfig(workdir=run.workdir, **script.settings)
    reporter.note("confinement", (await asyncio.to_thread(probe)).describe())
    failed = False
    for number, turn in enumerate(script.inputs, 1):
        agent = ExplorerEvaluatorAgent(run.table, run.model or llm, config=config, narrator=reporter,
                                       name=f"task-{number}")
        task = None if run.durable is None else DurableTask(run.durable, f"task-{number}", reporter)
        skip = None if task is None else task.open(agent, agent, llm, LLM_CALLS)
        if skip == "decide":
            return 1
        if skip is None:
            agent.add_listener(reporter.step)
            if task is None or agent.state() == "Idle":
                reporter.note("task", f"{turn.text}{' (--plan)' if script.plan else ''}")
            async with agent:
                try:
                    async with asyncio.timeout(run.timeout):
                        if task is not None:
                            task.start()
                        if agent.state() == "Idle":
                            agent.feed("TaskReceived", payload=turn.text, event_id="task", plan=script.plan)
                        await agent.wait_done()  # the pump stops in Answered or OutOfTurns
                except TimeoutError:
                    reporter.note("error", f"task {number} did not finish within {run.timeout:g}s")
                    failed = True
            failed = report_failures(agent, reporter) or failed
            if task is not None and task.pending():
                return 1
        reporter.note("result", f"task {number}: {agent.state()}: {agent.answer or 'no answer'}")
    _unused(run, llm)
    return 1 if failed else 0


def _approvals_answered(durable: Durability) -> int:
    """How many scripted permission answers the journaled call runs used (a resumed run skips them)."""
    prefix = f"{durable.run_id}/call-"
    return sum(1 for run_id in durable.store.runs() if run_id.startswith(prefix)
               for record in durable.store.records(run_id)
               if record.body.get("event") in ("ApprovalGranted", "ApprovalDenied"))


async def play_tool_call(run: Run) -> int:
    """The script's replies are tool calls; each goes through its own tool-call trace (durably: each
    call its own run ``RUN/call-N``; a resumed call continues where its journal ends, and a call
    that halted for an operator stops the script until ``--decide`` settles it)."""
    script, reporter = run.script, run.reporter
    prompt: PermissionPrompt = TerminalPrompt(policy=run.policy)
    if script.permissions is not None:
        scripted = ScriptedPermissions(script.permissions)
        if run.durable is not None and run.durable.resume:
            scripted.skip(_approvals_answered(run.durable))
        prompt = scripted
    permissions = ReportedPermissions(prompt, reporter)
    failed = False
    for number, call in enumerate(runner_plan(script.replies), 1):
        runner = ToolCallRunner(run.table, run.workdir, permissions, allow=script.allow or (),
                                settings=dict(script.settings), reporter=reporter, name=f"call-{number}")
        runner.call = call
        task = None if run.durable is None else DurableTask(run.durable, f"call-{number}", reporter)
        if task is None or task.open(runner, runner, table_decides=True) is None:
            runner.add_listener(reporter.step)
            if runner.state() == "Requested":
                reporter.note("call", f"{call.name} {call.arguments}")
            try:
                async with asyncio.timeout(run.timeout):
                    await runner.run(call, None if task is None else task.link)
            except TimeoutError:
                reporter.note("error", f"tool call {number} did not finish within {run.timeout:g}s")
                failed = True
                continue
            failed = report_failures(runner, reporter) or failed
        content = runner.answer().content
        first = content.splitlines()[0] if content else ""
        reporter.note("result", f"{call.name}: {runner.state()}: {first}")
        if task is not None and task.pending():
            return 1
    return 1 if failed else 0


PLAYERS: dict[str, Player] = {"vibework-agent": play_vibework, "explorer-evaluator": play_explorer,
                              "tool-call": play_tool_call}
SCRIPTED_ONLY = frozenset({"tool-call"})  # the players that call no model (``Run.model`` does not apply)
ASKS_PERMISSION = frozenset({"vibework-agent", "tool-call"})  # the agents ``--permission-policy`` applies to

# The ``settings`` each player's agent takes (the script's own keys cover the rest).
_OWN = {"workdir", "allow"}
SETTINGS_OF: dict[str, frozenset[str]] = {
    "vibework-agent": frozenset(f.name for f in fields(VibeworkConfig)) - _OWN,
    "explorer-evaluator": frozenset(f.name for f in fields(ExplorerConfig)) - _OWN,
    "tool-call": frozenset({"call_timeout", "command_timeout"})}
