"""One tool call through the tool-call trace (seed 003), in memory: the table decides, this runner performs.

Validation checks the arguments against the tool's JSON schema; a tool no permission
rule allows waits for the ``PermissionPrompt`` (``AwaitingApproval``). The start is
recorded (an in-memory journal of ``started``/``completed`` entries keyed by the call's
idempotency key) before the tool is invoked; a call that outlives ``call_timeout`` is
cancelled and becomes ``Unknown``, and the status query answers from that journal: an
outcome recorded, never started, or unavailable. Read-only tools count as keyed (a retry
with the same key is safe); a mutating one whose status is unavailable halts for an
operator. The durable journal and its recovery live in ``durable.py``; this runner only
shows the table driving one call, with ``status()`` as the status query.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from agentfsm.impl.agents.prompts import PermissionPrompt, PermissionRequest, PermissionRules
from agentfsm.impl.agents.tools import Tool, Toolbox, ToolResult, builtin_tools
from agentfsm.impl.driver import LOG, ActionContext, Activity, Driver
from agentfsm.impl.engine import Engine
from agentfsm.impl.llm.client import Call, ReplyStep, ToolCall
from agentfsm.spec import Table
from agentfsm.spec.expr import Value

ENDED = frozenset({"Returned", "Halted"})
_JSON_TYPES: dict[str, Any] = {"string": str, "number": (int, float), "integer": int, "boolean": bool,
                               "array": list, "object": dict}


class Narrator(Protocol):
    def note(self, kind: str, text: str) -> None: ...


class _Silent:
    def note(self, kind: str, text: str) -> None:
        pass


def validate(tool: Tool | None, arguments: str) -> str | None:
    """Why the arguments do not fit the tool's schema (required keys, property types), or None."""
    if tool is None:
        return "unknown tool"
    try:
        value = json.loads(arguments or "{}")
    except json.JSONDecodeError as exc:
        return f"arguments are not valid JSON: {exc}"
    if not isinstance(value, dict):
        return "arguments must be a JSON object"
    schema = tool.parameters
    for key in schema.get("required", ()):
        if key not in value:
            return f"missing argument {key!r}"
    for key, given in value.items():
        spec = schema.get("properties", {}).get(key)
        if spec is None:
            return f"unknown argument {key!r}"
        want = _JSON_TYPES.get(spec.get("type", ""), object)
        if not isinstance(given, want) or (isinstance(given, bool) and spec.get("type") != "boolean"):
            return f"argument {key!r} must be {spec.get('type')}"
    return None


@dataclass(frozen=True)
class Entry:
    kind: str  # started | completed | failed
    key: str
    attempt: int


