"""One tool call through the tool-call trace (seed 003) with the in-memory runner."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from agent_runs import run
from agentfsm.impl.agents.prompts import ScriptedPermissions, ScriptedVerdict
from agentfsm.impl.agents.tool_call import ToolCallRunner, validate
from agentfsm.impl.agents.tools import builtin_tools
from agentfsm.impl.llm.client import ToolCall
from agentfsm.spec import Table, load_table
from conftest import SPEC


@pytest.fixture(scope="module")
def trace() -> Table:
    return load_table(SPEC / "tool-call.yaml")


def call(name: str, **arguments: object) -> ToolCall:
    return ToolCall("c1", name, json.dumps(arguments))


def runner(trace: Table, tmp_path: Path, *verdicts: ScriptedVerdict | str, **settings: float) -> ToolCallRunner:
    return ToolCallRunner(trace, tmp_path, ScriptedPermissions(verdicts),  # type: ignore[arg-type]
                          allow=("read_file",), settings=settings)


def states(r: ToolCallRunner) -> list[str]:
    return [c.state for c in r.history]


def test_allowed_call_runs_with_its_start_recorded_first(trace: Table, tmp_path: Path) -> None:
    (tmp_path / "a").write_text("alpha")
    r = runner(trace, tmp_path)
    result = run(r.run(call("read_file", path="a")))
    assert result.content == "alpha" and not result.is_error
    assert states(r) == ["Approved", "Running", "Completed", "Recorded", "Returned"]
    assert r.status()["journal"] == ["started tool-call:c1 #1", "completed tool-call:c1 #1"]
    assert r.status()["state"] == "Returned" and r.status()["outcome_known"] is True


def test_approval_denied_never_starts(trace: Table, tmp_path: Path) -> None:
    r = runner(trace, tmp_path, "deny")
    result = run(r.run(call("write_file", path="x", content="y")))
    assert result.content == "Permission denied by the user" and not (tmp_path / "x").exists()
    assert states(r) == ["AwaitingApproval", "Denied", "Returned"] and r.journal == []


def test_invalid_arguments_never_run(trace: Table, tmp_path: Path) -> None:
    r = runner(trace, tmp_path)
    assert run(r.run(call("read_file", path=3))).content == "invalid arguments: argument 'path' must be string"
    assert states(r) == ["Invalid", "Returned"]


def test_timeout_of_a_keyed_call_is_retried_with_the_same_key(trace: Table, tmp_path: Path) -> None:
    r = runner(trace, tmp_path, call_timeout=0.2)
    tool = next(t for t in builtin_tools(tmp_path) if t.name == "list_dir")
    slow_first = {"n": 0}

    async def slow_once(arguments: dict[str, object]) -> str:
        slow_first["n"] += 1
        if slow_first["n"] == 1:
            await asyncio.sleep(5)
        return "listing"
    r.toolbox.tools["read_file"] = type(tool)("read_file", tool.description, tool.parameters, slow_once)
    result = run(r.run(call("read_file", path=".")))
    assert result.content == "listing"
    assert states(r) == ["Approved", "Running", "Unknown", "Running", "Completed", "Recorded", "Returned"]
    assert [c.event for c in r.history][2:4] == ["TimedOut", "StatusUnavailable"]


def test_timeout_of_an_unkeyed_call_halts(trace: Table, tmp_path: Path) -> None:
    r = runner(trace, tmp_path, "grant", call_timeout=0.2)
    result = run(r.run(call("run_command", argv=["sleep", "5"])))
    assert result.is_error and result.content.startswith("halted")
    assert states(r)[-2:] == ["Unknown", "Halted"] and r.is_done()


def test_cancel_while_running(trace: Table, tmp_path: Path) -> None:
    r = runner(trace, tmp_path, "grant")

    async def main() -> str:
        task = asyncio.create_task(r.run(call("run_command", argv=["sleep", "5"])))
        await asyncio.sleep(0.1)
        await r.wait_until(lambda: r.state() == "Running")
        r.cancel_call()
        return (await task).content
    assert run(main()) == "Cancelled"
    assert states(r)[-3:] == ["Cancelling", "Cancelled", "Returned"]


def test_validate() -> None:
    read = next(t for t in builtin_tools(".") if t.name == "read_file")
    assert validate(None, "{}") == "unknown tool"
    assert validate(read, "[1]") == "arguments must be a JSON object"
    assert validate(read, "{") is not None and validate(read, "{}") == "missing argument 'path'"
    assert validate(read, '{"path": "a", "mode": 1}') == "unknown argument 'mode'"
    assert validate(read, '{"path": "a"}') is None
