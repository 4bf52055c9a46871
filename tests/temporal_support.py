"""Temporal for the tests: find or start the private dev server, run table runs on it with an
in-process worker or with real worker processes (``agentfsm temporal worker``)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from private_server import PrivateServer

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "temporal.sh"
AGENTFSM = Path(sys.executable).parent / "agentfsm"


SERVER = PrivateServer("Temporal dev server", SCRIPT, "AGENTFSM_TEST_TEMPORAL_ADDRESS", "temporalio", "temporal",
                       start_timeout=120, stop_timeout=60)


def queue() -> str:
    """A task queue of its own for each test: workers of other tests never take its tasks."""
    return f"test-{uuid.uuid4().hex[:12]}"


@asynccontextmanager
async def in_process_worker(address: str, task_queue: str, factory: Callable[[Any], Mapping[str, Any]],
                            ) -> AsyncIterator[Any]:
    """A worker in this process (the test's event loop) and a client for the test."""
    from agentfsm.impl.temporal.worker import build_worker, connect
    client = await connect(address)
    async with build_worker(client, task_queue, factory, sticky=1.0):
        yield client


def worker_process(address: str, task_queue: str, *extra: str, env: Mapping[str, str] | None = None,
                   log: Path | None = None, program: Sequence[str] = (str(AGENTFSM),)) -> subprocess.Popen[bytes]:
    """A real worker process (``agentfsm temporal worker``; ``program`` another command line taking
    the same arguments), in a session of its own so a kill reaches it alone."""
    out = open(log, "ab") if log is not None else subprocess.DEVNULL  # noqa: SIM115 (the child keeps it)
    return subprocess.Popen([*program, "temporal", "worker", "--address", address, "--task-queue", task_queue,
                             *extra], env={**os.environ, **(env or {})}, stdout=out, stderr=out,
                            start_new_session=True, cwd=ROOT.parent)


def until(check: Callable[[], Any], bound: float = 60.0, what: str = "the condition") -> Any:
    """Poll ``check`` until it returns something true (bounded, so a broken run fails, not hangs)."""
    deadline = time.monotonic() + bound
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {bound} s")
        time.sleep(0.1)


async def until_async(check: Callable[[], Any], bound: float = 60.0, what: str = "the condition") -> Any:
    deadline = time.monotonic() + bound
    while True:
        found = await check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {bound} s")
        await asyncio.sleep(0.1)


def executions(address: str, run_id: str) -> tuple[list[list[Any]], dict[str, Any]]:
    """The history of each execution of run ``run_id`` (a run that continued as new has several), oldest
    first, followed back from the newest through the run each continued; and the run's result."""
    from agentfsm.impl.temporal.worker import connect

    async def main() -> tuple[list[list[Any]], dict[str, Any]]:
        client = await connect(address)
        result: dict[str, Any] = await client.get_workflow_handle(run_id).result()
        found: list[list[Any]] = []
        execution = ""
        while True:
            events = list((await client.get_workflow_handle(run_id, run_id=execution or None).fetch_history()).events)
            found.insert(0, events)
            execution = events[0].workflow_execution_started_event_attributes.continued_execution_run_id
            if not execution:
                return found, result
    return asyncio.run(main())
