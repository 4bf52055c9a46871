"""An agent run's Temporal history grows linearly in its steps: a Loom conversation of 2N turns
records about twice the events and bytes of one of N turns beyond a run's fixed part, not four
times (as when every agent task carried the whole journal so far). Sizes, not times: the history's
events and their encoded bytes, read from the server after the runs, on one real worker process.
Past a bound, a run continues as new: no execution's history outgrows it, and the run's journal
(its trace, its result) is whole across them."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT
from temporal_support import AGENTFSM, executions, queue, worker_process

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


def played(address: str, task_queue: str, folder: Path, turns: int, *extra: str) -> str:
    """A Loom run of ``turns`` turns, played to its end (``agentfsm temporal start ... --wait``); its id."""
    folder.mkdir()
    (folder / "w").mkdir()
    (folder / "script.yaml").write_text(conversation(turns))
    run_id = f"{folder.name}-{task_queue}"
    done = subprocess.run([str(AGENTFSM), "temporal", "start", str(LOOM), "--agent-script", "script.yaml",
                           "--workdir", "w", "--address", address, "--task-queue", task_queue, "--run-id", run_id,
                           "--wait", *extra], capture_output=True, text=True, timeout=240, cwd=folder)
    assert done.returncode == 0, done.stdout + done.stderr
    return run_id


def history(address: str, task_queue: str, folder: Path, turns: int) -> tuple[int, int]:
    """A Loom run of ``turns`` turns, played to its end: its history's events and bytes."""
    from agentfsm.impl.temporal.worker import connect

    run_id = played(address, task_queue, folder, turns)

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


def shape(records: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """What two journals of one conversation share (not the clock, not the effects' keys)."""
    return [(r["kind"], r["body"].get("event"), r["body"].get("next"), r["body"].get("payload")) for r in records]


def test_a_long_agent_run_continues_as_new_with_its_whole_journal(served: tuple[str, str], tmp_path: Path) -> None:
    """A Loom conversation of 2N turns with a bound of 40 events: it continues as new, no execution's
    history passes the bound by more than one step's events, and its journal is the one the same
    conversation has in one execution."""
    address, task_queue = served
    [_], whole = executions(address, played(address, task_queue, tmp_path / "whole", 2 * N))
    bounded, continued = executions(address, played(address, task_queue, tmp_path / "bounded", 2 * N,
                                                    "--history-bound", "40"))
    assert len(bounded) >= 3 and all(len(events) <= 40 + 20 for events in bounded), [len(e) for e in bounded]
    assert shape(continued["records"]) == shape(whole["records"]) and continued["state"] == whole["state"]
