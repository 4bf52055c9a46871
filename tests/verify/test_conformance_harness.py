"""The adapter transport: a misbehaving implementation is a clear failure, never a hang."""

from __future__ import annotations

import contextlib
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from agentfsm.spec import Table
from agentfsm.spec.vectorfile import Vector
from agentfsm.verify.conformance.conform import Runner, format_report
from agentfsm.verify.conformance.harness import AdapterFailure, ProcessTransport, Session, Unsupported, split_command
from agentfsm.verify.conformance.vectors import generate
from conformance_helpers import LOOM, broken_adapter, semantics_adapter

TIMEOUT = 0.5


@pytest.fixture(scope="module")
def vectors(loom: Table) -> list[Vector]:
    return generate(loom, sets=["rows"])[1]


def first_event(argv: list[str]) -> AdapterFailure:
    transport = ProcessTransport(argv, TIMEOUT)
    session = Session(transport)
    try:
        session.reset("loom-agent")
        session.event("UserInput", {})
        session.event("TextDelta", {})
    except AdapterFailure as exc:
        return exc
    finally:
        transport.close()
    raise AssertionError("the adapter's fault went unnoticed")


@pytest.mark.parametrize(("mode", "kind", "text"), [
    ("hang", "timeout", "no reply within 0.5 s"),
    ("crash", "exited", "exit status 3"),
    ("garbage", "garbled", "not JSON: '<html>502 Bad Gateway</html>'"),
    ("no-ok", "garbled", "no boolean 'ok'"),
    ("exit-at-start", "exited", "exit status 4"),
])
def test_each_protocol_fault_is_named(mode: str, kind: str, text: str) -> None:
    failure = first_event(broken_adapter(mode))
    assert failure.kind == kind
    assert text in failure.message


def test_a_crash_reports_the_adapters_stderr() -> None:
    failure = first_event(broken_adapter("crash"))
    assert "panic: index out of range in step()" in failure.stderr
    assert "panic: index out of range" in failure.describe()


def test_replies_out_of_order_are_caught(loom: Table, vectors: list[Vector]) -> None:
    # The adapter answers each event twice. The extra reply is found waiting after the
    # reply that failed, or before the next request, or is taken for the reset's reply
    # and fails its shape check: whichever the timing, a protocol failure is reported.
    report = Runner(loom, lambda: ProcessTransport(broken_adapter("twice"), TIMEOUT)).run(vectors)
    first = next(r for r in report.results if r.status == "fail")
    assert "protocol: " in first.failure
    assert "out of order" in first.failure


def test_an_event_shaped_reply_to_reset_is_caught() -> None:
    failure = first_event(broken_adapter("late"))
    assert failure.kind == "protocol" and "reset" in failure.message


def test_a_timeout_kills_the_whole_process_group() -> None:
    transport = ProcessTransport(broken_adapter("hang-child"), TIMEOUT)
    session = Session(transport)
    session.reset("loom-agent")
    with pytest.raises(AdapterFailure) as caught:
        session.event("UserInput", {})
    assert caught.value.kind == "timeout"
    child = int(caught.value.stderr.split("child ")[1].split()[0])
    assert gone(child)


def gone(pid: int) -> bool:
    """Dead: no such process, or a zombie waiting for a reaper (SIGKILL is asynchronous)."""
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as stat:
                if stat.read().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.02)
    return False


def test_a_missing_program_is_a_start_failure() -> None:
    with pytest.raises(AdapterFailure) as caught:
        ProcessTransport(["/nonexistent/adapter"], TIMEOUT)
    assert caught.value.kind == "start"


def test_unsupported_requests_are_reported_not_failed() -> None:
    transport = ProcessTransport(broken_adapter("unsupported"), TIMEOUT)
    try:
        session = Session(transport)
        session.reset("loom-agent")
        reply = session.event("UserInput", {})
    finally:
        transport.close()
    assert reply == Unsupported("event UserInput is not supported")


def test_commands_are_split_without_a_shell_unless_asked() -> None:
    assert split_command("node 'my adapter.mjs' --x") == ["node", "my adapter.mjs", "--x"]
    assert split_command("a | b", shell=True) == ["/bin/sh", "-c", "a | b"]
    with pytest.raises(ValueError, match="cannot split"):
        split_command("node 'unterminated")
    with pytest.raises(ValueError, match="empty"):
        split_command("   ")


