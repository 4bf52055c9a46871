"""The Temporal fault campaign: real worker processes SIGKILLed and SIGSTOPped at random moments
(most of them inside activities: every tool lingers after acting), and the dev server itself
killed and restarted mid-run. Three kinds of runs share the workers and the faults:

- **agentfsm**: the Loom table's turn (4 effects, 2 of them non-idempotent) as the table
  workflow, its events sent as signals while the run goes on, its tools ledger tools with a
  fencing status query;
- **agents**: the tool-call agent, its ``run_command`` calls appending to the same external
  ledger (``agentfsm.faults.temporal_agent_runs``): each call a unit run, its tool in the agent's
  activity, no status query, so a lost outcome waits for the operator;
- **baseline**: the same non-idempotent tool calls as plain Temporal activities with the
  SDK's default retry policy (what a user would otherwise write).

Counted per kind: duplicated effects (a non-idempotent key executed more than once in the
external ledger), lost signals (an event sent and acknowledged but absent from the run's
journal), stuck runs (not completed once the faults stop and the operator has answered),
operator decisions, and tracebacks (a workflow task that failed, or a worker that died
other than by the campaign's own signals). Every table and agent run's protocol log (the
workers write one) is audited against ``spec/systems/temporal-run.yaml``
(``agentfsm.faults.temporal_audit``): effects audited, unexplained (fails the campaign) and cut.

``python -m agentfsm.faults.temporal_chaos run --runs 100`` (``make temporal-chaos``);
``... worker`` is the worker process it starts.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from agentfsm.faults.protocol_audit import Verdict
from agentfsm.faults.temporal_agent_runs import AgentRuns
from agentfsm.faults.temporal_audit import audit_runs
from agentfsm.faults.temporal_baseline import HEARTBEAT, PLAIN_WORKFLOW, START_TO_CLOSE, PlainActivity, PlainWorkflow
from agentfsm.impl.durable.ledger import FileLedger, LedgerTool
from agentfsm.impl.durable.protocol_log import ENV
from agentfsm.impl.durable.run import EffectCall, StatusReply, Tool
from agentfsm.impl.stores.journal import JSON
from agentfsm.impl.temporal.process_end import exit_before_finalizing
from agentfsm.spec.model import Table

ROOT = Path(__file__).resolve().parent.parent
LOOM_EVENTS: list[tuple[str, dict[str, Any]]] = [
    ("UserInput", {}), ("TextDelta", {}), ("LlmCompleted", {"tool_calls": 2}), ("ToolCompleted", {"mutating": True}),
    ("ToolCompleted", {"mutating": False}), ("PostToolsHookCompleted", {"action_taken": True}),
    ("LlmCompleted", {"tool_calls": 0}), ("ShutdownRequested", {})]
PLAIN_EFFECTS = 2   # the non-idempotent effects of one Loom turn: ExecuteTools, RunPostToolsHook


class Acting:
    """A campaign tool: it acts (a ledger line), says which worker acts on a non-idempotent effect
    (``acting``: the campaign kills that worker while the tool lingers), then lingers."""

    def __init__(self, inner: LedgerTool, linger: float, acting: Path) -> None:
        self.inner = inner
        self.fences = inner.fences
        self.linger = linger
        self.acting = acting

    def run(self, call: EffectCall) -> JSON:
        result = self.inner.run(call)
        if not self.inner.idempotent:
            with self.acting.open("a") as f:
                f.write(f"{os.getpid()} {call.key}\n")
        time.sleep(self.linger)
        return result

    def status(self, call: EffectCall) -> StatusReply | None:
        return self.inner.status(call)


def fenced_tools(ledger: Path, linger: float) -> Any:
    """The campaign's agentfsm tools: ledger tools whose status query answers from the ledger and
    fences the key."""
    def factory(table: Table) -> Mapping[str, Tool]:
        return {a.name: Acting(LedgerTool(FileLedger(ledger), a.idempotent, True), linger,
                               ledger.with_name("acting.txt")) for a in table.actions if a.effect == "external"}
    return factory


async def serve_worker(address: str, task_queue: str, ledger: Path, linger: float) -> None:
    from agentfsm.impl.temporal.activities import EffectActivities
    from agentfsm.impl.temporal.worker import connect, runner
    from agentfsm.impl.temporal.workflow import TableWorkflow
    from temporalio.worker import Worker
    client = await connect(address)
    effects = EffectActivities(fenced_tools(ledger, linger))
    plain = PlainActivity(ledger, linger)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    async with Worker(client, task_queue=task_queue, workflows=[TableWorkflow, PlainWorkflow],
                      activities=[effects.perform, effects.status, effects.agent, plain.effect],
                      workflow_runner=runner(),
                      sticky_queue_schedule_to_start_timeout=timedelta(seconds=2)):
        print("ready", flush=True)
        await stop.wait()


@dataclass
class Tally:
    runs: int = 0
    effects: int = 0
    duplicated: int = 0
    lost_signals: int = 0
    stuck: int = 0
    decisions: int = 0
    unknown: int = 0
    audited: int = 0       # effects whose protocol log was audited against temporal-run.yaml
    unexplained: int = 0   # ... that no interleaving of the system explains
    cut: int = 0           # ... whose window went past what the system describes (a prefix audited)
    notes: list[str] = field(default_factory=list)

    def audited_by(self, verdict: Verdict) -> None:
        self.audited += verdict.windows
        self.unexplained += len(verdict.unexplained)
        self.cut += verdict.cut
        self.notes += verdict.unexplained


@dataclass
class Outcome:
    runs_per_kind: int
    faults: Counter[str] = field(default_factory=Counter)
    agentfsm: Tally = field(default_factory=Tally)
    agents: Tally = field(default_factory=Tally)
    baseline: Tally = field(default_factory=Tally)
    tracebacks: int = 0
    seconds: float = 0.0


class Campaign:
    def __init__(self, folder: Path, runs: int, workers: int, seed: int, batch: int, linger: float) -> None:
        self.folder = folder
        self.runs = runs
        self.rng = random.Random(seed)
        self.batch = batch
        self.linger = linger
        self.ledger = folder / "ledger.txt"
        self.protocol = folder / "temporal.protocol.jsonl"
        self.env = {**os.environ, "AGENTFSM_TEMPORAL_DIR": str(folder / "server"), ENV: str(self.protocol)}
        self.address = self._server("start")
        self.queue = f"chaos-{seed}"
        self.count = workers
        self.workers: list[subprocess.Popen[bytes]] = []
        self.deaths = 0
        self.spawned = 0
        self.outcome = Outcome(runs)
        self.agents = AgentRuns(folder, self.ledger, linger, self.retrying)

    def _server(self, command: str) -> str:
        done = subprocess.run([str(ROOT / "scripts" / "temporal.sh"), command], capture_output=True, text=True,
                              env=self.env, timeout=120)
        if done.returncode != 0:
            raise RuntimeError(f"temporal.sh {command}: {done.stderr.strip()}")
        return done.stdout.strip()

    def _spawn(self, slot: int) -> None:
        self.spawned += 1
        path = self.folder / f"worker-{self.spawned}.log"
        log = open(path, "ab")  # noqa: SIM115 (the child holds it)
        child = subprocess.Popen([sys.executable, "-m", "agentfsm.faults.temporal_chaos", "worker", "--address",
                                  self.address, "--task-queue", self.queue, "--ledger", str(self.ledger), "--linger",
                                  str(self.linger)], stdout=log, stderr=log, start_new_session=True, cwd="/",
                                 env=self.env)
        if slot < len(self.workers):
            self.workers[slot] = child
        else:
            self.workers.append(child)
        deadline = time.monotonic() + 120
        while b"ready" not in path.read_bytes():
            if child.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"a worker did not start: see {path}")
            time.sleep(0.1)

    def _reap(self, slot: int, expected: bool) -> None:
        child = self.workers[slot]
        code = child.wait(60)
        if not expected or code not in (0, -signal.SIGKILL, -signal.SIGTERM):
            self.deaths += 1

    def _acting(self) -> list[int]:
        """The pids of the workers that acted on a table run's non-idempotent effect, in order."""
        path = self.folder / "acting.txt"
        return [int(line.split()[0]) for line in path.read_text().splitlines()] if path.exists() else []

    async def fault(self) -> None:
        """One fault: right after a worker acted on a table run's non-idempotent effect (its tool
        lingers: the worker is inside the activity), or at a random moment if none acts for a
        while: that worker and another SIGKILLed (and replaced), it SIGSTOPped for a while, or the
        server SIGKILLed and started again (same port, same database)."""
        await asyncio.sleep(self.rng.uniform(0.0, 1.0))
        seen = len(self._acting())
        deadline = time.monotonic() + 5.0
        while len(self._acting()) == seen and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        acted = self._acting()[seen:]
        pids = [w.pid for w in self.workers]
        kind = self.rng.choice(["kill", "kill", "stop", "server"])
        self.outcome.faults[kind] += 1
        slot = pids.index(acted[0]) if acted and acted[0] in pids else self.rng.randrange(len(self.workers))
        if kind == "kill":   # the acting worker and another: the activities in flight die with them
            others = [k for k in range(len(self.workers)) if k != slot]
            slots = [slot, *self.rng.sample(others, min(1, len(others)))]
            for one in slots:
                os.killpg(self.workers[one].pid, signal.SIGKILL)
            for one in slots:
                await asyncio.to_thread(self._reap, one, True)
                self._spawn(one)
        elif kind == "stop":
            os.killpg(self.workers[slot].pid, signal.SIGSTOP)
            await asyncio.sleep(self.rng.uniform(HEARTBEAT, 3 * HEARTBEAT))
            os.killpg(self.workers[slot].pid, signal.SIGCONT)
        else:
            pid = int((self.folder / "server" / "pid").read_text())
            os.kill(pid, signal.SIGKILL)
            await asyncio.sleep(self.rng.uniform(0.5, 2.0))
            await asyncio.to_thread(self._server, "start")

    async def retrying(self, what: Any, bound: float = 120.0) -> Any:
        """A client call through a server that may be down for a while."""
        deadline = time.monotonic() + bound
        while True:
            try:
                return await what()
            except Exception:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.5)

    async def run(self) -> Outcome:
        from agentfsm.impl.temporal.client import start_message, start_run
        from agentfsm.impl.temporal.messages import EventMessage, Timeouts
        from agentfsm.impl.temporal.worker import connect
        began = time.monotonic()
        for slot in range(self.count):
            self._spawn(slot)
        client = await self.retrying(lambda: connect(self.address))
        loom = ROOT / "spec" / "loom-agent.yaml"
        text = loom.read_text(encoding="utf-8")
        sent: dict[str, list[str]] = {}
        for first in range(0, self.runs, self.batch):
            ids = [f"run-{n}" for n in range(first, min(first + self.batch, self.runs))]
            faults = asyncio.ensure_future(self._faults())
            for run_id in ids:
                start = start_message(run_id, loom, text, {}, [], False, Timeouts(START_TO_CLOSE, HEARTBEAT, 10.0))
                await self.retrying(lambda s=start: start_run(client, self.queue, s, "loom-agent"))
                await self.agents.start(client, self.queue, f"agent-{run_id}", Timeouts(START_TO_CLOSE, HEARTBEAT))
                await self.retrying(lambda r=run_id: client.start_workflow(
                    PLAIN_WORKFLOW, [f"plain/{r}/{k}" for k in range(PLAIN_EFFECTS)], id=f"plain-{r}",
                    task_queue=self.queue))
            for n, (name, params) in enumerate(LOOM_EVENTS, 1):
                for run_id in ids:
                    message = EventMessage(name, params, f"{run_id}-e{n}")
                    handle = client.get_workflow_handle(run_id)
                    await self.retrying(lambda h=handle, m=message: h.signal("event", m))
                    sent.setdefault(run_id, []).append(message.event_id or "")
                await asyncio.sleep(self.rng.uniform(0.0, 0.3))
            await faults
            await self._settle(client, ids, sent)
            await self.agents.settle(client, [f"agent-{r}" for r in ids], self.outcome.agents)
        self.outcome.seconds = time.monotonic() - began
        self.audit()
        return self.outcome

    def audit(self) -> None:
        """Every table and agent run's protocol log audited against temporal-run.yaml: an effect the
        system does not explain fails the campaign (the plain activities write none)."""
        verdicts = audit_runs(self.protocol, {"agentfsm": lambda run: run.startswith("run-"),
                                              "agents": lambda run: run.startswith("agent-")})
        for kind, verdict in verdicts.items():
            getattr(self.outcome, kind).audited_by(verdict)

    async def _faults(self) -> None:
        for _ in range(self.rng.randint(3, 5)):
            await self.fault()

    async def _settle(self, client: Any, ids: list[str], sent: Mapping[str, list[str]]) -> None:
        """Wait for the batch to end, answering decisions as an operator would (from the ledger)."""
        executed = FileLedger(self.ledger)
        pending = set(ids)
        deadline = time.monotonic() + 240
        while pending and time.monotonic() < deadline:
            for run_id in sorted(pending):
                handle = client.get_workflow_handle(run_id)
                described = await self.retrying(handle.describe)
                if described.status is not None and described.status.name == "COMPLETED":
                    pending.discard(run_id)
                    continue
                try:
                    decisions = await asyncio.wait_for(handle.query("pending"), 10)
                except Exception:
                    continue
                for d in decisions:
                    answer = ("continue" if d["kind"] == "anomaly"
                              else "completed" if executed.executions()[d["id"]] else "rerun")
                    if d["kind"] != "approval-expired":
                        self.outcome.agentfsm.decisions += 1
                        await self.retrying(lambda h=handle, i=d["id"], a=answer: h.signal(
                            "decide", {"id": i, "decision": a}))
            await asyncio.sleep(0.5)
        counts = executed.executions()
        tally = self.outcome.agentfsm
        for run_id in ids:
            tally.runs += 1
            if run_id in pending:
                tally.stuck += 1
                continue
            result = await self.retrying(client.get_workflow_handle(run_id).result)
            journaled = {r["body"].get("event_id") for r in result["records"]}
            tally.lost_signals += sum(1 for e in sent[run_id] if e not in journaled)
            for effect in result["effects"]:
                tally.effects += 1
                if not effect["idempotent"]:
                    tally.duplicated += counts[effect["key"]] > 1
            tally.unknown += sum(1 for r in result["records"] if r["kind"] == "unknown")
        base = self.outcome.baseline
        for run_id in ids:
            base.runs += 1
            handle = client.get_workflow_handle(f"plain-{run_id}")
            try:
                await asyncio.wait_for(self.retrying(handle.result), 240)
            except Exception:
                base.stuck += 1
            for k in range(PLAIN_EFFECTS):
                base.effects += 1
                base.duplicated += counts[f"plain/{run_id}/{k}"] > 1

    def close(self) -> None:
        for slot, child in enumerate(self.workers):
            if child.poll() is None:
                os.killpg(child.pid, signal.SIGCONT)
                child.terminate()
                self._reap(slot, True)
        failures = sum(log.read_text(errors="replace").count("Failed activation")
                       for log in self.folder.glob("worker-*.log"))
        self.outcome.tracebacks = failures + self.deaths
        self._server("stop")


