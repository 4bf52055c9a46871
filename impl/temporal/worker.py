"""A Temporal worker process for tables: the table workflow and the effects' activities on one
task queue (or only one of the two, for deployments that separate them)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta

from agentfsm.impl.temporal.activities import EffectActivities, ToolFactory
from agentfsm.impl.temporal.workflow import TableWorkflow
from agentfsm.spec import bundled_tables, load_table
from temporalio.client import Client
from temporalio.worker import Replayer, Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

DEFAULT_ADDRESS = "127.0.0.1:7233"
NAMESPACE = "default"
PASSTHROUGH = ("agentfsm", "yaml", "jsonschema", "jsonschema_specifications", "referencing", "rpds", "attr", "attrs",
               "transitions")
"""The project's pure modules and what the table loader imports: loaded once by the worker, outside
the sandbox (compiling a table is deterministic; re-importing them for every run would be slow)."""


HEARTBEAT_THROTTLE = 0.5
"""Seconds between an activity's heartbeats reaching the server (the SDK's default is most of the
heartbeat timeout): a cancellation (an interrupt of an agent run) reaches an activity only with the
answer to a heartbeat, so this bounds how late the agent hears of it."""


def warm_up() -> None:
    """Import everything compiling a table imports (the schema validator loads parts lazily), before
    any workflow runs: the sandbox then finds it loaded and passes it through."""
    load_table(next(p for p in bundled_tables() if p.name == "tool-call.yaml"))


async def connect(address: str, namespace: str = NAMESPACE) -> Client:
    return await Client.connect(address, namespace=namespace)


def runner() -> SandboxedWorkflowRunner:
    warm_up()
    return SandboxedWorkflowRunner(restrictions=SandboxRestrictions.default.with_passthrough_modules(*PASSTHROUGH))


def replayer() -> Replayer:
    """Temporal's replayer with this worker's workflow and sandbox: a recorded history that replays
    here without a nondeterminism error is one this code can carry on."""
    return Replayer(workflows=[TableWorkflow], workflow_runner=runner())


def build_worker(client: Client, task_queue: str, factory: ToolFactory, workflows: bool = True,
                 activities: bool = True, concurrency: int = 16, sticky: float = 5.0) -> Worker:
    """``sticky``: seconds a run's next workflow task waits for this worker before any other worker
    takes it (after this worker died, it is the delay before another carries the run on)."""
    effects = EffectActivities(factory)
    return Worker(client, task_queue=task_queue, workflow_runner=runner(),
                  workflows=[TableWorkflow] if workflows else [],
                  activities=[effects.perform, effects.status, effects.agent] if activities else [],
                  max_concurrent_activities=concurrency,
                  max_heartbeat_throttle_interval=timedelta(seconds=HEARTBEAT_THROTTLE),
                  sticky_queue_schedule_to_start_timeout=timedelta(seconds=sticky))


async def serve(address: str, task_queue: str, factory: ToolFactory, stop: asyncio.Event,
                workflows: bool = True, activities: bool = True, concurrency: int = 16, sticky: float = 5.0,
                ready: Callable[[], None] | None = None) -> None:
    """Serve ``task_queue`` until ``stop`` is set (then finish the tasks in hand)."""
    client = await connect(address)
    async with build_worker(client, task_queue, factory, workflows, activities, concurrency, sticky):
        if ready is not None:
            ready()
        await stop.wait()
