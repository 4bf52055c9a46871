"""The private servers' lifecycle under ``pytest -n``: a worker never stops a server another
worker may still use; the controlling process stops what the run started, and nothing else."""

from __future__ import annotations

from pathlib import Path

import pytest
from private_server import PrivateServer, Stopper, for_the_session

SCRIPT = """#!/bin/sh
case "$1" in
  start) touch "{flag}"; echo "127.0.0.1:1" ;;
  stop) rm -f "{flag}" ;;
  status) test -e "{flag}" ;;
esac
"""


@pytest.fixture
def server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> PrivateServer:
    script = tmp_path / "server.sh"
    script.write_text(SCRIPT.format(flag=tmp_path / "up"))
    script.chmod(0o755)
    monkeypatch.delenv("FAKE_SERVER_ADDRESS", raising=False)
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    return PrivateServer("fake server", script, "FAKE_SERVER_ADDRESS", "json", "none", 10, 10)


def test_a_session_stops_the_server_it_started(server: PrivateServer) -> None:
    with for_the_session(server) as address:
        assert address == "127.0.0.1:1" and server.running()
    assert not server.running()


def test_a_worker_leaves_it_running_and_the_controller_stops_it(server: PrivateServer,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    stopper = Stopper((server,))
    stopper.begin()
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw0")
    with for_the_session(server):
        pass
    assert server.running(), "a worker stopped a server the other workers may still use"
    stopper.end()
    assert not server.running()


def test_a_server_running_before_the_run_is_left_running(server: PrivateServer) -> None:
    server.address()
    stopper = Stopper((server,))
    stopper.begin()
    with for_the_session(server):
        pass
    stopper.end()
    assert server.running()
