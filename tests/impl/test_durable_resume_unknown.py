"""``--resume`` never starts a run (issue 25, defect 3).

A mistyped ``--run-id`` with ``--resume`` replayed the whole conversation as a new run and
performed every side effect again, exit 0; a store whose log and index were deleted was
"resumed" the same way, saying "nothing was journaled". Resuming a run the store does not
hold is now bad input (exit 2) that performs nothing; starting it is the command without
``--resume``.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from test_durable_agent import agentfsm
from test_durable_owner import SLOW_TOOL


def finished(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    (tmp_path / "s.yaml").write_text(SLOW_TOOL.format(seconds=0))
    done = agentfsm("--script", "s.yaml", "--store", "j.db", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "ledger").read_text() == "ran\n"


def stored_runs(db: Path) -> list[str]:
    with sqlite3.connect(db) as conn:
        return [str(r[0]) for r in conn.execute("SELECT run_id FROM runs ORDER BY run_id")]


def test_resuming_a_mistyped_run_id_performs_nothing(tmp_path: Path) -> None:
    finished(tmp_path)
    typo = agentfsm("--script", "s.yaml", "--store", "j.db", "--resume", "--run-id", "rnu", cwd=tmp_path)
    assert typo.returncode == 2, typo.stdout + typo.stderr
    assert "j.db: no run 'rnu' to resume" in typo.stderr and "Traceback" not in typo.stderr
    assert "'run'" in typo.stderr, "the runs the store holds are named"
    assert (tmp_path / "ledger").read_text() == "ran\n", "no effect performed again"
    assert stored_runs(tmp_path / "j.db") == ["run"]


def test_resuming_in_a_store_that_holds_no_run_starts_nothing(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    (tmp_path / "s.yaml").write_text(SLOW_TOOL.format(seconds=0))
    sqlite3.connect(tmp_path / "j.db").close()  # a store whose records are gone (its log deleted)
    resumed = agentfsm("--script", "s.yaml", "--store", "j.db", "--resume", cwd=tmp_path)
    assert resumed.returncode == 2, resumed.stdout + resumed.stderr
    assert "no run 'run' to resume" in resumed.stderr and "nothing was journaled" not in resumed.stdout
    assert not (tmp_path / "ledger").exists()
    started = agentfsm("--script", "s.yaml", "--store", "j.db", cwd=tmp_path)  # starting it is explicit
    assert started.returncode == 0, started.stdout + started.stderr
    assert (tmp_path / "ledger").read_text() == "ran\n"
