"""The explorer/evaluator loop (seed 001) on the driver: the table decides, this module performs.

The action the table emits names the context the LLM call gets, and the request is
built from that name alone: ``CallPlannerLlm_TaskOnly`` (the task), ``CallExplorerLlm_
LastOutputs`` (the task, the evaluator's last remark, the latest outputs),
``CallExplorerLlm_PlanAndLastOutputs`` (the same with the plan), and
``CallEvaluatorLlm_WorkingMemory`` (the task and everything accumulated, with notes). The
explorer's ``$(view ...)``, ``$(text-search ...)`` and ``$(run ...)`` run in the work
directory; the evaluator's ``$(keep ...)``, ``$(drop ...)`` and ``$(note ...)`` curate
working memory, and its ``$(answer ...)`` or ``$(done ...)`` ends the run.

Working memory keeps every output in order, numbered (``$(keep 1 3)``, ``$(drop 2)``
refer to the numbers). Kept items are always shown in full; when memory outgrows
``memory_limit`` characters, the oldest other items are shortened to their first line.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from agentfsm.impl.agents.explorer_commands import EXPLORE, Command, CommandRunner, Reply, parse_reply
from agentfsm.impl.agents.journaled import Pending, begin_effect, replay, report
from agentfsm.impl.driver import LOG, ActionContext, Activity, Driver, Envelope
from agentfsm.impl.durable.run import Calls, Described, EffectCall, Report, StatusReply
from agentfsm.impl.durable.state import Effect
from agentfsm.impl.engine import Engine
from agentfsm.impl.llm.client import LlmClient, LlmError, LlmRequest, ResponseBuilder, complete
from agentfsm.impl.stores.journal import JSON, Record
from agentfsm.spec import Table

LLM_CALLS = ("CallPlannerLlm_TaskOnly", "CallExplorerLlm_LastOutputs", "CallExplorerLlm_PlanAndLastOutputs",
             "CallEvaluatorLlm_WorkingMemory")
REPLIES = ("ExplorerReplied", "EvaluatorReplied", "EvaluatorAnswered", "EvaluatorDone")
# The internal actions that only update the context: replayed when a durable run resumes.
FORBIDDEN_PHRASES = ("I need to", "Let me", "I will")  # the evaluator's prompt rule (seed 001)


def turn_label(turn: int, max_turns: int, role: str) -> str:
    """The seed's turn label: "[agent-v2] Turn N/M (role)"."""
    return f"[agent-v2] Turn {turn}/{max_turns} ({role})"


CONTEXT_ACTIONS = ("RecordPlan", "RecordOutputs", "ApplyMemoryCommands", "RejectEvaluatorCommands", "ReturnAnswer")

Outputs = list[tuple[Command, str]]


def outputs_json(turn: int, outputs: Outputs) -> JSON:
    return {"turn": turn, "outputs": [[c.name, c.argument, output] for c, output in outputs]}


def outputs_from_json(data: JSON) -> tuple[int, Outputs]:
    return int(data["turn"]), [(Command(str(name), str(argument)), str(output))
                               for name, argument, output in data["outputs"]]


def plan_steps(plan: str) -> int:
    """The steps of a plan: its numbered or bulleted lines (``1.``, ``2)``, ``-``, ``*``)."""
    return sum(1 for line in plan.splitlines() if re.match(r"\s*(?:\d+[.)]|[-*])\s+\S", line))


PLANNER_PROMPT = """You are a PLANNER. Given only the task, write a plan of 2-4 short numbered steps for
gathering the information it needs. Do not answer the task and do not run commands."""

EXPLORER_PROMPT = """You are an EXPLORER. Suggest commands to gather information.

Commands:
$(view path) - file structure/symbols
$(view path:start-end) - specific lines
$(text-search "pattern") - search codebase
$(run cmd) - shell command

Output commands directly. Do NOT answer the question - that's the evaluator's job.
Example: $(view src/main.rs) $(text-search "config")"""

