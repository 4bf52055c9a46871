"""The lease pieces every store shares (impl/stores/leases.py), each on its own and in-process:
whether an owner is gone (so its run is taken over at once), the heartbeat's renewals, and the
fence that refuses a worker's writes outside its run. A bug here is a duplicated effect: a live
owner taken for dead, a lapsed lease renewed late, a write that skips its fencing token."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from agentfsm.impl.stores.journal import CREATED, STEP, Entry
from agentfsm.impl.stores.leases import FencedStore, Heartbeat, Lease, LeaseLost, RunHeld, owner_gone, owner_name
from agentfsm.impl.stores.sqlite import SqliteStore

HOST = socket.gethostname()


def child() -> subprocess.Popen[bytes]:
    """A sleeping process that any signal but 0 would end (none ignored, even under nohup)."""
    script = ("import signal, sys, time\n"
              "for s in (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGTERM, signal.SIGUSR1):\n"
              "    signal.signal(s, signal.SIG_DFL)\n"
              "print('ready', flush=True)\n"
              "time.sleep(60)\n")
    process = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE)
    assert process.stdout is not None and process.stdout.readline() == b"ready\n"
    return process


def test_a_live_process_of_this_host_is_not_gone_and_is_left_running() -> None:
    alive = child()
    try:
        assert owner_gone(f"{HOST}:{alive.pid}") is False
        assert owner_gone(owner_name()) is False
        with pytest.raises(subprocess.TimeoutExpired):
            alive.wait(timeout=2)   # asking whether it is gone sent it no signal
    finally:
        alive.kill()
        alive.wait()


def test_a_dead_or_zombie_process_of_this_host_is_gone() -> None:
    dead = child()
    dead.kill()
    deadline = time.monotonic() + 30
    while Path(f"/proc/{dead.pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z":
        assert time.monotonic() < deadline, "the killed child became a zombie"
        time.sleep(0.01)
    try:
        assert owner_gone(f"{HOST}:{dead.pid}") is True, "a zombie is gone"
    finally:
        dead.wait()
    assert owner_gone(f"{HOST}:{dead.pid}") is True, "a reaped process is gone"


def test_an_owner_of_another_host_or_not_a_pid_is_never_taken_for_gone() -> None:
    reaped = child()
    reaped.kill()
    reaped.wait()
    assert owner_gone(f"elsewhere-{HOST}:{reaped.pid}") is False
    assert owner_gone(f"{HOST}:not-a-pid") is False
    assert owner_gone(f"{HOST}:") is False


def test_a_process_this_user_may_not_signal_or_whose_stat_is_unreadable_is_not_gone(
        monkeypatch: pytest.MonkeyPatch) -> None:
    reaped = child()
    reaped.kill()
    reaped.wait()

    def refused(pid: int, sig: int) -> None:
        raise PermissionError(pid)
    monkeypatch.setattr(os, "kill", refused)
    assert owner_gone(f"{HOST}:1") is False
    monkeypatch.setattr(os, "kill", lambda pid, sig: None)   # it exited between the signal and the read
    assert owner_gone(f"{HOST}:{reaped.pid}") is False


def test_owner_name_is_host_and_pid() -> None:
    assert owner_name() == f"{HOST}:{os.getpid()}"


def test_the_errors_name_the_run_the_token_and_the_owner() -> None:
    lost = LeaseLost("r", 3, "it expired")
    assert (str(lost), lost.run_id, lost.token) == ("run 'r': lease 3 lost: it expired", "r", 3)
    held = RunHeld("r", "host:12", 4, 29.6)
    assert (held.run_id, held.owner) == ("r", "host:12")
    assert str(held).startswith("run 'r' is owned by host:12 (lease 4, 30 s left)")


def test_a_lease_counts_down_to_its_deadline() -> None:
    lease = Lease("r", "m", 1, "me", 10.0, deadline=time.monotonic() + 10.0)
    assert 9.0 < lease.remaining() <= 10.0


def lease(seconds: float = 30.0) -> Lease:
    return Lease("r", "m", 1, "me", seconds)


class Clock:
    """Stands in for a heartbeat's stop event: each wait records its timeout and returns whether
    the heartbeat was stopped by then (after ``waits`` timeouts)."""

    def __init__(self, waits: int) -> None:
        self.timeouts: list[float | None] = []
        self.waits = waits

    def wait(self, timeout: float | None = None) -> bool:
        self.timeouts.append(timeout)
        return len(self.timeouts) > self.waits

    def set(self) -> None:
        self.waits = 0


def test_a_heartbeat_renews_every_third_of_the_lease_until_stopped() -> None:
    renewed: list[Lease] = []
    beat = Heartbeat(lease(30.0), renewed.append)
    beat._stop = Clock(waits=2)   # type: ignore[assignment]
    beat._beat()
    assert len(renewed) == 2 and renewed[0] is beat.lease
    assert beat._stop.timeouts == [10.0, 10.0, 10.0]   # type: ignore[attr-defined]
    assert beat.lost is None


def test_a_heartbeat_rides_out_an_unreachable_store_and_stops_once_the_lease_is_lost() -> None:
    answers: list[BaseException | None] = [None, ConnectionError("down"), LeaseLost("r", 1, "taken"), None]

    def renew(_: Lease) -> None:
        answer = answers.pop(0)
        if answer is not None:
            raise answer
    noted: list[bool] = []
    beat = Heartbeat(lease(), renew, lambda _lease, _before, renewed: noted.append(renewed))
    beat._stop = Clock(waits=10)   # type: ignore[assignment]
    beat._beat()
    assert answers == [None], "it stopped at the lost lease, not before and not after"
    assert noted == [True, False, False], "the protocol log hears a renewal only when the store took it"
    assert isinstance(beat.lost, LeaseLost)
    assert Heartbeat(lease(), lambda _: None).beat() is True
    down = Heartbeat(lease(), renew)
    answers[:] = [ConnectionError("down")]
    assert down.beat() is True and isinstance(down.lost, ConnectionError)
    answers[:] = [LeaseLost("r", 1, "taken")]
    assert down.beat() is False and isinstance(down.lost, LeaseLost)


def test_leaving_a_heartbeat_stops_its_thread_after_the_renewal_in_flight() -> None:
    started, finished = threading.Event(), threading.Event()

    def renew(_: Lease) -> None:
        started.set()
        time.sleep(0.5)
        finished.set()
    with Heartbeat(lease(0.03), renew) as beat:
        assert beat._thread.is_alive(), "entering started the thread"
        assert started.wait(30), "the thread renews on its own"
    assert finished.is_set(), "leaving waited for the renewal in flight"
    assert not beat._thread.is_alive()


def test_the_fence_passes_the_runs_writes_with_its_token_and_refuses_every_other(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "j.db")
    try:
        mine = store.acquire("r", owner_name(), 30)
        fenced = FencedStore(store, mine)
        assert fenced.create("r", "m", Entry(CREATED, {}, 0.0)).seq == 1
        assert fenced.create("r/task-1", "sub", Entry(CREATED, {}, 0.0)).run_id == "r/task-1"
        [record] = fenced.append("r", 1, [Entry(STEP, {"n": 1}, 0.0)])
        assert (record.run_id, record.seq) == ("r", 2)
        assert sorted(fenced.runs()) == ["r", "r/task-1"]
        assert (fenced.version("r"), fenced.machine("r"), fenced.machine("r/task-1")) == (2, "m", "sub")
        assert [r.seq for r in fenced.records("r")] == [1, 2]
        assert [r.seq for r in fenced.records("r", 1)] == [2]
        assert [r.seq for r in fenced.load("r").records] == [1, 2]
        for run_id, write in (("rr", lambda: fenced.create("rr", "m", Entry(CREATED, {}, 0.0))),
                              ("other", lambda: fenced.append("other", 0, [Entry(STEP, {}, 0.0)])),
                              ("r", lambda: fenced.discard_tail("r", 2))):
            with pytest.raises(LeaseLost) as refused:
                write()
            assert (refused.value.run_id, refused.value.token) == (run_id, mine.token)
        assert store.version("r") == 2 and "rr" not in store.runs()
        store.release(mine)
        later = store.acquire("r", owner_name(), 30)
        with pytest.raises(LeaseLost):
            fenced.append("r", 2, [Entry(STEP, {"n": 2}, 0.0)])   # the fence is checked by the store
        FencedStore(store, later).append("r", 2, [Entry(STEP, {"n": 2}, 0.0)])
        fenced.close()
        assert store.version("r") == 3, "closing the fence leaves the worker's store open"
    finally:
        store.close()
