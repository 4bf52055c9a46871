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

import atexit
import contextlib
import json
import os
import selectors
import shlex
import signal
import subprocess
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from agentfsm.spec.expr import Value

MAX_LINE = 1 << 20
MEMO_LINES = 1 << 14   # distinct reply lines a transport keeps parsed (an adapter repeats few replies)
FLUSH_BYTES = 1 << 12   # requests queued past this are written at once, so that the adapter is never idle
LOW_WATER = 128   # a wait writes the queued requests once fewer are written from the awaited reply's on
NAP = 0.0003   # seconds a wait first sleeps while the adapter has LOW_WATER requests or more to answer
IDLE = 0.05   # seconds of silence after which a wait writes the queued requests anyway (replies dropped)
STDERR_LINES = 20
QUIT_GRACE = 1.0
STARTUP_GRACE = 10.0   # seconds added to the timeout for a fresh adapter's first reply

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


class AdapterDidNotStart(Exception):
    """The adapter could not be started, or exited before answering its first reset: the
    command or its set-up is wrong (bad input), so no vector says anything about the implementation."""

    def __init__(self, failure: AdapterFailure) -> None:
        super().__init__(failure.message)
        self.failure = failure

    def describe(self) -> str:
        how = "could not be started" if self.failure.kind == "start" else "exited"
        return (f"the adapter never answered its first reset (it {how}), so no vector was judged: check the "
                f"command and what it needs\n  {self.failure.describe()}")


class Transport(Protocol):
    """Requests out, replies back in order; ``close`` ends the implementation.

    ``send`` may return before the implementation answered (requests are pipelined);
    ``receive`` returns the next reply, or raises ``AdapterFailure``.
    """

    def send(self, messages: Sequence[Message], lines: Sequence[bytes] | None = None) -> None:
        """Queue requests; ``lines`` are the same already encoded (one JSON line each), if at hand."""

    def receive(self) -> Message: ...

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


# Every adapter process not yet killed and reaped, so that whatever ends the harness can end them
# too. Held strongly: a transport dropped unclosed (its runner ended by a signal) must still be
# killed and reaped, not left to close its pipes when collected, ending as a zombie nobody reaps.
_LIVE: set[ProcessTransport] = set()


def kill_all() -> None:
    """Kill the process group of every adapter still running (on a signal or at exit)."""
    for transport in list(_LIVE):
        transport.kill()


atexit.register(kill_all)


def encode(message: Message) -> bytes:
    return (json.dumps(message, separators=(",", ":")) + "\n").encode()


