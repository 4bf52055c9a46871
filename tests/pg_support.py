"""PostgreSQL for the tests: the server (``SERVER``), and a schema of its own for each test."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from private_server import PrivateServer

ROOT = Path(__file__).resolve().parent.parent


SERVER = PrivateServer("PostgreSQL server", ROOT / "scripts" / "postgres.sh", "AGENTFSM_TEST_PG_URL",
                       "psycopg", "postgres", start_timeout=300, stop_timeout=120)


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