EVALUATOR_PROMPT = """You are an EVALUATOR, not an explorer. Your ONLY job is to judge what we found.

RULES:
1. NEVER output commands (not even in backticks like `view` or `text-search`)
2. NEVER say "I need to", "Let me", or "I will" - those are explorer phrases
3. You MUST either $(answer) or explain what specific info is missing

Do NOT explore more: judge only the outputs shown, never guess what a file holds. If they
are not enough, say what is missing and the explorer will look.

If results contain the answer: $(answer The complete answer here)
If results are partial: $(note what we found) then explain what's still needed
If results are irrelevant: explain what went wrong

Memory commands: $(keep 1 3), $(keep), $(drop 2), $(note finding)

Example good response:
"The search found `support_for_extension` in registry.rs.
$(note Language detection uses support_for_extension())
$(answer normalize detects language by file extension via support_for_extension())\""""


class Narrator(Protocol):
    """Where the run's story goes (``agentfsm run``'s reporter, a log, a test transcript)."""

    def note(self, kind: str, text: str) -> None: ...


class Notes:
    def __init__(self) -> None:
        self.notes: list[tuple[str, str]] = []

    def note(self, kind: str, text: str) -> None:
        self.notes.append((kind, text))


@dataclass
class ExplorerConfig:
    workdir: Path = field(default_factory=Path.cwd)
    command_timeout: float = 30.0
    run_allowed: tuple[str, ...] = ("ls", "cat", "grep", "wc", "head", "tail", "find", "git")
    max_output: int = 8000        # characters kept of one command's output
    memory_limit: int = 24000     # characters of working memory shown in full to the evaluator
    llm_retries: int = 2          # retries of a failed LLM call (the seed models no LLM errors)
    retry_delay: float = 0.5


@dataclass
class Item:
    number: int
    turn: int
    command: Command
    output: str
    kept: bool = False


@dataclass
class WorkingMemory:
    items: list[Item] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    added: int = 0  # numbers are never reused, so a dropped item's number stays dropped

    def add(self, turn: int, command: Command, output: str) -> Item:
        self.added += 1
        item = Item(self.added, turn, command, output)
        self.items.append(item)
        return item

    def apply(self, commands: Sequence[Command]) -> list[str]:
        """Apply keep/drop/note in order; returns complaints about numbers that name no item."""
        complaints = []
        for command in commands:
            if command.name == "note":
                if command.argument:
                    self.notes.append(command.argument)
                continue
            if command.name not in ("keep", "drop"):
                continue
            numbers = []
            for word in command.argument.replace(",", " ").split():
                if word.isdigit() and any(i.number == int(word) for i in self.items):
                    numbers.append(int(word))
                else:
                    complaints.append(f"{command}: no item {word}")
            if command.name == "keep":
                for item in self.items:
                    item.kept = item.kept or not command.argument or item.number in numbers
            else:
                self.items = [i for i in self.items if i.number not in numbers]
        return complaints

    def render(self, limit: int) -> str:
        size = sum(len(i.output) for i in self.items)
        shortened: set[int] = set()
        for item in self.items:  # oldest first
            if size <= limit:
                break
            if not item.kept:
                shortened.add(item.number)
                size -= len(item.output) - len(item.output.split("\n", 1)[0])
        blocks, turn = [], None
        for item in self.items:
            if item.turn != turn:
                turn = item.turn
                blocks.append(f"Turn {turn} (explorer):")
            output = item.output.split("\n", 1)[0] + " [... shortened]" if item.number in shortened else item.output
            mark = " (kept)" if item.kept else ""
            blocks.append(f"[{item.number}]{mark} `{item.command}`\n\n{output}")
        return "\n\n".join(blocks) or "(nothing yet)"


