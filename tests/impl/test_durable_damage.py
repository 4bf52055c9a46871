"""Damaged and failing stores are reported (exit 2, the file named, what is wrong), never a
traceback, a hang, a false final state or a silent rollback (issue 13, defects 6, 7, 8, 14)."""

from __future__ import annotations

import json
import resource
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

from agentfsm.faults.chaos import agent_script
from agentfsm.impl.stores.wal import committed_end
from test_durable_agent import AGENTFSM, LOOM

from agentfsm.cli import main

EVENTS = """events:
  - UserInput
  - LlmCompleted: {tool_calls: 1}
  - ToolCompleted: {mutating: false}
  - ShutdownRequested
"""
TOOL_CALL = str(Path(LOOM).parent / "tool-call.yaml")


def run(*argv: str, cwd: Path, limit: int | None = None) -> subprocess.CompletedProcess[str]:
    def limited() -> None:
        if limit is not None:  # a full disk, as a file size limit: writes past it fail (EFBIG)
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    # The timeout only turns a hang into a failure; the run takes seconds.
    return subprocess.run([AGENTFSM, *argv], capture_output=True, text=True, cwd=cwd, timeout=120,
                          preexec_fn=limited)


def clean_error(proc: subprocess.CompletedProcess[str], db: str, what: str) -> None:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr and f"{db}" in proc.stderr and what in proc.stderr, proc.stderr


def durable_run(tmp_path: Path) -> None:
    (tmp_path / "e.yaml").write_text(EVENTS)
    assert run("run", LOOM, "--script", "e.yaml", "--store", "j.db", cwd=tmp_path).returncode == 0


