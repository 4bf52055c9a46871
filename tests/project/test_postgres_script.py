"""``scripts/postgres.sh``: a server restarted after a crash keeps its port, so workers
holding its URL reconnect (issue 13, defect 13: it picked a new port every start)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
SCRIPT = str(ROOT / "scripts" / "postgres.sh")


def script(command: str, folder: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([SCRIPT, command], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "AGENTFSM_PG_DIR": str(folder)})


@pytest.mark.slow
def test_a_crashed_server_restarts_on_its_port() -> None:
    if shutil.which("pg_ctl") is None and not list(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl")):
        pytest.skip("no PostgreSQL server installed")
    folder = Path(tempfile.mkdtemp(prefix="agentfsm-pg-test-"))
    folder.chmod(0o755)  # the server's user (postgres, when we are root) works in it
    try:
        first = script("start", folder)
        assert first.returncode == 0, first.stderr
        url = first.stdout.strip().splitlines()[-1]
        pid = int((folder / "data" / "postmaster.pid").read_text().split()[0])
        os.kill(pid, signal.SIGKILL)  # the server crashes
        deadline = time.monotonic() + 30
        while script("status", folder).returncode == 0 and time.monotonic() < deadline:
            time.sleep(0.1)
        again = script("start", folder)
        assert again.returncode == 0, again.stderr
        assert again.stdout.strip().splitlines()[-1] == url, "the same URL after the crash"
    finally:
        script("stop", folder)
        shutil.rmtree(folder, ignore_errors=True)