class ExplorerEvaluatorAgent(Driver):
    """One task through the loop: ``ask(task, plan=...)``, then ``await wait_done()``; ``answer`` holds the result."""

    def __init__(self, table: Table, llm: LlmClient, *, config: ExplorerConfig | None = None,
                 narrator: Narrator | None = None, name: str = "explorer-evaluator",
                 logger: logging.Logger = LOG) -> None:
        self.config = config or ExplorerConfig()
        super().__init__(
            Engine(table), name=name, logger=logger,
            processing_states={"Planning", "Exploring", "ExecutingCommands", "Evaluating"},
            actions={**{action: self._caller(action) for action in LLM_CALLS},
                     "RecordPlan": self._record_plan,
                     "RunCommands": lambda ctx: self._run_commands(None), "RecordOutputs": self._record_outputs,
                     "DiscardExplorerConclusion": self._discard_conclusion,
                     "ApplyMemoryCommands": self._apply_memory, "RejectEvaluatorCommands": self._reject_commands,
                     "ReturnAnswer": self._return_answer, "ReportOutOfTurns": self._out_of_turns},
            on_event={"TaskReceived": self._task_received, "ExplorerReplied": self._explorer_replied})
        self.llm = llm
        self.narrator: Narrator = narrator or Notes()
        self.runner = CommandRunner(self.config.workdir, self.config.command_timeout,
                                    tuple(self.config.run_allowed), self.config.max_output)
        self.task = ""
        self.plan: str | None = None
        self.memory = WorkingMemory()
        self.last_outputs: list[Item] = []
        self.last_remark = ""
        self.answer: str | None = None
        self.violations: list[str] = []
        self.max_turns = int(table.constants["max_turns"])
        self.requests: list[tuple[str, LlmRequest]] = []  # (action, request): what each call was shown
        self._commands: tuple[Command, ...] = ()  # the explorer's latest commands (what RunCommands runs)

    def ask(self, task: str, plan: bool = False) -> None:
        self.feed("TaskReceived", payload=task, plan=plan)

    def _task_received(self, ctx: ActionContext) -> None:
        self.task = str(ctx.envelope.payload or "")

    def _explorer_replied(self, ctx: ActionContext) -> None:
        reply: Reply = ctx.envelope.payload
        self._commands = tuple(reply.of(EXPLORE))

    # -- contexts ------------------------------------------------------------------------

    def planner_context(self) -> str:
        return f"**Task:** {self.task}"

    def explorer_context(self, with_plan: bool) -> str:
        parts = [f"**Task:** {self.task}"]
        if with_plan and self.plan:
            parts.append(f"**Plan:**\n{self.plan}")
        if self.last_remark:
            parts.append(f"**Evaluator said:** {self.last_remark}")
        if self.last_outputs:
            parts.append("**Last outputs:**\n\n" + "\n\n".join(f"`{i.command}`\n\n{i.output}"
                                                               for i in self.last_outputs))
        else:
            parts.append("**Last outputs:** (none yet)")
        return "\n\n".join(parts)

    def evaluator_context(self) -> str:
        parts = [f"**Task:** {self.task}", "**History:**\n\n" + self.memory.render(self.config.memory_limit)]
        if self.memory.notes:
            parts.append("**Notes:**\n" + "\n".join(f"- {n}" for n in self.memory.notes))
        parts.append("**Your job:** Note important findings, then $(answer ANSWER) or explain what's missing.")
        return "\n\n".join(parts)

    # -- LLM calls -----------------------------------------------------------------------

    def _caller(self, action: str) -> Callable[[ActionContext], None]:
        return lambda ctx: self._call(action)

    def _call(self, action: str, pending: Pending | None = None) -> None:
        """The LLM call ``action`` names, with the context its name says, for the current turn."""
        system, context, feed = {
            "CallPlannerLlm_TaskOnly": (PLANNER_PROMPT, self.planner_context, "PlannerReplied"),
            "CallExplorerLlm_LastOutputs": (EXPLORER_PROMPT, lambda: self.explorer_context(False), "ExplorerReplied"),
            "CallExplorerLlm_PlanAndLastOutputs": (EXPLORER_PROMPT, lambda: self.explorer_context(True),
                                                   "ExplorerReplied"),
            "CallEvaluatorLlm_WorkingMemory": (EVALUATOR_PROMPT, self.evaluator_context, "EvaluatorReplied")}[action]
        turn = int(self.engine.vars["turns"])
        request = LlmRequest(({"role": "system", "content": system}, {"role": "user", "content": context()}))
        self.requests.append((action, request))
        role = feed.removesuffix("Replied").lower()

        async def call(activity: Activity) -> None:
            if not begin_effect(self, pending):
                return
            text = await self._complete(request)
            self.narrator.note(role, f"{turn_label(turn, self.max_turns, role)}: {json.dumps(text)}")
            self._feed_reply(activity.feed, feed, text, report(pending, "completed", {"text": text}))
        self.spawn("llm", call)

    def _feed_reply(self, send: Callable[..., None], feed: str, text: str, effect: Report | None) -> None:
        """The event an LLM reply is: the role's, and for the evaluator whether it concluded."""
        reply = parse_reply(text)
        if feed == "ExplorerReplied":
            send(self, feed, payload=reply, effect=effect, has_commands=reply.explores,
                 concludes=reply.conclusion is not None)
        elif feed == "EvaluatorReplied":
            conclusion = reply.conclusion
            event = feed if conclusion is None else \
                "EvaluatorAnswered" if conclusion.name == "answer" else "EvaluatorDone"
            send(self, event, payload=reply, effect=effect,
                 has_commands=reply.explores or bool(reply.markdown_commands))
        else:
            send(self, feed, payload=text, effect=effect)

    async def _complete(self, request: LlmRequest) -> str:
        for attempt in range(self.config.llm_retries + 1):
            try:
                return (await complete(self.llm, request, ResponseBuilder())).text
            except LlmError as exc:
                if not exc.retryable or attempt == self.config.llm_retries:
                    raise
                self.narrator.note("retry", f"{exc.message}; retrying")
                await asyncio.sleep(self.config.retry_delay * 2 ** attempt)
        raise AssertionError("unreachable")


    # -- the other actions ---------------------------------------------------------------

    def _record_plan(self, ctx: ActionContext) -> None:
        """Keep the plan for the explorer; one not of "2-4 step[s]" (the seed) is kept and reported."""
        self.plan = str(ctx.envelope.payload).strip()
        steps = plan_steps(self.plan)
        if not 2 <= steps <= 4:
            self.violations.append(f"the plan has {steps} steps, not 2-4")
            self.narrator.note("violation", f"the planner's plan has {steps} steps; the seed asks for 2-4")

    def _run_commands(self, pending: Pending | None) -> None:
        commands = self._commands
        turn = int(self.engine.vars["turns"])

        async def run(activity: Activity) -> None:
            if not begin_effect(self, pending):
                return
            outputs = []
            for command in commands:
                output = await self.runner.run(command)
                self.narrator.note("command", f"{command} -> {output.splitlines()[0] if output else ''}")
                outputs.append((command, output))
            activity.feed(self, "CommandsExecuted", payload=(turn, outputs),
                          effect=report(pending, "completed", outputs_json(turn, outputs)))
        self.spawn("commands", run)

    def _record_outputs(self, ctx: ActionContext) -> None:
        turn, outputs = ctx.envelope.payload
        self.last_outputs = [self.memory.add(turn, command, output) for command, output in outputs]

    def _discard_conclusion(self, ctx: ActionContext) -> None:
        reply: Reply = ctx.envelope.payload
        self.narrator.note("discarded", f"the explorer cannot conclude: {reply.conclusion}")

    def _apply_memory(self, ctx: ActionContext) -> None:
        reply: Reply = ctx.envelope.payload
        self._check_phrases(reply)
        for complaint in self.memory.apply(reply.commands):
            self.narrator.note("memory", complaint)
        self.last_remark = reply.prose

    def _reject_commands(self, ctx: ActionContext) -> None:
        reply: Reply = ctx.envelope.payload
        found = [f"$({c})" for c in reply.of(EXPLORE)] + reply.markdown_commands
        self.violations.append(", ".join(found))
        self.narrator.note("violation", f"the evaluator may not explore; not run: {', '.join(found)}")

    def _check_phrases(self, reply: Reply) -> None:
        """The evaluator "NEVER say[s] 'I need to', 'Let me', or 'I will'" (the seed): the reply is kept
        and the slip reported, as a plan of the wrong length is (every evaluator row applies memory)."""
        said = [phrase for phrase in FORBIDDEN_PHRASES if phrase.lower() in reply.text.lower()]
        if said:
            self.violations.append(f"the evaluator said {', '.join(repr(p) for p in said)}")
            self.narrator.note("violation", f"the evaluator said {', '.join(repr(p) for p in said)}; the seed "
                                            "forbids it")

    def _return_answer(self, ctx: ActionContext) -> None:
        reply: Reply = ctx.envelope.payload
        assert reply.conclusion is not None
        self.answer = reply.conclusion.argument
        self.narrator.note("answer", self.answer)

    def _out_of_turns(self, ctx: ActionContext) -> None:
        self.narrator.note("out-of-turns", f"no answer within {ctx.outcome.vars['turns']} turns")


    # -- durable runs (``agentfsm.impl.durable.driver.EffectAgent``) ----------------------

    def payload_json(self, envelope: Envelope) -> JSON:
        payload = envelope.payload
        if isinstance(payload, Reply):
            return payload.text
        if envelope.event == "CommandsExecuted":
            return outputs_json(*payload)
        return payload if isinstance(payload, str) else None

    def _payload(self, event: str, data: JSON) -> Any:
        """The payload ``payload_json`` journaled, as the hooks take it."""
        if event in REPLIES:
            return parse_reply(str(data))
        if event == "CommandsExecuted":
            return outputs_from_json(data)
        return data

    def effect_calls(self, envelope: Envelope) -> Calls:
        """RunCommands runs the commands of the explorer's reply, as it wrote them."""
        reply = envelope.payload
        if envelope.event != "ExplorerReplied" or not isinstance(reply, Reply):
            return {}
        return {"RunCommands": Described("", [f"$({c})" for c in reply.of(EXPLORE)])}

    def perform(self, effect: Effect, retry: bool) -> None:
        pending = Pending(effect.key, retry)
        if effect.action in LLM_CALLS:
            self._call(effect.action, pending)
        elif effect.action == "RunCommands":
            self._run_commands(pending)
        else:
            raise ValueError(f"the explorer/evaluator agent has no effect {effect.action!r}")

    def status_query(self, call: EffectCall) -> StatusReply | None:
        return None  # neither the model nor a command can say what became of an earlier call

    def report_back(self, effect: Effect) -> None:
        """Feed back an outcome settled without its event (a user's decision on commands whose
        run was cut short: their output is lost, and the evaluator is told so)."""
        result = effect.result if isinstance(effect.result, dict) else {}
        outcome: Literal["completed", "failed"] = "completed" if effect.status == "completed" else "failed"
        settled = Report(effect.key, outcome, effect.result, effect.via)
        if effect.action == "RunCommands":
            turn = int(self.engine.vars["turns"])
            if "outputs" in result:
                turn, outputs = outputs_from_json(result)
            else:
                lost = (f"(the process stopped while this ran; {effect.via} settled it as {outcome}, "
                        "its output is lost)")
                outputs = [(command, lost) for command in self._commands]
            self.feed("CommandsExecuted", payload=(turn, outputs), effect=settled)
        else:
            feed = {"CallPlannerLlm_TaskOnly": "PlannerReplied", "CallEvaluatorLlm_WorkingMemory": "EvaluatorReplied"}
            self._feed_reply(lambda agent, event, **kw: self.feed(event, **kw),
                             feed.get(effect.action, "ExplorerReplied"), str(result.get("text", "")), settled)

    def restore(self, records: Sequence[Record]) -> None:
        """Rebuild the task, plan, working memory and answer from the journal (told nothing again)."""
        told, self.narrator = self.narrator, Notes()
        try:
            replay(self, records, self._payload, CONTEXT_ACTIONS)
        finally:
            self.narrator = told

    def resumed(self) -> None:
        """Nothing beyond effects: the loop has no timers."""
