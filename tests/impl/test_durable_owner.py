"""One owner per durable run on SQLite: a lease with a fencing token, renewed by a heartbeat.

Issue 13, defect 1: a second ``run --resume`` on a running SQLite run marked the first one's
running tool ``unknown`` and ``--decide rerun`` ran it again. Now the second process is
refused while the owner lives; an owner that stalls past its lease is taken over and its
late writes (the stalled tool's result) are refused, so the tool still ran once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from agentfsm.impl.stores.journal import CREATED, STEP, Entry
from agentfsm.impl.stores.leases import FencedStore, LeaseLost, RunHeld, owner_name
from agentfsm.impl.stores.sqlite import SqliteStore
from agentfsm.impl.stores.wal import WRITE_LOCK, held
from test_durable_agent import AGENTFSM, LOOM, agentfsm, journal

SLOW_TOOL = """workdir: work
settings: {{commit_hook: false}}
inputs: [Run it]
replies:
  - - {{tool_call: {{name: run_command, arguments: {{argv: [sh, -c, "echo ran >> ../ledger; sleep {seconds}"]}}}}}}
  - - {{text: done}}
"""


def start(tmp_path: Path, seconds: float, *extra: str) -> subprocess.Popen[bytes]:
    (tmp_path / "work").mkdir(exist_ok=True)
    (tmp_path / "s.yaml").write_text(SLOW_TOOL.format(seconds=seconds))
    child = subprocess.Popen([AGENTFSM, "run", LOOM, "--script", "s.yaml", "--store", "j.db", *extra],
                             cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 60
    while not (tmp_path / "ledger").exists() and time.monotonic() < deadline and child.poll() is None:
        time.sleep(0.02)
    assert (tmp_path / "ledger").exists(), "the tool started"
    return child


def test_a_second_resumer_is_refused_while_the_owner_lives(tmp_path: Path) -> None:
    child = start(tmp_path, 600)   # killed below; it must outlast three CLI runs on a loaded machine
    try:
        second = agentfsm("--script", "s.yaml", "--store", "j.db", "--resume", cwd=tmp_path)
        assert second.returncode == 2, second.stdout + second.stderr
        assert "j.db: run 'run' is owned by" in second.stderr and "Traceback" not in second.stderr
        [effect] = [e for e in journal(tmp_path)["current"]["effects"] if e["tool"] == "run_command"]
        assert effect["status"] == "started", "the refused resumer wrote nothing"
        rerun = agentfsm("--script", "s.yaml", "--store", "j.db", "--resume", "--decide",
                         f"{effect['key']}=rerun", cwd=tmp_path)
        assert rerun.returncode == 2, rerun.stdout + rerun.stderr
    finally:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait(10)
    assert (tmp_path / "ledger").read_text() == "ran\n"
    # The owner is dead (and reaped): its lease is taken over at once, not after it lapses.
    resumed = agentfsm("--script", "s.yaml", "--store", "j.db", "--resume", cwd=tmp_path)
    assert resumed.returncode == 1 and "run_command" in resumed.stdout, resumed.stdout + resumed.stderr


def stall_outside_a_write(child: subprocess.Popen[bytes], db: Path) -> None:
    """SIGSTOP ``child`` between two of its write transactions. On SQLite a process frozen inside
    one (a few milliseconds) holds the file's write lock, and no other process can write until it
    wakes or dies: the store has no server to end its session (docs/durability.md)."""
    for _ in range(100):
        os.kill(child.pid, signal.SIGSTOP)
        if not held(Path(f"{db}-shm"), WRITE_LOCK):
            return
        os.kill(child.pid, signal.SIGCONT)
        time.sleep(0.01)
    raise AssertionError("the owner never left its write transaction")


def test_a_stalled_owner_is_fenced_out_and_its_late_result_refused(tmp_path: Path) -> None:
    child = start(tmp_path, 2, "--lease", "1.5")
    stall_outside_a_write(child, tmp_path / "j.db")  # the agent stalls; the command it started runs on
    try:
        time.sleep(2.5)  # past the lease: the heartbeat stopped with its process
        taken = agentfsm("--script", "s.yaml", "--store", "j.db", "--resume", cwd=tmp_path)
        assert taken.returncode == 1, taken.stdout + taken.stderr
        assert "decision: unknown-effect" in taken.stdout
        # defect 11: the decision shows the call's arguments, not only its name
        assert 'run_command {"argv": ["sh", "-c", "echo ran >> ../ledger; sleep 2"]}' in taken.stdout
    finally:
        os.kill(child.pid, signal.SIGCONT)
    out, err = child.communicate(timeout=60)
    assert child.returncode == 1, out.decode() + err.decode()
    assert b"lease" in out + err and b"Traceback" not in err
    view = journal(tmp_path)
    [effect] = [e for e in view["current"]["effects"] if e["tool"] == "run_command"]
    assert effect["status"] == "unknown", "the stalled owner's result was refused, not recorded"
    assert (tmp_path / "ledger").read_text() == "ran\n"


def test_fencing_tokens_on_sqlite(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "j.db")
    first = store.acquire("r", owner_name(), 30)
    with pytest.raises(RunHeld):
        store.acquire("r", owner_name(), 30)  # this process is alive: its lease holds
    FencedStore(store, first).create("r", "m", Entry(CREATED, {}, 0.0))
    FencedStore(store, first).append("r", 1, [Entry(STEP, {"n": 1}, 0.0)])
    store.release(first)
    second = store.acquire("r", owner_name(), 30)
    assert second.token == first.token + 1, "a released run keeps its token count"
    with pytest.raises(LeaseLost):
        FencedStore(store, first).append("r", 2, [Entry(STEP, {"n": 2}, 0.0)])
    with pytest.raises(LeaseLost):
        store.renew(first)
    FencedStore(store, second).append("r", 2, [Entry(STEP, {"n": 2}, 0.0)])
    assert store.version("r") == 3
    store.close()


DMS_PROBE = "import sys; from agentfsm.impl.stores.wal import log_in_use; print(log_in_use(sys.argv[1]))"


def test_a_second_store_in_one_process_keeps_the_first_ones_log_locks(tmp_path: Path) -> None:
    """Chaos campaign two-resumers: a run died of SIGBUS. Opening the heartbeat's store checked
    the write-ahead log by reading its index file, and closing that file dropped the process's
    POSIX locks on it: another process then took the index for abandoned and reset it under
    the first one's memory map."""
    db = tmp_path / "j.db"
    first = SqliteStore(db)
    first.runs()

    def probe() -> str:
        return subprocess.run([sys.executable, "-c", DMS_PROBE, f"{db}-shm"], capture_output=True, text=True,
                              cwd=tmp_path, timeout=60).stdout.strip()
    assert probe() == "True"
    second = SqliteStore(db)
    try:
        assert probe() == "True", "the first connection still says it uses the log"
    finally:
        second.close()
        first.close()
