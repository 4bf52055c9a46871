"""Adapter transports: talk the conformance protocol to an implementation, safely.

An implementation under test is a stranger's process. Everything it can do wrong —
never start, die, hang, print garbage, answer twice, answer the wrong question — must
become an ``AdapterFailure`` with a clear message and the tail of its stderr, within the
per-step timeout, never a hang of the harness. The process runs in its own process group
so a timeout kills it together with anything it spawned.

``Session`` adds the protocol's shape on top of any transport: ``reset`` and ``event``
return an ``Observation`` (what the implementation reported) or ``Unsupported`` (an
``{"ok": false}`` reply), after checking the reply has the fields the protocol requires.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import shlex
import signal
import subprocess
import threading
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from agentfsm.spec.expr import Value

MAX_LINE = 1 << 20
STDERR_LINES = 20
QUIT_GRACE = 1.0

Message = dict[str, Any]


class AdapterFailure(Exception):
    """The implementation broke the protocol; ``kind`` is timeout|exited|garbled|protocol|start."""

    def __init__(self, kind: str, message: str, stderr: str = "") -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.stderr = stderr

    def describe(self) -> str:
        text = f"{self.kind}: {self.message}"
        if self.stderr:
            text += "\n  adapter stderr (last lines):\n" + "\n".join("    " + line for line in self.stderr.splitlines())
        return text


class Transport(Protocol):
    """One request, one reply; ``close`` ends the implementation."""

    def request(self, message: Message) -> Message: ...

    def stray(self, wait: float) -> str | None:
        """Output that no request asked for, waiting up to ``wait`` seconds for it."""

    def close(self) -> None: ...


def split_command(command: str, shell: bool = False) -> list[str]:
    """The adapter's argument list: shell words without a shell, or ``sh -c`` when asked."""
    if shell:
        return ["/bin/sh", "-c", command]
    try:
        argv = shlex.split(command)
    except ValueError as exc:
        raise ValueError(f"cannot split adapter command {command!r}: {exc}") from None
    if not argv:
        raise ValueError("empty adapter command")
    return argv


