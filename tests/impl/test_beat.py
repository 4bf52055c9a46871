"""The heartbeat process (``impl/durable/beat.py``) when it cannot reach the store.

Found by the server-kill chaos campaign: a worker reconnecting while the PostgreSQL server
restarted started a heartbeat process that could not connect. The child died with a traceback,
and its owner went on as if its leases were being renewed. Now the child's failure is a
``JournalError`` of the owner (a worker reconnects, a CLI run reports it), and whoever had
claimed a run for it releases the claim.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from agentfsm.impl.durable.beat import Beats
from agentfsm.impl.stores.journal import JournalError
from agentfsm.impl.stores.leases import owner_name
from agentfsm.impl.stores.postgres import PostgresStore
from agentfsm.impl.stores.sqlite import SqliteStore
from agentfsm.impl.workers.worker import serve
from agentfsm.spec import load_table
from pg_support import fresh_schema

import agentfsm.cli.durable as durable

COUNTER = Path(__file__).parent.parent / "tables" / "counter.yaml"


def unreachable() -> str:
    """A PostgreSQL URL whose port nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"postgresql://agentfsm@127.0.0.1:{port}/none"


@pytest.fixture
def schema(pg_url: str) -> Iterator[str]:
    with fresh_schema(pg_url) as name:
        yield name


def test_a_heartbeat_process_that_cannot_reach_its_store_is_its_owners_error(capfd: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(JournalError, match=r"^heartbeat process: cannot connect to the PostgreSQL store: "):
        Beats(unreachable())
    assert "Traceback" not in capfd.readouterr().err


def test_a_worker_whose_heartbeat_process_cannot_start_reconnects(pg_url: str, schema: str,
                                                                  capfd: pytest.CaptureFixture[str]) -> None:
    stop = threading.Event()
    warned: list[str] = []

    def warn(message: str) -> None:
        warned.append(message)
        stop.set()

    table = load_table(COUNTER)
    tally = serve(lambda: PostgresStore(pg_url, schema), {"counter": table}, lambda t: {}, "w", stop=stop, warn=warn,
                  poll=0.01, beat_url=unreachable())
    assert tally.abandoned == 1
    assert warned and warned[0].startswith("w/0: JournalError: heartbeat process: cannot connect"), warned
    assert warned[0].endswith("; reconnecting")
    assert "Traceback" not in capfd.readouterr().err


def test_a_run_whose_heartbeat_process_cannot_start_releases_its_claim(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(url: str) -> Beats:
        raise JournalError("heartbeat process: cannot connect")

    monkeypatch.setattr(durable, "Beats", broken)
    path = str(tmp_path / "j.db")
    before = set(threading.enumerate())
    store = SqliteStore(path)
    with pytest.raises(JournalError, match="heartbeat process"):
        durable.Ownership(store, path, "r", 30.0)
    store.close()
    assert set(threading.enumerate()) <= before, "no heartbeat thread left renewing"
    other = SqliteStore(path)
    lease = other.acquire("r", owner_name() + "-other", 30.0)
    assert lease.token == 2, "the failed owner's claim was released, not left to expire"
    other.close()