def test_missing_tail_records_are_detected_and_repaired_only_on_request(tmp_path: Path) -> None:
    durable_run(tmp_path)
    with sqlite3.connect(tmp_path / "j.db") as conn:
        conn.execute("DELETE FROM records WHERE seq >= 4")  # the log lost its last records
    clean_error(run("journal", "j.db", cwd=tmp_path), "j.db", "records 4..11 missing")
    clean_error(run("run", LOOM, "--script", "e.yaml", "--store", "j.db", "--resume", cwd=tmp_path), "j.db",
                "records 4..11 missing")
    repaired = run("journal", "j.db", "--repair", cwd=tmp_path)
    assert repaired.returncode == 0 and "records from 4 on discarded" in repaired.stdout, repaired.stderr
    resumed = run("run", LOOM, "--script", "e.yaml", "--store", "j.db", "--resume", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    view = json.loads(run("journal", "j.db", "--json", cwd=tmp_path).stdout)
    kinds = [r["kind"] for r in view["runs"][0]["records"]]
    assert kinds[3] == "repaired" and view["runs"][0]["current"]["state"] == "ShuttingDown"


def test_sqlite_errors_after_open_are_reported_not_raised(tmp_path: Path) -> None:
    durable_run(tmp_path)
    with sqlite3.connect(tmp_path / "j.db") as conn:
        conn.execute("UPDATE records SET body = CAST(X'FFFE7B7D' AS TEXT) WHERE seq = 2")
    clean_error(run("journal", "j.db", cwd=tmp_path), "j.db", "damaged")
    clean_error(run("run", LOOM, "--script", "e.yaml", "--store", "j.db", "--resume", cwd=tmp_path), "j.db",
                "damaged")


def test_a_malformed_database_file_is_reported(tmp_path: Path) -> None:
    durable_run(tmp_path)
    with sqlite3.connect(tmp_path / "j.db") as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        page = conn.execute("PRAGMA page_size").fetchone()[0]
    data = bytearray((tmp_path / "j.db").read_bytes())
    data[page + 8: 2 * page] = b"\xa5" * (page - 8)  # a whole b-tree page overwritten
    (tmp_path / "j.db").write_bytes(bytes(data))
    proc = run("journal", "j.db", cwd=tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and "j.db" in proc.stderr, proc.stderr


def test_a_full_disk_ends_the_run_promptly_with_the_journaled_state(tmp_path: Path) -> None:
    turns = ", ".join(f"turn {n}" for n in range(8))
    replies = "".join(f"  - - {{text: \"reply {n} {'x' * 200}\"}}\n" for n in range(8))
    (tmp_path / "s.yaml").write_text(f"inputs: [{turns}]\nsettings: {{commit_hook: false}}\nreplies:\n{replies}")
    proc = run("run", LOOM, "--script", "s.yaml", "--store", "j.db", "--timeout", "300", cwd=tmp_path,
               limit=90_000)
    clean_error(proc, "j.db", "disk is full or failing")
    assert "cannot rollback" not in proc.stdout + proc.stderr
    view = json.loads(run("journal", "j.db", "--json", cwd=tmp_path).stdout)["runs"][0]["current"]
    last = [line for line in proc.stdout.splitlines() if "done:" in line][-1]
    assert f"final state {view['state']}," in last and f"journal version {view['version']}" in last


def test_a_bad_script_event_is_refused_before_any_step(tmp_path: Path, capsys: object) -> None:
    (tmp_path / "bad.yaml").write_text("events:\n  - UserInput\n  - LlmCompleted: {tool_calls: 1}\n  - NoSuchEvent\n")
    durable = run("run", LOOM, "--script", "bad.yaml", "--store", "j.db", cwd=tmp_path)
    clean_error(durable, "bad.yaml", "event 3: loom-agent has no event 'NoSuchEvent'")
    assert not (tmp_path / "j.db").exists() or "run" not in run("journal", "j.db", cwd=tmp_path).stdout
    plain = run("run", LOOM, "--script", "bad.yaml", cwd=tmp_path)
    clean_error(plain, "bad.yaml", "event 3")
    assert plain.stdout == "", "nothing was played"
    bad_param = tmp_path / "param.yaml"
    bad_param.write_text("events:\n  - ArgumentsValid: {ask_user: maybe, takes_key: true}\n")
    assert main(["run", TOOL_CALL, "--script", str(bad_param), "--store", str(tmp_path / "k.db")]) == 2


if sys.platform != "linux":  # RLIMIT_FSIZE and SIGXFSZ as used here
    del test_a_full_disk_ends_the_run_promptly_with_the_journaled_state


def killed_with_log(tmp_path: Path) -> None:
    """A run SIGKILLed mid-way: its write-ahead log and log index are left behind."""
    (tmp_path / "work").mkdir()
    (tmp_path / "s.yaml").write_text(agent_script(2))  # two turns, each with a tool call
    killed = run("run", LOOM, "--script", "s.yaml", "--store", "j.db", "--kill-at", "40", cwd=tmp_path)
    assert killed.returncode == -signal.SIGKILL
    assert (tmp_path / "j.db-wal").stat().st_size > 4 * 4096 and (tmp_path / "j.db-shm").exists()


def test_a_flipped_bit_in_the_write_ahead_log_is_detected_not_dropped(tmp_path: Path) -> None:
    """Defect 12: SQLite drops a damaged frame and every committed one after it, silently."""
    killed_with_log(tmp_path)
    wal = tmp_path / "j.db-wal"
    data = bytearray(wal.read_bytes())
    data[32 + 2 * (24 + 4096) + 24 + 200] ^= 0x10  # inside frame 3's page
    wal.write_bytes(bytes(data))
    clean_error(run("journal", "j.db", cwd=tmp_path), "j.db-wal", "frame 3 fails its checksum")
    clean_error(run("run", LOOM, "--script", "s.yaml", "--store", "j.db", "--resume", cwd=tmp_path), "j.db-wal",
                "frame 3")
    repaired = run("journal", "j.db", "--repair", cwd=tmp_path)
    assert repaired.returncode in (0, 2) and "SQLite dropped those frames" in repaired.stdout, repaired.stderr
    assert (tmp_path / "j.db-wal.damaged").read_bytes() == bytes(data), "the damaged log is kept"


def test_a_deleted_write_ahead_log_is_detected(tmp_path: Path) -> None:
    """Defect 12: a deleted log lost the run ("no run to resume") without saying why."""
    killed_with_log(tmp_path)
    (tmp_path / "j.db-wal").unlink()
    clean_error(run("run", LOOM, "--script", "s.yaml", "--store", "j.db", "--resume", cwd=tmp_path), "j.db-wal",
                "the log is missing")


def frames_of(wal: bytes | bytearray) -> int:
    return (len(wal) - 32) // (24 + 4096)


def test_a_cut_write_ahead_log_is_detected(tmp_path: Path) -> None:
    """Defect 12: a log cut short (a frame boundary, or mid-frame) loses its last committed frames."""
    killed_with_log(tmp_path)
    wal = tmp_path / "j.db-wal"
    data = wal.read_bytes()
    wal.write_bytes(data[:32 + (frames_of(data) // 2) * (24 + 4096) + 1000])
    clean_error(run("journal", "j.db", cwd=tmp_path), "j.db-wal", "it was cut, damaged or deleted")


def test_a_flipped_bit_in_the_last_frame_is_damage_not_a_torn_write(tmp_path: Path) -> None:
    """The log index counts the last frame as committed: it was whole once."""
    killed_with_log(tmp_path)
    wal = tmp_path / "j.db-wal"
    data = bytearray(wal.read_bytes())
    data[32 + (frames_of(data) - 1) * (24 + 4096) + 24 + 100] ^= 0x01
    wal.write_bytes(bytes(data))
    clean_error(run("journal", "j.db", cwd=tmp_path), "j.db-wal", "it was cut, damaged or deleted")


def test_a_flipped_bit_in_the_log_header_is_detected_even_without_the_index(tmp_path: Path) -> None:
    """SQLite ignores a log whose header fails its checksum, frames and all."""
    killed_with_log(tmp_path)
    wal = tmp_path / "j.db-wal"
    data = bytearray(wal.read_bytes())
    data[20] ^= 0x04  # the checkpoint sequence number, inside the header's checksum
    wal.write_bytes(bytes(data))
    clean_error(run("journal", "j.db", cwd=tmp_path), "j.db-wal", "its header fails its checksum")
    (tmp_path / "j.db-shm").unlink()
    clean_error(run("journal", "j.db", cwd=tmp_path), "j.db-wal", "its header fails its checksum")


def uncommitted_frames_after_the_last_commit(tmp_path: Path, count: int) -> bytes:
    """The killed run's log with ``count`` frames of an aborted transaction after its last commit,
    as a full disk leaves them: the log's salts, no commit mark, the first failing its checksum
    (a write that did not finish), the later ones left from a longer attempt before it."""
    killed_with_log(tmp_path)
    wal = tmp_path / "j.db-wal"
    data = bytearray(wal.read_bytes())
    size = 24 + 4096
    frame = bytearray(data[32:32 + size])
    frame[4:8] = bytes(4)  # no commit mark: a frame of a transaction that never committed
    frame[16:24] = bytes(8)  # the checksum of a chain that was never finished
    data += frame * count
    wal.write_bytes(bytes(data))
    return bytes(data)


def test_uncommitted_frames_after_the_last_commit_are_not_damage(tmp_path: Path) -> None:
    """Issue 25, defect 5: a full disk mid-write left frames of a transaction that never committed;
    they were reported as damage that "would drop committed frames" and needed a repair."""
    data = uncommitted_frames_after_the_last_commit(tmp_path, 3)
    view = run("journal", "j.db", cwd=tmp_path)
    assert view.returncode == 0 and "damaged" not in view.stderr, view.stdout + view.stderr
    assert committed_end(data) == len(data) - 3 * (24 + 4096), "the next write goes over them"
    assert committed_end(data[:-3 * (24 + 4096)]) == committed_end(data) and committed_end(b"") == 32


def test_a_commit_after_a_damaged_frame_is_still_damage(tmp_path: Path) -> None:
    data = bytearray(uncommitted_frames_after_the_last_commit(tmp_path, 3))
    data[-(24 + 4096) + 4:-(24 + 4096) + 8] = (7).to_bytes(4, "big")  # the last one marks a commit
    (tmp_path / "j.db-wal").write_bytes(bytes(data))
    clean_error(run("journal", "j.db", cwd=tmp_path), "j.db-wal", "committed frames follow it")