class ProcessTransport:
    """An adapter process on pipes, read by threads so every wait has a deadline."""

    def __init__(self, argv: Sequence[str], timeout: float, cwd: str | None = None,
                 env: Mapping[str, str] | None = None) -> None:
        self.argv = list(argv)
        self.timeout = timeout
        self.lines: queue.Queue[bytes | None] = queue.Queue()
        self.stderr_tail: deque[str] = deque(maxlen=STDERR_LINES)
        try:
            self.proc = subprocess.Popen(
                self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                cwd=cwd, env=dict(env) if env is not None else None, start_new_session=True)
        except OSError as exc:
            raise AdapterFailure("start", f"cannot start {shlex.join(self.argv)}: {exc.strerror or exc}") from None
        self.out_thread = threading.Thread(target=self._read_stdout, daemon=True)
        self.err_thread = threading.Thread(target=self._read_stderr, daemon=True)
        self.out_thread.start()
        self.err_thread.start()

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        with contextlib.suppress(OSError, ValueError):
            while True:
                line = self.proc.stdout.readline(MAX_LINE)
                if not line:
                    break
                self.lines.put(line)
        self.lines.put(None)

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        with contextlib.suppress(OSError, ValueError):
            while True:
                raw = self.proc.stderr.readline(8192)
                if not raw:
                    break
                self.stderr_tail.append(raw.decode("utf-8", "replace").rstrip("\n"))

    def stderr(self) -> str:
        """The last lines the adapter wrote to stderr (after letting a dead one finish)."""
        if self.proc.poll() is not None:
            self.err_thread.join(timeout=0.5)
        return "\n".join(self.stderr_tail)

    def fail(self, kind: str, message: str) -> AdapterFailure:
        self.kill()
        return AdapterFailure(kind, message, self.stderr())

    def exited(self) -> AdapterFailure:
        try:
            code = self.proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            return self.fail("exited", "the adapter closed its stdout")
        how = f"killed by signal {-code}" if code < 0 else f"exit status {code}"
        return self.fail("exited", f"the adapter exited ({how})")

    def request(self, message: Message) -> Message:
        try:
            stray = self.lines.get_nowait()
        except queue.Empty:
            stray = None
        else:
            if stray is None:
                raise self.exited()
            raise self.fail("protocol", f"unsolicited output before request {message.get('op')!r} "
                            f"(a reply out of order?): {_excerpt(stray)}")
        data = (json.dumps(message, separators=(",", ":")) + "\n").encode()
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(data)
            self.proc.stdin.flush()
        except (BrokenPipeError, ConnectionResetError, ValueError):
            raise self.exited() from None
        try:
            line = self.lines.get(timeout=self.timeout)
        except queue.Empty:
            raise self.fail("timeout", f"no reply to {message.get('op')!r} within {self.timeout:g} s") from None
        if line is None:
            raise self.exited()
        if not line.endswith(b"\n") and len(line) >= MAX_LINE:
            raise self.fail("garbled", f"reply longer than {MAX_LINE} bytes")
        return parse_reply(line, self.fail)

    def stray(self, wait: float) -> str | None:
        try:
            line = self.lines.get(timeout=wait)
        except queue.Empty:
            return None
        if line is None:
            self.lines.put(None)
            return None
        return _excerpt(line)

    def kill(self) -> None:
        """Kill the adapter's whole process group (it may have spawned children)."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=2.0)
        self._close_pipes()

    def _close_pipes(self) -> None:
        for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError, ValueError):
                    pipe.close()

    def close(self) -> None:
        """Ask the adapter to quit; kill its process group if it does not within a second."""
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write(b'{"op":"quit"}\n')
                self.proc.stdin.close()
            except (OSError, ValueError):
                pass
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=QUIT_GRACE)
        self.kill()


def parse_reply(line: bytes, fail: Callable[[str, str], AdapterFailure]) -> Message:
    try:
        reply = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise fail("garbled", f"reply is not JSON: {_excerpt(line)}") from None
    if not isinstance(reply, dict):
        raise fail("garbled", f"reply is not a JSON object: {_excerpt(line)}")
    if not isinstance(reply.get("ok"), bool):
        raise fail("garbled", f"reply has no boolean 'ok': {_excerpt(line)}")
    return reply


def _excerpt(line: bytes, limit: int = 120) -> str:
    text = line.decode("utf-8", "replace").rstrip("\n")
    return repr(text if len(text) <= limit else text[:limit] + "...")


class FunctionTransport:
    """An implementation in this process: a function from request to reply dicts."""

    def __init__(self, handle: Callable[[Message], Message]) -> None:
        self.handle = handle

    def request(self, message: Message) -> Message:
        # The reply goes through JSON exactly as it would over a pipe.
        line = json.dumps(self.handle(message)).encode() + b"\n"
        return parse_reply(line, lambda kind, text: AdapterFailure(kind, text))

    def stray(self, wait: float) -> str | None:
        return None

    def close(self) -> None:
        self.handle({"op": "quit"})


@dataclass(frozen=True)
class Observation:
    """What the implementation reported; ``accepted`` is None for a reset, ``vars`` when given."""

    state: str
    accepted: bool | None = None
    actions: tuple[str, ...] = ()
    vars: Mapping[str, Value] | None = None


@dataclass(frozen=True)
class Unsupported:
    """An ``{"ok": false, "error": ...}`` reply: the implementation cannot serve the request."""

    error: str


class Session:
    """The protocol's requests over a transport, with every reply's shape checked."""

    def __init__(self, transport: Transport) -> None:
        self.transport = transport

    def reset(self, machine: str) -> Observation | Unsupported:
        return self._observe(self.transport.request({"op": "reset", "machine": machine}), "reset")

    def event(self, event: str, params: Mapping[str, Value]) -> Observation | Unsupported:
        return self._observe(self.transport.request({"op": "event", "event": event, "params": dict(params)}),
                             "event")

    def close(self) -> None:
        self.transport.close()

    def _observe(self, reply: Message, op: str) -> Observation | Unsupported:
        if not reply["ok"]:
            return Unsupported(str(reply.get("error", "")))
        state = reply.get("state")
        if not isinstance(state, str):
            raise self._bad(op, "has no string 'state'", reply)
        values = reply.get("vars")
        if values is not None and not (isinstance(values, dict) and all(
                isinstance(v, int) for v in values.values())):
            raise self._bad(op, "has 'vars' that is not an object of integers and booleans", reply)
        if op == "reset":
            if "accepted" in reply or "actions" in reply:
                raise self._bad(op, "looks like a reply to an event (a reply out of order?)", reply)
            return Observation(state, vars=values)
        accepted, actions = reply.get("accepted"), reply.get("actions")
        if not isinstance(accepted, bool):
            raise self._bad(op, "has no boolean 'accepted' (a reply out of order?)", reply)
        if not (isinstance(actions, list) and all(isinstance(a, str) for a in actions)):
            raise self._bad(op, "has no 'actions' list of strings", reply)
        return Observation(state, accepted, tuple(actions), values)

    def _bad(self, op: str, what: str, reply: Message) -> AdapterFailure:
        stderr = ""
        if isinstance(self.transport, ProcessTransport):
            self.transport.kill()
            stderr = self.transport.stderr()
        text = json.dumps(reply)
        return AdapterFailure("protocol", f"reply to {op!r} {what}: {text[:200]}", stderr)
