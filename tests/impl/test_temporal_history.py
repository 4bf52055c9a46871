"""An agent run's Temporal history grows linearly in its steps: a Loom conversation of 2N turns
records about twice the events and bytes of one of N turns beyond a run's fixed part, not four
times (as when every agent task carried the whole journal so far). Sizes, not times: the history's
events and their encoded bytes, read from the server after the runs, on one real worker process."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import ROOT
from temporal_support import AGENTFSM, queue, worker_process

LOOM = ROOT / "spec" / "loom-agent.yaml"
N = 4


@pytest.fixture(scope="module")
def served(temporal_address: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    task_queue = queue()
    proc = worker_process(temporal_address, task_queue, log=tmp_path_factory.mktemp("worker") / "worker.log")
    try:
        yield temporal_address, task_queue
    finally:
        proc.terminate()
        proc.wait(30)


def conversation(turns: int) -> str:
    """An agent script of ``turns`` inputs, each answered by the scripted model with a line of text."""
    inputs = ", ".join(f'"question {n:03}"' for n in range(turns))
    replies = ", ".join(f'"answer {n:03}"' for n in range(turns))
    return f"settings: {{commit_hook: false}}\ninputs: [{inputs}]\nreplies: [{replies}]\n"


def history(address: str, task_queue: str, folder: Path, turns: int) -> tuple[int, int]:
    """A Loom run of ``turns`` turns, played to its end: its history's events and bytes."""
    from agentfsm.impl.temporal.worker import connect

    folder.mkdir()
    (folder / "w").mkdir()
    (folder / "script.yaml").write_text(conversation(turns))
    run_id = f"history-{turns}-{task_queue}"
    done = subprocess.run([str(AGENTFSM), "temporal", "start", str(LOOM), "--agent-script", "script.yaml",
                           "--workdir", "w", "--address", address, "--task-queue", task_queue, "--run-id", run_id,
                           "--wait"], capture_output=True, text=True, timeout=240, cwd=folder)
    assert done.returncode == 0, done.stdout + done.stderr

    async def main() -> tuple[int, int]:
        events = (await (await connect(address)).get_workflow_handle(run_id).fetch_history()).events
        return len(events), sum(e.ByteSize() for e in events)
    return asyncio.run(main())


def test_an_agent_runs_history_grows_linearly_in_its_steps(served: tuple[str, str], tmp_path: Path) -> None:
    address, task_queue = served
    none, n, twice = (history(address, task_queue, tmp_path / str(t), t) for t in (0, N, 2 * N))
    for what in (0, 1):   # events, bytes: the second N turns cost what the first N did (linear), not 3 times
        first, second = n[what] - none[what], twice[what] - n[what]
        assert first > 0 and second <= 1.2 * first, (what, none, n, twice)
