"""Chaos campaigns (``agentfsm chaos``) with real processes, in ``make test-slow`` (at least
100 runs per store): no duplicated effect, no lost step, no stuck run, no unclean error;
every damaged journal reported (exit 2, the store named) or repaired by ``journal --repair``.
A short campaign of the scenarios that catch issue 25's defects runs in ``make test``."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from agentfsm.faults.chaos import (
    PG_SCENARIOS,
    SCENARIOS,
    WORKER_SCENARIOS,
    Proc,
    Row,
    campaign,
    count_writes,
    full_disk,
    table_text,
)
from agentfsm.faults.chaos_agents import AGENTS

from agentfsm.cli import main

ROOT = Path(__file__).resolve().parent.parent.parent
AGENTFSM = str(Path(sys.executable).parent / "agentfsm")


def check(rows: list) -> None:  # type: ignore[type-arg]
    print("\n" + table_text(rows))
    for row in rows:
        assert row.trials > 0, row
        assert (row.duplicated, row.lost, row.stuck, row.unclean, row.unexplained) == (0, 0, 0, 0, 0), \
            (row.scenario, row.notes)   # unexplained: a run's protocol log no interleaving of the model explains


@pytest.mark.slow
@pytest.mark.chaos
def test_sqlite_campaign() -> None:
    seed = int(os.environ.get("AGENTFSM_TEST_SEED", random.randrange(1 << 30)))
    print(f"seed {seed}")
    rows = campaign(SCENARIOS, trials=15, seed=seed)
    check(rows)
    assert sum(r.runs for r in rows) >= 100
    assert {(r.scenario, r.agent) for r in rows} == {(s, a.name) for s in SCENARIOS for a in AGENTS}


@pytest.mark.chaos
def test_a_full_disk_at_every_write_of_every_agent() -> None:
    """``make chaos`` only (``make test-slow``, which CI runs, has the sweep's spread-out share): the
    disk fills at each frame of each write of each agent's one-tool run in turn, the process failing
    on it, and at each frame past a write's second, killing it; no effect duplicated, no step lost,
    no damage reported, every run resumed to its end."""
    seed = int(os.environ.get("AGENTFSM_TEST_SEED", random.randrange(1 << 30)))
    print(f"seed {seed}")
    rows = campaign(("full-disk",), trials=4 * 128, seed=seed)
    check(rows)
    for row in rows:
        assert row.trials + 1 == row.runs and row.trials < 128, (row.agent, "every frame, each once")
        assert row.damaged == 0, row.notes


@pytest.mark.slow
@pytest.mark.chaos
def test_worker_and_server_kill_campaign() -> None:
    if shutil.which("pg_ctl") is None and not list(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl")):
        pytest.skip("no PostgreSQL server installed")
    folder = Path(tempfile.mkdtemp(prefix="agentfsm-chaos-pg-"))
    folder.chmod(0o755)
    env = {**os.environ, "AGENTFSM_PG_DIR": str(folder)}
    script = str(ROOT / "scripts" / "postgres.sh")
    try:
        started = subprocess.run([script, "start"], capture_output=True, text=True, timeout=300, env=env,
                                 start_new_session=True)
        assert started.returncode == 0, started.stderr
        url = started.stdout.strip().splitlines()[-1]
        seed = int(os.environ.get("AGENTFSM_TEST_SEED", random.randrange(1 << 30)))
        print(f"seed {seed}")
        rows = campaign(PG_SCENARIOS + WORKER_SCENARIOS, trials=4, seed=seed, url=url, pg_dir=folder)
        check(rows)
        assert sum(r.runs for r in rows) >= 100
    finally:
        subprocess.run([script, "stop"], capture_output=True, timeout=120, env=env)
        shutil.rmtree(folder, ignore_errors=True)


def test_a_campaign_keeps_its_trials_folders_when_asked(tmp_path: Path) -> None:
    """``--keep``: each trial's store and protocol log stay, to read a failing trial's log."""
    tool_call = [a for a in AGENTS if a.name == "tool-call"]
    check(campaign(("mistyped-id",), trials=1, seed=26, agents=tool_call, keep=tmp_path / "kept"))
    assert sorted(p.name for p in (tmp_path / "kept").iterdir()) == ["mistyped-id-0"]
    assert (tmp_path / "kept" / "mistyped-id-0" / "j.db.protocol.jsonl").stat().st_size > 0


def test_an_unclean_note_shows_the_traceback_not_the_lines_logged_after_it() -> None:
    """The server-kill failure of CI showed only the worker's later reconnect messages; the
    traceback that made it unclean (a heartbeat process's) was cut off."""
    err = ("w/0: AdminShutdown; reconnecting\nTraceback (most recent call last):\n  File \"beat.py\", line 9\n"
           "    main()\nJournalError: cannot connect\n\tIs the server running?\n" + "w/0: reconnecting\n" * 40)
    assert Proc([], 0, "", err).gist == ("Traceback (most recent call last):\nJournalError: cannot connect\n"
                                         + "w/0: reconnecting\n" * 40)[:300]
    assert Proc([], 1, "", "x" * 400 + "end").gist == "x" * 297 + "end"


def test_chaos_cli_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["chaos", "--trials", "0"]) == 2
    assert main(["chaos", "--pg-dir", "x"]) == 2
    assert "--pg-dir goes with --pg" in capsys.readouterr().err
    assert main(["chaos", "--keep", str(ROOT)]) == 2
    assert f"--keep {ROOT}: not a new or empty folder" in capsys.readouterr().err
    loom = str(ROOT / "spec" / "loom-agent.yaml")
    demo = str(ROOT / "examples" / "loom-demo.yaml")
    assert main(["run", loom, "--script", demo, "--full-disk-at", "3"]) == 2
    assert "--full-disk-at needs --store" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["run", loom, "--script", demo, "--store", "j.db", "--full-disk-at", "3:x"])
    assert "expected N, N:BYTES or N:BYTES:die" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.chaos
