"""A server some tests need (PostgreSQL, Temporal): the one an environment variable names, else
the private one its script in scripts/ starts, stopped after the session if the tests started it."""

from __future__ import annotations

import importlib
import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest


@dataclass(frozen=True)
class PrivateServer:
    what: str              # "PostgreSQL server": how messages name it
    script: Path           # start|stop|status, printing the address on start
    env: str               # the variable that names a server already running
    client: str            # the library the tests talk to it with ...
    extra: str             # ... and the agentfsm extra that installs it
    start_timeout: float
    stop_timeout: float

    def running(self) -> bool:
        """Whether the private server is up (then someone else started it)."""
        try:
            return subprocess.run([str(self.script), "status"], capture_output=True, timeout=60).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            return False

    def down(self) -> bool:
        """Whether starting it is the tests' job: no environment variable names one and the
        private one is not running (then the tests that start it stop it too)."""
        return not os.environ.get(self.env) and not self.running()

    def stop(self) -> None:
        subprocess.run([str(self.script), "stop"], capture_output=True, timeout=self.stop_timeout)

    def address(self) -> str:
        """The server's address: the environment's, else the private server's, started if need
        be. Skips (a failure in CI) when the client is missing or no server can be started."""
        try:
            importlib.import_module(self.client)
        except ImportError:
            pytest.skip(f"{self.client} is not installed (pip install 'agentfsm[{self.extra}]')")
        named = os.environ.get(self.env)
        if named:
            return named
        try:
            proc = subprocess.run([str(self.script), "start"], capture_output=True, text=True,
                                  timeout=self.start_timeout)
        except (OSError, subprocess.TimeoutExpired) as exc:
            pytest.skip(f"no {self.what} could be started: {exc}")
        if proc.returncode != 0 or not proc.stdout.strip():
            pytest.skip(f"no {self.what} could be started: {proc.stderr.strip()[-300:]}")
        return proc.stdout.strip().splitlines()[-1]


@contextmanager
def for_the_session(server: PrivateServer) -> Iterator[str]:
    """The server's address for a session fixture; a private server the tests started is stopped
    after. Under ``pytest -n`` a worker never stops it (another worker may still use it): the
    controlling process's ``Stopper`` does, once every worker is done."""
    ours = not os.environ.get("PYTEST_XDIST_WORKER") and server.down()
    try:
        yield server.address()
    finally:
        if ours:
            server.stop()


@dataclass
class Stopper:
    """Stops, when the whole test run ends, the private servers its tests started: those no
    environment variable names and that were not running when the run began (a developer's
    own server is left alone)."""
    servers: tuple[PrivateServer, ...]
    stopping: list[PrivateServer] = field(default_factory=list)

    def begin(self) -> None:
        self.stopping = [s for s in self.servers if s.down()]

    def end(self) -> None:
        for server in self.stopping:
            if server.running():
                server.stop()
