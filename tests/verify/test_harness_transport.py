"""The adapter process transport under the faults a stranger's implementation brings: long
replies, a slow reader, a full stdin pipe, stderr left behind by a dead adapter (or held open
by its child), replies nobody asked for, and the end of it all: ``quit`` and end of input,
then the process group killed, reaped and its pipes closed, at close and at exit.

No assertion depends on timing: the tests wait for file descriptors and exit statuses, and
the deadlines are driven by a fake clock where their edge is tested."""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import signal
import subprocess
import sys
import textwrap
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from agentfsm.verify.conformance import harness
from agentfsm.verify.conformance.harness import AdapterFailure, ProcessTransport, Session

PATIENT = 60.0   # a timeout no healthy test comes near

# Answers every request with {"ok": true, "state": <its "n">, "pad": <its "pad">}, except one
# with "drop" (no reply at all); a SIGUSR1 makes it print one more reply nobody asked for, and a
# line on stderr. Exits at quit (status: the requests seen before it) or at the end of its input
# (status 99).
ECHO = """
import json, signal, sys
def late(signum, frame):
    sys.stdout.write('{"ok":true,"state":"Late"}\\n'); sys.stdout.flush()
    sys.stderr.write("noted\\n"); sys.stderr.flush()
signal.signal(signal.SIGUSR1, late)
seen = 0
for line in sys.stdin:
    request = json.loads(line)
    if request["op"] == "quit":
        sys.exit(seen)
    seen += 1
    if request.get("drop"):
        continue
    sys.stdout.write(json.dumps({"ok": True, "state": str(request.get("n")), "pad": request.get("pad")}) + "\\n")
    sys.stdout.flush()
sys.exit(99)
"""
LATE = "'{\"ok\":true,\"state\":\"Late\"}'"   # its unasked reply, as failures show it


def adapter(program: str, timeout: float = PATIENT) -> ProcessTransport:
    return ProcessTransport([sys.executable, "-c", textwrap.dedent(program)], timeout)


@pytest.fixture
def echo() -> Iterator[ProcessTransport]:
    transport = adapter(ECHO)
    yield transport
    transport.close()


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] not in "ZX"
    except FileNotFoundError:
        return False


@contextlib.contextmanager
def watched(pid: int) -> Iterator[Callable[[float], bool]]:
    """``ended(wait)``: whether ``pid`` has ended, waiting up to ``wait`` s on a pidfd (no polling)."""
    fd = os.pidfd_open(pid)
    try:
        yield lambda wait: bool(select.select([fd], [], [], wait)[0])
    finally:
        os.close(fd)


def wait_readable(fd: int) -> None:
    assert select.select([fd], [], [], PATIENT)[0], "the adapter never wrote"


def requests(first: int, count: int, pad: int) -> list[dict[str, object]]:
    return [{"op": "event", "n": n, "pad": "p" * pad} for n in range(first, first + count)]


def states(transport: ProcessTransport, count: int) -> list[str]:
    return [transport.receive()["state"] for _ in range(count)]


def clock(reading: Callable[[], float], on_second: Callable[[], None]) -> SimpleNamespace:
    """``time`` for the harness: ``monotonic`` gives ``reading()``; its second reading first calls
    ``on_second`` (the harness has by then looked at the pipes, or written, once)."""
    count = 0

    def monotonic() -> float:
        nonlocal count
        count += 1
        if count == 2:
            on_second()
        return reading()

    return SimpleNamespace(monotonic=monotonic, sleep=time.sleep)


def fake_clock(first: float, then: float, on_second: Callable[[], None]) -> SimpleNamespace:
    """A clock that reads ``first``, then ``then`` for ever."""
    readings = iter([first])
    return clock(lambda: next(readings, then), on_second)


def test_requests_and_replies_larger_than_the_pipes_flow_both_ways(echo: ProcessTransport) -> None:
    # 400 kB each way: written in one blocking go, the adapter would block on its full stdout
    # while the harness blocks on the adapter's full stdin.
    for first in (0, 200):
        echo.send(requests(first, 200, 2000))
        assert states(echo, 200) == [str(n) for n in range(first, first + 200)]


