"""Shared fixtures: paths of the repository and its bundled tables."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from agentfsm.spec import Table, load_table

ROOT = Path(__file__).resolve().parent.parent
SPEC = ROOT / "spec"
TABLES = sorted(SPEC.glob("*.yaml"))


@pytest.fixture(scope="session")
def loom() -> Table:
    return load_table(SPEC / "loom-agent.yaml")


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Run ``agentfsm ARGS`` in-process; return (exit status, stdout, stderr)."""
    from agentfsm.cli import main

    try:
        code = main(args)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """A PostgreSQL server for the shared-store tests: $AGENTFSM_TEST_PG_URL, else the private
    cluster of scripts/postgres.sh (started if need be, and then stopped after the session, so
    that nothing is left running). Skips only when none can be started."""
    from pg_support import ENV, running, server_url, stop
    ours = not os.environ.get(ENV) and not running()
    try:
        yield server_url()
    finally:
        if ours:
            stop()
