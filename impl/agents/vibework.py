"""The vibework agent (seed 002) on the driver: the table decides, this module performs.

An LLM reply becomes one of the table's events: text only (``TextResponse``), a
``complete_task`` call (``TaskFinished``), an ``AskUserQuestion`` call
(``QuestionsAsked``) or a batch of tool calls (``ToolUse``, with the permission rules'
verdict on the first call). Tools run one at a time, as the table's ``ExecutingTool``
has one current call; each is auto-allowed by a rule or waits for the
``PermissionPrompt``. ``spawn_agent`` starts a child agent on the same ``Sessions``
runtime and waits for it (``WaitingForSubAgent``); a child ending in ``Error`` is the
parent's ``SubAgentFailed``.

Every tool call of a reply gets exactly one result in the conversation: its output, a
denial, an error, or "Interrupted" (the table's Answer* actions say which). The "current"
call is always the first call of the batch without a result.

Interrupts are the table's ``Interrupt`` event, delivered only where a row takes it; its
actions do the work (cancel the stream and keep the partial text, answer the pending
permission "Interrupted", withdraw the questions). While a tool or sub-agent runs it
completes first (a sub-agent is interrupted too, so it completes soon).

Run durably (``agentfsm run --store``), the LLM calls and tool executions are journaled
effects whose outcomes come back with their events, and a resumed agent rebuilds its
conversation from the journaled payloads. A sub-agent is a child run of its parent's
``ExecuteTool`` effect (``agentfsm.impl.durable.children``): its own LLM calls and tools are
journaled there, the parent's effect completes with its answer, and after a crash the
spawn's status query answers ``resume``: the child run is recovered (its unknown tools
follow the same rules as the parent's) and continues where it stopped.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from agentfsm.impl.agents.journaled import Pending, begin_effect, call_args, replay, report
from agentfsm.impl.agents.loom import (
    INTERRUPTED,
    Display,
    Transcript,
    payload_json,
    response_from_json,
    response_json,
)
from agentfsm.impl.agents.prompts import (
    PermissionPrompt,
    PermissionRequest,
    PermissionRules,
    QuestionRequest,
    TerminalPrompt,
    UserQuestionPrompt,
)
from agentfsm.impl.agents.tools import Toolbox, ToolResult, builtin_tools
from agentfsm.impl.driver import LOG, ActionContext, Activity, Driver, Envelope
from agentfsm.impl.durable.children import child_run_id, decisions_of
from agentfsm.impl.durable.driver import DurableLink
from agentfsm.impl.durable.run import Calls, Decision, Described, DurableRun, EffectCall, Report, StatusReply
from agentfsm.impl.durable.state import Effect
from agentfsm.impl.engine import Engine
from agentfsm.impl.llm.client import (
    LlmClient,
    LlmError,
    LlmRequest,
    LlmResponse,
    Message,
    ResponseBuilder,
    ToolCall,
    complete,
)
from agentfsm.impl.stores.journal import JSON, STEP, Record
from agentfsm.spec import Table

ASK = "AskUserQuestion"
FINISH = "complete_task"
SPAWN = "spawn_agent"
SETTLED = frozenset({"Idle", "Done", "Error"})  # nothing more happens without new input
RESPONSES = frozenset({"TextResponse", "ToolUse", "QuestionsAsked", "TaskFinished"})
RESULTS = frozenset({"ToolCompleted", "ToolFailed", "SubAgentCompleted", "SubAgentFailed", "QuestionsAnswered"})
# Internal actions that only update the conversation: replayed when a durable run resumes.
CONTEXT_ACTIONS = frozenset({"AnswerToolDenied", "AnswerToolError", "AnswerToolInterrupted",
                             "AnswerRemainingToolsInterrupted", "KeepPartialText", "DiscardThinkingAndToolCalls",
                             "CancelQuestions", "ReportError", "ClearError"})
WAITING = {"permissions": "WaitingForPermission", "answers": "WaitingForUserInput"}
"""Where the agent waits for a verdict or answers: a step out of it used one (answered, or withdrawn)."""

AGENT_TOOLS = {
    ASK: ("Ask the user one or more questions and wait for the answers.",
          {"type": "object", "properties": {"questions": {"type": "array", "items": {"type": "string"}}},
           "required": ["questions"]}),
    FINISH: ("Declare the task complete (call it last, alone or after the other calls).",
             {"type": "object", "properties": {"summary": {"type": "string"}}}),
    SPAWN: ("Hand a sub-task to a sub-agent and wait for its final answer.",
            {"type": "object", "properties": {"task": {"type": "string"}}, "required": ["task"]}),
}


@dataclass
class VibeworkConfig:
    workdir: Path = field(default_factory=Path.cwd)
    system_prompt: str | None = None
    allow: tuple[str, ...] = ("read_file", "list_dir")  # permission rules: tool-name patterns
    tool_timeout: float = 120.0
    command_timeout: float = 60.0
    tool_errors_fatal: bool = True  # a tool's error is ToolFailed (Error), else a result for the model
    max_depth: int = 1              # sub-agents of sub-agents: depth below which spawn_agent is offered
    interactive: bool = True        # a user answers permission requests; False auto-allows every tool


@dataclass(frozen=True)
class AgentState:
    """The seed's ``AgentState`` with its payload (``state()`` gives the name alone)."""

    name: str
    tool_name: str | None = None
    tool_use_id: str | None = None
    session_id: str | None = None
    request_id: str | None = None
    message: str | None = None


