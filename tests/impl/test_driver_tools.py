"""Tool handlers and the git hook: confined paths, argument lists, timeouts that kill."""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path

from agentfsm.impl.agents.tools import Toolbox, ToolResult, builtin_tools, git_commit
from agentfsm.impl.llm.client import ToolCall


def execute(workdir: Path, name: str, arguments: object, timeout: float = 10.0) -> ToolResult:
    box = Toolbox(builtin_tools(workdir, command_timeout=timeout), timeout=timeout)
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return asyncio.run(box.execute(ToolCall("c1", name, raw)))


def test_read_list_write(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "a.txt").write_text("alpha")
    assert execute(tmp_path, "read_file", {"path": "a.txt"}).content == "alpha"
    assert execute(tmp_path, "list_dir", {}).content == "a.txt\nsub/"
    result = execute(tmp_path, "write_file", {"path": "sub/b.txt", "content": "beta"})
    assert not result.is_error and (tmp_path / "sub" / "b.txt").read_text() == "beta"


def test_paths_outside_the_workdir_are_refused(tmp_path: Path) -> None:
    inner = tmp_path / "inner"
    inner.mkdir()
    (tmp_path / "secret").write_text("s")
    for path in ("../secret", "/etc/passwd", "sub/../../secret"):
        result = execute(inner, "read_file", {"path": path})
        assert result.is_error and "outside the work directory" in result.content
    (inner / "link").symlink_to(tmp_path / "secret")
    assert execute(inner, "read_file", {"path": "link"}).is_error


def test_run_command_takes_an_argument_list_not_a_shell(tmp_path: Path) -> None:
    result = execute(tmp_path, "run_command", {"argv": ["echo", "$HOME; rm -rf /"]})
    assert result.content == "exit status 0\n$HOME; rm -rf /\n"
    assert execute(tmp_path, "run_command", {"argv": "echo hi"}).is_error
    assert "exit status 3" in execute(tmp_path, "run_command", {"argv": ["sh", "-c", "exit 3"]}).content
    assert "command not found" in execute(tmp_path, "run_command", {"argv": ["no-such-program-x"]}).content


def test_run_command_timeout_kills_the_process(tmp_path: Path) -> None:
    marker = tmp_path / "survived"
    result = execute(tmp_path, "run_command", {"argv": ["sh", "-c", f"sleep 1; touch {marker}"], "timeout": 0.2})
    assert result.is_error and "timed out after 0.2s" in result.content
    asyncio.run(asyncio.sleep(1.3))
    assert not marker.exists()


def test_bad_calls_are_error_results(tmp_path: Path) -> None:
    assert "unknown tool" in execute(tmp_path, "fly", {}).content
    assert "not valid JSON" in execute(tmp_path, "read_file", "{oops").content
    assert "JSON object" in execute(tmp_path, "read_file", "[1]").content
    assert "must be a string" in execute(tmp_path, "read_file", {"path": 3}).content
    assert "not a file" in execute(tmp_path, "read_file", {"path": "nope"}).content


def test_git_commit_hook(tmp_path: Path) -> None:
    assert asyncio.run(git_commit(tmp_path, "m")) is False  # not a work tree
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    assert asyncio.run(git_commit(tmp_path, "m")) is False  # nothing to commit
    (tmp_path / "f").write_text("x")
    assert asyncio.run(git_commit(tmp_path, "first")) is True
    log = subprocess.run(["git", "-C", str(tmp_path), "log", "--format=%an %s"], capture_output=True, text=True)
    assert log.stdout.strip() == "agentfsm first"
