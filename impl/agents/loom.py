"""The Loom agent (seed 000) on the driver: the table's actions mapped to real work.

SendLlmRequest streams a reply (TextDelta, ToolCallDelta, then LlmCompleted or LlmError);
ExecuteTools runs the response's tool calls concurrently, each feeding ToolCompleted (or
ToolExecutionFailed when it could not be executed at all); RunPostToolsHook commits the
work directory to git (PostToolsHookFailed when git fails); entering Error starts a retry
timer with exponential backoff that feeds RetryTimeoutFired, and the table's ``origin``
says what is retried: the LLM request, only the tool calls that could not run (each
keeps its call id), or the hook. Tool calls the retries could not run reach the model as
error outcomes. The conversation context is kept here and updated from accepted events,
as Loom threads it through its states.

Interrupts follow vibework's rules, in Loom's terms (the turn ends in WaitingForUserInput
rather than Done): while the LLM streams, the partial text is kept and all tool calls are
dropped; while tools run, tools already started complete and the remaining ones get an
"Interrupted" error; a pending retry is abandoned (its timer fires at once: the tool calls
it would re-run get "Interrupted", a hook runs as after any batch). The table stays in
charge: the driver only feeds events the table declares (an interrupted turn answers its
next SendLlmRequest with an empty completion instead of calling the model). In a durable
run the interrupt is journaled before it acts (an ``interrupt`` record: the table has no
interrupt event), so a resume after a crash keeps the turn interrupted.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from agentfsm.impl.agents.journaled import Pending, begin_effect, call_args, journal_interrupt, replay, report
from agentfsm.impl.agents.tools import HookFailed, Toolbox, ToolResult, ToolUnavailable, builtin_tools, git_commit
from agentfsm.impl.driver import LOG, ActionContext, Activity, Driver, Envelope
from agentfsm.impl.durable.run import CallSpec, EffectCall, Report, StatusReply
from agentfsm.impl.durable.state import Effect
from agentfsm.impl.engine import Engine, Outcome
from agentfsm.impl.llm.client import (
    LlmClient,
    LlmError,
    LlmRequest,
    LlmResponse,
    Message,
    ResponseBuilder,
    TextChunk,
    ToolCall,
    ToolCallChunk,
)
from agentfsm.impl.stores.journal import INTERRUPT, JSON, STEP, Record
from agentfsm.spec import Table

INTERRUPTED = "Interrupted"
ExecutionStatus = Literal["Pending", "Running", "Completed"]


class Display(Protocol):
    """Where the agent's output goes (a terminal, a UI, a transcript)."""

    def text(self, delta: str) -> None: ...
    def error(self, message: str) -> None: ...
    def tool(self, result: ToolResult) -> None: ...
    def retry(self, reason: str, attempt: int, delay: float) -> None: ...


class Transcript:
    """A display that keeps everything (tests, and the default)."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.errors: list[str] = []
        self.tools: list[ToolResult] = []
        self.retries: list[str] = []  # the reason of each LLM request asked again

    def text(self, delta: str) -> None:
        self.texts.append(delta)

    def error(self, message: str) -> None:
        self.errors.append(message)

    def tool(self, result: ToolResult) -> None:
        self.tools.append(result)

    def retry(self, reason: str, attempt: int, delay: float) -> None:
        self.retries.append(reason)


@dataclass
class LoomConfig:
    workdir: Path = field(default_factory=Path.cwd)
    system_prompt: str | None = None
    retry_base: float = 0.5        # seconds before the first retry
    retry_factor: float = 2.0      # each further retry waits this much longer
    retry_max: float = 30.0        # cap on one wait
    tool_concurrency: int = 4      # tools running at once; the rest wait their turn
    tool_timeout: float = 120.0    # per tool call
    command_timeout: float = 60.0  # run_command's own limit
    commit_hook: bool = True       # RunPostToolsHook commits to git when workdir is a work tree
    max_tool_rounds: int = 25      # tool batches in one turn before the turn ends with an error

    def backoff(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number ``attempt`` (1-based); never less than the server's
        ``Retry-After``."""
        delay = float(min(self.retry_max, self.retry_base * self.retry_factor ** max(0, attempt - 1)))
        return max(delay, retry_after or 0.0)