class ProcessTransport:
    """An adapter process on pipes, driven by one selector loop so every wait has a deadline.

    Requests are written without waiting for replies (non-blocking, interleaved with
    reading, so neither side can block the other on a full pipe); replies are read in
    chunks and split into lines. stderr is drained in the same loop, its last lines kept.
    """

    def __init__(self, argv: Sequence[str], timeout: float, cwd: str | None = None,
                 env: Mapping[str, str] | None = None) -> None:
        self.argv = list(argv)
        self.timeout = timeout
        self.stderr_tail: deque[str] = deque(maxlen=STDERR_LINES)
        self.replies: list[bytes] = []   # lines read; those from ``taken`` on not taken yet
        self.taken = 0
        self.last_line = b""   # the line of the reply ``receive`` returned last
        self.overdue = False   # a wait for the next reply timed out in ``take_if``
        self.known: dict[bytes, Message] = {}   # reply lines parsed before (their replies are read-only)
        self.partial = b""
        self.err_partial = b""
        self.outbox = bytearray()
        self.written = 0   # request lines written to the adapter so far
        self.read = 0   # reply lines read from it so far
        self.eof = False
        self.answered = False
        try:
            self.proc = subprocess.Popen(
                self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                cwd=cwd, env=dict(env) if env is not None else None, start_new_session=True, bufsize=0)
        except OSError as exc:
            raise AdapterFailure("start", f"cannot start {shlex.join(self.argv)}: {exc.strerror or exc}") from None
        _LIVE.add(self)
        assert self.proc.stdin is not None and self.proc.stdout is not None and self.proc.stderr is not None
        self.fd_in, self.fd_out, self.fd_err = self.proc.stdin.fileno(), self.proc.stdout.fileno(), \
            self.proc.stderr.fileno()
        for fd in (self.fd_in, self.fd_out, self.fd_err):
            os.set_blocking(fd, False)
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.fd_out, selectors.EVENT_READ)
        self.selector.register(self.fd_err, selectors.EVENT_READ)
        self.writing = False

    def stderr(self) -> str:
        """The last lines the adapter wrote to stderr (after letting a dead one finish)."""
        if self.proc.poll() is not None:
            deadline = time.monotonic() + 0.5
            while self.fd_err >= 0 and time.monotonic() < deadline:
                self._pump(deadline - time.monotonic())
        tail = list(self.stderr_tail)
        if self.err_partial:
            tail.append(self.err_partial.decode("utf-8", "replace"))
        return "\n".join(tail)

    def fail(self, kind: str, message: str) -> AdapterFailure:
        stderr = self.stderr() if kind == "exited" else "\n".join(self.stderr_tail)
        self.kill()
        return AdapterFailure(kind, message, stderr)

    def exited(self) -> AdapterFailure:
        try:
            code = self.proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            return self.fail("exited", "the adapter closed its stdout")
        how = f"killed by signal {-code}" if code < 0 else f"exit status {code}"
        return self.fail("exited", f"the adapter exited ({how})")

    def send(self, messages: Sequence[Message], lines: Sequence[bytes] | None = None) -> None:
        # Written when the next reply is awaited, or once a few kilobytes wait: in chunks, as a pipe would.
        self.outbox += b"".join(lines if lines is not None else map(encode, messages))
        if len(self.outbox) >= FLUSH_BYTES and not self.writing:
            self._flush()

    def _flush(self) -> None:
        try:
            written = os.write(self.fd_in, self.outbox)
        except BlockingIOError:
            written = 0
        except (BrokenPipeError, ConnectionResetError, OSError):
            self.outbox.clear()
            self._stop_writing()
            return
        self.written += self.outbox.count(b"\n", 0, written)
        del self.outbox[:written]
        if self.outbox and not self.writing:
            self.selector.register(self.fd_in, selectors.EVENT_WRITE)
            self.writing = True
        elif not self.outbox and self.writing:
            self.selector.unregister(self.fd_in)
            self.writing = False

    def _stop_writing(self) -> None:
        if self.writing:
            self.selector.unregister(self.fd_in)
            self.writing = False

    def _pump(self, wait: float) -> bool:
        """Wait up to ``wait`` seconds for the pipes, then move whatever is ready; False if nothing was."""
        ready = self.selector.select(max(wait, 0.0))
        for key, _ in ready:
            fd = key.fd
            if fd == self.fd_in:
                self._flush()
            elif fd == self.fd_out:
                self._read_out()
            elif fd == self.fd_err:
                self._read_err()
        return bool(ready)

    def _chunk(self, fd: int) -> bytes | None:
        """What a ready pipe holds: None if nothing after all, b"" at its end (it is then unwatched)."""
        try:
            chunk = os.read(fd, 1 << 16)
        except BlockingIOError:
            return None
        except OSError:
            chunk = b""
        if not chunk:
            self.selector.unregister(fd)
        return chunk

    def _read_out(self) -> None:
        chunk = self._chunk(self.fd_out)
        if chunk == b"":
            self.eof, self.fd_out = True, -1
        elif chunk:
            *lines, self.partial = (self.partial + chunk).split(b"\n")
            if self.taken:
                del self.replies[:self.taken]
                self.taken = 0
            self.replies.extend(lines)
            self.read += len(lines)

    def _read_err(self) -> None:
        chunk = self._chunk(self.fd_err)
        if chunk == b"":
            self.fd_err = -1
            return
        if not chunk:
            return
        *lines, self.err_partial = (self.err_partial + chunk).split(b"\n")
        self.stderr_tail.extend(line.decode("utf-8", "replace")[:500] for line in lines)

    def _allowed(self) -> float:
        # A fresh process gets extra time for its first reply: it may still be starting up.
        return self.timeout + (STARTUP_GRACE if not self.answered else 0.0)

    def _arrival(self, ahead: int) -> str | None:
        """Read until the reply line ``ahead`` places past the next one is at hand (None), or say
        why it will not be: the adapter exited, wrote a line past MAX_LINE (garbled), or did not
        answer in time (at once when a wait for this line timed out before: ``overdue``).

        A wait costs both sides a wake-up per read, so it batches as a pipe fed at once would:
        the queued requests are written only when the adapter runs short (fewer than
        ``LOW_WATER`` written from the awaited reply's request on, that request perhaps not
        among them) or stays silent for ``IDLE`` seconds (it dropped replies), and while it
        has plenty to answer the wait first naps (``NAP``), then reads what piled up. Each
        request still reaches the adapter before its reply is awaited, in order, so what it
        answers never depends on when; only the number of reads and writes does."""
        if self.taken + ahead < len(self.replies):
            return None
        deadline = time.monotonic() + self._allowed()
        quiet = False
        while self.taken + ahead >= len(self.replies):
            if len(self.partial) > MAX_LINE:
                return "garbled"
            if self.eof:
                return "exited"
            left = deadline - time.monotonic()
            if left <= 0 or self.overdue:
                return "timeout"
            held = bool(self.outbox) and not self.writing
            busy = self.written - (self.read - len(self.replies) + self.taken + ahead) >= LOW_WATER
            if held and (quiet or not busy):
                self._flush()
                held = False
            if busy:
                time.sleep(min(NAP, left))
            quiet = not self._pump(min(left, IDLE) if held else left)
        return None

    def receive(self) -> Message:
        problem = self._arrival(0)
        if problem == "garbled":
            raise self.fail("garbled", f"reply longer than {MAX_LINE} bytes")
        if problem == "exited":
            raise self.exited()
        if problem == "timeout":
            raise self.fail("timeout", f"no reply within {self._allowed():g} s")
        self.answered = True
        line = self.last_line = self.replies[self.taken]
        self.taken += 1
        known = self.known.get(line)
        [reply] = parse_many([line], self.known) if known is None else [known]
        if isinstance(reply, bytes):
            if len(reply) > MAX_LINE:
                raise self.fail("garbled", f"reply longer than {MAX_LINE} bytes")
            return parse_reply(reply, self.fail)
        if not isinstance(reply.get("ok"), bool):
            raise self.fail("garbled", f"reply has no boolean 'ok': {_excerpt(json.dumps(reply).encode())}")
        return reply

    def take_if(self, lines: list[bytes | None]) -> bool:
        """Take the next reply lines, unparsed, if they are ``lines`` (a run passes a vector whose
        replies are lines that passed the same expectations before). Each line is awaited only
        while those before it matched; a reply that does not come leaves them all for ``receive``,
        which then fails the adapter at that reply's step without waiting again. Lines all at
        hand are compared at once."""
        at, count = self.taken, len(lines)
        if at + count <= len(self.replies):
            if self.replies[at:at + count] != lines:
                return False
        elif None in lines:
            return False
        else:
            for ahead, line in enumerate(lines):
                problem = self._arrival(ahead)
                if problem is not None:
                    self.overdue = problem == "timeout"
                    return False
                if self.replies[self.taken + ahead] != line:
                    return False
        self.answered = True
        self.taken += len(lines)
        self.last_line = self.replies[self.taken - 1]
        return True

    def request(self, message: Message) -> Message:
        stray = self.stray(0.0)
        if stray is not None:
            raise self.fail("protocol", f"unsolicited output before request {message.get('op')!r} "
                            f"(a reply out of order?): {stray}")
        self.send([message])
        return self.receive()

    def stray(self, wait: float) -> str | None:
        deadline = time.monotonic() + wait
        while True:
            self._pump(0.0)
            if self.taken < len(self.replies):
                self.taken += 1
                return _excerpt(self.replies[self.taken - 1])
            left = deadline - time.monotonic()
            if left <= 0 or self.eof:
                return None
            self._pump(left)

    def kill(self) -> None:
        """Kill the adapter's whole process group (it may have spawned children) and reap it. It
        stays among the live ones until then, so that a kill cut short (a signal that ends the
        harness) is done again by ``kill_all``."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        if self.proc.poll() is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=2.0)
        _LIVE.discard(self)
        self._close_pipes()

    def _close_pipes(self) -> None:
        with contextlib.suppress(OSError, ValueError, KeyError):
            self.selector.close()
        for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                with contextlib.suppress(OSError, ValueError):
                    pipe.close()
        self.fd_in = self.fd_out = self.fd_err = -1

    def close(self) -> None:
        """Ask the adapter to quit; kill its process group if it does not within a second."""
        if self.proc.poll() is None:
            # Without blocking: an adapter that stopped reading must not hang the harness.
            with contextlib.suppress(OSError):
                os.write(self.fd_in, bytes(self.outbox) + b'{"op":"quit"}\n')
            with contextlib.suppress(OSError, ValueError):
                assert self.proc.stdin is not None
                self.proc.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=QUIT_GRACE)
        self.kill()


def parse_many(lines: list[bytes], known: dict[bytes, Message] | None = None) -> list[Message | bytes]:
    """Reply lines parsed, each on its own; a line that is not one JSON object, or is longer
    than ``MAX_LINE``, stays raw (``receive`` reports it).

    ``known`` remembers the objects of lines parsed before (up to ``MEMO_LINES`` of them):
    an adapter answers a long run with few distinct lines, and a dictionary lookup costs a
    fraction of a parse. The same line then gives the same object, so replies are read-only.
    """
    out: list[Message | bytes] = []
    for line in lines:
        if known is not None and (reply := known.get(line)) is not None:
            out.append(reply)
            continue
        try:
            reply = json_value(line) if len(line) <= MAX_LINE else None
        except ValueError:
            reply = None
        if isinstance(reply, dict):
            out.append(reply)
            if known is not None and len(known) < MEMO_LINES:
                known[line] = reply
        else:
            out.append(line)
    return out


_DECODER = json.JSONDecoder()


def json_value(line: bytes) -> Any:
    """The one JSON value a UTF-8 line holds, JSON whitespace around it allowed (ValueError if not).

    Each line is parsed for itself: lines joined before parsing can read as objects none of
    them is (``{"ok":true},{"ok":true`` then ``"state":"B"}``). Nesting too deep for the
    parser is no JSON either, not a crash of the harness."""
    text = line.decode().strip(" \t\r\n")
    try:
        value, end = _DECODER.raw_decode(text)
    except RecursionError:
        raise ValueError("nested too deep") from None
    if end != len(text):
        raise ValueError("more than one JSON value")
    return value


def parse_reply(line: bytes, fail: Callable[[str, str], AdapterFailure]) -> Message:
    try:
        reply = json_value(line)
    except ValueError:
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
        self.replies: deque[Message] = deque()

    def send(self, messages: Sequence[Message], lines: Sequence[bytes] | None = None) -> None:
        self.replies.extend(map(self.handle, messages))

    def receive(self) -> Message:
        # The reply goes through JSON exactly as it would over a pipe.
        line = json.dumps(self.replies.popleft()).encode() + b"\n"
        return parse_reply(line, lambda kind, text: AdapterFailure(kind, text))

    def request(self, message: Message) -> Message:
        self.send([message])
        return self.receive()

    def stray(self, wait: float) -> str | None:
        return None

    def close(self) -> None:
        self.handle({"op": "quit"})


class WithoutVars:
    """Another transport with ``vars`` removed from every reply: an implementation that hides its variables."""

    def __init__(self, inner: Transport) -> None:
        self.inner = inner

    def send(self, messages: Sequence[Message], lines: Sequence[bytes] | None = None) -> None:
        self.inner.send(messages, lines)

    def receive(self) -> Message:
        return {key: value for key, value in self.inner.receive().items() if key != "vars"}

    def request(self, message: Message) -> Message:
        self.send([message])
        return self.receive()

    def stray(self, wait: float) -> str | None:
        return self.inner.stray(wait)

    def close(self) -> None:
        self.inner.close()


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
        return self.observe(self.transport.request({"op": "reset", "machine": machine}), "reset")

    def event(self, event: str, params: Mapping[str, Value]) -> Observation | Unsupported:
        return self.observe(self.transport.request({"op": "event", "event": event, "params": dict(params)}),
                             "event")

    def next_reply(self, op: str) -> Observation | Unsupported:
        """The next reply, checked as the answer to a request of kind ``op`` (reset or event)."""
        return self.observe(self.transport.receive(), op)

    def close(self) -> None:
        self.transport.close()

    def observe(self, reply: Message, op: str) -> Observation | Unsupported:
        """A reply read by ``transport.receive``, checked as the answer to a request of kind ``op``."""
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
