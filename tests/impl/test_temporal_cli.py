"""``agentfsm temporal``: a worker process serves runs the CLI starts, sends events to, lists,
traces, decides and interrupts; bad input and an unreachable server are exit 2, never a traceback."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import ROOT, run_cli
from temporal_support import queue, until, worker_process

TOOL_CALL = str(ROOT / "spec" / "tool-call.yaml")
SCRIPT = """events:
  - ArgumentsValid: {ask_user: true, takes_key: false}
  - ApprovalGranted
  - Started
"""


@pytest.fixture(scope="module")
def served(temporal_address: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, Path]]:
    """A real worker process on a task queue of this module's, with demonstration ledger tools."""
    folder = tmp_path_factory.mktemp("temporal-cli")
    task_queue = queue()
    child = worker_process(temporal_address, task_queue, "--ledger", str(folder / "ledger.txt"),
                           "--sticky-timeout", "1", TOOL_CALL, log=folder / "worker.log")
    try:
        yield temporal_address, task_queue, folder
    finally:
        child.terminate()
        child.wait(30)


def cli(capsys: pytest.CaptureFixture[str], address: str, *argv: str) -> tuple[int, str, str]:
    return run_cli(["temporal", *argv, "--address", address], capsys)


def test_start_send_trace_list_and_interrupt(served: tuple[str, str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    address, task_queue, folder = served
    script = folder / "call.yaml"
    script.write_text(SCRIPT, encoding="utf-8")
    run_id = f"cli-{task_queue}"
    code, out, err = cli(capsys, address, "start", TOOL_CALL, "--script", str(script), "--run-id", run_id,
                         "--task-queue", task_queue, "--open", "--approval-lifetime", "RequestApproval=600",
                         "--timeout", "30", "--heartbeat", "2")
    assert (code, out.strip(), err) == (0, run_id, "")
    until(lambda: run_cli(["temporal", "trace", run_id, "--address", address, "--json"], capsys)[1].count(
        '"started"') >= 1, what="the tool's start")
    code, out, _ = cli(capsys, address, "send", run_id, "Completed", "--event-id", "done-1")
    assert code == 0 and "Completed sent" in out
    code, out, _ = cli(capsys, address, "send", run_id, "ResultRecorded")
    assert code == 0
    until(lambda: '"Recorded"' in run_cli(["temporal", "trace", run_id, "--address", address, "--json"], capsys)[1],
          what="the result recorded")
    code, out, _ = cli(capsys, address, "interrupt", run_id, "--reason", "enough")
    assert code == 0 and "interrupt sent" in out
    code, out, _ = cli(capsys, address, "send", run_id, "ResultReturned", "--param", "ignored=1")
    assert code == 0   # the workflow refuses it (a note), the run waits on
    assert cli(capsys, address, "send", run_id, "ResultReturned")[0] == 0
    until(lambda: "records" in json.loads(cli(capsys, address, "trace", run_id, "--json")[1])["config"],
          what="the run's end")   # a completed run's trace is its result: the configuration with its records
    code, out, _ = cli(capsys, address, "trace", run_id, "--json")
    trace = json.loads(out)
    kinds = [r["kind"] for r in trace["records"]]
    assert trace["config"]["state"] == "Returned" and "interrupt" in kinds and "completed" in kinds
    [note] = trace["config"]["notes"]
    assert note.startswith("event ResultReturned refused:") and "ignored" in note
    code, out, _ = cli(capsys, address, "trace", run_id)
    assert code == 0 and "state Returned" in out and " step " in out
    until(lambda: f"{run_id}  tool-call  completed" in cli(capsys, address, "list")[1], what="the run listed")
    code, out, _ = cli(capsys, address, "list", "--json")
    assert any(r["run_id"] == run_id and r["status"] == "completed" for r in json.loads(out)["runs"])
    assert (folder / "ledger.txt").read_text().splitlines() == [f"{run_id}/4/0"]


def test_start_wait_count_prints_each_end_state(served: tuple[str, str, Path],
                                                capsys: pytest.CaptureFixture[str]) -> None:
    address, task_queue, folder = served
    script = folder / "whole.yaml"
    script.write_text("events:\n  - ArgumentsValid: {ask_user: false, takes_key: false}\n  - Started\n"
                      "  - Completed\n  - ResultRecorded\n  - ResultReturned\n", encoding="utf-8")
    code, out, _ = cli(capsys, address, "start", TOOL_CALL, "--script", str(script), "--count", "2", "--run-id",
                       f"many-{task_queue}", "--task-queue", task_queue, "--wait")
    assert code == 0
    assert [line.split(": ")[1].split(" ")[0] for line in out.splitlines() if ": " in line] == ["Returned"] * 2


def test_deciding_what_is_not_open_is_refused(served: tuple[str, str, Path],
                                              capsys: pytest.CaptureFixture[str]) -> None:
    address, task_queue, _ = served
    run_id = f"nothing-{task_queue}"
    assert cli(capsys, address, "start", TOOL_CALL, "--run-id", run_id, "--task-queue", task_queue, "--open")[0] == 0
    code, _, err = cli(capsys, address, "decide", run_id, f"{run_id}/3/0=rerun")
    assert code == 2 and "no open decision" in err and "Traceback" not in err
    code, _, err = cli(capsys, address, "decide", run_id, "KEY=maybe")
    assert code == 2 and "expected ID=completed" in err


@pytest.mark.parametrize(("argv", "says"), [
    (["start", TOOL_CALL, "--count", "0"], "--count must be 1 or more"),
    (["start", TOOL_CALL, "--history-bound", "0"], "--history-bound must be 1 or more"),
    (["start", TOOL_CALL, "--approval-lifetime", "RequestApproval=soon"], "expected ACTION=SECONDS"),
    (["start", TOOL_CALL, "--approval-lifetime", "Nope=5"], "has no action Nope"),
    (["start", str(ROOT / "examples" / "loom-demo.yaml")], "error"),
    (["start", TOOL_CALL, "--script", str(ROOT / "examples" / "loom-demo.yaml")], "event scripts"),
    (["start", TOOL_CALL, "--agent-script", str(ROOT / "examples" / "tool-call-demo.yaml")], "an agent script"),
    (["start", str(ROOT / "tests" / "tables" / "counter.yaml"), "--agent-script",
      str(ROOT / "examples" / "loom-demo.yaml")], "no agent runs counter"),
    (["start", TOOL_CALL, "--workdir", "."], "go with --agent-script"),
    (["start", TOOL_CALL, "--agent-script", str(ROOT / "examples" / "tool-call-durable.yaml"), "--openai",
      "http://127.0.0.1:1/v1", "--model", "m"], "calls no model"),
    (["start", str(ROOT / "spec" / "loom-agent.yaml"), "--agent-script", str(ROOT / "examples" / "loom-demo.yaml"),
      "--workdir", "/no/such/folder"], "does not exist"),
    (["send", "r", "E", "--param", "novalue"], "expected NAME=VALUE"),
    (["worker", str(ROOT / "spec" / "loom-agent.yaml")], "no tool for the external action"),
    (["worker", "--concurrency", "0", "--workflows-only"], "--concurrency must be 1 or more"),
    (["worker", "--tools", "no_such_module:tools", "--activities-only"], "--tools no_such_module:tools"),
])
def test_bad_input_is_exit_2(argv: list[str], says: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(["temporal", *argv, "--address", "127.0.0.1:1"], capsys)
    assert code == 2 and says in err and "Traceback" not in err


def test_an_unknown_run_and_an_unreachable_server_are_exit_2(temporal_address: str,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli(capsys, temporal_address, "trace", "no-such-run")
    assert code == 2 and "not found" in err
    code, _, err = cli(capsys, "127.0.0.1:1", "list")
    assert code == 2 and "cannot connect" in err and "scripts/temporal.sh start" in err
