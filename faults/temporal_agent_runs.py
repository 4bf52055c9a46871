"""The Temporal fault campaign's agent runs: the tool-call agent (``agentfsm temporal start
spec/tool-call.yaml --agent-script``) plays ``CALLS`` ``run_command`` calls per run, each a unit run
of its own (``RUN/call-N``, a child workflow), with the agent's own tools in the workers' agent
activity. Each command appends its call's key to the campaign's external ledger, says which worker
acts (its parent's pid, for the fault that follows), then lingers, so the campaign's faults fall
inside the activity. ``run_command`` is not idempotent and has no status query: a call whose
outcome is lost waits for the operator, who answers from the ledger (``completed`` if the call ran,
else ``rerun``), sending the decision to the run the call belongs to."""

from __future__ import annotations

import asyncio
import functools
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from agentfsm.impl.durable.ledger import FileLedger

CALLS = 2
TOOL_CALL = Path(__file__).resolve().parent.parent / "spec" / "tool-call.yaml"
Retrying = Callable[[Callable[[], Awaitable[Any]]], Awaitable[Any]]


def agent_script(run_id: str, ledger: Path, acting: Path, linger: float) -> str:
    """The run's agent script: ``CALLS`` commands, each acting once on the ledger under its call's key."""
    command = f'echo "$1" >> {ledger}; echo "$PPID $1" >> {acting}; sleep {linger:g}'
    calls = [{"tool_call": {"name": "run_command", "arguments": {"argv": ["sh", "-c", command, "sh",
                                                                          f"{run_id}/call-{n}"]}}}
             for n in range(1, CALLS + 1)]
    return json.dumps({"allow": ["run_command"], "inputs": [], "replies": [calls]})


class AgentRuns:
    """The campaign's agent runs: started beside its table runs, settled as an operator would."""

    def __init__(self, folder: Path, ledger: Path, linger: float, retrying: Retrying) -> None:
        self.workdir = folder / "agent-work"
        self.workdir.mkdir(exist_ok=True)
        self.ledger = ledger
        self.acting = folder / "acting.txt"
        self.linger = linger
        self.retrying = retrying
        self.decided: dict[str, set[str]] = {}
        """The decisions sent to each unit run (by key)."""

    async def start(self, client: Any, task_queue: str, run_id: str, timeouts: Any) -> None:
        from agentfsm.impl.temporal.client import start_message, start_run
        from agentfsm.impl.temporal.messages import AgentStart
        from agentfsm.spec import load_table
        table = load_table(TOOL_CALL)
        start = start_message(run_id, TOOL_CALL, TOOL_CALL.read_text(encoding="utf-8"), dict(table.runtime), [], True,
                              timeouts)
        start.agent = AgentStart(agent_script(run_id, self.ledger, self.acting, self.linger), f"{run_id}.yaml",
                                 str(self.workdir), [], units=CALLS, unit_name="call")
        await self.retrying(lambda: start_run(client, task_queue, start, table.machine))

    async def operate(self, client: Any, run_id: str) -> int:
        """Answer the decisions the run's call under way waits for; how many were sent."""
        try:
            config = await asyncio.wait_for(client.get_workflow_handle(run_id).query("config"), 10)
            unit = config.get("unit")
            if not unit:
                return 0
            handle = client.get_workflow_handle(unit)
            decisions = await asyncio.wait_for(handle.query("pending"), 10)
        except Exception:   # the server or every worker down for a while: ask again later
            return 0
        executed = FileLedger(self.ledger).executions()
        sent = 0
        for d in decisions:
            if d["kind"] == "approval-expired":
                continue
            answer = "continue" if d["kind"] == "anomaly" else "completed" if executed[unit] else "rerun"
            await self.retrying(functools.partial(handle.signal, "decide", {"id": d["id"], "decision": answer}))
            self.decided.setdefault(unit, set()).add(d["id"])
            sent += 1
        return sent

    async def settle(self, client: Any, ids: list[str], tally: Any, bound: float = 240.0) -> None:
        """Wait for the runs to end, operating meanwhile; then count each call: executed more than once
        in the ledger (duplicated), a decision sent but absent from its run's journal (lost), a run not
        completed (stuck), the unknown outcomes and the decisions."""
        pending = set(ids)
        deadline = time.monotonic() + bound
        while pending and time.monotonic() < deadline:
            for run_id in sorted(pending):
                described = await self.retrying(client.get_workflow_handle(run_id).describe)
                if described.status is not None and described.status.name == "COMPLETED":
                    pending.discard(run_id)
                else:
                    tally.decisions += await self.operate(client, run_id)
            await asyncio.sleep(0.5)
        executed = FileLedger(self.ledger).executions()
        for run_id in ids:
            tally.runs += 1
            if run_id in pending:
                tally.stuck += 1
                continue
            result = await self.retrying(client.get_workflow_handle(run_id).result)
            tally.stuck += any(unit["state"] != "Returned" for unit in result["units"])   # a call never answered
            for unit in result["units"]:
                records = (await self.retrying(client.get_workflow_handle(unit["run_id"]).result))["records"]
                journaled = {r["body"].get("key") for r in records if r["kind"] == "decided"}
                tally.lost_signals += len(self.decided.get(unit["run_id"], set()) - journaled)
                tally.unknown += sum(1 for r in records if r["kind"] == "unknown")
                tally.effects += 1
                tally.duplicated += executed[unit["run_id"]] > 1
