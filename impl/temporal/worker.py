"""A Temporal worker process for tables: the table workflow and the effects' activities on one
task queue (or only one of the two, for deployments that separate them)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from agentfsm.impl.temporal.activities import EffectActivities, ToolFactory
from agentfsm.impl.temporal.workflow import TableWorkflow
from temporalio.client import Client
from temporalio.worker import Worker

DEFAULT_ADDRESS = "127.0.0.1:7233"
NAMESPACE = "default"


async def connect(address: str, namespace: str = NAMESPACE) -> Client:
    return await Client.connect(address, namespace=namespace)


def build_worker(client: Client, task_queue: str, factory: ToolFactory, workflows: bool = True,
                 activities: bool = True, concurrency: int = 16) -> Worker:
    effects = EffectActivities(factory)
    return Worker(client, task_queue=task_queue,
                  workflows=[TableWorkflow] if workflows else [],
                  activities=[effects.perform, effects.status] if activities else [],
                  max_concurrent_activities=concurrency)


async def serve(address: str, task_queue: str, factory: ToolFactory, stop: asyncio.Event,
                workflows: bool = True, activities: bool = True, concurrency: int = 16,
                ready: Callable[[], None] | None = None) -> None:
    """Serve ``task_queue`` until ``stop`` is set (then finish the tasks in hand)."""
    client = await connect(address)
    async with build_worker(client, task_queue, factory, workflows, activities, concurrency):
        if ready is not None:
            ready()
        await stop.wait()