def summary(outcome: Outcome) -> str:
    lines = [f"{outcome.runs_per_kind} runs per kind, faults {dict(sorted(outcome.faults.items()))}, "
             f"{outcome.seconds:.0f} s; tracebacks {outcome.tracebacks}"]
    for name, tally in (("agentfsm", outcome.agentfsm), ("agents", outcome.agents), ("baseline", outcome.baseline)):
        lines.append(f"{name}: {tally.runs} runs, {tally.effects} effects, {tally.duplicated} duplicated, "
                     f"{tally.lost_signals} lost signals, {tally.stuck} stuck, {tally.unknown} unknown, "
                     f"{tally.decisions} operator decisions; {tally.audited} effects audited, "
                     f"{tally.unexplained} unexplained, {tally.cut} cut")
        lines += [f"  unexplained: {why}" for why in tally.notes]
    return "\n".join(lines)


def clean(outcome: Outcome) -> bool:
    """No agentfsm run (table or agent) duplicated an effect, lost a signal, got stuck or did what its
    model does not explain, and no worker failed."""
    dirty = [t.duplicated or t.lost_signals or t.stuck or t.unexplained for t in (outcome.agentfsm, outcome.agents)]
    return not (any(dirty) or outcome.tracebacks)


def campaign(runs: int, workers: int = 3, seed: int = 1, batch: int = 10, linger: float = 1.0,
             folder: Path | None = None) -> Outcome:
    with tempfile.TemporaryDirectory(prefix="agentfsm-temporal-chaos-") as tmp:
        where = folder or Path(tmp)
        where.mkdir(parents=True, exist_ok=True)
        made = Campaign(where, runs, workers, seed, batch, linger)
        try:
            return asyncio.run(made.run())
        finally:
            made.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agentfsm.faults.temporal_chaos")
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="the campaign")
    r.add_argument("--runs", type=int, default=100, help="runs of each kind (agentfsm, agents, baseline)")
    r.add_argument("--workers", type=int, default=3)
    r.add_argument("--seed", type=int, default=1)
    r.add_argument("--batch", type=int, default=10, help="runs of each kind at once")
    r.add_argument("--json", metavar="FILE", help="write the counts as JSON")
    w = sub.add_parser("worker", help="one of the campaign's worker processes")
    w.add_argument("--address", required=True)
    w.add_argument("--task-queue", required=True)
    w.add_argument("--ledger", required=True)
    w.add_argument("--linger", type=float, default=0.5)
    args = parser.parse_args(argv)
    if args.command == "worker":
        asyncio.run(serve_worker(args.address, args.task_queue, Path(args.ledger), args.linger))
        return 0
    if args.runs < 1 or args.workers < 1 or args.batch < 1:
        parser.error("--runs, --workers and --batch must be 1 or more")
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(1))   # stop the workers and the server
    outcome = campaign(args.runs, args.workers, args.seed, args.batch)
    print(summary(outcome))
    if args.json:
        Path(args.json).write_text(json.dumps({**asdict(outcome), "faults": dict(outcome.faults)}, indent=2))
    return 0 if clean(outcome) else 1


if __name__ == "__main__":
    exit_before_finalizing(main())
