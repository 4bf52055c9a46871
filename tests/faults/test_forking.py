"""Work forked from the warm process (crash shards, SIGKILL children): results, deaths, hangs."""

from __future__ import annotations

import os
import signal
import time

import pytest
from agentfsm.faults.forking import Forked, ForkTimeout


def test_result_of_any_size_comes_back() -> None:
    assert Forked(lambda: "x" * 3_000_000).wait() == (0, "x" * 3_000_000)


def test_a_raising_child_exits_1_with_its_traceback() -> None:
    def work() -> str:
        raise ValueError("boom")
    code, text = Forked(work).wait()
    assert code == 1 and "ValueError: boom" in text


def test_a_child_killed_by_sigkill_reports_the_signal() -> None:
    def work() -> str:
        os.kill(os.getpid(), signal.SIGKILL)
        return "never"
    assert Forked(work).wait() == (-signal.SIGKILL, "")


def test_a_hanging_child_is_killed_at_the_timeout() -> None:
    def work() -> str:
        time.sleep(60)
        return "late"
    child = Forked(work)
    with pytest.raises(ForkTimeout):
        child.wait(0.5)
    with pytest.raises(ProcessLookupError):
        os.kill(child.pid, 0)
