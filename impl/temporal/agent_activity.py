"""An agent run's activity: the table's own agent driver, rebuilt from the journal, does one thing.

The workflow keeps the journal and decides every step (``agentfsm.spec.semantics.step``); the
agent's drivers (the model call, the tools, the handlers that turn an action into work and
its result into the next event) run here, in an activity, on a *replica*: a ``DurableRun``
over an in-memory store loaded with the records the task carries, with the agent attached to
it as on a resume (``DurableLink.attach``: its context rebuilt from the journaled payloads,
its scripted model and prompts positioned by what the journal used). Nothing of a run lives
in a worker's memory between tasks, so any worker can take the next one.

The replica journals as any durable run would, and every event its driver delivers is
captured (name, parameters, event id, payload, calls, the effect it reports) and returned;
the workflow delivers the same events to its own journal, where its step decides again.
The replica performs only the effect the task names (its ``started`` the workflow made
durable before scheduling the task); the effects its steps make due are the workflow's to
start. The task ends once the driver is quiet (no event queued, no work running). A
cancelled task (the user interrupted) interrupts the agent the way it interrupts live, and
still returns what it fed.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Literal, Protocol

from agentfsm.impl.agents.explorer_evaluator import LLM_CALLS, ExplorerConfig, ExplorerEvaluatorAgent
from agentfsm.impl.agents.journaled import Pending
from agentfsm.impl.agents.loom import LoomAgent, LoomConfig
from agentfsm.impl.agents.play import vibework_used
from agentfsm.impl.agents.prompts import ScriptedPermissions, ScriptedQuestions, TerminalPrompt
from agentfsm.impl.agents.tool_call import ToolCallRunner, runner_plan
from agentfsm.impl.agents.vibework import SubAgentEnd, VibeworkAgent, vibework_config
from agentfsm.impl.driver import Activity, Driver
from agentfsm.impl.durable.driver import DurableLink, EffectAgent
from agentfsm.impl.durable.run import Calls, Delivery, DurableRun, EffectCall, EngineStepper, Options, Report
from agentfsm.impl.durable.state import Effect
from agentfsm.impl.llm.client import LlmClient, ScriptedLlm, close_client
from agentfsm.impl.llm.openai import OpenAIClient
from agentfsm.impl.play import _models_answered
from agentfsm.impl.script import AgentScript, parse_script
from agentfsm.impl.stores.journal import JSON
from agentfsm.impl.temporal.journal_run import calls_json, journal_store
from agentfsm.impl.temporal.messages import AgentReply, AgentStart, AgentTask, StartRun, StatusAnswer
from agentfsm.spec.model import Table
from agentfsm.spec.yamlio import load_document

REPLICA_END = logging.getLogger("agentfsm.temporal.replica")
REPLICA_END.propagate = False
REPLICA_END.addHandler(logging.NullHandler())


RETURNED = {"completed": "done", "failed": "failed"}
"""An effect's journal status once its driver is quiet, as the protocol log's ``returned`` says it."""


class AgentRunError(ValueError):
    """An agent run that cannot be served (no agent for its table, a script that does not load)."""


def agent_script(start: AgentStart) -> AgentScript:
    script = parse_script(load_document(start.script_text.encode("utf-8"), start.script_file).data,
                          start.script_file, replies=not start.openai)
    if not isinstance(script, AgentScript):
        raise AgentRunError(f"{start.script_file}: an agent run takes an agent script ('inputs', 'replies')")
    return script


def model_of(start: AgentStart, script: AgentScript) -> tuple[LlmClient, ScriptedLlm]:
    """The run's model (the OpenAI-compatible one when named) and the scripted one (positioned later).
    A model call is an effect like a tool's, marked by the table: the bundled agents mark theirs
    idempotent (a request sent again is safe, only paid twice), so Temporal may retry an attempt
    whose outcome it lost, with the same key and the same conversation."""
    scripted = ScriptedLlm(script.replies)
    if not start.openai:
        return scripted, scripted
    key = os.environ.get("OPENAI_API_KEY")   # the worker's: a secret does not travel in a run's history
    return OpenAIClient(start.openai, start.model, key, timeout=start.llm_timeout), scripted


Build = Callable[[Table, AgentStart, AgentScript, LlmClient, ScriptedLlm, AgentTask], "Hosted"]


@dataclass
class Hosted:
    """An agent driver built for one task: how to position its scripts once its run is attached,
    how it takes user input, what it took of its script, and how it settled."""

    driver: Driver
    agent: EffectAgent
    used: Callable[[DurableRun], dict[str, int]]
    skip: Callable[[dict[str, int]], None]
    send: Callable[[str, str | None], None]
    outcome: Callable[[DurableRun], dict[str, Any]]
    attach: Callable[[DurableLink], None] = lambda link: None
    report: Callable[[Effect], None] | None = None
    """How the agent takes an effect settled without its event (default: its ``report_back``)."""


def _loom(table: Table, start: AgentStart, script: AgentScript, model: LlmClient, llm: ScriptedLlm,
          task: AgentTask) -> Hosted:
    agent = LoomAgent(table, model, config=LoomConfig(workdir=Path(start.workdir), **script.settings))
    return Hosted(agent, agent, lambda run: {"llm": _models_answered(run)}, lambda used: llm.skip(used["llm"]),
                  agent.send_input, lambda run: {"state": run.state})


class ChildWorkflows(VibeworkAgent):
    """A vibework agent whose sub-agent is a run of its own (a child workflow): a spawn's first task
    feeds ``SubAgentSpawned`` and names the child's task (``spawning``); once the child run ended,
    the spawn's next task (``ended``) reports it as the agent does live."""

    ended: SubAgentEnd | None = None
    spawning: str | None = None

    async def sub_agent(self, activity: Activity, task: str, pending: Pending | None) -> SubAgentEnd | None:
        session = self._new_child().session_id   # the registry is this task's: the same id every time
        if self.ended is not None:
            return replace(self.ended, session_id=session)
        if not self.spawn_resumed():
            activity.feed(self, "SubAgentSpawned", payload=session)
        self.spawning = task
        return None


