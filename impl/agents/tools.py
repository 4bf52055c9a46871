"""Real tool handlers for the driver, confined to a work directory, and the post-tools git hook.

Tools never go through a shell: commands are argument lists run with a timeout, and a
cancelled or timed-out command is killed. Paths are resolved inside the work directory;
anything that escapes it is refused. A tool's failure is a result handed back to the
model (an error message). Only a call that could not be executed at all leaves
``Toolbox.execute`` as ``ToolUnavailable`` (the Loom table's error origin Tool: the agent
retries it), and a post-tools hook that failed raises ``HookFailed`` (origin Io).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentfsm.impl.llm.client import ToolCall

MAX_OUTPUT = 64 * 1024


class ToolError(Exception):
    """A tool could not do what was asked; the message goes back to the model."""


class ToolUnavailable(Exception):
    """The call could not be executed at all: its process could not be spawned, or an idempotent
    tool's I/O failed for a reason its arguments did not cause. Not the tool's answer but the
    infrastructure's, and safe to run again (it never started, or twice does no harm)."""


class HookFailed(Exception):
    """The post-tools hook could not do its work (git refused, the workspace could not be read)."""


# What a call's own arguments cause (a missing file, a directory given as a file): the model's to fix.
ARGUMENT_ERRORS = (FileNotFoundError, FileExistsError, IsADirectoryError, NotADirectoryError, PermissionError)


@dataclass(frozen=True)
class ToolResult:
    call_id: str
    name: str
    content: str
    is_error: bool = False

    def as_message(self) -> dict[str, Any]:
        content = f"error: {self.content}" if self.is_error else self.content
        return {"role": "tool", "tool_call_id": self.call_id, "content": content}


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: Mapping[str, Any]  # JSON Schema of the arguments object
    run: Callable[[dict[str, Any]], Awaitable[str]]
    mutating: bool = False  # modifies the workspace: the post-tools hook runs after it
    idempotent: bool = False  # running it again does no harm (read-only): a durable run may retry it

    def schema(self) -> dict[str, Any]:
        return {"type": "function",
                "function": {"name": self.name, "description": self.description, "parameters": dict(self.parameters)}}


class Toolbox:
    """Named tools; ``execute`` turns any failure into an error result."""

    def __init__(self, tools: Iterable[Tool], timeout: float = 120.0) -> None:
        self.tools = {tool.name: tool for tool in tools}
        self.timeout = timeout

    def schemas(self) -> tuple[dict[str, Any], ...]:
        return tuple(tool.schema() for tool in self.tools.values())

    def mutating(self, name: str) -> bool:
        tool = self.tools.get(name)
        return tool is not None and tool.mutating

    def idempotent(self, name: str) -> bool:
        tool = self.tools.get(name)
        return tool is not None and tool.idempotent

    async def execute(self, call: ToolCall) -> ToolResult:
        tool = self.tools.get(call.name)
        if tool is None:
            return ToolResult(call.id, call.name, f"unknown tool {call.name!r}", True)
        try:
            arguments = json.loads(call.arguments or "{}")
        except json.JSONDecodeError as exc:
            return ToolResult(call.id, call.name, f"arguments are not valid JSON: {exc}", True)
        if not isinstance(arguments, dict):
            return ToolResult(call.id, call.name, "arguments must be a JSON object", True)
        try:
            async with asyncio.timeout(self.timeout):
                return ToolResult(call.id, call.name, await tool.run(arguments))
        except ToolError as exc:
            return ToolResult(call.id, call.name, str(exc), True)
        except TimeoutError:
            return ToolResult(call.id, call.name, f"timed out after {self.timeout:g}s", True)
        except OSError as exc:
            message = f"{type(exc).__name__}: {exc.strerror or exc}"
            if tool.idempotent and not isinstance(exc, ARGUMENT_ERRORS):
                raise ToolUnavailable(message) from exc
            return ToolResult(call.id, call.name, message, True)