class ToolCallRunner(Driver):
    """Drives one call: ``await run(call)`` returns the result handed to the model (or the halt's reason)."""

    def __init__(self, table: Table, workdir: Path, permissions: PermissionPrompt, *, allow: Sequence[str] = (),
                 settings: Mapping[str, Any] | None = None, toolbox: Toolbox | None = None,
                 reporter: Narrator | None = None, name: str = "tool-call", logger: logging.Logger = LOG) -> None:
        settings = dict(settings or {})
        self.call_timeout = float(settings.pop("call_timeout", 60.0))
        command_timeout = float(settings.pop("command_timeout", 60.0))
        if settings:
            raise TypeError(f"unknown setting {sorted(settings)[0]!r} for the tool-call runner "
                            "(call_timeout, command_timeout)")
        super().__init__(
            Engine(table), name=name, logger=logger, idle_states={"Requested"},
            processing_states={"Approved", "Running", "Cancelling", "Unknown"},
            actions={"RequestApproval": self._request_approval, "BeginExecution": self._begin,
                     "InvokeTool": self._invoke, "RetryWithSameKey": self._invoke,
                     "QueryStatus": self._query_status, "CancelExecution": self._cancel_execution,
                     "RecordResult": self._record_result,
                     "ReturnResultToModel": lambda ctx: self.feed("ResultReturned"),
                     "ReturnValidationError": self._answer, "ReturnDenial": self._answer,
                     "ReturnCancellation": self._answer, "RecordAnomaly": self._anomaly,
                     "AlertOperator": self._alert})
        self.toolbox = toolbox or Toolbox(builtin_tools(workdir, command_timeout), self.call_timeout * 2)
        self.permissions = permissions
        self.rules = PermissionRules(tuple(allow))
        self.reporter: Narrator = reporter or _Silent()
        self.journal: list[Entry] = []
        self.call: ToolCall | None = None
        self.result: ToolResult | None = None
        self._outcome: ToolResult | None = None

    # -- the caller's side ---------------------------------------------------------------

    async def run(self, call: ToolCall) -> ToolResult:
        self.call = call
        async with self:
            tool = self.toolbox.tools.get(call.name)
            problem = validate(tool, call.arguments)
            if problem is not None:
                self.feed("ArgumentsInvalid", payload=problem)
            else:
                self.feed("ArgumentsValid", ask_user=not self.rules.allows(call.name),
                          takes_key=not self.toolbox.mutating(call.name))
            await self.wait_until(lambda: self.engine.state in ENDED and self.is_quiet())
        return self.result or ToolResult(call.id, call.name, "halted: an operator must decide the outcome", True)

    def is_done(self) -> bool:
        return self.engine.state in ENDED or super().is_done()

    def cancel_call(self) -> None:
        """The user cancels the call; completion may still win the race."""
        self.feed("CancelRequested")

    def status(self) -> dict[str, Value | str | list[str]]:
        """Where the call stands: its state, the trace's variables and its journal."""
        return {"state": self.engine.state, **self.engine.vars,
                "journal": [f"{e.kind} {e.key} #{e.attempt}" for e in self.journal]}

    @property
    def key(self) -> str:
        assert self.call is not None
        return f"{self.name}:{self.call.id}"

    # -- actions -------------------------------------------------------------------------

    def _request_approval(self, ctx: ActionContext) -> None:
        call = self.call
        assert call is not None
        tool = self.toolbox.tools[call.name]
        request = PermissionRequest(call.name, call.id, tool.description, call.arguments)

        async def ask(activity: Activity) -> None:
            try:
                granted = await self.permissions.ask(request)
            except Exception as exc:  # a prompt that cannot answer never approves
                self.reporter.note("approval", f"the prompt failed ({exc}): denied")
                granted = False
            activity.feed(self, "ApprovalGranted" if granted else "ApprovalDenied")
        self.spawn("approval", ask)

    def _begin(self, ctx: ActionContext) -> None:
        attempt = int(ctx.outcome.vars["attempts"]) + 1
        self.journal.append(Entry("started", self.key, attempt))  # recorded before the tool runs
        self.feed("Started")

    def _invoke(self, ctx: ActionContext) -> None:
        call = self.call
        assert call is not None
        attempt = int(ctx.outcome.vars["attempts"])

        async def invoke(activity: Activity) -> None:
            try:
                async with asyncio.timeout(self.call_timeout):
                    result = await self.toolbox.execute(call)
            except TimeoutError:
                activity.feed(self, "TimedOut")
                return
            self.journal.append(Entry("failed" if result.is_error else "completed", self.key, attempt))
            self._outcome = result
            activity.feed(self, "Failed" if result.is_error else "Completed", payload=result)
        self.spawn("invoke", invoke)

    def _cancel_execution(self, ctx: ActionContext) -> None:
        cancelled = False
        for activity in self.running("invoke"):
            self.cancel(activity)
            cancelled = True
        if cancelled and self.engine.state == "Cancelling":
            self.feed("CancelConfirmed")

    def _query_status(self, ctx: ActionContext) -> None:
        kinds = [e.kind for e in self.journal if e.key == self.key]
        if "completed" in kinds:
            self.feed("StatusCompleted")
        elif "failed" in kinds:
            self.feed("StatusFailed")
        elif "started" not in kinds:
            self.feed("StatusNotRun")
        else:  # started, outcome never seen: the service cannot tell us
            self.feed("StatusUnavailable")

    def _record_result(self, ctx: ActionContext) -> None:
        call = self.call
        assert call is not None
        outcome = ctx.envelope.payload if isinstance(ctx.envelope.payload, ToolResult) else self._outcome
        self.result = outcome or ToolResult(call.id, call.name, f"{ctx.outcome.state.lower()} (no output kept)",
                                            ctx.outcome.state == "Failed")
        self.feed("ResultRecorded")

    def _answer(self, ctx: ActionContext) -> None:
        call = self.call
        assert call is not None
        reason = {"ReturnValidationError": f"invalid arguments: {ctx.envelope.payload}",
                  "ReturnDenial": "Permission denied by the user",
                  "ReturnCancellation": "Cancelled"}
        action = next(a for a in ctx.outcome.actions if a in reason)
        self.result = ToolResult(call.id, call.name, reason[action], True)
        self.feed("ResultReturned")

    def _anomaly(self, ctx: ActionContext) -> None:
        self.reporter.note("anomaly", f"{ctx.envelope.event} cannot happen in that state")

    def _alert(self, ctx: ActionContext) -> None:
        self.reporter.note("operator", f"automatic progress stopped for {self.key}: an operator must decide")


def runner_plan(replies: Sequence[Sequence[ReplyStep]]) -> list[ToolCall]:
    """The tool calls a script's replies hold, in order, with ids ``call_N``."""
    calls = [step for reply in replies for step in reply if isinstance(step, Call)]
    return [ToolCall(step.call_id or f"call_{n}", step.name, json.dumps(dict(step.arguments)))
            for n, step in enumerate(calls, 1)]