def _vibework(table: Table, start: AgentStart, script: AgentScript, model: LlmClient, llm: ScriptedLlm,
              task: AgentTask) -> Hosted:
    permissions = ScriptedPermissions(script.permissions) if script.permissions is not None else None
    questions = ScriptedQuestions(script.answers) if script.answers is not None else None
    agent = ChildWorkflows(table, model, config=vibework_config(Path(start.workdir), dict(script.settings),
                                                                  script.allow),
                           permissions=permissions, questions=questions, depth=start.depth)
    if task.ended is not None:
        agent.ended = SubAgentEnd("", str(task.ended["state"]), task.ended.get("error"),
                                  str(task.ended.get("answer", "")), dict(task.ended.get("used", {})))

    def skip(used: dict[str, int]) -> None:
        llm.skip(used.get("llm", 0))
        for prompt, kind in ((questions, "answers"), (permissions, "permissions")):
            if prompt is not None:
                prompt.skip(used.get(kind, 0))

    def outcome(run: DurableRun) -> dict[str, Any]:
        return {"state": agent.state(), "error": agent.error, "answer": agent.last_text(), "used": vibework_used(run)}
    return Hosted(agent, agent, vibework_used, skip, agent.send_input, outcome)


def _explorer(table: Table, start: AgentStart, script: AgentScript, model: LlmClient, llm: ScriptedLlm,
              task: AgentTask) -> Hosted:
    agent = ExplorerEvaluatorAgent(table, model, config=ExplorerConfig(workdir=Path(start.workdir), **script.settings),
                                   name=f"task-{start.unit}")

    def used(run: DurableRun) -> dict[str, int]:
        return {"llm": sum(1 for e in run.st.effects.values() if e.action in LLM_CALLS and e.status == "completed")}

    def send(text: str, event_id: str | None) -> None:
        agent.feed("TaskReceived", payload=text, event_id="task", plan=script.plan)
    return Hosted(agent, agent, used, lambda counts: llm.skip(counts.get("llm", 0)), send,
                  lambda run: {"state": agent.state(), "answer": agent.answer or "no answer", "used": used(run)})


