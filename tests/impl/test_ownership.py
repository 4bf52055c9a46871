"""A process's claim on a run (``claim_run``): the store's answer, granted or refused, is what the
protocol log records, since the audit reads a run's owners from that log alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agentfsm.impl.durable.ownership import claim_run
from agentfsm.impl.durable.protocol_log import ProtocolLog
from agentfsm.impl.stores.journal import JSON
from agentfsm.impl.stores.leases import RunHeld, owner_name
from agentfsm.impl.stores.sqlite import SqliteStore


def records(path: Path) -> list[dict[str, JSON]]:
    return [{k: v for k, v in json.loads(line).items() if k != "at"} for line in path.read_text().splitlines()]


def test_a_granted_claim_is_logged_with_its_token_and_a_refused_one_as_refused(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "runs.db")
    path = tmp_path / "protocol.jsonl"
    log = ProtocolLog(path, "me")
    try:
        store.acquire("held", "elsewhere:1", 30)   # another host's owner is never taken for gone
        store.release(store.acquire("free", "elsewhere:1", 30))   # released: the next token is 2
        with pytest.raises(RunHeld) as held:
            claim_run(store, "held", owner_name(), 30, log)
        assert held.value.owner == "elsewhere:1"
        lease = claim_run(store, "free", owner_name(), 30, log)
        assert (lease.run_id, lease.owner, lease.token) == ("free", owner_name(), 2)
        assert records(path) == [
            {"owner": "me", "run": "held", "op": "claim", "result": "refused"},
            {"owner": owner_name(), "run": "free", "op": "claim", "result": "granted", "token": 2, "seconds": 30},
        ]
    finally:
        store.close()
