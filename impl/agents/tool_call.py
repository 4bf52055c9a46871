"""One tool call through the tool-call trace (seed 003): the table decides, this runner performs.

Validation checks the arguments against the tool's JSON schema; a tool no permission
rule allows waits for the ``PermissionPrompt`` (``AwaitingApproval``). The start is
recorded before the tool is invoked; a call that outlives ``call_timeout`` is cancelled
and becomes ``Unknown``, and the status query answers from the trace's journal: an
outcome recorded, never started, or unavailable. Read-only tools count as keyed (a retry
with the same key is safe); a mutating one whose status is unavailable halts for an
operator.

In memory the journal is a list of ``started``/``completed`` entries. Run durably (a
``DurableLink``: ``agentfsm run --store``), the durable journal is the trace: ``Started``
is the journaled tool.started, the invocations are journaled effects, and the status
query reads them. On resume the runner continues from the journaled state: an
invocation the journal marks unknown is fed as ``Interrupted``; the operator's decision
on it (``--decide KEY=completed|failed|rerun``) becomes ``OperatorResolved`` (a rerun's
own outcome is the verdict); a granted approval not yet started is revalidated against
its lifetime (``ApprovalExpired`` once it passed); a pending approval is asked again.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from agentfsm.impl.agents.journaled import Pending, begin_effect, report
from agentfsm.impl.agents.prompts import PermissionPrompt, PermissionRequest, PermissionRules
from agentfsm.impl.agents.tools import Tool, Toolbox, ToolResult, builtin_tools
from agentfsm.impl.driver import LOG, ActionContext, Activity, Driver, Envelope
from agentfsm.impl.durable.driver import DurableLink
from agentfsm.impl.durable.run import CallSpec, EffectCall, StatusReply
from agentfsm.impl.durable.state import Effect
from agentfsm.impl.engine import Engine
from agentfsm.impl.llm.client import Call, ReplyStep, ToolCall
from agentfsm.impl.stores.journal import JSON, STEP, JournalError, Record
from agentfsm.spec import Table
from agentfsm.spec.expr import Value

ENDED = frozenset({"Returned", "Halted"})
INVOKES = frozenset({"InvokeTool", "RetryWithSameKey"})  # the call's executions (journaled effects when durable)
RESULTS = frozenset({"Completed", "Failed", "OperatorResolved", "ResultRecorded", "ResultReturned"})
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


def result_json(result: ToolResult) -> JSON:
    return {"content": result.content, "is_error": result.is_error}


class ToolCallRunner(Driver):
    """Drives one call: ``await run(call)`` returns the result handed to the model (or the halt's reason).

    Also the ``EffectAgent`` of its durable run (``agentfsm.impl.durable.driver``)."""

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
                     "QueryStatus": lambda ctx: self._query_status(None),
                     "CancelExecution": lambda ctx: self._cancel_execution(None),
                     "RecordResult": lambda ctx: self._record_result(ctx.outcome.state, ctx.envelope.payload),
                     "ReturnResultToModel": lambda ctx: self.feed("ResultReturned", payload=self.result),
                     "ReturnValidationError": self._answer, "ReturnDenial": self._answer,
                     "ReturnCancellation": self._answer, "RecordAnomaly": self._anomaly,
                     "AlertOperator": self._alert},
            on_event={event: self._settle_others for event in ("Completed", "Failed", "OperatorResolved")})
        self.toolbox = toolbox or Toolbox(builtin_tools(workdir, command_timeout), self.call_timeout * 2)
        self.permissions = permissions
        self.rules = PermissionRules(tuple(allow))
        self.reporter: Narrator = reporter or _Silent()
        self.journal: list[Entry] = []  # in memory; a durable run's trace is its journal
        self.link: DurableLink | None = None
        self.call: ToolCall | None = None
        self.result: ToolResult | None = None
        self._outcome: ToolResult | None = None
        self.approval_expires: float | None = None  # durable: when the last approval asked for lapses

    # -- the caller's side ---------------------------------------------------------------

    async def run(self, call: ToolCall, link: DurableLink | None = None) -> ToolResult:
        """Drive ``call`` to its answer; with ``link`` (opened on this runner) from where its journal stands."""
        self.call = call
        self.link = link
        async with self:
            if link is not None:
                link.resume()
            if self.engine.state == "Requested":
                self.request(call)
            await self.wait_until(lambda: self.is_done() and self.is_quiet())
        return self.answer()

    def request(self, call: ToolCall) -> None:
        """Validate the call's arguments: the first event of its trace."""
        problem = validate(self.toolbox.tools.get(call.name), call.arguments)
        if problem is not None:
            self.feed("ArgumentsInvalid", payload=problem)
        else:
            self.feed("ArgumentsValid", ask_user=not self.rules.allows(call.name),
                      takes_key=not self.toolbox.mutating(call.name))

    def answer(self) -> ToolResult:
        """What the model gets: the call's result, or why it has none yet."""
        call = self.call
        assert call is not None
        return self.result or ToolResult(call.id, call.name, "halted: an operator must decide the outcome", True)

    def is_done(self) -> bool:
        return self.engine.state in ENDED or super().is_done()

    def cancel_call(self) -> None:
        """The user cancels the call; completion may still win the race."""
        self.feed("CancelRequested")

    def status(self) -> dict[str, Value | str | list[str]]:
        """Where the call stands: its state, the trace's variables and its journal."""
        if self.link is None:
            journal = [f"{e.kind} {e.key} #{e.attempt}" for e in self.journal]
        else:
            journal = [f"{e.status} {e.key} #{e.attempts}" for e in self._executions()]
        return {"state": self.engine.state, **self.engine.vars, "journal": journal}

    @property
    def key(self) -> str:
        assert self.call is not None
        return f"{self.name}:{self.call.id}"

    # -- actions -------------------------------------------------------------------------

    def _request_approval(self, ctx: ActionContext | None) -> None:
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

    def _begin(self, ctx: ActionContext | None) -> None:
        """Record tool.started: in memory an entry; durably the ``Started`` step is the record."""
        if self.link is None:
            self.journal.append(Entry("started", self.key, int(self.engine.vars["attempts"]) + 1))
        self.feed("Started")

    def _invoke(self, ctx: ActionContext | None, pending: Pending | None = None) -> None:
        """Run the tool once; durably ``pending`` is the journaled effect (its outcome is reported by
        the event fed back). In ``Halted`` it is the operator's rerun: its outcome is the verdict."""
        call = self.call
        assert call is not None
        attempt = int(self.engine.vars["attempts"])
        verdict = self.engine.state == "Halted"

        async def invoke(activity: Activity) -> None:
            if not begin_effect(self, pending):
                return
            try:
                async with asyncio.timeout(self.call_timeout):
                    result = await self.toolbox.execute(call)
            except TimeoutError:
                if pending is not None and self._journaled(lambda link: link.run.mark_unknown(
                        pending.key, f"no outcome within call_timeout {self.call_timeout:g}s")):
                    return
                activity.feed(self, "TimedOut")
                return
            if pending is None:
                self.journal.append(Entry("failed" if result.is_error else "completed", self.key, attempt))
            self._outcome = result
            effect = report(pending, "failed" if result.is_error else "completed", result_json(result))
            if verdict:
                activity.feed(self, "OperatorResolved", payload=result, effect=effect, succeeded=not result.is_error)
            else:
                activity.feed(self, "Failed" if result.is_error else "Completed", payload=result, effect=effect)
        self.spawn("invoke", invoke)

    def _cancel_execution(self, pending: Pending | None) -> None:
        if not begin_effect(self, pending):
            return
        cancelled = False
        for activity in self.running("invoke"):
            self.cancel(activity)
            cancelled = True
        if pending is not None:
            for effect in self._executions("started"):  # the tool stopped: this execution has no outcome
                self._settle(effect.key, "failed", {"error": "cancelled"}, "cancel")
        if cancelled and self.engine.state == "Cancelling":
            self.feed("CancelConfirmed", effect=report(pending, "completed", {"cancelled": True}))
        elif pending is not None:
            self._settle(pending.key, "completed", {"cancelled": cancelled}, "run")

    def _query_status(self, pending: Pending | None) -> None:
        """The status query: what the trace's journal says of this call's executions."""
        if not begin_effect(self, pending):
            return
        if self.link is None:
            kinds = [e.kind for e in self.journal if e.key == self.key]
        else:
            kinds = [e.status if e.status in ("completed", "failed") else "started"
                     for e in self._executions() if e.status != "pending"]
        if "completed" in kinds:
            answer = "StatusCompleted"
        elif "failed" in kinds:
            answer = "StatusFailed"
        elif "started" not in kinds:
            answer = "StatusNotRun"
        else:  # started, outcome never seen: the service cannot tell us
            answer = "StatusUnavailable"
        self.feed(answer, effect=report(pending, "completed", {"status": answer}))

    def _record_result(self, state: str, payload: Any) -> None:
        call = self.call
        assert call is not None
        outcome = payload if isinstance(payload, ToolResult) else self._outcome or self._journaled_outcome()
        self.result = outcome or ToolResult(call.id, call.name, f"{state.lower()} (no output kept)",
                                            state == "Failed")
        self.feed("ResultRecorded", payload=self.result)

    def _answer(self, ctx: ActionContext) -> None:
        self._answer_model(ctx.outcome.state, ctx.envelope.payload)

    def _answer_model(self, state: str, detail: Any) -> None:
        """Answer the model for a call that never executed (Invalid, Denied, Cancelled)."""
        call = self.call
        assert call is not None
        reason = {"Invalid": f"invalid arguments: {detail}", "Denied": "Permission denied by the user",
                  "Cancelled": "Cancelled"}
        self.result = ToolResult(call.id, call.name, reason[state], True)
        self.feed("ResultReturned", payload=self.result)

    def _anomaly(self, ctx: ActionContext) -> None:
        self.reporter.note("anomaly", f"{ctx.envelope.event} cannot happen in that state")

    def _alert(self, ctx: ActionContext) -> None:
        self.reporter.note("operator", f"automatic progress stopped for {self.key}: an operator must decide")

    # -- durable runs (``agentfsm.impl.durable.driver.EffectAgent``) ----------------------

    def _journaled(self, write: Callable[[DurableLink], None]) -> bool:
        """Write to the durable journal; True when it failed (then the runner stops, as when a step
        cannot be journaled)."""
        if self.link is None:
            return False
        try:
            write(self.link)
        except JournalError as exc:
            self.failures.append(exc)
            self.log.error("%s: the journal failed: %s", self.name, exc)
            self.halt()
            return True
        return False

    def _settle(self, key: str, outcome: Literal["completed", "failed"], result: JSON, via: str) -> None:
        self._journaled(lambda link: link.run.settle(key, outcome, result, via))

    def _executions(self, *statuses: str) -> list[Effect]:
        """The call's journaled executions (first run and retries), in order; only ``statuses`` if given."""
        if self.link is None:
            return []
        found = sorted((e for e in self.link.run.st.effects.values() if e.action in INVOKES), key=lambda e: e.seq)
        return [e for e in found if not statuses or e.status in statuses]

    def _journaled_outcome(self) -> ToolResult | None:
        """A settled execution's result, as the journal keeps it (a status query found it)."""
        call = self.call
        assert call is not None
        for effect in reversed(self._executions("completed", "failed")):
            if isinstance(effect.result, dict) and "content" in effect.result:
                return ToolResult(call.id, call.name, str(effect.result["content"]), bool(effect.result["is_error"]))
        return None

    def _settle_others(self, ctx: ActionContext) -> None:
        """An outcome settles every earlier execution still unknown: the service deduplicated a keyed
        retry (same key), and the operator's verdict is the call's."""
        reported = ctx.envelope.effect
        if self.link is None or reported is None:
            return
        via = "operator" if ctx.envelope.event == "OperatorResolved" else "retry"
        for effect in self._executions("started", "unknown"):
            if effect.key != reported.key:
                self._settle(effect.key, reported.outcome, reported.result, via)

    def payload_json(self, envelope: Envelope) -> JSON:
        payload = envelope.payload
        if isinstance(payload, ToolResult):
            return result_json(payload)
        return payload if isinstance(payload, str) else None

    def effect_calls(self, envelope: Envelope) -> Mapping[str, Sequence[CallSpec]]:
        """Each execution is keyed by the model's call id and never retried by the durable layer on
        its own (idempotent False): the table decides what an unknown execution becomes."""
        call = self.call
        assert call is not None
        spec = CallSpec(call.id, call.name, False, {"arguments": call.arguments})
        return {action: [spec] for action in INVOKES}

    def perform(self, effect: Effect, retry: bool) -> None:
        pending = Pending(effect.key, retry)
        if effect.action in INVOKES:
            self._invoke(None, pending)
        elif effect.action == "QueryStatus":
            self._query_status(pending)
        elif effect.action == "CancelExecution":
            self._cancel_execution(pending)
        else:
            raise ValueError(f"the tool-call runner has no effect {effect.action!r}")

    def status_query(self, call: EffectCall) -> StatusReply | None:
        return None  # the tools have no status API: the table's QueryStatus reads the journal

    def report_back(self, effect: Effect) -> None:
        """The operator's verdict on an unknown execution: ``OperatorResolved`` once the call halted
        for it (before that, ``resumed`` feeds ``Interrupted`` and the status query finds it)."""
        if effect.action in INVOKES and effect.via == "user" and self.engine.state == "Halted":
            self.feed("OperatorResolved", payload=self._journaled_outcome(),
                      effect=report(Pending(effect.key), "completed" if effect.status == "completed" else "failed",
                                    effect.result, "user"),
                      succeeded=effect.status == "completed")

    def restore(self, records: Sequence[Record]) -> None:
        """The call's outcome, its answer and its approval's lifetime, from the journal."""
        call = self.call
        assert call is not None, "set the call before opening its durable run"
        for record in records:
            body = record.body
            if record.kind != STEP:
                continue
            for approval in body.get("approvals", ()):
                self.approval_expires = approval["expires_at"]
            data = body.get("payload")
            if body["status"] == "fired" and body["event"] in RESULTS and isinstance(data, dict):
                result = ToolResult(call.id, call.name, str(data["content"]), bool(data["is_error"]))
                if body["event"] in ("ResultRecorded", "ResultReturned"):
                    self.result = result
                else:
                    self._outcome = result

    def resumed(self) -> None:
        """Continue the internal step the crash cut short, from the journaled state."""
        state = self.engine.state
        executions = self._executions()
        if state == "AwaitingApproval":
            self.reporter.note("approval", "the pending approval survived the restart: asking again")
            self._request_approval(None)
        elif state == "Approved":
            self._revalidate()
        elif state in ("Running", "Cancelling") and executions and (
                executions[-1].status == "unknown" or executions[-1].via == "user"):
            self.feed("Interrupted")
        elif state in ("Completed", "Failed"):
            self._record_result(state, None)
        elif state == "Recorded":
            self.feed("ResultReturned", payload=self.result)
        elif state in ("Invalid", "Denied", "Cancelled"):
            call = self.call
            assert call is not None
            self._answer_model(state, validate(self.toolbox.tools.get(call.name), call.arguments))

    def _revalidate(self) -> None:
        """A granted approval not yet started: still within its lifetime, or asked again."""
        assert self.link is not None
        now = self.link.run.options.clock()
        if self.engine.vars["needs_approval"] and self.approval_expires is not None and now > self.approval_expires:
            self.reporter.note("approval", "the approval lapsed before the call started: asking again")
            self.feed("ApprovalExpired")
        else:
            self._begin(None)


def runner_plan(replies: Sequence[Sequence[ReplyStep]]) -> list[ToolCall]:
    """The tool calls a script's replies hold, in order, with ids ``call_N``."""
    calls = [step for reply in replies for step in reply if isinstance(step, Call)]
    return [ToolCall(step.call_id or f"call_{n}", step.name, json.dumps(dict(step.arguments)))
            for n, step in enumerate(calls, 1)]