def test_a_request_queued_behind_a_full_stdin_arrives_intact(echo: ProcessTransport,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    # Requests the stopped adapter has not read fill its stdin until a write would block; the
    # next request must then wait for room, not be cut. The adapter resumes once the harness
    # has tried to write it (at its second look at the clock).
    echo.request({"op": "reset", "n": "R"})
    os.kill(echo.proc.pid, signal.SIGSTOP)
    filled = 0
    line = harness.encode(requests(0, 1, 1000)[0])
    while True:
        try:
            os.write(echo.fd_in, line)
        except BlockingIOError:
            break
        filled += 1
    echo.send(requests(1000, 1, 1000))
    monkeypatch.setattr(harness, "time", clock(time.monotonic, lambda: os.kill(echo.proc.pid, signal.SIGCONT)))
    assert states(echo, filled + 1) == ["0"] * filled + ["1000"]


def test_a_reply_longer_than_max_line_is_garbled() -> None:
    transport = adapter("import sys; sys.stdin.readline(); sys.stdout.write('x' * (1 << 22))")
    with pytest.raises(AdapterFailure) as caught:
        transport.request({"op": "reset", "machine": "m"})
    assert (caught.value.kind, caught.value.message) == ("garbled", "reply longer than 1048576 bytes")
    assert transport.proc.returncode == -signal.SIGKILL


# Writes one reply of exactly SIZE bytes before its newline, a valid JSON object padded to that
# length: only its length can make it garbled.
SIZED = """
import sys
sys.stdin.readline()
head = '{"ok":true,"state":"A","pad":"'
sys.stdout.write(head + "x" * (SIZE - len(head) - 2) + '"}\\n'); sys.stdout.flush()
sys.stdin.read()
"""


@pytest.mark.parametrize("pipe", [None, harness.MAX_LINE], ids=["default pipe", "pipe enlarged to MAX_LINE"])
@pytest.mark.parametrize("size", [harness.MAX_LINE, harness.MAX_LINE + 1, harness.MAX_LINE + 40000,
                                  harness.MAX_LINE + 100000])
def test_the_line_limit_is_exact_whatever_the_pipe_holds(size: int, pipe: int | None) -> None:
    # The limit was checked on what the reads had gathered, so it moved with the pipe's size
    # and the read size: with the default pipe a line of MAX_LINE + 40000 bytes was accepted,
    # and an adapter that enlarged its stdout pipe got MAX_LINE + 100000 garbled only because
    # the reads were of 64 KiB (docs/conformance.md: a line longer than MAX_LINE is garbled).
    transport = adapter(SIZED.replace("SIZE", str(size)))
    if pipe is not None:   # as an adapter enlarging its stdout would (F_SETPIPE_SZ), before it writes
        fcntl.fcntl(transport.fd_out, fcntl.F_SETPIPE_SZ, pipe)
        assert fcntl.fcntl(transport.fd_out, fcntl.F_GETPIPE_SZ) == pipe
    try:
        if size <= harness.MAX_LINE:
            reply = transport.request({"op": "reset", "machine": "m"})
            assert len(harness.encode(reply)) - 1 == size
            return
        with pytest.raises(AdapterFailure) as caught:
            transport.request({"op": "reset", "machine": "m"})
        assert (caught.value.kind, caught.value.message) == ("garbled", "reply longer than 1048576 bytes")
    finally:
        transport.close()


def test_two_replies_written_at_once_are_not_joined_into_objects_they_are_not() -> None:
    # Neither line is one JSON object, but joined with a comma they read as two: parsed as one
    # JSON array, the first request got "A" out of malformed output.
    transport = adapter("""
        import sys
        sys.stdin.readline()
        sys.stdout.write('{"ok":true,"state":"A","accepted":true,"actions":[]},{"ok":true\\n'
                         '"state":"B","accepted":true,"actions":[]}\\n')
        sys.stdout.flush()
        sys.stdin.read()
    """)
    session = Session(transport)
    transport.send([{"op": "event", "event": "Go", "params": {}}] * 2)
    with pytest.raises(AdapterFailure) as caught:
        session.next_reply("event")
    assert (caught.value.kind, caught.value.message) == (
        "garbled", "reply is not JSON: '{\"ok\":true,\"state\":\"A\",\"accepted\":true,\"actions\":[]},{\"ok\":true'")


@pytest.mark.parametrize("line", ["'x' * (1 << 20)", "'[' * 100000"], ids=["at the limit", "nested too deep"])
def test_a_line_that_is_no_json_is_reported_as_such_not_as_too_long_nor_a_crash(line: str) -> None:
    transport = adapter(f"import sys; sys.stdin.readline(); sys.stdout.write({line} + '\\n'); "
                        "sys.stdout.flush(); sys.stdin.read()")
    with pytest.raises(AdapterFailure) as caught:
        transport.request({"op": "reset", "machine": "m"})
    assert (caught.value.kind, caught.value.message) == ("garbled", f"reply is not JSON: '{line[1] * 120}...'")


def test_an_unfinished_reply_of_exactly_max_line_is_no_garbage() -> None:
    transport = adapter("import sys; sys.stdin.readline(); sys.stdout.write('x' * (1 << 20))")
    with pytest.raises(AdapterFailure) as caught:
        transport.request({"op": "reset", "machine": "m"})
    assert (caught.value.kind, caught.value.message) == ("exited", "the adapter exited (exit status 0)")


def test_a_dead_adapters_stderr_is_drained_when_asked_for() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        transport = adapter("import sys; sys.stderr.write('last words\\n' + 'z' * 600 + '\\nunfinished'); sys.exit(7)")
    assert not caught
    assert transport.proc.wait() == 7
    assert transport.stderr() == "\n".join(["last words", "z" * 500, "unfinished"])
    transport.close()


def test_a_dead_adapters_stderr_is_read_to_its_end_not_to_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    # The clock stands still: only the end of the pipe can end the drain.
    transport = adapter("import sys; sys.stderr.write('bye\\n')")
    assert transport.proc.wait() == 0
    monkeypatch.setattr(harness, "time", fake_clock(0.0, 0.0, lambda: None))
    assert transport.stderr() == "bye"
    transport.close()


def test_a_dead_adapters_stderr_drain_stops_at_its_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    # The clock reads the drain's deadline from its first look on: nothing more is read.
    transport = adapter("import sys; sys.stderr.write('bye\\n')")
    assert transport.proc.wait() == 0
    monkeypatch.setattr(harness, "time", fake_clock(0.0, 0.5, lambda: None))
    assert transport.stderr() == ""
    transport.close()


def test_a_running_adapters_stderr_is_what_was_read_so_far_without_waiting(echo: ProcessTransport) -> None:
    echo.request({"op": "reset", "n": "R"})   # its signal handler is in place
    os.kill(echo.proc.pid, signal.SIGUSR1)
    wait_readable(echo.fd_out)
    wait_readable(echo.fd_err)
    assert echo.stderr() == ""
    assert echo.stray(0.0) == LATE
    assert echo.stderr() == "noted"


def test_stderr_held_open_by_a_child_neither_hangs_nor_outlives_close() -> None:
    transport = adapter("""
        import subprocess, sys
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        sys.stderr.write(f"child {child.pid}\\n")
        sys.exit(2)
    """)
    assert transport.proc.wait() == 2
    text = transport.stderr()   # the child keeps the pipe open: no end of it to wait for
    with watched(int(text.removeprefix("child "))) as ended:
        assert not ended(0.0)
        transport.close()
        assert ended(PATIENT), "the adapter's child outlived close"


def test_an_adapter_that_closes_stdout_and_lives_on_is_reported_and_killed() -> None:
    transport = adapter("import os, sys; os.close(1); sys.stdin.read()")
    with pytest.raises(AdapterFailure) as caught:
        transport.request({"op": "reset", "machine": "m"})
    assert (caught.value.kind, caught.value.message) == ("exited", "the adapter closed its stdout")
    assert transport.proc.returncode == -signal.SIGKILL


def test_an_adapter_that_closed_its_stdin_is_reported_by_its_exit_not_a_broken_pipe() -> None:
    transport = adapter("import os, sys; sys.stdin.readline(); os.close(0); "
                        "print('{\"ok\": true, \"state\": \"A\"}', flush=True); sys.exit(3)")
    session = Session(transport)
    assert session.reset("m") == harness.Observation("A")
    with pytest.raises(AdapterFailure) as caught:
        session.event("Go", {})   # written to a pipe nobody reads any more
    assert (caught.value.kind, caught.value.message) == ("exited", "the adapter exited (exit status 3)")


def test_an_adapter_killed_by_a_hangup_is_reported_with_that_signal() -> None:
    transport = adapter("import os, signal, sys; sys.stdin.readline(); signal.signal(signal.SIGHUP, signal.SIG_DFL); "
                        "os.kill(os.getpid(), signal.SIGHUP)")   # SIG_DFL: a nohup'ed harness passes SIG_IGN on
    with pytest.raises(AdapterFailure) as caught:
        transport.request({"op": "reset", "machine": "m"})
    assert caught.value.message == "the adapter exited (killed by signal 1)"


def test_a_reply_of_the_wrong_shape_ends_the_adapter() -> None:
    transport = adapter("import sys; sys.stdin.readline(); print('{\"ok\": true}', flush=True); sys.stdin.read()")
    with pytest.raises(AdapterFailure) as caught:
        Session(transport).reset("m")
    assert caught.value.message == "reply to 'reset' has no string 'state': {\"ok\": true}"
    assert transport.proc.returncode == -signal.SIGKILL


@pytest.mark.parametrize(("second", "shown"), [
    ('{"ok":true,"state":"Again"}', "'{\"ok\":true,\"state\":\"Again\"}'"),   # as the adapter wrote it
    ("oops", "'oops'"),
])
def test_a_reply_nobody_asked_for_fails_the_next_request(second: str, shown: str) -> None:
    transport = adapter(f"""
        import sys
        sys.stdin.readline()
        sys.stdout.write('{{"ok":true,"state":"A"}}\\n{second}\\n'); sys.stdout.flush()
        sys.stdin.read()
    """)
    session = Session(transport)
    assert session.reset("m") == harness.Observation("A")
    with pytest.raises(AdapterFailure) as caught:
        session.event("Go", {})
    assert (caught.value.kind, caught.value.message) == (
        "protocol", f"unsolicited output before request 'event' (a reply out of order?): {shown}")


def test_output_arriving_after_the_last_reply_is_stray(echo: ProcessTransport) -> None:
    assert echo.request({"op": "reset", "n": "R"})["state"] == "R"
    assert echo.stray(0.0) is None
    os.kill(echo.proc.pid, signal.SIGUSR1)
    wait_readable(echo.fd_out)
    assert echo.stray(0.0) == LATE


def test_stray_waits_out_its_wait_for_late_output(echo: ProcessTransport, monkeypatch: pytest.MonkeyPatch) -> None:
    echo.request({"op": "reset", "n": "R"})
    monkeypatch.setattr(harness, "time", fake_clock(0.0, 0.5, lambda: os.kill(echo.proc.pid, signal.SIGUSR1)))
    assert echo.stray(1.0) == LATE


def test_stray_stops_at_its_deadline(echo: ProcessTransport, monkeypatch: pytest.MonkeyPatch) -> None:
    echo.request({"op": "reset", "n": "R"})
    with monkeypatch.context() as patch:
        patch.setattr(harness, "time", fake_clock(0.0, 1.0, lambda: os.kill(echo.proc.pid, signal.SIGUSR1)))
        assert echo.stray(1.0) is None
    assert echo.stray(PATIENT) == LATE   # left for the next look


def test_a_reply_not_there_at_the_deadline_is_a_timeout(echo: ProcessTransport,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    allowed = PATIENT + harness.STARTUP_GRACE
    monkeypatch.setattr(harness, "time", fake_clock(0.0, allowed, lambda: None))
    echo.send([{"op": "reset", "n": "R"}])
    with pytest.raises(AdapterFailure) as caught:
        echo.receive()
    assert (caught.value.kind, caught.value.message) == ("timeout", f"no reply within {allowed:g} s")


def test_close_sends_what_is_queued_then_quit_and_lets_the_adapter_exit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(harness, "QUIT_GRACE", PATIENT)
    transport = adapter(ECHO)
    transport.request({"op": "reset", "n": "R"})
    transport.send([{"op": "event", "n": 1}])
    transport.close()
    assert transport.proc.returncode == 2   # the reset and the queued event, then quit


def test_close_ends_the_input_of_an_adapter_that_ignores_quit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(harness, "QUIT_GRACE", PATIENT)
    transport = adapter("import sys; sys.stdin.read(); sys.exit(5)")
    transport.close()
    assert transport.proc.returncode == 5


def test_close_kills_the_process_group_reaps_and_closes_every_pipe(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(harness, "QUIT_GRACE", PATIENT)
    transport = adapter("""
        import subprocess, sys
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        for line in sys.stdin:
            print('{"ok": true, "state": "%d"}' % child.pid, flush=True)
    """)
    child = int(transport.request({"op": "reset"})["state"])
    fds = [transport.fd_in, transport.fd_out, transport.fd_err, transport.selector.fileno()]
    for fd in fds:
        os.fstat(fd)
    assert transport in harness._LIVE
    with watched(child) as ended:
        transport.close()
        assert ended(PATIENT), "the adapter's child outlived close"
    assert transport.proc.returncode == 0 and not alive(transport.proc.pid)
    for fd in fds:
        with pytest.raises(OSError):
            os.fstat(fd)
    assert transport not in harness._LIVE   # its pid may be another process's by exit time


def test_kill_all_kills_every_adapter_still_running() -> None:
    transport = adapter("import sys; sys.stdin.read()")
    harness.kill_all()
    assert transport.proc.returncode == -signal.SIGKILL
    assert transport not in harness._LIVE


def test_an_adapter_left_running_is_killed_when_the_harness_exits(tmp_path: Path) -> None:
    program = ("import sys; from agentfsm.verify.conformance.harness import ProcessTransport; "
               "t = ProcessTransport([sys.executable, '-c', 'import time; time.sleep(600)'], 5.0); print(t.proc.pid)")
    pid = int(subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, check=True,
                             cwd=tmp_path).stdout)
    try:
        assert not alive(pid)
    finally:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_send_writes_the_encoded_lines_when_given(echo: ProcessTransport) -> None:
    echo.send([{"op": "event", "n": k} for k in range(3)], [harness.encode({"op": "event", "n": k}) for k in "abc"])
    assert states(echo, 3) == ["a", "b", "c"]


def plenty(first: int, drop: bool = False) -> list[dict[str, object]]:
    """``LOW_WATER`` requests, together past ``FLUSH_BYTES``: ``send`` writes them at once."""
    made = requests(first, harness.LOW_WATER, harness.FLUSH_BYTES // harness.LOW_WATER)
    return [{**r, "drop": True} for r in made] if drop else made


def test_queued_requests_stay_queued_while_the_adapter_has_plenty_and_go_when_it_runs_short(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The stopped adapter has LOW_WATER requests written from the awaited reply's on: the wait
    # (there is one: it resumes at the wait's second look at the clock) leaves the queued
    # request queued, to be written in a bigger chunk. Once fewer are left it is written.
    monkeypatch.setattr(harness, "IDLE", PATIENT)   # no silence long enough to write it anyway
    transport = adapter(ECHO, timeout=5.0)
    try:
        transport.request({"op": "reset", "n": "R"})
        os.kill(transport.proc.pid, signal.SIGSTOP)
        transport.send(plenty(0))
        queued = requests(harness.LOW_WATER, 1, 0)
        transport.send(queued)
        assert transport.outbox == harness.encode(queued[0])
        with monkeypatch.context() as patch:
            patch.setattr(harness, "time", clock(time.monotonic, lambda: os.kill(transport.proc.pid, signal.SIGCONT)))
            assert transport.receive()["state"] == "0"
        assert transport.outbox == harness.encode(queued[0])
        assert states(transport, harness.LOW_WATER) == [str(n) for n in range(1, harness.LOW_WATER + 1)]
        assert (transport.written, transport.read) == (harness.LOW_WATER + 2, harness.LOW_WATER + 2)
    finally:
        transport.close()


def test_queued_requests_go_once_an_adapter_that_dropped_replies_falls_silent() -> None:
    # Written from the awaited reply's request on there seem to be plenty (LOW_WATER), but the
    # adapter answers none of them: after IDLE seconds of silence the queued request is written,
    # and its reply is the one awaited (as when every request was written at once).
    transport = adapter(ECHO, timeout=5.0)
    try:
        transport.request({"op": "reset", "n": "R"})
        transport.send(plenty(0, drop=True))
        transport.send(requests(harness.LOW_WATER, 1, 0))
        assert transport.receive()["state"] == str(harness.LOW_WATER)
    finally:
        transport.close()
