"""Stores by URL, PostgreSQL schema migrations, leases and fencing, workers and their CLI."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from agentfsm.impl.durable.ledger import MemoryLedger, ledger_tools
from agentfsm.impl.durable.run import EffectCall, Options, StatusReply
from agentfsm.impl.stores.journal import JSON, Entry, JournalError
from agentfsm.impl.stores.leases import FencedStore, Lease, LeaseLost
from agentfsm.impl.stores.postgres import MIGRATIONS, SCHEMA_VERSION, PostgresStore
from agentfsm.impl.stores.sqlite import SqliteStore
from agentfsm.impl.stores.urls import StoreURLError, open_leasing_store, open_store, postgres_args, sqlite_path
from agentfsm.impl.workers.worker import GuardedTool, Worker, submit
from agentfsm.spec import load_table
from agentfsm.spec.expr import Value
from json_envelope import enveloped
from pg_support import fresh_schema
from psycopg import sql

from agentfsm.cli import main

COUNTER = Path(__file__).parent.parent / "tables" / "counter.yaml"


@pytest.fixture
def schema(pg_url: str) -> Iterator[str]:
    with fresh_schema(pg_url) as name:
        yield name


def plain(*names: str) -> list[tuple[str, dict[str, Value]]]:
    return [(name, {}) for name in names]


def step(n: int) -> Entry:
    return Entry("step", {"n": n}, float(n))


# -- URLs ----------------------------------------------------------------------------------

def test_store_urls(tmp_path: Path, pg_url: str, schema: str) -> None:
    assert sqlite_path("sqlite:///rel/j.db") == "rel/j.db"
    assert sqlite_path("sqlite:////abs/j.db") == "/abs/j.db"
    assert sqlite_path("plain.db") == "plain.db"
    for bad in ("sqlite://host/j.db", "sqlite:///", "mysql://x/y"):
        with pytest.raises(StoreURLError):
            sqlite_path(bad)
    assert postgres_args("postgresql://u@h:1/d?schema=s&sslmode=disable") == (
        "postgresql://u@h:1/d?sslmode=disable", "s")
    with pytest.raises(StoreURLError, match="one schema"):
        postgres_args("postgresql://u@h/d?schema=a&schema=b")
    store = open_store(f"sqlite:///{tmp_path}/j.db")
    assert isinstance(store, SqliteStore) and store.path == tmp_path / "j.db"
    store.close()
    pg = open_store(f"{pg_url}?schema={schema}")
    assert isinstance(pg, PostgresStore) and pg.schema == schema
    pg.close()
    with pytest.raises(StoreURLError, match="workers share a PostgreSQL store"):
        open_leasing_store(f"sqlite:///{tmp_path}/j.db")
    with pytest.raises(JournalError, match="cannot connect"):
        open_store("postgresql://nobody@127.0.0.1:1/none?connect_timeout=2")


# -- migrations ----------------------------------------------------------------------------

def test_migrations_apply_once_and_upgrade_an_older_schema(pg_url: str, schema: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        conn.execute("CREATE TABLE agentfsm_schema (version INTEGER PRIMARY KEY, applied_at TIMESTAMPTZ)")
        conn.execute(MIGRATIONS[0].encode())
        conn.execute("INSERT INTO agentfsm_schema VALUES (1, now())")
        conn.execute("INSERT INTO runs VALUES ('old', 'm', 0, '')")
    store = PostgresStore(pg_url, schema)
    assert store.schema_version() == SCHEMA_VERSION == 3
    assert store.runs() == ["old"] and store.jobs() == []
    store.close()
    again = PostgresStore(pg_url, schema)
    with psycopg.connect(pg_url, autocommit=True) as conn:
        rows = conn.execute(sql.SQL("SELECT version FROM {}.agentfsm_schema ORDER BY version").format(
            sql.Identifier(schema))).fetchall()
        assert [r[0] for r in rows] == [1, 2, 3]
        conn.execute(sql.SQL("INSERT INTO {}.agentfsm_schema VALUES (99, now())").format(sql.Identifier(schema)))
    again.close()
    with pytest.raises(JournalError, match=r"schema version 99.*upgrade agentfsm"):
        PostgresStore(pg_url, schema)


# -- leases and fencing --------------------------------------------------------------------

def test_a_lost_lease_cannot_write_renew_or_finish(pg_url: str, schema: str) -> None:
    """The token fences: a lapsed lease nobody claimed since still writes (as the model's store,
    durable-run-fixed.yaml, lands it); from the next claim on, it writes, renews and finishes nothing."""
    table = load_table(COUNTER)
    a, b = PostgresStore(pg_url, schema), PostgresStore(pg_url, schema)
    submit(a, table, "r", plain("Tick", "Stop"))
    lease_a = a.claim("A", ["counter"], 0.3)
    assert lease_a is not None and lease_a.token == 1 and lease_a.script[0] == {"event": "Tick", "params": {}}
    assert b.claim("B", ["counter"], 10) is None
    assert b.claim("B", ["other"], 10) is None
    a.append("r", 1, [step(2)], fence=lease_a)
    time.sleep(0.4)
    FencedStore(a, lease_a).append("r", 2, [step(3)])   # lapsed, and nobody claimed the run since
    lease_b = b.claim("B", ["counter"], 10)
    assert lease_b is not None and lease_b.token == 2 and lease_b.run_id == "r"
    for act in (lambda: a.append("r", 3, [step(4)], fence=lease_a), lambda: a.renew(lease_a),
                lambda: a.finish(lease_a, "done", "A")):
        with pytest.raises(LeaseLost, match="lease 1 lost"):
            act()
    assert a.version("r") == 3
    b.append("r", 3, [step(4)], fence=lease_b)
    b.renew(lease_b)
    b.finish(lease_b, "done", "B")
    for act in (lambda: b.finish(lease_b, "done", "B again"), lambda: b.append("r", 4, [step(5)], fence=lease_b)):
        with pytest.raises(LeaseLost, match="finished"):
            act()
    [job] = a.jobs()
    assert (job.status, job.token, job.claims, job.outcome, job.owner) == ("done", 2, 2, "B", None)
    assert a.claim("C", ["counter"], 10) is None and a.pending() == 0
    a.close()
    b.close()


def test_a_claim_cannot_slip_between_the_fence_check_and_the_commit(pg_url: str, schema: str) -> None:
    """The fenced write holds the job row until it commits: a claimant skips the run meanwhile."""
    table = load_table(COUNTER)
    b = PostgresStore(pg_url, schema)
    claims: list[Lease | None] = []

    def at_commit(phase: str, label: str) -> None:
        if phase == "before":
            time.sleep(0.3)
            thread = threading.Thread(target=lambda: claims.append(b.claim("B", ["counter"], 10)))
            thread.start()
            thread.join(5)
    a = PostgresStore(pg_url, schema, on_boundary=at_commit)
    submit(a, table, "r", plain("Stop"))
    lease = a.claim("A", ["counter"], 0.2)
    assert lease is not None
    a.append("r", 1, [step(2)], fence=lease)
    assert claims == [None]
    assert a.version("r") == 2
    taken = b.claim("B", ["counter"], 10)
    assert taken is not None and taken.token == 2
    a.close()
    b.close()


# -- workers -------------------------------------------------------------------------------

class SlowNote:
    """A tool whose worker freezes past its lease (heartbeat included) on its first call while
    another worker claims the run (and dies at once), so its result is refused: the token moved on
    when it tries to record it."""

    def __init__(self, ledger: MemoryLedger, pg_url: str, schema: str) -> None:
        self.ledger = ledger
        self.pg_url = pg_url
        self.schema = schema

    def run(self, call: EffectCall) -> JSON:
        self.ledger.execute(call.key)
        with psycopg.connect(self.pg_url, autocommit=True) as conn:
            conn.execute(sql.SQL("UPDATE {}.jobs SET token = token + 1, "
                                 "expires_at = clock_timestamp() - interval '1 second' "
                                 "WHERE run_id = %s").format(sql.Identifier(self.schema)), (call.run_id,))
        return {"receipt": call.key}

    def status(self, call: EffectCall) -> StatusReply | None:
        return ("done", {"receipt": call.key}) if self.ledger.executions()[call.key] else ("not-run", None)


def test_worker_outcomes_done_blocked_failed_and_lost(pg_url: str, schema: str) -> None:
    table = load_table(COUNTER, {"max": 2})
    store = PostgresStore(pg_url, schema)
    ledger = MemoryLedger()
    submit(store, table, "ok", plain("Tick", "Tick", "Stop"))
    submit(store, table, "illegal", plain("Tick", "Tick", "Tick"))
    submit(store, table, "slow", plain("Tick", "Tick", "Stop"))
    worker = Worker(store, {"counter": table}, {"counter": ledger_tools(table, ledger, True)}, "w", 0.5)
    assert worker.serve_one() and worker.serve_one()
    slow = Worker(store, {"counter": table}, {"counter": {"Note": SlowNote(ledger, pg_url, schema)}}, "slow", 0.5)
    assert slow.serve_one()
    assert (slow.tally.lost, slow.tally.claimed) == (1, 1)
    assert {j.run_id: j.status for j in store.jobs()} == {"ok": "done", "illegal": "blocked", "slow": "queued"}
    assert "illegal event Tick" in next(j.outcome or "" for j in store.jobs() if j.run_id == "illegal")
    assert ledger.executions() == {"ok/2/0": 1, "ok/5/0": 1, "illegal/2/0": 1, "illegal/5/0": 1, "slow/2/0": 1}
    time.sleep(0.5)
    assert worker.serve_one() and not worker.serve_one()
    assert {j.run_id: j.status for j in store.jobs()}["slow"] == "done"
    kinds = [r.kind for r in store.records("slow")]
    assert kinds[:5] == ["created", "step", "started", "unknown", "completed"]
    assert sorted(k for k in ledger.executions() if k.startswith("slow/")) == ["slow/2/0", "slow/6/0"]
    assert set(ledger.executions().values()) == {1}
    submit(store, table, "broken", plain("Stop"))
    lease = store.claim("x", ["counter"], 10)
    assert lease is not None
    store.append("broken", 1, [Entry("completed", {"key": "nope"}, 0.0)], fence=lease)
    store.finish(lease, "done", "")
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(sql.SQL("UPDATE {}.jobs SET status = 'queued' WHERE run_id = 'broken'").format(
            sql.Identifier(schema)))
    assert worker.serve_one()
    failed = next(j for j in store.jobs() if j.run_id == "broken")
    assert failed.status == "failed" and "ReplayError" in (failed.outcome or "")
    assert worker.tally.done == 2 and worker.tally.blocked == 1 and worker.tally.failed == 1
    store.close()


def test_cli_submit_worker_jobs(pg_url: str, schema: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"{pg_url}?schema={schema}"
    script = tmp_path / "script.yaml"
    script.write_text("events: [Tick, {Tick: {}}, Stop]\n")
    assert main(["submit", str(COUNTER), "--store", url, "--script", str(script), "--count", "3",
                 "--run-id", "c"]) == 0
    assert capsys.readouterr().out.split() == ["c-1", "c-2", "c-3"]
    assert main(["submit", str(COUNTER), "--store", url, "--script", str(script), "--run-id", "c-1"]) == 2
    assert "already exists" in capsys.readouterr().err
    ledger = tmp_path / "effects"
    assert main(["worker", str(COUNTER), "--store", url, "--ledger", str(ledger), "--concurrency", "2",
                 "--exit-when-idle", "--snapshot-every", "2"]) == 0
    assert "3 claimed, 3 done" in capsys.readouterr().out
    assert len(ledger.read_text().split()) == 6
    assert main(["jobs", "--store", url, "--json"]) == 0
    report = enveloped(json.loads(capsys.readouterr().out), "jobs")
    assert report["counts"] == {"done": 3}
    assert {j["outcome"] for j in report["jobs"]} == {"Stopped {'n': 2}"}


@pytest.mark.parametrize("argv, message", [
    (["worker", str(COUNTER), "--store", "sqlite:///j.db", "--ledger", "x"], "workers share a PostgreSQL"),
    (["worker", str(COUNTER), "--store", "postgresql://u@h/d"], "no tool for the external action(s) Note"),
    (["worker", str(COUNTER), "--store", "postgresql://u@h/d", "--concurrency", "0"], "--concurrency"),
    (["worker", str(COUNTER), "--store", "postgresql://u@h/d", "--ledger", "x", "--poll", "nan"], "--poll positive"),
    (["worker", str(COUNTER), "--store", "postgresql://u@h/d", "--ledger", "x", "--lease", "nan"], "--lease and"),
    (["worker", str(COUNTER), "--store", "postgresql://u@h/d", "--ledger", "x", "--lease", "inf"], "--lease and"),
    (["worker", str(COUNTER), "--store", "postgresql://u@h/d", "--ledger", "x", "--poll", "inf"], "--poll positive"),
    (["worker", str(COUNTER), "--store", "postgresql://u@h/d", "--tools", "nosuchmodule:f"], "--tools"),
    (["submit", str(COUNTER), "--store", "postgresql://u@h/d", "--script", "/nonexistent"], "cannot read"),
])
def test_cli_bad_input_exits_2(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_scripts_are_checked_against_the_table(pg_url: str, schema: str, tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    url = f"{pg_url}?schema={schema}"
    for text, message in (("events: [Jump]\n", "no event 'Jump'"), ("{a: 1}\n", "unknown key 'a'"),
                          ("events: [{Tick: {x: 1}}]\n", "no parameter 'x'"),
                          ("inputs: [hi]\nreplies: []\n", "event scripts")):
        script = tmp_path / "s.yaml"
        script.write_text(text)
        assert main(["submit", str(COUNTER), "--store", url, "--script", str(script)]) == 2
        assert message in capsys.readouterr().err
    assert Options().snapshot_every == 0


def test_a_tool_never_runs_when_its_lease_cannot_be_renewed() -> None:
    ledger = MemoryLedger()
    table = load_table(COUNTER)
    [tool] = ledger_tools(table, ledger, False).values()
    lease = Lease("r", "counter", 3, "w", 10.0)

    def unreachable(lease: Lease) -> None:
        raise OSError("connection reset")
    guarded = GuardedTool(tool, lease, unreachable)
    with pytest.raises(LeaseLost, match="could not renew it: connection reset"):
        guarded.run(EffectCall("r", "Note", "r/2/0", 1))
    assert ledger.executions() == {}
    renewed: list[int] = []
    GuardedTool(tool, lease, lambda held: renewed.append(held.token)).run(EffectCall("r", "Note", "r/2/0", 1))
    assert renewed == [3] and ledger.executions() == {"r/2/0": 1}


def test_a_durable_run_and_its_journal_take_store_urls(tmp_path: Path, pg_url: str, schema: str,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    demo = Path(__file__).parent.parent.parent / "examples" / "loom-demo.yaml"
    loom = Path(__file__).parent.parent.parent / "spec" / "loom-agent.yaml"
    for url in (f"sqlite:///{tmp_path}/run.db", f"{pg_url}{'&' if '?' in pg_url else '?'}schema={schema}"):
        assert main(["run", str(loom), "--script", str(demo), "--store", url, "--workdir", str(tmp_path)]) == 0
        capsys.readouterr()
        assert main(["journal", "--store", url, "--json"]) == 0
        [run] = json.loads(capsys.readouterr().out)["runs"]
        assert run["current"]["state"] == "ShuttingDown" and len(run["records"]) > 50
    assert main(["journal", "--store", f"sqlite:///{tmp_path}/missing.db"]) == 2


class _DyingConnection:
    """A connection the server ends right after it was opened (its postmaster killed)."""

    closed = False

    def execute(self, *args: object) -> None:
        raise psycopg.OperationalError("consuming input failed: server closed the connection unexpectedly")

    def close(self) -> None:
        self.closed = True


def test_a_server_that_dies_while_the_store_is_set_up_is_a_journal_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """server-kill chaos campaign: a worker connected as the server was killed; the next statement
    of the store's set-up raised psycopg's own error, and the worker exited 1 with a traceback
    instead of waiting for the server as it does when the connection is refused."""
    connection = _DyingConnection()
    monkeypatch.setattr(psycopg, "connect", lambda *args, **kwargs: connection)
    with pytest.raises(JournalError, match=r"^cannot connect to the PostgreSQL store: consuming input failed: server "
                                           r"closed the connection unexpectedly$"):
        PostgresStore("postgresql://x@127.0.0.1:1/db", "s")
    assert connection.closed
