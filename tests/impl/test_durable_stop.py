"""One rule for --timeout, Ctrl-C and SIGTERM on a durable run (issue 13, defect 10): the
process stops, nothing more is journaled, and the run stays resumable. Before, a timeout or
Ctrl-C journaled the shutdown, so the run had ended for good and resuming asked a decision
that changed nothing."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest
from test_durable_agent import AGENTFSM, LOOM, agentfsm, journal

LONG_TOOL = """workdir: work
settings: {commit_hook: false}
inputs: [Run it]
replies:
  - - {tool_call: {name: run_command, arguments: {argv: [sh, -c, "echo ran >> ../ledger; exec sleep 60"]}}}
  - - {text: done}
"""


def prepare(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    (tmp_path / "s.yaml").write_text(LONG_TOOL)


def check_resumable(tmp_path: Path) -> None:
    view = journal(tmp_path)
    assert view["current"]["state"] == "ExecutingTools", "the shutdown was not journaled: the run goes on"
    resumed = agentfsm("--script", "s.yaml", "--store", "j.db", "--resume", cwd=tmp_path)
    assert resumed.returncode == 1 and "decision: unknown-effect" in resumed.stdout, resumed.stdout
    key = journal(tmp_path)["decisions"][0]["id"]
    decided = agentfsm("--script", "s.yaml", "--store", "j.db", "--resume", "--decide", f"{key}=failed", cwd=tmp_path)
    assert decided.returncode == 0, decided.stdout + decided.stderr
    assert journal(tmp_path)["current"]["state"] == "ShuttingDown"
    assert (tmp_path / "ledger").read_text() == "ran\n"


def test_a_timeout_leaves_the_run_resumable(tmp_path: Path) -> None:
    prepare(tmp_path)
    timed = agentfsm("--script", "s.yaml", "--store", "j.db", "--timeout", "3", cwd=tmp_path)
    assert timed.returncode == 1 and "stopped: --timeout 3s" in timed.stdout, timed.stdout + timed.stderr
    assert "Traceback" not in timed.stderr
    check_resumable(tmp_path)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_ctrl_c_and_sigterm_leave_the_run_resumable(tmp_path: Path, sig: signal.Signals) -> None:
    prepare(tmp_path)
    child = subprocess.Popen([AGENTFSM, "run", LOOM, "--script", "s.yaml", "--store", "j.db"], cwd=tmp_path,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not (tmp_path / "ledger").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    child.send_signal(sig)
    out, err = child.communicate(timeout=60)
    assert child.returncode == 128 + sig, out + err
    assert f"stopped: {sig.name}" in out and "Traceback" not in err
    check_resumable(tmp_path)
