"""Model-based testing of the durable protocol: seeded walks of durable-run-fixed.yaml performed
on the real store (SQLite; PostgreSQL too) and the real ledger tool agree with the model at every
store and tool step, and, with the workers real processes of the durable runtime, at every
worker step too; planted protocol defects are each caught at the step where they show."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from agentfsm.faults.protocol_audit import Auditor
from agentfsm.faults.protocol_walk import Divergence, RealProtocol, Walked, walk
from agentfsm.faults.runtime_walk import PoolProtocol, RuntimeProtocol
from agentfsm.impl.durable.ledger import MemoryLedger
from agentfsm.impl.durable.protocol_log import ProtocolLog
from agentfsm.impl.stores.journal import JSON
from agentfsm.impl.stores.leases import OwnedStore
from agentfsm.impl.stores.sqlite import SqliteStore
from agentfsm.spec.audit_mapping import load_mapping
from agentfsm.spec.system_load import load_system
from agentfsm.spec.system_log import read_logs
from agentfsm.verify.system.audit import SystemAudit, audit_system
from conftest import ROOT, run_cli
from pg_support import fresh_schema
from protocol_plants import PLANTS, RUNTIME_PLANTS

SYSTEM = load_system(str(ROOT / "spec/systems/durable-run-fixed.yaml"))
MAPPING = load_mapping(SYSTEM, ROOT / "spec/systems/audit/durable-run-fixed.yaml")
WALKS, LENGTH = 60, 60
PLANT_WALKS = 200
# Where each plant shows first: the real step whose answer is not the model's.
CAUGHT_AT = {"journal-unfenced": "store takes Write", "tool-unfenced": "tool takes Run",
             "status-unfenced": "tool takes Run", "claim-ignores-owner": "store takes Claim",
             "claim-keeps-token": "store takes Claim", "expiry-ignores-heartbeat": "store takes Claim",
             "lease-not-renewed-while-a-tool-runs": "store takes Claim"}


def walks(store: OwnedStore, seeds: range, walked: Walked | None = None,
          log: list[dict[str, JSON]] | None = None) -> list[Divergence]:
    """The first divergence of the walks with these seeds, in order (none: []); ``log`` gets the
    records of the last walk."""
    for seed in seeds:
        real = RealProtocol(store, MemoryLedger(), f"walk-{uuid.uuid4().hex[:8]}-{seed}")
        if log is not None:
            log.clear()
        divergence = walk(SYSTEM, real, seed, LENGTH, walked or Walked(), log=log)
        if divergence is not None:
            return [divergence]
    return []


def audited(log: list[dict[str, JSON]], folder: Path) -> SystemAudit:
    """The audit of a walk's log against the system, through the mapping kept with it."""
    path = folder / f"walk-{uuid.uuid4().hex[:8]}.jsonl"
    path.write_text("".join(json.dumps(record) + "\n" for record in log))
    return audit_system(SYSTEM, MAPPING, read_logs(SYSTEM, MAPPING, [str(path)]))


@pytest.fixture
def sqlite(tmp_path: Path) -> Iterator[SqliteStore]:
    store = SqliteStore(tmp_path / "runs.db")
    yield store
    store.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[OwnedStore]:
    """Each store the plants are run on: SQLite, and PostgreSQL (a schema of its own)."""
    if request.param == "sqlite":
        sqlite = SqliteStore(tmp_path / "runs.db")
        yield sqlite
        sqlite.close()
        return
    from agentfsm.impl.stores.postgres import PostgresStore
    url = request.getfixturevalue("pg_url")
    with fresh_schema(url) as schema:
        postgres = PostgresStore(url, schema)
        yield postgres
        postgres.close()


def test_the_real_sqlite_store_and_tool_follow_the_model(sqlite: SqliteStore) -> None:
    walked = Walked()
    found = walks(sqlite, range(WALKS), walked)
    assert not found, "\n".join(map(str, found))
    assert walked.checked > 300   # the walks reach the store and the tool, not only the workers