def _tool_call(table: Table, start: AgentStart, script: AgentScript, model: LlmClient, llm: ScriptedLlm,
               task: AgentTask) -> Hosted:
    scripted = ScriptedPermissions(script.permissions) if script.permissions is not None else None
    call = runner_plan(script.replies)[start.unit - 1]
    runner = ToolCallRunner(table, Path(start.workdir), scripted or TerminalPrompt(interactive=False),
                            allow=script.allow or (), settings=dict(script.settings), name=f"call-{start.unit}")
    runner.call = call

    def used(run: DurableRun) -> dict[str, int]:
        return {"permissions": sum(1 for r in run.store.records(run.run_id)
                                   if r.body.get("event") in ("ApprovalGranted", "ApprovalDenied"))}

    def skip(counts: dict[str, int]) -> None:
        if scripted is not None:
            scripted.skip(counts.get("permissions", 0))

    def outcome(run: DurableRun) -> dict[str, Any]:
        content = runner.answer().content
        return {"state": runner.state(), "answer": content.splitlines()[0] if content else "", "used": used(run)}

    def attach(link: DurableLink) -> None:
        runner.link = link

    def report(effect: Effect) -> None:
        """As a resume of the call does (``DurableLink.resume``): an operator's verdict reaches a call
        still ``Running`` as ``Interrupted`` (its status query then reads the verdict), a halted one as
        ``OperatorResolved``."""
        runner.report_back(effect)
        if effect.via == "user":
            runner.resumed()
    return Hosted(runner, runner, used, skip, lambda text, event_id: runner.request(call), outcome, attach, report)


AGENTS: dict[str, Build] = {"loom-agent": _loom, "vibework-agent": _vibework, "explorer-evaluator": _explorer,
                            "tool-call": _tool_call}
UNITS = {"explorer-evaluator": "task", "tool-call": "call"}
"""The agents that play each input as a run of its own, and what a unit is called."""
"""The agents that run on Temporal, by their table's machine name."""


class ReplicaRun(DurableRun):
    """The run as the journal holds it, in memory: it records what its driver delivers and the
    interrupts it journals (``fed``), in order, for the workflow to deliver again."""

    fed: list[dict[str, Any]]
    capturing: bool

    def deliver(self, event: str, params: Mapping[str, object] | None = None, event_id: str | None = None, *,
                payload: JSON = None, calls: Calls | None = None, reports: Report | None = None) -> Delivery:
        if not self.capturing:   # the task is over: nothing more reaches the workflow
            return Delivery("halted", False, self.state, ())
        delivery = super().deliver(event, params, event_id, payload=payload, calls=calls, reports=reports)
        if delivery.status not in ("duplicate", "halted"):
            self.fed.append({"event": event, "params": dict(params or {}), "event_id": event_id, "payload": payload,
                             "calls": calls_json(calls), "report": None if reports is None else asdict(reports)})
        return delivery

    def interrupt(self, reason: str) -> None:
        super().interrupt(reason)
        self.fed.append({"interrupt": reason})

    def settle(self, key: str, outcome: Literal["completed", "failed"], result: JSON, via: str) -> None:
        super().settle(key, outcome, result, via)
        self.fed.append({"settle": key, "outcome": outcome, "result": result, "via": via})

    def mark_unknown(self, key: str, reason: str) -> None:
        super().mark_unknown(key, reason)
        self.fed.append({"unknown": key, "reason": reason})


class ReplicaLink(DurableLink):
    """The link of a driver to its replica run: only the task's own effect may begin (its ``started``
    is journaled already); the effects a step makes due are left to the workflow."""

    performing = ""
    made_due = False

    def begin(self, key: str, retry: bool) -> bool:
        return key == self.performing

    def flush(self) -> None:
        self.made_due = self.made_due or bool(self._due)
        self._due = []


class Noted(Protocol):
    """A protocol log's record of one attempt of an effect (``agentfsm.impl.temporal.activities``)."""

    def __call__(self, op: str, key: str, attempt: int, **fields: JSON) -> None: ...


