"""One owner per CLI run on PostgreSQL too (issue 25, defect 1).

Two ``run --resume`` at once on a PostgreSQL store, both told ``--decide KEY=rerun`` after the
first owner was killed mid-tool, ran the tool three times where the user allowed two, and one
of them hung on its refused ``ToolCompleted``. As on SQLite, a CLI run now takes the run's
lease (fencing token, heartbeat) before it opens the run: the second resumer is refused.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from pg_support import fresh_schema
from test_durable_agent import AGENTFSM, LOOM
from test_durable_owner import SLOW_TOOL


def run(url: str, *extra: str, cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([AGENTFSM, "run", LOOM, "--script", "s.yaml", "--store", url, *extra], cwd=cwd,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def started(tmp_path: Path, url: str, seconds: float) -> subprocess.Popen[str]:
    """A durable Loom run on ``url`` whose one tool call has started (and runs ``seconds``)."""
    (tmp_path / "work").mkdir(exist_ok=True)
    (tmp_path / "s.yaml").write_text(SLOW_TOOL.format(seconds=seconds))
    child = run(url, cwd=tmp_path)
    deadline = time.monotonic() + 60
    while not (tmp_path / "ledger").exists() and time.monotonic() < deadline and child.poll() is None:
        time.sleep(0.02)
    assert (tmp_path / "ledger").exists(), child.communicate()
    return child


def view(url: str) -> dict[str, Any]:
    proc = subprocess.run([AGENTFSM, "journal", "--store", url, "--json"], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    [entry] = json.loads(proc.stdout)["runs"]
    result: dict[str, Any] = entry
    return result


def tool_effect(url: str) -> dict[str, Any]:
    [effect] = [e for e in view(url)["current"]["effects"] if e["tool"] == "run_command"]
    result: dict[str, Any] = effect
    return result


def test_a_second_resumer_on_postgres_is_refused_while_the_owner_lives(tmp_path: Path, pg_url: str) -> None:
    with fresh_schema(pg_url) as schema:
        url = f"{pg_url}?schema={schema}"
        child = started(tmp_path, url, 30)
        try:
            second = run(url, "--resume", cwd=tmp_path)
            out, err = second.communicate(timeout=60)
            assert second.returncode == 2, out + err
            assert "run 'run' is owned by" in err and "Traceback" not in err
            assert tool_effect(url)["status"] == "started", "the refused resumer wrote nothing"
        finally:
            os.killpg(child.pid, signal.SIGKILL)
            child.wait(10)
        assert (tmp_path / "ledger").read_text() == "ran\n"


def test_two_resumers_deciding_rerun_on_postgres_run_the_tool_twice_not_three_times(tmp_path: Path,
                                                                                      pg_url: str) -> None:
    with fresh_schema(pg_url) as schema:
        url = f"{pg_url}?schema={schema}"
        child = started(tmp_path, url, 3)
        os.killpg(child.pid, signal.SIGKILL)  # mid-tool: the effect is unknown, a decision
        child.wait(10)
        key = tool_effect(url)["key"]
        both = [run(url, "--resume", "--decide", f"{key}=rerun", cwd=tmp_path) for _ in range(2)]
        done = [(p.returncode, out + err) for p in both for out, err in [p.communicate(timeout=60)]]
        assert sorted(code for code, _ in done) == [0, 2], done
        refused = next(text for code, text in done if code == 2)
        assert "is owned by" in refused and "Traceback" not in refused
        assert (tmp_path / "ledger").read_text() == "ran\nran\n", "the original and the one rerun allowed"