def test_chaos_cli_one_trial(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["chaos", "--scenario", "sigkill", "--trials", "1", "--seed", "3"]) == 0
    out = capsys.readouterr().out
    assert "| sigkill | loom-agent | 1 | 1 | 1 | 0 | 0 | 0 | 0 |" in out and out.rstrip().endswith("ok")


def test_short_campaign_of_the_scenarios_that_caught_issue_25(pg_url: str) -> None:
    """One trial each: a repair then a resume answering rerun, a mistyped run id, two resumers on
    PostgreSQL deciding rerun, tools outliving the lease (asleep and keeping the GIL)."""
    seed = int(os.environ.get("AGENTFSM_TEST_SEED", random.randrange(1 << 30)))
    print(f"seed {seed}")
    check(campaign(("repair-resume", "mistyped-id", "pg-two-resumers"), trials=1, seed=seed, url=pg_url))
    check(campaign(("slow-tools",), trials=2, seed=seed, url=pg_url))


def test_a_disk_full_at_a_write_loses_nothing_and_the_run_goes_on(tmp_path: Path) -> None:
    """The full-disk sweep's fault at one write (the fifth, as the reply streams): the process fails
    on it; once space returns the resumed run reports no damage and ends, the tool run once. (A process
    killed by the full disk: the sweep's trial below.)"""
    (tmp_path / "work").mkdir()
    (tmp_path / "s.yaml").write_text(AGENTS[0].script(1, 0))
    argv = [AGENTFSM, "run", str(ROOT / "spec" / "loom-agent.yaml"), "--script", "s.yaml", "--store", "j.db"]
    full = subprocess.run([*argv, "--full-disk-at", "9:5000"], capture_output=True, text=True, cwd=tmp_path,
                          timeout=120)
    assert full.returncode == 2, full.stderr
    assert "j.db: the disk is full or failing" in full.stderr
    assert not (tmp_path / "j.db-wal").exists(), "its log closed as the process exited"
    resumed = subprocess.run([*argv, "--resume"], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "final state ShuttingDown" in resumed.stdout
    assert (tmp_path / "ledger").read_text() == "t1\n"


PLANT = """# The write-ahead log check with issue 25's fix of defect 5 reverted: a frame of the log's
# generation after one failing its checksum counts as a commit, committed or not. A sitecustomize:
# the agentfsm processes a trial starts import it through PYTHONPATH.
import struct
from agentfsm.impl.stores import wal

_wal_frames, _committed_frame = wal.wal_frames, wal.committed_frame


def planted(data):
    wal.committed_frame = lambda header, salt1, salt2: struct.unpack(">2I", header[8:16]) == (salt1, salt2)
    try:
        return _wal_frames(data)
    finally:
        wal.committed_frame = _committed_frame


wal.wal_frames = planted
"""


@pytest.fixture(scope="module")
def loom_frames(tmp_path_factory: pytest.TempPathFactory) -> list[int]:
    """The frames of each write of the full-disk sweep's fault-free Loom run."""
    row = Row("full-disk", AGENTS[0].name)
    frames = count_writes(tmp_path_factory.mktemp("reference") / "run", row, AGENTS[0])
    assert row.ok and frames, row.notes
    return frames


@pytest.mark.parametrize("plant", [False, True])
def test_the_full_disk_sweep_fills_the_disk_between_the_frames_of_a_write(
        plant: bool, loom_frames: list[int], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 25, defect 5, held by the sweep: the disk fills at the third frame of a Loom write of more,
    killing the process with two whole frames and a torn one after the log's last commit, and the
    resume before space returns is killed inside the first of them (a frame failing its checksum, then
    whole ones, no commit). Once space returns the run resumes and ends: no damage reported, nothing
    run twice or lost. With the fix reverted (``plant``) the trial counts the false damage report."""
    if plant:
        (tmp_path / "plant").mkdir()
        (tmp_path / "plant" / "sitecustomize.py").write_text(PLANT)
        monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, (str(tmp_path / "plant"),
                                                                        os.environ.get("PYTHONPATH")))))
    write = next(n for n, frames in enumerate(loom_frames, 1) if n > 1 and frames >= 3)  # not the run's creation
    row = Row("full-disk", AGENTS[0].name)
    full_disk(tmp_path / "fill", row, random.Random(7), AGENTS[0], write, 2, die=True)
    print(row)
    assert (row.faults, row.duplicated, row.lost, row.stuck) == (1, 0, 0, 0), row.notes
    if plant:
        assert (row.unclean, row.damaged) == (1, 1), row.notes
        assert "a full disk reported as damage" in row.notes[0] and "committed frames follow it" in row.notes[0]
    else:
        assert (row.unclean, row.damaged) == (0, 0), row.notes