def _string(arguments: Mapping[str, Any], key: str, default: str | None = None) -> str:
    value = arguments.get(key, default)
    if not isinstance(value, str):
        raise ToolError(f"argument {key!r} must be a string")
    return value


class Workspace:
    """The directory the tools may touch."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root).resolve()

    def path(self, given: str) -> Path:
        try:
            target = (self.root / given).resolve()
        except RuntimeError:
            raise ToolError(f"path {given!r} is a symlink loop") from None
        except ValueError:  # a NUL byte
            raise ToolError(f"path {given!r} is not a path") from None
        if not self.inside(target):
            raise ToolError(f"path {given!r} is outside the work directory")
        return target

    def inside(self, resolved: Path) -> bool:
        return resolved == self.root or self.root in resolved.parents

    def relative(self, path: Path) -> str:
        return str(path.relative_to(self.root)) or "."


async def run_process(argv: Sequence[str], cwd: Path, timeout: float, env: Mapping[str, str] | None = None, *,
                      pass_fds: Sequence[int] = (), stop_over: int | None = None) -> tuple[int, str]:
    """Run an argument list; kill it, with every process it started (its own session), on timeout
    or cancellation. Returns (status, output): the first ``MAX_OUTPUT`` bytes, the rest counted and
    dropped as it comes (an endless output never fills memory); past ``stop_over`` bytes the
    command is killed. A program that does not exist or may not run is the caller's ``OSError``;
    any other failure to spawn (no processes or memory left) is ``ToolUnavailable``: nothing ran."""
    try:
        process = await asyncio.create_subprocess_exec(
            *argv, cwd=cwd, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT, env=dict(env) if env is not None else None, start_new_session=True,
            pass_fds=tuple(pass_fds))
    except ARGUMENT_ERRORS:
        raise
    except OSError as exc:
        raise ToolUnavailable(f"could not start {argv[0]}: {type(exc).__name__}: {exc.strerror or exc}") from exc

    def kill() -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)

    kept, size, stopped = bytearray(), 0, False
    try:
        async with asyncio.timeout(timeout):
            assert process.stdout is not None
            while chunk := await process.stdout.read(1 << 16):
                size += len(chunk)
                kept += chunk[:max(0, MAX_OUTPUT - len(kept))]
                if stop_over is not None and size > stop_over and not stopped:
                    stopped = True
                    kill()  # what it wrote before it died is drained, and dropped
            await process.wait()
    except BaseException:
        kill()
        await _reaped(process)
        raise
    text = bytes(kept).decode("utf-8", "replace")
    if stopped:
        text = f"[stopped: the output went past {stop_over} bytes, so the command was killed]\n{text}"
    elif size > MAX_OUTPUT:
        text += f"\n[... {size - MAX_OUTPUT} more bytes]"
    return process.returncode or 0, text


async def _reaped(process: asyncio.subprocess.Process) -> None:
    """Wait until a killed process has ended, through further cancellations too (the caller re-raises
    the first): the event loop must not close while it still watches the process."""
    while process.returncode is None:
        with contextlib.suppress(asyncio.CancelledError):
            await process.wait()


def builtin_tools(workdir: Path | str, command_timeout: float = 60.0) -> list[Tool]:
    """read_file, list_dir, write_file and run_command over one work directory."""
    space = Workspace(workdir)

    async def read_file(arguments: dict[str, Any]) -> str:
        path = space.path(_string(arguments, "path"))
        if not path.is_file():
            raise ToolError(f"{space.relative(path)} is not a file")
        data = await asyncio.to_thread(path.read_bytes)
        if len(data) > MAX_OUTPUT:
            raise ToolError(f"{space.relative(path)} is {len(data)} bytes; the limit is {MAX_OUTPUT}")
        return data.decode("utf-8", "replace")

    async def list_dir(arguments: dict[str, Any]) -> str:
        path = space.path(_string(arguments, "path", "."))
        if not path.is_dir():
            raise ToolError(f"{space.relative(path)} is not a directory")
        entries = sorted(path.iterdir(), key=lambda p: p.name)
        return "\n".join(p.name + ("/" if p.is_dir() else "") for p in entries if p.name != ".git")

    async def write_file(arguments: dict[str, Any]) -> str:
        path = space.path(_string(arguments, "path"))
        content = _string(arguments, "content")
        path.parent.mkdir(parents=True, exist_ok=True)
        await asyncio.to_thread(path.write_text, content, encoding="utf-8")
        return f"wrote {len(content.encode())} bytes to {space.relative(path)}"

    async def run_command(arguments: dict[str, Any]) -> str:
        argv = arguments.get("argv")
        if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
            raise ToolError("argument 'argv' must be a non-empty list of strings (no shell)")
        timeout = arguments.get("timeout", command_timeout)
        if not isinstance(timeout, int | float) or isinstance(timeout, bool) or timeout <= 0:
            raise ToolError("argument 'timeout' must be a positive number of seconds")
        try:
            status, output = await run_process(argv, space.root, min(float(timeout), command_timeout))
        except TimeoutError:
            raise ToolError(f"command timed out after {min(float(timeout), command_timeout):g}s") from None
        except FileNotFoundError:
            raise ToolError(f"command not found: {argv[0]}") from None
        return f"exit status {status}\n{output}"

    path_arg = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
    return [
        Tool("read_file", "Read a UTF-8 text file in the work directory.", path_arg, read_file, idempotent=True),
        Tool("list_dir", "List a directory in the work directory (directories end with /).",
             {"type": "object", "properties": {"path": {"type": "string"}}}, list_dir, idempotent=True),
        Tool("write_file", "Write a UTF-8 text file in the work directory, creating directories.",
             {"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
              "required": ["path", "content"]}, write_file, mutating=True),
        Tool("run_command", "Run a program (an argument list, no shell) in the work directory with a timeout.",
             {"type": "object", "properties": {"argv": {"type": "array", "items": {"type": "string"}},
                                               "timeout": {"type": "number"}}, "required": ["argv"]},
             run_command, mutating=True),
    ]


_GIT_ENV = {"GIT_TERMINAL_PROMPT": "0", "GIT_AUTHOR_NAME": "agentfsm", "GIT_AUTHOR_EMAIL": "agentfsm@localhost",
            "GIT_COMMITTER_NAME": "agentfsm", "GIT_COMMITTER_EMAIL": "agentfsm@localhost"}


async def git_commit(workdir: Path | str, message: str, timeout: float = 30.0) -> bool:
    """The Loom post-tools hook: commit every change in ``workdir`` if it is a git work tree.

    Returns whether a commit was made (False: not a work tree, or nothing to commit). Raises
    ``HookFailed`` when git fails in a work tree (a held ``index.lock``, a full disk), so the
    agent retries the hook. Commits carry agentfsm as author and committer so they never
    depend on the user's git identity.
    """
    root = Path(workdir)
    env = {**os.environ, **_GIT_ENV}

    async def git(*args: str, ok: Collection[int] | None = (0,)) -> tuple[int, str]:
        """Run git; a status outside ``ok`` (None: any) or a failure to start it is ``HookFailed``."""
        try:
            status, out = await run_process(["git", *args], root, timeout, env)
        except FileNotFoundError:
            raise
        except (OSError, ToolUnavailable) as exc:
            raise HookFailed(f"git {args[0]}: {exc}") from exc
        if ok is not None and status not in ok:
            raise HookFailed(f"git {args[0]} failed (status {status}): {out.strip()}")
        return status, out

    try:
        status, out = await git("rev-parse", "--is-inside-work-tree", ok=None)
    except FileNotFoundError:
        return False  # no git here: nothing to commit to
    if status != 0 or out.strip() != "true":
        return False
    await git("add", "-A")
    status, _ = await git("diff", "--cached", "--quiet", ok=(0, 1))
    if status == 0:
        return False  # nothing staged
    await git("commit", "-q", "--no-verify", "-m", message)
    return True