@dataclass(frozen=True)
class SubAgentEnd:
    """How a sub-agent settled: its parent's tool result says it. ``used`` is what it took of the
    scripts it shares with its parent (replies, verdicts, answers) when its run is not in the
    parent's store, so that the parent's resume skips them too."""

    session_id: str
    state: str
    error: str | None
    answer: str
    used: Mapping[str, int] = field(default_factory=dict)


class Sessions:
    """The runtime the agents share: ``get(session_id)`` finds a parent's child, as the seed's ``runtime.get``."""

    def __init__(self) -> None:
        self.agents: dict[str, VibeworkAgent] = {}
        self._count = 0

    def register(self, agent: VibeworkAgent) -> str:
        self._count += 1
        session_id = f"session-{self._count}"
        self.agents[session_id] = agent
        return session_id

    def get(self, session_id: str) -> VibeworkAgent | None:
        return self.agents.get(session_id)


class VibeworkAgent(Driver):
    """A running vibework agent: ``send_input()``, ``interrupt()``, ``shutdown()`` and the monitoring API."""

    def __init__(self, table: Table, llm: LlmClient, *, config: VibeworkConfig | None = None,
                 toolbox: Toolbox | None = None, permissions: PermissionPrompt | None = None,
                 questions: UserQuestionPrompt | None = None, display: Display | None = None,
                 sessions: Sessions | None = None, depth: int = 0, name: str = "vibework",
                 logger: logging.Logger = LOG) -> None:
        self.config = config or VibeworkConfig()
        super().__init__(
            Engine(table), name=name, logger=logger, shutdown_event="Shutdown", idle_states={"Idle"},
            processing_states={"Processing"},
            actions={"CallLlm": lambda ctx: self._call_llm(None),
                     "RequestPermission": lambda ctx: self._request_permission(),
                     "ExecuteTool": lambda ctx: self._execute_tool(None), "AwaitSubAgent": self._await_sub_agent,
                     "SendQuestions": lambda ctx: self._send_questions(), "AnswerToolDenied": self._answer_denied,
                     "AnswerToolError": self._answer_error, "AnswerToolInterrupted": self._answer_interrupted,
                     "AnswerRemainingToolsInterrupted": self._answer_remaining,
                     "CancelLlmRequest": lambda ctx: self._cancel("llm"), "KeepPartialText": self._keep_partial,
                     "DiscardThinkingAndToolCalls": self._discard_partial,
                     "CancelQuestions": self._cancel_questions, "ReportError": self._report_error,
                     "ClearError": self._clear_error, "ReleaseAgent": lambda ctx: self.cancel_all(),
                     "ProcessInput": self._process_input},
            on_event={"UserInput": self._user_input, "TextResponse": self._response,
                      "ToolUse": self._response, "QuestionsAsked": self._response,
                      "TaskFinished": self._task_finished, "ToolCompleted": self._result,
                      "ToolFailed": self._result, "SubAgentCompleted": self._result,
                      "SubAgentFailed": self._result, "QuestionsAnswered": self._result,
                      "SubAgentSpawned": self._sub_agent_spawned, "LlmFailed": self._failed,
                      "InternalError": self._failed})
        self.llm = llm
        self.toolbox = toolbox or Toolbox(builtin_tools(self.config.workdir, self.config.command_timeout),
                                          self.config.tool_timeout)
        terminal = TerminalPrompt(interactive=False)
        self.permissions: PermissionPrompt = permissions or terminal
        self.questions: UserQuestionPrompt = questions or terminal
        self.display: Display = display or Transcript()
        self.sessions = sessions or Sessions()
        self.session_id = self.sessions.register(self)
        self.depth = depth
        self.rules = PermissionRules(tuple(self.config.allow))
        self.max_tools = table.event("ToolUse").params[0].hi
        self.conversation: list[Message] = []
        if self.config.system_prompt:
            self.conversation.append({"role": "system", "content": self.config.system_prompt})
        self.error: str | None = None
        self.child: VibeworkAgent | None = None
        self.child_decisions: Mapping[str, str] = {}
        """The user's decisions (``--decide``) for the effects of this agent's child runs (durable runs)."""
        self._children: dict[str, tuple[VibeworkAgent, DurableLink]] = {}  # child runs recovery opened, by spawn key
        self._blocked = False  # a child run waits for the user's decision: nothing goes on until a resume
        self._partial = ResponseBuilder()
        self._batch: list[ToolCall] = []
        self._answered: set[str] = set()
        self._request_id = 0
        self._latest: dict[str, Activity] = {}

    def send_input(self, text: str, event_id: str | None = None) -> None:
        self.feed("UserInput", payload=text, event_id=event_id)

    # -- monitoring ----------------------------------------------------------------------

    def is_done(self) -> bool:
        return self.engine.state == "Done" or super().is_done()

    def settled(self) -> bool:
        """Idle, Done or Error with nothing left to do: the agent waits for new input (or, durably,
        for the user's decision in a child run: ``decisions()``)."""
        return (self.engine.state in SETTLED or self._blocked) and self.is_quiet()

    async def wait_settled(self) -> None:
        await self.wait_until(self.settled)

    def detail(self) -> AgentState:
        state = self.engine.state
        call = self._current()
        if state == "ExecutingTool" and call is not None:
            return AgentState(state, tool_name=call.name, tool_use_id=call.id)
        if state == "WaitingForPermission" and call is not None:
            return AgentState(state, tool_name=call.name, tool_use_id=call.id)
        if state == "WaitingForSubAgent" and self.child is not None:
            return AgentState(state, session_id=self.child.session_id)
        if state == "WaitingForUserInput":
            return AgentState(state, request_id=f"{self.session_id}/q{self._request_id}")
        if state == "Error":
            return AgentState(state, message=self.error)
        return AgentState(state)

    def last_text(self) -> str:
        """The latest assistant text (a sub-agent's answer to its parent)."""
        for message in reversed(self.conversation):
            if message["role"] == "assistant" and message.get("content"):
                return str(message["content"])
        return ""

    # -- the batch -----------------------------------------------------------------------

    def _unanswered(self) -> list[ToolCall]:
        return [call for call in self._batch if call.id not in self._answered]

    def _current(self) -> ToolCall | None:
        pending = self._unanswered()
        return pending[0] if pending else None

    def _allows(self, call: ToolCall) -> bool:
        """Auto-allowed: the agent's own tools, a matching permission rule, or non-interactive
        mode (WaitingForPermission is for "Interactive mode enabled": nobody could answer)."""
        return not self.config.interactive or call.name in (ASK, FINISH) or self.rules.allows(call.name)

    def _next_allowed(self) -> bool:
        """The rules' verdict on the call after the current one (fed with the current call's completion)."""
        pending = self._unanswered()
        return len(pending) > 1 and self._allows(pending[1])

    def _record(self, result: ToolResult) -> None:
        if result.call_id in self._answered:
            return
        self._answered.add(result.call_id)
        self.conversation.append(result.as_message())
        self.display.tool(result)

    def _answer(self, call: ToolCall | None, content: str, is_error: bool = True) -> None:
        if call is not None:
            self._record(ToolResult(call.id, call.name, content, is_error))

    # -- context, from accepted events ---------------------------------------------------

    def _user_input(self, ctx: ActionContext) -> None:
        if ctx.outcome.state == "Processing":  # in Done or Error it is taken to Idle first (ProcessInput)
            self.conversation.append({"role": "user", "content": str(ctx.envelope.payload)})

    def _process_input(self, ctx: ActionContext) -> None:
        self.feed("UserInput", payload=ctx.envelope.payload)

    def _response(self, ctx: ActionContext) -> None:
        response: LlmResponse = ctx.envelope.payload
        self._partial = ResponseBuilder()
        self.conversation.append(response.as_message())
        if response.text:
            self.display.text(response.text)
        calls = list(response.tool_calls)
        self._batch, self._answered = calls, set()
        if ctx.envelope.event == "QuestionsAsked":
            ask = next(call for call in calls if call.name == ASK)
            self._batch = [ask] + [call for call in calls if call is not ask]
            for call in self._batch[1:]:
                self._answer(call, f"not run: {ASK} must be alone in a response")
        for call in calls[self.max_tools:]:
            self._answer(call, f"not run: at most {self.max_tools} tool calls per response")

    def _task_finished(self, ctx: ActionContext) -> None:
        payload = ctx.envelope.payload
        if isinstance(payload, LlmResponse):
            self._response(ctx)
        self._answer(self._current(), "Task complete.", is_error=False)

    def _result(self, ctx: ActionContext) -> None:
        result: ToolResult = ctx.envelope.payload
        self._record(result)
        if ctx.envelope.event in ("ToolFailed", "SubAgentFailed"):
            self.error = f"{result.name}: {result.content}"

    def _sub_agent_spawned(self, ctx: ActionContext) -> None:
        self.log.info("%s: sub-agent %s spawned", self.name, ctx.envelope.payload, extra={"agent": self.name})

    def _failed(self, ctx: ActionContext) -> None:
        self.error = str(ctx.envelope.payload or ctx.envelope.event)

    # -- actions -------------------------------------------------------------------------

    def _schemas(self) -> tuple[dict[str, object], ...]:
        own = [{"type": "function", "function": {"name": name, "description": text, "parameters": params}}
               for name, (text, params) in AGENT_TOOLS.items() if name != SPAWN or self.depth < self.config.max_depth]
        return self.toolbox.schemas() + tuple(own)

    def _call_llm(self, pending: Pending | None) -> None:
        request = LlmRequest(tuple(self.conversation), self._schemas())
        self._start("llm", lambda activity: self._stream(activity, request, pending))

    async def _stream(self, activity: Activity, request: LlmRequest, pending: Pending | None) -> None:
        if not begin_effect(self, pending):
            return
        builder = self._partial = ResponseBuilder()
        try:
            response = await complete(self.llm, request, builder)
        except LlmError as exc:
            activity.feed(self, "LlmFailed", payload=exc.message,
                          effect=report(pending, "failed", {"error": exc.message}))
            return
        self._feed_response(activity.feed, response,
                            report(pending, "completed", {"response": response_json(response)}))

    def _feed_response(self, send: Callable[..., None], response: LlmResponse, effect: Report | None) -> None:
        """The event an LLM response is: text, questions, the task finished, or a batch of tools."""
        calls = response.tool_calls
        if not calls:
            send(self, "TextResponse", payload=response, effect=effect)
        elif any(call.name == ASK for call in calls):
            send(self, "QuestionsAsked", payload=response, effect=effect)
        elif len(calls) == 1 and calls[0].name == FINISH:
            send(self, "TaskFinished", payload=response, effect=effect)
        else:
            send(self, "ToolUse", payload=response, effect=effect, tools=min(len(calls), self.max_tools),
                 rule_allows=self._allows(calls[0]))

    def _request_permission(self) -> None:
        call = self._current()
        assert call is not None, "RequestPermission with no pending call"
        description = AGENT_TOOLS[call.name][0] if call.name in AGENT_TOOLS else \
            self.toolbox.tools[call.name].description if call.name in self.toolbox.tools else "unknown tool"
        request = PermissionRequest(call.name, call.id, description, call.arguments)

        async def ask(activity: Activity) -> None:
            try:
                granted = await self.permissions.ask(request)
            except Exception as exc:  # the prompt's own failure is the table's PermissionFailed
                activity.feed(self, "PermissionFailed", payload=f"permission handling failed: {exc}",
                              next_rule_allows=self._next_allowed())
                return
            activity.feed(self, "PermissionGranted" if granted else "PermissionDenied")
        self._start("permission", ask)

    def _execute_tool(self, pending: Pending | None) -> None:
        call = self._current()
        assert call is not None, "ExecuteTool with no pending call"
        self._start("tool", lambda activity: self._run_tool(activity, call, pending))

    async def _run_tool(self, activity: Activity, call: ToolCall, pending: Pending | None) -> None:
        if not begin_effect(self, pending):
            return
        if call.name == SPAWN:
            await self._run_sub_agent(activity, call, pending)
            return
        if call.name == FINISH:
            if len(self._unanswered()) == 1:
                activity.feed(self, "TaskFinished", effect=report(pending, "completed", {"finished": True}))
            else:
                self._finish_tool(activity, ToolResult(call.id, call.name,
                                                       f"ignored: {FINISH} must be the last call of a response"),
                                  pending)
            return
        self._finish_tool(activity, await self.toolbox.execute(call), pending)

    def _finish_tool(self, activity: Activity, result: ToolResult, pending: Pending | None) -> None:
        """Feed a call's result; durably it reports the execution."""
        failed = result.is_error and self.config.tool_errors_fatal
        effect = report(pending, "failed" if failed else "completed", {"result": asdict(result)})
        if failed:
            activity.feed(self, "ToolFailed", payload=result, effect=effect)
        else:
            activity.feed(self, "ToolCompleted", payload=result, effect=effect, next_rule_allows=self._next_allowed())

    async def _run_sub_agent(self, activity: Activity, call: ToolCall, pending: Pending | None) -> None:
        try:
            task = json.loads(call.arguments or "{}").get("task")
        except (json.JSONDecodeError, AttributeError):
            task = None
        if not isinstance(task, str) or not task:
            self._finish_tool(activity, ToolResult(call.id, call.name, "argument 'task' must be a string", True),
                              pending)
            return
        if self.depth >= self.config.max_depth:
            self._finish_tool(activity, ToolResult(call.id, call.name, "sub-agents may not spawn sub-agents "
                                                   f"deeper than {self.config.max_depth}", True), pending)
            return
        ended = await self.sub_agent(activity, task, pending)
        if ended is None:
            return
        if ended.state == "Error":
            result = ToolResult(call.id, call.name, f"sub-agent {ended.session_id} failed: {ended.error}", True)
            activity.feed(self, "SubAgentFailed", payload=result,
                          effect=report(pending, "failed", {"result": asdict(result), **ended.used}))
        else:
            result = ToolResult(call.id, call.name, ended.answer or "(the sub-agent gave no answer)")
            activity.feed(self, "SubAgentCompleted", next_rule_allows=self._next_allowed(), payload=result,
                          effect=report(pending, "completed", {"result": asdict(result), **ended.used}))

    async def sub_agent(self, activity: Activity, task: str, pending: Pending | None) -> SubAgentEnd | None:
        """Run the sub-agent on ``task`` until it settles (durably on its child run, in this store);
        None when it ends elsewhere (a runtime that runs it as its own run reports it later)."""
        link = None
        if pending is not None and isinstance(self.durability, DurableLink):
            child, link = self._child_run(pending.key)
        else:
            child = self._new_child()
        self.child = child
        child.start()
        try:
            if link is not None:
                link.resume()
            resumed = self.spawn_resumed()
            if not resumed:
                activity.feed(self, "SubAgentSpawned", payload=child.session_id)
            child.send_input(task, event_id="task")  # a resumed child run holds it already: a duplicate
            if resumed and self.engine.vars["interrupted"]:  # journaled for the parent, maybe not for the child
                self._interrupt_child()
            await child.wait_settled()
            ended = SubAgentEnd(child.session_id, child.state(), child.error, child.last_text())
            child.durability = None  # the child run ends where it settled: its release is not journaled
        finally:
            await child.shutdown()
        return ended

    def spawn_resumed(self) -> bool:
        """A spawn resumed (or rerun) after a crash: its SubAgentSpawned is journaled already."""
        return self.engine.state == "WaitingForSubAgent"

    def _new_child(self) -> VibeworkAgent:
        child = VibeworkAgent(
            self.table, self.llm, config=self.config, toolbox=self.toolbox, permissions=self.permissions,
            questions=self.questions, display=self.display, sessions=self.sessions, depth=self.depth + 1,
            name=f"{self.name}/sub{self.depth + 1}", logger=self.log)
        child.child_decisions = self.child_decisions
        return child

    def _child_run(self, key: str) -> tuple[VibeworkAgent, DurableLink]:
        """The sub-agent of the spawn effect ``key`` on its child run: the one recovery opened, else a
        new run (or one a decided ``rerun`` finds: recovered, with the user's decisions for it)."""
        opened = self._children.pop(key, None)
        if opened is not None:
            return opened
        link = self.durability
        assert isinstance(link, DurableLink)
        store, run_id = link.run.store, child_run_id(key)
        runs = store.runs()
        child = self._new_child()
        return child, DurableLink.open(child, child, store, run_id, run_id in runs,
                                       decisions_of(run_id, self.child_decisions, runs))

    def runs(self) -> list[DurableRun]:
        """This agent's durable run and the child runs its recovery opened (theirs too), to resume."""
        link = self.durability
        own = [link.run] if isinstance(link, DurableLink) else []
        return own + [run for child, _ in self._children.values() for run in child.runs()]

    def decisions(self) -> list[Decision]:
        """What only the user can settle in this agent's run and the child runs its recovery opened:
        ``agentfsm run`` prints them and stops before anything runs."""
        return [decision for run in self.runs() for decision in run.decisions()]

    def _await_sub_agent(self, ctx: ActionContext) -> None:
        if ctx.outcome.vars["interrupted"]:
            self._interrupt_child()

    def _interrupt_child(self) -> None:
        child = self.child
        if child is not None and not child.is_done():
            self.spawn("interrupt-sub-agent", lambda activity: child.interrupt())

    def _send_questions(self) -> None:
        call = self._current()
        assert call is not None and call.name == ASK
        try:
            asked = json.loads(call.arguments or "{}").get("questions")
        except (json.JSONDecodeError, AttributeError):
            asked = None
        questions = tuple(str(q) for q in asked) if isinstance(asked, list) and asked else ("(no question given)",)
        self._request_id += 1
        request = QuestionRequest(f"{self.session_id}/q{self._request_id}", questions)

        async def ask(activity: Activity) -> None:
            try:
                answers = await self.questions.ask(request)
            except Exception as exc:  # nobody can answer: an internal error of the agent
                activity.feed(self, "InternalError", payload=f"asking the user failed: {exc}")
                return
            text = "\n".join(f"Q: {q}\nA: {a}" for q, a in zip(questions, answers, strict=False))
            activity.feed(self, "QuestionsAnswered", payload=ToolResult(call.id, call.name, text))
        self._start("questions", ask)

    def _answer_denied(self, ctx: ActionContext) -> None:
        self._answer(self._current(), "Permission denied by the user")

    def _answer_error(self, ctx: ActionContext) -> None:
        self._answer(self._current(), str(ctx.envelope.payload or "permission handling failed"))

    def _answer_interrupted(self, ctx: ActionContext) -> None:
        self._cancel("permission")
        self._answer(self._current(), INTERRUPTED)

    def _answer_remaining(self, ctx: ActionContext) -> None:
        for call in self._unanswered():
            self._answer(call, INTERRUPTED)

    def _keep_partial(self, ctx: ActionContext) -> None:
        given = ctx.envelope.payload  # the text streamed so far, journaled with the Interrupt
        partial = given if isinstance(given, str) else self._partial.partial_text()
        if partial:
            self.conversation.append({"role": "assistant", "content": partial})
            self.display.text(partial)

    def _discard_partial(self, ctx: ActionContext) -> None:
        self._partial = ResponseBuilder()

    def _cancel_questions(self, ctx: ActionContext) -> None:
        self._cancel("questions")
        self._answer(self._current(), INTERRUPTED)

    def _report_error(self, ctx: ActionContext) -> None:
        for name in ("llm", "tool", "permission", "questions"):
            self._cancel(name)
        self._answer_remaining(ctx)  # an internal error leaves no call without a result
        self.display.error(self.error or "error")

    def _clear_error(self, ctx: ActionContext) -> None:
        self.error = None

    def _start(self, name: str, work: Callable[[Activity], Coroutine[Any, Any, None]]) -> None:
        self._latest[name] = self.spawn(name, work)

    def _cancel(self, name: str) -> None:
        """Stop the latest activity of that kind; if it already ended, its queued event is dropped all the same."""
        self.cancel(self._latest.pop(name, None))

    # -- interrupts and shutdown ---------------------------------------------------------

    def on_interrupt(self) -> None:
        state = self.engine.state
        if state in SETTLED:
            return
        if state in ("ExecutingTool", "WaitingForSubAgent") and self.engine.vars["interrupted"]:
            return
        self.apply(Envelope("Interrupt", payload=self._partial.partial_text() or None))
        if state == "WaitingForSubAgent":
            self._interrupt_child()

    def on_shutdown(self) -> None:
        """``Shutdown`` ends the task in Done from any state ("Done when: shutdown requested");
        its actions answer the calls left and release every activity."""
        if self.engine.state != "Done":
            self.apply(Envelope("Shutdown"))


    # -- durable runs (``agentfsm.impl.durable.driver.EffectAgent``) ----------------------

    def payload_json(self, envelope: Envelope) -> JSON:
        return payload_json(envelope.payload)

    def _payload(self, event: str, data: JSON) -> Any:
        """The payload ``payload_json`` journaled, as the hooks take it."""
        if event in RESPONSES:
            return response_from_json(data)
        if event in RESULTS:
            return ToolResult(**data)
        return data

    def effect_calls(self, envelope: Envelope) -> Calls:
        """ExecuteTool runs one call: a response's first (ToolUse), the current one once permitted,
        else the one after the current call, which this event answers (ToolFinished goes on to it)."""
        payload = envelope.payload
        pending = self._unanswered()
        if isinstance(payload, LlmResponse):
            pending = list(payload.tool_calls[:self.max_tools])
        elif envelope.event != "PermissionGranted":
            pending = pending[1:]
        return {"ExecuteTool": Described(pending[0].name, call_args(pending[0]))} if pending else {}

    def perform(self, effect: Effect, retry: bool) -> None:
        """Start an effect's activity; a spawn whose child run waits for the user's decision is left
        as it is (the agent is then settled: ``decisions()`` says what a later ``--resume`` needs)."""
        pending = Pending(effect.key, retry)
        opened = self._children.get(effect.key)
        if opened is not None and opened[0].decisions():
            self._blocked = True
        elif effect.action == "CallLlm":
            self._call_llm(pending)
        elif effect.action == "ExecuteTool":
            self._execute_tool(pending)
        elif effect.action == "CancelLlmRequest":
            self._cancel_llm(pending)
        else:
            raise ValueError(f"the vibework agent has no effect {effect.action!r}")

    def _cancel_llm(self, pending: Pending) -> None:
        """Stop the stream; the LLM call it cut short has no outcome (settled failed, ``via: cancel``)."""
        link = self.durability
        if not begin_effect(self, pending) or not isinstance(link, DurableLink):
            return
        self._cancel("llm")
        run = link.run
        for effect in list(run.st.effects.values()):
            if effect.action == "CallLlm" and effect.status == "started":
                run.settle(effect.key, "failed", {"error": "cancelled"}, "cancel")
        run.settle(pending.key, "completed", None, "run")

    def status_query(self, call: EffectCall) -> StatusReply | None:
        """A spawn's sub-agent resumes on its child run (``resume``; the run is opened, and recovered,
        now); neither the model nor the tools can say what became of any other earlier call. A spawn
        journaled before sub-agents had child runs (the parent already waits for it, but no child
        run exists) ran inside its effect, unjournaled: it stays a decision, as it was."""
        call_now = self._current()
        link = self.durability
        if call.action != "ExecuteTool" or call_now is None or call_now.name != SPAWN \
                or not isinstance(link, DurableLink):
            return None
        if self.engine.state == "WaitingForSubAgent" and child_run_id(call.key) not in link.run.store.runs():
            return None
        self._children[call.key] = self._child_run(call.key)
        return ("resume", None)

    def report_back(self, effect: Effect) -> None:
        """Feed back an outcome the user decided (an execution or LLM call the crash left unknown)."""
        if effect.via not in ("user", "status"):
            return  # settled by the agent itself (a cancelled stream): no event to feed
        result = effect.result if isinstance(effect.result, dict) else {}
        outcome: Literal["completed", "failed"] = "completed" if effect.status == "completed" else "failed"
        settled = Report(effect.key, outcome, effect.result, effect.via)
        if effect.action == "CallLlm":
            response = response_from_json(result.get("response"))
            if response is None:
                self.feed("LlmFailed", payload=f"the LLM call was settled {outcome} by the {effect.via}, its "
                          "response is lost", effect=settled)
            else:
                self._feed_response(lambda agent, event, **kw: self.feed(event, **kw), response, settled)
            return
        call = self._current()
        if effect.action != "ExecuteTool" or call is None:
            return
        data = result.get("result")
        tool = ToolResult(**data) if isinstance(data, dict) else ToolResult(
            call.id, call.name, f"(the process stopped while this ran; the {effect.via} settled it as {outcome}, "
            "its output is lost)", outcome == "failed")
        spawned = call.name == SPAWN
        if outcome == "failed":
            self.feed("SubAgentFailed" if spawned else "ToolFailed", payload=tool, effect=settled)
        else:
            self.feed("SubAgentCompleted" if spawned else "ToolCompleted", payload=tool, effect=settled,
                      next_rule_allows=self._next_allowed())

    def restore(self, records: Sequence[Record]) -> None:
        """Rebuild the conversation, the batch and its answers from the journal (shown nothing again)."""
        shown, self.display = self.display, Transcript()
        try:
            replay(self, records, self._payload, CONTEXT_ACTIONS)
        finally:
            self.display = shown
        self._request_id = sum(1 for r in records if r.kind == STEP and r.body["status"] == "fired"
                               and "SendQuestions" in r.body["actions"])

    def resumed(self) -> None:
        """Ask again what the crash left unanswered: a permission, the user's questions."""
        if self.engine.state == "WaitingForPermission":
            self._request_permission()
        elif self.engine.state == "WaitingForUserInput":
            self._send_questions()


def vibework_config(workdir: Path, settings: dict[str, object], allow: Sequence[str] | None) -> VibeworkConfig:
    """A config from a script's ``settings`` and ``allow``; raises TypeError for an unknown setting."""
    config = VibeworkConfig(workdir=workdir, **settings)  # type: ignore[arg-type]
    if allow is not None:
        config.allow = tuple(allow)
    return config