def test_the_walks_logs_are_explained_by_the_model(sqlite: SqliteStore, tmp_path: Path) -> None:
    for seed in range(8):
        log: list[dict[str, JSON]] = []
        assert not walks(sqlite, range(seed, seed + 1), log=log)
        result = audited(log, tmp_path)
        assert result.ok and result.records == len(log), [str(s) for s in result.unexplained]


def test_the_cli_reads_a_walks_log_through_the_mapping_kept_with_the_system(
        sqlite: SqliteStore, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log: list[dict[str, JSON]] = []
    walks(sqlite, range(3, 4), log=log)
    path = tmp_path / "walk.jsonl"
    path.write_text("".join(json.dumps(record) + "\n" for record in log))
    code, out, err = run_cli(["audit", str(ROOT / "spec/systems/durable-run-fixed.yaml"), str(path)], capsys)
    assert code == 0 and f"{len(log)} logged steps explained" in out, out + err


def test_the_real_postgresql_store_follows_the_model(pg_url: str) -> None:
    from agentfsm.impl.stores.postgres import PostgresStore
    with fresh_schema(pg_url) as schema:
        store = PostgresStore(pg_url, schema)
        try:
            walked = Walked()
            found = walks(store, range(WALKS // 4), walked)   # a server's commits are slower: fewer walks
        finally:
            store.close()
    assert not found, "\n".join(map(str, found))
    assert walked.checked > 60


@pytest.mark.parametrize("plant", sorted(PLANTS))
def test_a_planted_defect_is_caught_where_it_shows(plant: str, store: OwnedStore, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """By the walk, at the step whose real answer the model does not give; by the audit of the
    walk's log, at that step's record; on each store."""
    PLANTS[plant](monkeypatch)
    log: list[dict[str, JSON]] = []
    found = walks(store, range(PLANT_WALKS), log=log)
    assert found, f"{plant}: no walk of {PLANT_WALKS} diverged"
    first = found[0]
    assert first.model != first.real and first.label.startswith(CAUGHT_AT[plant]), str(first)
    result = audited(log, tmp_path)   # the same run, from its log: its last record is the real answer
    assert not result.ok and [s.line for s in result.unexplained] == [len(log)], [str(s) for s in result.unexplained]


def runtime_logged(store: OwnedStore, seeds: range, folder: Path) -> tuple[list[Divergence], Path]:
    """The walks with the runtime's own protocol log written by the real code (``LoggedStore``,
    ``ProtocolLog``), as an ``agentfsm run --store`` process writes it."""
    log = folder / f"runtime-{uuid.uuid4().hex[:8]}.jsonl"
    for seed in seeds:
        real = RealProtocol(store, MemoryLedger(), f"walk-{uuid.uuid4().hex[:8]}-{seed}",
                            log=ProtocolLog(log, "scheduler"))
        divergence = walk(SYSTEM, real, seed, LENGTH, Walked())
        real.log.close()
        if divergence is not None:
            return [divergence], log
    return [], log


def test_the_runtimes_own_log_of_the_walks_is_explained(sqlite: SqliteStore, tmp_path: Path) -> None:
    found, log = runtime_logged(sqlite, range(12), tmp_path)
    assert not found
    verdict = Auditor().audit_log(log)
    assert verdict.windows >= 8 and verdict.ok, verdict.unexplained


@pytest.mark.parametrize(("plant", "record"), [("claim-keeps-token", "store takes Claim"),
                                               ("journal-unfenced", "store takes WriteCompleted")])
def test_a_store_plant_is_caught_from_the_runtimes_own_log(plant: str, record: str, store: OwnedStore,
                                                           tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The plants the store's answers show; the others (a live owner's lease taken, the tool's
    side) leave logs a stalled owner explains: the walks catch those."""
    PLANTS[plant](monkeypatch)
    found, log = runtime_logged(store, range(PLANT_WALKS), tmp_path)
    assert found
    verdict = Auditor().audit_log(log)
    assert len(verdict.unexplained) == 1 and record in verdict.unexplained[0], verdict.unexplained


RUNTIME_WALKS = 40
# Where each plant shows first when the workers are the real runtime's processes.
CAUGHT_BY_THE_RUNTIME = {
    "journal-unfenced": "worker[1] takes Rejected", "tool-unfenced": "tool takes Run",
    "status-unfenced": "tool takes Run", "claim-ignores-owner": "store takes Claim",
    "claim-keeps-token": "store takes Claim", "expiry-ignores-heartbeat": "store takes Claim",
    "lease-not-renewed-while-a-tool-runs": "store takes Claim", "decision-applied-twice": "store takes Claim",
    "resume-takes-no-claim": "worker[1] takes Refused", "status-under-old-token": "environment -> worker[0]: AskStatus"}


def runtime_walks(store: OwnedStore, seeds: range, walked: Walked | None = None,
                  processes: type[RuntimeProtocol] = RuntimeProtocol) -> list[Divergence]:
    """The first divergence of the walks whose workers are real processes (none: []): ``agentfsm
    run --resume`` bodies, or the pool's workers (``PoolProtocol``, PostgreSQL only)."""
    for seed in seeds:
        real = processes(store, MemoryLedger(), f"runtime-{uuid.uuid4().hex[:8]}-{seed}")
        divergence = walk(SYSTEM, real, seed, LENGTH, walked or Walked())
        if divergence is not None:
            return [divergence]
    return []


def test_the_real_runtime_follows_the_model(sqlite: SqliteStore) -> None:
    """Every worker step is the real process's next call, every store and tool step its answer."""
    walked = Walked()
    found = runtime_walks(sqlite, range(RUNTIME_WALKS), walked)
    assert not found, "\n".join(map(str, found))
    assert walked.checked > 500


def test_the_real_runtime_on_postgresql_follows_the_model(pg_url: str) -> None:
    from agentfsm.impl.stores.postgres import PostgresStore
    with fresh_schema(pg_url) as schema:
        store = PostgresStore(pg_url, schema)
        try:
            walked = Walked()
            found = runtime_walks(store, range(RUNTIME_WALKS // 4), walked)
        finally:
            store.close()
    assert not found, "\n".join(map(str, found))
    assert walked.checked > 100


def test_the_pool_workers_follow_the_model(pg_url: str) -> None:
    """The model's workers played by PostgreSQL's pool ``Worker`` (its claim from the queue, its
    lease-renewing tool, its finish): every worker step its next call, every answer the model's."""
    from agentfsm.impl.stores.postgres import PostgresStore
    with fresh_schema(pg_url) as schema:
        store = PostgresStore(pg_url, schema)
        try:
            walked = Walked()
            found = runtime_walks(store, range(RUNTIME_WALKS // 4), walked, PoolProtocol)
        finally:
            store.close()
    assert not found, "\n".join(map(str, found))
    assert walked.checked > 100


@pytest.mark.parametrize("plant", sorted({**PLANTS, **RUNTIME_PLANTS}))
def test_a_planted_defect_is_caught_by_the_walks_of_the_real_runtime(plant: str, store: OwnedStore,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Each plant, the store's, the tool's and the runtime's own, at the first step where the real
    code and the model disagree, on each store."""
    {**PLANTS, **RUNTIME_PLANTS}[plant](monkeypatch)
    found = runtime_walks(store, range(PLANT_WALKS))
    assert found, f"{plant}: no walk of {PLANT_WALKS} diverged"
    first = found[0]
    assert first.model != first.real and first.label.startswith(CAUGHT_BY_THE_RUNTIME[plant]), str(first)


# The plants in the pool worker's path: the queue's claim and lease, the fences, the heartbeat, the
# recovery's status query (a pool worker takes no claim_run and makes no decision: a blocked job waits).
POOL_PLANTS = {name: plant for name, plant in {**PLANTS, **RUNTIME_PLANTS}.items()
               if name not in ("resume-takes-no-claim", "decision-applied-twice")}


@pytest.mark.parametrize("plant", sorted(POOL_PLANTS))
def test_a_planted_defect_is_caught_by_the_walks_of_the_pool_workers(plant: str, pg_url: str,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from agentfsm.impl.stores.postgres import PostgresStore
    POOL_PLANTS[plant](monkeypatch)
    with fresh_schema(pg_url) as schema:
        store = PostgresStore(pg_url, schema)
        try:
            found = runtime_walks(store, range(PLANT_WALKS), processes=PoolProtocol)
        finally:
            store.close()
    assert found, f"{plant}: no walk of {PLANT_WALKS} diverged"
    first = found[0]
    assert first.model != first.real and first.label.startswith(CAUGHT_BY_THE_RUNTIME[plant]), str(first)


def test_a_walk_of_the_runtime_leaves_no_process_running(sqlite: SqliteStore) -> None:
    """The walk ends every process it parked (a crash), so no thread outlives it."""
    runtime_walks(sqlite, range(5))
    assert not [t.name for t in threading.enumerate() if t.name.startswith("walk worker-")]


def test_the_runtime_processes_own_logs_of_the_walks_are_explained(sqlite: SqliteStore, tmp_path: Path) -> None:
    """The protocol log the runtime's processes write (claim_run, LoggedStore, their release) is
    explained by the audit of real runs, walk after walk."""
    log = tmp_path / "runtime.jsonl"
    for seed in range(12):
        real = RuntimeProtocol(sqlite, MemoryLedger(), f"runtime-{seed}", log=ProtocolLog(log, "scheduler"))
        assert walk(SYSTEM, real, seed, LENGTH, Walked()) is None
    verdict = Auditor().audit_log(log)
    assert verdict.windows >= 8 and verdict.ok, verdict.unexplained


def test_the_pool_workers_own_logs_of_the_walks_are_explained(pg_url: str, tmp_path: Path) -> None:
    """The protocol log the pool's workers write (their claims, fenced writes, tool calls, status
    queries, finishes) is explained by the audit of real runs, walk after walk."""
    from agentfsm.impl.stores.postgres import PostgresStore
    log = tmp_path / "pool.jsonl"
    with fresh_schema(pg_url) as schema:
        store = PostgresStore(pg_url, schema)
        try:
            for seed in range(12):
                real = PoolProtocol(store, MemoryLedger(), f"pool-{seed}", log=ProtocolLog(log, "scheduler"))
                assert walk(SYSTEM, real, seed, LENGTH, Walked()) is None
        finally:
            store.close()
    verdict = Auditor().audit_log(log)
    assert verdict.windows >= 8 and verdict.ok, verdict.unexplained


def test_a_decision_applied_twice_in_the_walks_is_caught_from_the_runtimes_own_log(
        store: OwnedStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The walk that catches the plant leaves a log the audit does not explain either, on each store."""
    RUNTIME_PLANTS["decision-applied-twice"](monkeypatch)
    log = tmp_path / "runtime.jsonl"
    real = RuntimeProtocol(store, MemoryLedger(), "runtime", log=ProtocolLog(log, "scheduler"))
    assert walk(SYSTEM, real, 0, LENGTH, Walked()) is not None
    verdict = Auditor().audit_log(log)
    assert len(verdict.unexplained) == 1 and "WriteStarted" in verdict.unexplained[0], verdict.unexplained


def test_a_claim_on_a_finished_run_differs_by_its_token_only(sqlite: SqliteStore,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The difference of abstraction the runtime's walks map (docs/durability.md): compared as they
    are, the real store's grant on a finished run carries a new token, the model's the completing
    claim's; the journal state is the same."""
    monkeypatch.setattr(RuntimeProtocol, "_finished_token", lambda self, answer: answer)
    found = runtime_walks(sqlite, range(RUNTIME_WALKS))
    assert found, "no walk claimed a finished run"
    first = found[0]
    assert first.label.startswith("store takes Claim"), str(first)
    assert first.model.endswith(", 2)") and first.real.endswith(", 2)") and first.model != first.real, str(first)
