"""PostgreSQL for the tests: find or start a server, and give each test its own schema."""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ENV = "AGENTFSM_TEST_PG_URL"


def running() -> bool:
    """Whether the private cluster of scripts/postgres.sh is up (then someone else started it)."""
    try:
        return subprocess.run([str(ROOT / "scripts" / "postgres.sh"), "status"], capture_output=True,
                              timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def stop() -> None:
    subprocess.run([str(ROOT / "scripts" / "postgres.sh"), "stop"], capture_output=True, timeout=120)


def server_url() -> str:
    try:
        import psycopg  # noqa: F401
    except ImportError:
        pytest.skip("psycopg is not installed (pip install 'agentfsm[postgres]')")
    url = os.environ.get(ENV)
    if url:
        return url
    try:
        proc = subprocess.run([str(ROOT / "scripts" / "postgres.sh"), "start"], capture_output=True, text=True,
                              timeout=300)
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"no PostgreSQL server could be started: {exc}")
    if proc.returncode != 0 or not proc.stdout.strip():
        pytest.skip(f"no PostgreSQL server could be started: {proc.stderr.strip()[-300:]}")
    return proc.stdout.strip().splitlines()[-1]


def drop_schema(url: str, schema: str) -> None:
    import psycopg
    from psycopg import sql
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@contextmanager
def fresh_schema(url: str) -> Iterator[str]:
    """A schema name no other test uses, dropped afterwards."""
    schema = f"t_{uuid.uuid4().hex[:12]}"
    try:
        yield schema
    finally:
        drop_schema(url, schema)
