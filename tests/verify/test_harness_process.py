"""How the conformance harness reports an adapter process that dies or cannot start: the exit
status or signal, its last twenty stderr lines and an unfinished last one, each value
worked out by hand. The mutation run (tests/mutation_run.py) found these pinned down by no
other fast test."""

from __future__ import annotations

import gc
import os
import sys

import pytest
from agentfsm.verify.conformance import harness
from agentfsm.verify.conformance.harness import AdapterFailure, ProcessTransport, Session


def failure_of(program: str) -> AdapterFailure:
    """Start a Python adapter running ``program`` and reset it; the failure the harness reports."""
    transport = ProcessTransport([sys.executable, "-c", program], 5.0)
    try:
        Session(transport).reset("loom-agent")
    except AdapterFailure as exc:
        return exc
    finally:
        transport.close()
    raise AssertionError("the adapter's death went unnoticed")


@pytest.mark.parametrize(("program", "how"), [
    ("import sys; sys.stdin.readline(); sys.exit(0)", "exit status 0"),
    ("import os, signal, sys; sys.stdin.readline(); os.kill(os.getpid(), signal.SIGKILL)", "killed by signal 9"),
])
def test_an_adapter_that_dies_is_reported_with_its_status(program: str, how: str) -> None:
    failure = failure_of(program)
    assert (failure.kind, failure.message) == ("exited", f"the adapter exited ({how})")


def test_the_last_twenty_stderr_lines_are_kept_and_an_unfinished_one() -> None:
    failure = failure_of("import sys; sys.stdin.readline(); "
                         "sys.stderr.write(''.join(f'line {k}\\n' for k in range(1, 26)) + 'no newline'); sys.exit(3)")
    assert failure.message == "the adapter exited (exit status 3)"
    assert failure.stderr.splitlines() == [f"line {k}" for k in range(6, 26)] + ["no newline"]


def test_an_adapter_that_cannot_start_is_named_with_the_reason() -> None:
    with pytest.raises(AdapterFailure) as caught:
        ProcessTransport(["/nonexistent/adapter", "--flag"], 1.0)
    assert (caught.value.kind, caught.value.message) == (
        "start", "cannot start /nonexistent/adapter --flag: No such file or directory")


def test_an_adapter_whose_transport_was_dropped_unclosed_is_still_ended_and_reaped() -> None:
    """A runner ended by a signal drops its transport without closing it: ``kill_all`` (run as the
    harness ends) must still kill the adapter and reap it, leaving no process nor zombie."""
    transport = ProcessTransport([sys.executable, "-c", "import time; time.sleep(60)"], 5.0)
    pid = transport.proc.pid
    del transport
    gc.collect()
    harness.kill_all()
    with pytest.raises(ProcessLookupError):
        os.killpg(pid, 0)