Hook = Callable[[Path, list[ToolResult]], Awaitable[bool]]


def response_json(response: LlmResponse | None) -> JSON:
    if response is None:
        return None
    return {"text": response.text, "finish_reason": response.finish_reason,
            "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in response.tool_calls]}


def payload_json(payload: Any) -> JSON:
    """What a conversational agent journals of an event's payload (a response, a tool's result, text)."""
    if isinstance(payload, LlmResponse):
        return response_json(payload)
    if isinstance(payload, ToolResult):
        return asdict(payload)
    if isinstance(payload, TextChunk):
        return payload.text
    if isinstance(payload, LlmError):
        return payload.message
    return payload if isinstance(payload, str) else None


def response_from_json(data: JSON) -> LlmResponse | None:
    if data is None:
        return None
    return LlmResponse(str(data["text"]), tuple(ToolCall(str(c["id"]), str(c["name"]), str(c["arguments"]))
                                                 for c in data["tool_calls"]), data.get("finish_reason"))


class LoomAgent(Driver):
    """A running Loom agent: ``send_input()``, ``interrupt()``, ``shutdown()`` and the monitoring API."""

    def __init__(self, table: Table, llm: LlmClient, *, config: LoomConfig | None = None,
                 toolbox: Toolbox | None = None, display: Display | None = None,
                 post_tools_hook: Hook | None = None, name: str = "loom", logger: logging.Logger = LOG) -> None:
        self.config = config or LoomConfig()
        super().__init__(
            Engine(table), name=name, logger=logger, shutdown_event="ShutdownRequested",
            idle_states={"WaitingForUserInput"}, processing_states={"CallingLlm"},
            actions={"SendLlmRequest": self._send_llm_request, "ExecuteTools": self._execute_tools,
                     "RunPostToolsHook": self._run_post_tools_hook, "DisplayMessage": self._display_message,
                     "DisplayError": self._display_error, "Shutdown": lambda ctx: self.cancel_all()},
            on_event={"UserInput": self._user_input, "LlmCompleted": self._llm_completed,
                      "LlmError": self._llm_error, "ToolProgress": self._tool_progress,
                      "ToolCompleted": self._tool_completed, "ToolExecutionFailed": self._tool_failed,
                      "PostToolsHookFailed": self._hook_failed},
            on_enter={"Error": self._start_retry_timer, "WaitingForUserInput": self._turn_ended})
        self.llm = llm
        self.toolbox = toolbox or Toolbox(builtin_tools(self.config.workdir, self.config.command_timeout),
                                          self.config.tool_timeout)
        self.display: Display = display or Transcript()
        self.post_tools_hook = post_tools_hook or self._commit
        self.max_tools = table.event("LlmCompleted").params[0].hi
        self.conversation: list[Message] = []
        if self.config.system_prompt:
            self.conversation.append({"role": "system", "content": self.config.system_prompt})
        self._interrupted = False
        self._partial = ResponseBuilder()
        self._batch: list[ToolCall] = []
        self.executions: dict[str, ExecutionStatus] = {}  # the batch's calls by id: Pending -> Running -> Completed
        self._unavailable: dict[str, ToolResult] = {}  # calls that could not be executed: back to Pending, retried
        self._results: list[ToolResult] = []
        self._semaphore: asyncio.Semaphore | None = None
        self._last_error = ""
        self._retry_after: float | None = None
        self._given_up: str | None = None  # a turn the model cannot finish: its remaining retries fail at once
        self._rounds = 0                   # tool batches of this turn
        self._llm_effect: Pending | None = None

    def send_input(self, text: str, event_id: str | None = None) -> None:
        self.feed("UserInput", payload=text, event_id=event_id)

    # -- context, from accepted events ---------------------------------------------------

    def _user_input(self, ctx: ActionContext) -> None:
        self._interrupted = False
        self._given_up, self._rounds = None, 0
        self.conversation.append({"role": "user", "content": str(ctx.envelope.payload)})

    def _llm_completed(self, ctx: ActionContext) -> None:
        response: LlmResponse | None = ctx.envelope.payload
        self._partial = ResponseBuilder()
        self._batch, self._results, self.executions, self._unavailable = [], [], {}, {}
        if response is None or (not response.text and not response.tool_calls):
            return
        self.conversation.append(response.as_message())
        self._batch = list(response.tool_calls[:self.max_tools])
        self._rounds += bool(self._batch)
        self.executions = {call.id: "Pending" for call in self._batch}
        for extra in response.tool_calls[self.max_tools:]:  # the table bounds a batch; say so to the model
            self._record(ToolResult(extra.id, extra.name, f"not run: at most {self.max_tools} tool calls "
                                    "per response", True))

    def _llm_error(self, ctx: ActionContext) -> None:
        error = ctx.envelope.payload
        if isinstance(error, LlmError):
            self._last_error, self._retry_after = error.message, error.retry_after
            if not error.retryable:
                self._given_up = error.message
        else:
            self._last_error, self._retry_after = str(error or "LLM request failed"), None

    def _tool_progress(self, ctx: ActionContext) -> None:
        call_id = str(ctx.envelope.payload)
        if self.executions.get(call_id) == "Pending":
            self.executions[call_id] = "Running"

    def _tool_completed(self, ctx: ActionContext) -> None:
        result: ToolResult = ctx.envelope.payload
        self.executions[result.call_id] = "Completed"
        self._unavailable.pop(result.call_id, None)
        self._record(result)
        self._settle_unavailable(ctx)

    def _tool_failed(self, ctx: ActionContext) -> None:
        """A call that could not be executed goes back to Pending: the retry runs it again."""
        failure: ToolResult = ctx.envelope.payload
        self.executions[failure.call_id] = "Pending"
        self._unavailable[failure.call_id] = failure
        self._retry_after = None  # a server's Retry-After is for LLM requests only
        self._settle_unavailable(ctx)

    def _settle_unavailable(self, ctx: ActionContext) -> None:
        """Once the batch is over with calls still not executed (their retries are spent), each
        reaches the model as an error outcome, as a tool's own failure does."""
        if ctx.outcome.state in ("ExecutingTools", "Error"):
            return
        for failure in self._unavailable.values():
            self.executions[failure.call_id] = "Completed"
            self._record(ToolResult(failure.call_id, failure.name,
                                    f"could not be executed, retries spent: {failure.content}", True))
        self._unavailable = {}

    def _hook_failed(self, ctx: ActionContext) -> None:
        self._last_error, self._retry_after = f"post-tools hook failed: {ctx.envelope.payload}", None

    def apply(self, envelope: Envelope) -> Outcome | None:
        """A second completion of one call id is not another call: logged and dropped before the
        table sees it (the seed's executions are per call id, not a count)."""
        payload = envelope.payload
        if envelope.event == "ToolCompleted" and isinstance(payload, ToolResult) \
                and self.executions.get(payload.call_id) == "Completed":
            self.log.warning("%s: dropped a second completion of tool call %s", self.name, payload.call_id,
                             extra={"agent": self.name, "event": envelope.event})
            return None
        return super().apply(envelope)

    def _record(self, result: ToolResult) -> None:
        self._results.append(result)
        self.conversation.append(result.as_message())
        self.display.tool(result)

    def _turn_ended(self, ctx: ActionContext) -> None:
        self._interrupted = False
        self._given_up, self._rounds = None, 0

    # -- actions -------------------------------------------------------------------------

    # Each external action's work takes ``pending`` (None unless the run is durable): the
    # activity then makes ``started`` durable right before acting and reports its outcome
    # with the event it feeds back.

    def _report(self, pending: Pending | None, outcome: Literal["completed", "failed"], result: JSON,
                via: str = "run") -> Report | None:
        return report(pending, outcome, result, via)

    def _begin(self, pending: Pending | None) -> bool:
        return begin_effect(self, pending)

    def _send_llm_request(self, ctx: ActionContext) -> None:
        self._request_llm(None)

    def _request_llm(self, pending: Pending | None) -> None:
        if self._interrupted:  # the interrupted turn ends without calling the model
            self.feed("LlmCompleted", payload=None, tool_calls=0,
                      effect=self._report(pending, "completed", {"called": False, "response": None}, "interrupt"))
            return
        if self._given_up is None and self._rounds >= self.config.max_tool_rounds:
            self._given_up = (f"stopped after {self._rounds} tool rounds in one turn (max_tool_rounds "
                              f"{self.config.max_tool_rounds})")
        if self._given_up is not None:  # retrying cannot help: the table's remaining retries fail at once
            error = LlmError(self._given_up, retryable=False)
            self.feed("LlmError", payload=error,
                      effect=self._report(pending, "failed", {"called": False, "error": error.message}, "give-up"))
            return
        request = LlmRequest(tuple(self.conversation), self.toolbox.schemas())
        self.spawn("llm", lambda activity: self._stream(activity, request, pending))

    async def _stream(self, activity: Activity, request: LlmRequest, pending: Pending | None) -> None:
        if not self._begin(pending):
            return
        self._llm_effect = pending
        builder = self._partial = ResponseBuilder()
        try:
            async for chunk in self.llm.stream(request):
                builder.add(chunk)
                activity.feed(self, "ToolCallDelta" if isinstance(chunk, ToolCallChunk) else "TextDelta",
                              payload=chunk)
            response = builder.response()
        except (LlmError, OSError, ValueError) as exc:
            error = exc if isinstance(exc, LlmError) else LlmError(f"{type(exc).__name__}: {exc}")
            activity.feed(self, "LlmError", payload=error,
                          effect=self._report(pending, "failed", {"called": True, "error": error.message}))
            return
        activity.feed(self, "LlmCompleted", payload=response,
                      effect=self._report(pending, "completed", {"called": True, "response": response_json(response)}),
                      tool_calls=min(len(response.tool_calls), self.max_tools))

    def _execute_tools(self, ctx: ActionContext) -> None:
        for call in self._to_run():
            self._start_tool(call, None)

    def _to_run(self) -> list[ToolCall]:
        """The batch's calls not executed yet: all of them at first, then those that could not run."""
        return [call for call in self._batch if self.executions.get(call.id) == "Pending"]

    def _start_tool(self, call: ToolCall, pending: Pending | None) -> None:
        if self._semaphore is None:
            self._semaphore = asyncio.Semaphore(max(1, self.config.tool_concurrency))
        self.spawn(f"tool:{call.id}", functools.partial(self._run_tool, call=call, pending=pending))

    async def _run_tool(self, activity: Activity, *, call: ToolCall, pending: Pending | None) -> None:
        assert self._semaphore is not None
        async with self._semaphore:
            if self._interrupted:
                result, ran, via = ToolResult(call.id, call.name, INTERRUPTED, True), False, "interrupt"
            elif not self._begin(pending):
                return
            else:
                activity.feed(self, "ToolProgress", payload=call.id)  # Pending -> Running
                try:
                    result, ran, via = await self.toolbox.execute(call), True, "run"
                except ToolUnavailable as exc:
                    failure = ToolResult(call.id, call.name, str(exc), True)
                    activity.feed(self, "ToolExecutionFailed", payload=failure,
                                  effect=self._report(pending, "failed", {"error": str(exc), "started": False}))
                    return
        report = self._report(pending, "completed", asdict(result), via)
        activity.feed(self, "ToolCompleted", payload=result, effect=report,
                      mutating=ran and self.toolbox.mutating(call.name))

    def _run_post_tools_hook(self, ctx: ActionContext) -> None:
        self._start_hook(None)

    def _start_hook(self, pending: Pending | None) -> None:
        results = list(self._results)

        async def hook(activity: Activity) -> None:
            if not self._begin(pending):
                return
            try:
                taken = await self.post_tools_hook(self.config.workdir, results)
            except (HookFailed, ToolUnavailable, OSError) as exc:
                self.log.warning("%s: post-tools hook failed: %s", self.name, exc, extra={"agent": self.name})
                activity.feed(self, "PostToolsHookFailed", payload=str(exc),
                              effect=self._report(pending, "failed", {"error": str(exc)}))
                return
            activity.feed(self, "PostToolsHookCompleted", action_taken=taken,
                          effect=self._report(pending, "completed", {"action_taken": taken}))
        self.spawn("post-tools-hook", hook)

    async def _commit(self, workdir: Path, results: list[ToolResult]) -> bool:
        if not self.config.commit_hook:
            return False
        names = ", ".join(sorted({r.name for r in results if self.toolbox.mutating(r.name)}))
        return await git_commit(workdir, f"agent: changes by {names or 'tools'}")

    def _display_message(self, ctx: ActionContext) -> None:
        chunk: Any = ctx.envelope.payload
        if chunk is not None:
            self.display.text(chunk.text)

    def _display_error(self, ctx: ActionContext) -> None:
        self.display.error(self._last_error)

    def _start_retry_timer(self, ctx: ActionContext) -> None:
        self._arm_retry(int(ctx.outcome.vars["retries"]), ctx.envelope.event == "LlmError")

    def _arm_retry(self, retries: int, llm: bool = False) -> None:
        at_once = self._given_up is not None or self._interrupted  # retrying cannot help, or the turn is over
        delay = 0.0 if at_once else self.config.backoff(retries, self._retry_after)
        if llm and not at_once:  # the model is asked again: say why, so a slow turn is not a mystery
            self.display.retry(self._last_error, retries, delay)

        async def timer(activity: Activity) -> None:
            await asyncio.sleep(delay)
            activity.feed(self, "RetryTimeoutFired")
        self.spawn("retry-timer", timer)

    # -- interrupts ----------------------------------------------------------------------

    def on_interrupt(self) -> None:
        state = self.engine.state
        if state in ("WaitingForUserInput", "ShuttingDown") or not journal_interrupt(self, f"interrupted in {state}"):
            return
        self._interrupted = True
        # Only a cancelled activity's event is replaced; one that already finished has queued its own.
        if state == "CallingLlm":
            for activity in self.running("llm"):
                self.cancel(activity)
                partial = self._partial.partial_text()
                response = LlmResponse(partial) if partial else None
                self.feed("LlmCompleted", payload=response, tool_calls=0, effect=self._report(
                    self._llm_effect, "completed", {"called": True, "response": response_json(response)}, "interrupt"))
        elif state == "Error":
            for activity in self.running("retry-timer"):
                self.cancel(activity)
                self.feed("RetryTimeoutFired")
        # ExecutingTools: started tools complete, waiting ones see the flag and answer "Interrupted";
        # PostToolsHook: the hook completes. Either way the next SendLlmRequest ends the turn.

    # -- durable runs (``agentfsm.impl.durable.driver.EffectAgent``) ----------------------

    def payload_json(self, envelope: Envelope) -> JSON:
        return payload_json(envelope.payload)

    def _payload(self, event: str, data: JSON) -> Any:
        """The payload ``payload_json`` journaled, as the hooks take it."""
        if event == "LlmCompleted":
            return response_from_json(data)
        if event in ("ToolCompleted", "ToolExecutionFailed"):
            return ToolResult(**data)
        return TextChunk(data) if event == "TextDelta" else data

    def effect_calls(self, envelope: Envelope) -> Mapping[str, Sequence[CallSpec]]:
        """ExecuteTools fans out into the response's calls, or on a retry (origin Tool) into the
        calls that could not be executed."""
        response = envelope.payload
        if envelope.event == "LlmCompleted" and isinstance(response, LlmResponse):
            calls = list(response.tool_calls[:self.max_tools])
        elif envelope.event == "RetryTimeoutFired":
            calls = self._to_run()
        else:
            return {}
        return {"ExecuteTools": [CallSpec(c.id, c.name, self.toolbox.idempotent(c.name),
                                          call_args(c)) for c in calls]}

    def perform(self, effect: Effect, retry: bool) -> None:
        pending = Pending(effect.key, retry)
        if effect.action == "SendLlmRequest":
            self._request_llm(pending)
        elif effect.action == "ExecuteTools":
            self._start_tool(ToolCall(str(effect.args["id"]), effect.tool, str(effect.args["arguments"])), pending)
        elif effect.action == "RunPostToolsHook":
            self._start_hook(pending)
        else:
            raise ValueError(f"the Loom agent has no effect {effect.action!r}")

    def status_query(self, call: EffectCall) -> StatusReply | None:
        return None  # neither the model, the built-in tools nor the commit hook can say what became of a call

    def report_back(self, effect: Effect) -> None:
        """Feed back an outcome settled without its event: by a status query or the user's decision."""
        result = effect.result if isinstance(effect.result, dict) else {}
        report = Report(effect.key, "completed" if effect.status == "completed" else "failed", effect.result,
                        effect.via)
        if effect.via == "interrupt":
            self._report_interrupted(effect, report)
        elif effect.action == "SendLlmRequest":
            response = response_from_json(result.get("response"))
            if effect.status == "completed":
                self.feed("LlmCompleted", payload=response, effect=report,
                          tool_calls=min(len(response.tool_calls), self.max_tools) if response else 0)
            else:
                self.feed("LlmError", payload=str(result.get("error", "the request's outcome is unknown")),
                          effect=report)
        elif effect.action == "ExecuteTools":
            call_id = str(effect.args["id"])
            if "content" in result:
                tool_result = ToolResult(call_id, effect.tool, str(result["content"]), bool(result.get("is_error")))
            elif effect.status == "completed":
                tool_result = ToolResult(call_id, effect.tool, "the process stopped while this ran; it completed "
                                         f"(confirmed by {effect.via}) but its output is lost")
            else:
                tool_result = ToolResult(call_id, effect.tool, "the process stopped while this ran; its outcome "
                                         f"is unknown and {effect.via} settled it as failed", True)
            self.feed("ToolCompleted", payload=tool_result, effect=report, mutating=self.toolbox.mutating(effect.tool))
        elif effect.action == "RunPostToolsHook" and effect.status == "completed":
            self.feed("PostToolsHookCompleted", effect=report, action_taken=bool(result.get("action_taken")))
        elif effect.action == "RunPostToolsHook":   # a failed hook is retried (origin Io), as when it fails live
            self.feed("PostToolsHookFailed", effect=report,
                      payload=str(result.get("error", f"its outcome is unknown and {effect.via} settled it as failed")))

    def _report_interrupted(self, effect: Effect, report: Report) -> None:
        """An effect of an interrupted turn that a crash left open, settled without running (again):
        fed back as the interrupt answers it live (no response, an "Interrupted" tool result)."""
        if effect.action == "SendLlmRequest":
            partial = self._partial.partial_text()  # the streamed text the journal holds is kept
            self.feed("LlmCompleted", payload=LlmResponse(partial) if partial else None, effect=report, tool_calls=0)
        elif effect.action == "ExecuteTools":
            result = effect.result if isinstance(effect.result, dict) else {}
            ran = effect.attempts > 0
            content = f"{INTERRUPTED}: {result.get('error', 'its outcome is unknown')}" if ran else INTERRUPTED
            self.feed("ToolCompleted", payload=ToolResult(str(effect.args["id"]), effect.tool, content, True),
                      effect=report, mutating=ran and self.toolbox.mutating(effect.tool))
        elif effect.action == "RunPostToolsHook":
            self.feed("PostToolsHookCompleted", effect=report, action_taken=False)

    def restore(self, records: Sequence[Record]) -> None:
        """Replay the journaled payloads through the context hooks (nothing is displayed again),
        and whether the current turn was interrupted (until a turn ends or a new one starts)."""
        shown, self.display = self.display, Transcript()
        try:
            replay(self, records, self._payload)
        finally:
            self.display = shown
        for record in records:
            if record.kind == INTERRUPT:
                self._interrupted = True
            elif record.kind == STEP and record.body["status"] == "fired":
                self._restore_turn(record.body)

    def _restore_turn(self, step: Mapping[str, JSON]) -> None:
        """What a fired step says of the turn under way: whether it is still interrupted, and the
        text its stream sent so far (kept if the interrupted stream is settled on resume)."""
        if step["event"] == "UserInput" or step["next"]["state"] == "WaitingForUserInput":
            self._interrupted = False
        if "SendLlmRequest" in step["actions"]:
            self._partial = ResponseBuilder()
        elif step["event"] == "TextDelta":
            self._partial.add(TextChunk(str(step.get("payload") or "")))

    def resumed(self) -> None:
        if self.engine.state == "Error" and self._interrupted:  # as live: the retry is abandoned at once
            self.feed("RetryTimeoutFired")
        elif self.engine.state == "Error":
            self._arm_retry(int(self.engine.vars["retries"]))