async def act(start: StartRun, table: Table, task: AgentTask, heartbeat: Callable[[], None],
              every: float = 0.5, acting: Callable[[str, bool], None] = lambda point, idempotent: None,
              *, current: Callable[[str, str, int], Awaitable[None]],
              noted: Noted = lambda op, key, attempt, **fields: None) -> AgentReply:
    """Do ``task`` with the agent attached to a replica of its run; what its driver fed. ``acting``
    is told, right before an effect is performed (``before-tool``) and once its driver is quiet after
    it (``after-tool``), whether it is idempotent (the kill scenarios). ``current`` (what, key,
    attempt) raises, right before the effect is performed, when the attempt is no longer the current
    one (its worker was stopped past the attempt's timeout): a stale attempt never acts. ``noted``
    takes the protocol log's records of a performed effect and of a status query."""
    if start.agent is None:
        raise AgentRunError(f"run {task.run_id} is not an agent run")
    build = AGENTS.get(table.machine)
    if build is None:
        raise AgentRunError(f"no agent runs {table.machine} on Temporal (agents: {', '.join(sorted(AGENTS))})")
    script = agent_script(start.agent)
    model, scripted = model_of(start.agent, script)
    hosted = build(table, start.agent, script, model, scripted, task)
    driver, agent = hosted.driver, hosted.agent
    store = journal_store(task.run_id, table.machine, task.records)
    options = Options(approvals=dict(start.approval_lifetimes), max_attempts=start.max_attempts)
    run = ReplicaRun.attach(store, table, task.run_id, DurableLink._tools(driver, agent),
                            EngineStepper(table, driver.engine), options)
    assert isinstance(run, ReplicaRun)
    run.fed, run.capturing = [], True
    driver.engine.restore(run.state, run.st.vars)
    agent.restore(store.records(task.run_id))
    link = ReplicaLink(driver, agent, run)
    link.performing = task.key if task.op == "perform" else ""
    hosted.attach(link)
    used = hosted.used(run)
    hosted.skip({kind: used.get(kind, 0) + start.agent.skip.get(kind, 0) for kind in {*used, *start.agent.skip}})
    try:
        if task.op == "status":
            effect = run.st.effects[task.key]
            call = EffectCall(run.run_id, effect.action, effect.key, effect.attempts, effect.tool, effect.args)
            reply = await asyncio.to_thread(agent.status_query, call)
            noted("status", task.key, effect.attempts, answer="none" if reply is None else reply[0])
            return AgentReply(status=StatusAnswer(False) if reply is None else StatusAnswer(True, reply[0], reply[1]))
        if task.op == "outcome":
            return AgentReply(outcome=hosted.outcome(run))
        driver.start()
        if task.op == "input":
            hosted.send(task.text, task.event_id)
        elif task.op == "perform":
            effect = run.st.effects[task.key]
            noted("attempt", task.key, effect.attempts, action=effect.action, idempotent=effect.idempotent)
            acting("before-tool", effect.idempotent)
            await current(f"run {task.run_id}: {effect.action} {task.key}", task.key, effect.attempts)
            noted("call", task.key, effect.attempts)
            agent.perform(effect, task.retry)
        elif task.op == "report":
            (hosted.report or agent.report_back)(run.st.effects[task.key])
        elif task.op == "interrupt":
            await driver.interrupt()
        elif task.op == "shutdown":
            await driver.shutdown()
        else:
            raise AgentRunError(f"no agent task {task.op!r}")
        await quiet(driver, link, heartbeat, every)
        if task.op == "perform":
            effect = run.st.effects[task.key]
            noted("returned", task.key, effect.attempts, result=RETURNED.get(effect.status, effect.status))
            acting("after-tool", effect.idempotent)
        run.capturing = False
        spawning = driver.spawning if isinstance(driver, ChildWorkflows) else None
        return AgentReply(fed=run.fed, child=spawning, used=hosted.used(run) if spawning else {})
    finally:
        run.capturing = False
        driver.log = REPLICA_END   # the replica stops where the run stands, not in a final state: no warning
        await driver.shutdown()
        await close_client(model)


async def quiet(driver: Driver, link: ReplicaLink, heartbeat: Callable[[], None], every: float) -> None:
    """Until the driver has nothing queued and nothing running, or nothing queued and an effect due
    (the workflow performs it next: what still runs here, such as a model's stream an interrupt
    is about to cancel, is the effect's to stop), heartbeating meanwhile; a cancelled task (the
    workflow's interrupt) interrupts the agent as live, then waits again."""
    def done() -> bool:
        return driver.is_quiet() or (link.made_due and (driver._queue is None or driver._queue.empty()))
    waiting = asyncio.ensure_future(driver.wait_until(done))
    interrupted = False
    while not waiting.done():
        heartbeat()
        try:
            await asyncio.wait([waiting], timeout=every)
        except asyncio.CancelledError:
            if interrupted:
                raise
            interrupted = True
            await driver.interrupt()
    waiting.result()