@pytest.mark.parametrize("mode", ["hang", "crash", "garbage", "twice"])
def test_a_broken_adapter_leaves_no_vector_unrun(loom: Table, vectors: list[Vector], mode: str) -> None:
    # Each failure restarts the adapter and the run goes on: every vector gets its verdict.
    some = vectors[:4]
    report = Runner(loom, lambda: ProcessTransport(broken_adapter(mode), TIMEOUT)).run(some)
    assert not report.ok and not report.stopped
    assert report.count("not-run") == 0
    assert report.count("fail") + report.count("pass") == len(some) and report.count("fail") >= 3
    for result in report.results:
        if result.status == "fail":
            # Every failure names the request it was answering: the reset, or a step and its event.
            assert re.match(r"(reset|step \d+ \(\w+\)|after step \d+): ", result.message), result.message


def test_max_failures_stops_early(loom: Table, vectors: list[Vector]) -> None:
    report = Runner(loom, lambda: ProcessTransport(broken_adapter("crash"), TIMEOUT)).run(vectors, max_failures=2)
    assert report.stopped == "stopped after 2 vectors did not pass"
    assert report.count("fail") == 2 and report.count("not-run") == len(vectors) - 2


def test_a_hanging_adapter_leaves_no_vector_unrun(loom: Table, vectors: list[Vector]) -> None:
    # The adapter hangs whenever it is sent LlmError: those vectors fail, each naming the
    # step and event it hung at; the adapter is replaced and every other vector passes.
    report = Runner(loom, lambda: ProcessTransport(semantics_adapter("--hang-on", "LlmError"), TIMEOUT)).run(vectors)
    hung = [v for v in vectors if any(s.event == "LlmError" for s in v.steps)]
    assert hung and report.count("not-run") == 0
    assert report.count("pass") == len(vectors) - len(hung)
    for result in report.results:
        if result.status == "fail":
            at = next(n for n, s in enumerate(result.vector.steps, start=1) if s.event == "LlmError")
            assert result.message == f"step {at} (LlmError): timeout: no reply within 0.5 s"
            assert result.failed_step == at
    text = format_report(report)
    assert f"{hung[0].id}: step" in text and f"{len(hung)} failed" in text


def test_the_runner_restarts_a_crashed_adapter_and_moves_on(loom: Table, vectors: list[Vector]) -> None:
    starts: list[list[str]] = []

    def connect() -> ProcessTransport:
        # The first process crashes; every later one is a correct implementation.
        argv = broken_adapter("crash") if not starts else semantics_adapter()
        starts.append(argv)
        return ProcessTransport(argv, 5.0)

    report = Runner(loom, connect).run(vectors)
    assert [r.status for r in report.results] == ["fail"] + ["pass"] * (len(vectors) - 1)
    assert len(starts) == 2


def test_the_harness_is_not_fooled_by_a_shell_metacharacter(tmp_path: object) -> None:
    # Without --shell, ';' is an argument, not a command separator.
    argv = split_command(f"{sys.executable} -c 'import sys; print(sys.argv[1:])' ; touch /tmp/x")
    assert argv[3:] == [";", "touch", "/tmp/x"]


def test_a_sigterm_to_conform_ends_the_adapters_process_group(tmp_path: Path) -> None:
    # conform runs an adapter that hangs with a child holding its stdout; a real SIGTERM
    # to conform must take the adapter and its child with it.
    agentfsm = str(Path(sys.executable).parent / "agentfsm")
    adapter = " ".join(broken_adapter("hang-child"))
    proc = subprocess.Popen([agentfsm, "conform", str(LOOM), "--adapter", adapter, "--timeout", "60",
                             "--sets", "rows"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        child, adapter_pid = _wait_for_hang_child(proc.pid)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 128 + signal.SIGTERM
    assert gone(adapter_pid) and gone(child)


def _wait_for_hang_child(conform: int) -> tuple[int, int]:
    """The pids of the hanging adapter conform started and of the child it spawned."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for adapter in _children(conform):
            for child in _children(adapter):
                return child, adapter
        time.sleep(0.1)
    raise AssertionError("the adapter never spawned its child")


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            found.extend(int(c) for c in (task / "children").read_text().split())
    return found
