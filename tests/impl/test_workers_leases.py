"""Leases under stalls and long tools (issue 13, defects 3, 4, 5, 9): a live worker keeps its
run (heartbeat while a tool runs), a stalled one is fenced out (its late tool call and its
result refused), a run whose effect keeps outliving the lease becomes a decision instead of a
loop, a transaction left open by a stalled worker does not lock the run forever, and a
worker's blocked run is decided through the queue (the real tools rerun it)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from agentfsm.impl.durable.ledger import FileLedger, LedgerTool, MemoryLedger, ledger_tools
from agentfsm.impl.durable.run import DurableRun, EffectCall, Options
from agentfsm.impl.stores import postgres
from agentfsm.impl.stores.journal import UNKNOWN
from agentfsm.impl.stores.leases import FencedStore, Lease, LeaseLost
from agentfsm.impl.stores.memory import Crash, MemoryStore
from agentfsm.impl.stores.postgres import PostgresStore
from agentfsm.impl.stores.sqlite import SqliteStore
from agentfsm.impl.workers.worker import submit
from agentfsm.spec import load_table
from pg_support import fresh_schema

COUNTER = Path(__file__).parent.parent / "tables" / "counter.yaml"
AGENTFSM = str(Path(sys.executable).parent / "agentfsm")
TESTS = str(Path(__file__).parent.parent)


def worker_argv(url: str, lease: str, *extra: str) -> list[str]:
    return [AGENTFSM, "worker", str(COUNTER), "--store", url, "--tools", "kill_tools:tools", "--lease", lease,
            "--poll", "0.05", "--exit-when-idle", *extra]


def test_a_tool_longer_than_the_lease_keeps_its_run(pg_url: str, tmp_path: Path) -> None:
    """Defect 3: a 2.5 s tool under a 1 s lease was taken over at every claim."""
    ledger = tmp_path / "effects"
    env = {**os.environ, "PYTHONPATH": TESTS, "AGENTFSM_TEST_LEDGER": str(ledger), "AGENTFSM_TEST_TOOL_DELAY": "2.5"}
    with fresh_schema(pg_url) as schema:
        url = f"{pg_url}?schema={schema}"
        store = PostgresStore(pg_url, schema)
        for run_id in ("a", "b"):
            submit(store, load_table(COUNTER), run_id, [("Tick", {}), ("Stop", {})])
        workers = [subprocess.Popen(worker_argv(url, "1"), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                   for _ in range(2)]
        for proc in workers:
            _, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err
        jobs = {j.run_id: (j.status, j.claims) for j in store.jobs()}
        assert jobs == {"a": ("done", 1), "b": ("done", 1)}, "claimed once each: the heartbeat kept the lease"
        assert FileLedger(ledger).executions() == {"a/2/0": 1, "b/2/0": 1}
        assert all(UNKNOWN not in [r.kind for r in store.records(run)] for run in ("a", "b"))
        store.close()


def test_a_tool_holding_the_interpreter_lock_longer_than_the_lease_keeps_its_run(pg_url: str,
                                                                                   tmp_path: Path) -> None:
    """Issue 25, defect 4: the heartbeat was a thread of the worker's interpreter, and a tool in a C
    call that holds the GIL starved it: an idempotent tool ran to completion at every claim (its
    result refused each time) until the run was blocked with a false "it never completed"."""
    path = tmp_path / "counter.yaml"
    path.write_text(COUNTER.read_text().replace("idempotent: false", "idempotent: true"))
    ledger = tmp_path / "effects"
    env = {**os.environ, "PYTHONPATH": TESTS, "AGENTFSM_TEST_LEDGER": str(ledger), "AGENTFSM_TEST_TOOL_DELAY": "3",
           "AGENTFSM_TEST_TOOL_GIL": "1"}
    with fresh_schema(pg_url) as schema:
        url = f"{pg_url}?schema={schema}"
        store = PostgresStore(pg_url, schema)
        submit(store, load_table(path), "a", [("Tick", {}), ("Stop", {})])
        argv = [AGENTFSM, "worker", str(path), "--store", url, "--tools", "kill_tools:tools", "--lease", "1",
                "--poll", "0.05", "--exit-when-idle"]
        worker = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
        assert worker.returncode == 0, worker.stderr
        assert [(j.status, j.claims) for j in store.jobs()] == [("done", 1)], worker.stderr
        assert FileLedger(ledger).executions() == {"a/2/0": 1}
        store.close()


def test_an_effect_that_keeps_outliving_the_lease_becomes_a_decision(tmp_path: Path) -> None:
    """Defect 3: an idempotent effect whose owner keeps dying mid-call was retried forever."""
    path = tmp_path / "counter.yaml"
    path.write_text(COUNTER.read_text().replace("idempotent: false", "idempotent: true"))
    table = load_table(path)
    store = MemoryStore()
    calls: list[int] = []

    class Dies(BaseException):
        """The owner dies (or loses its lease) while the tool runs."""

    class DyingTool:
        def run(self, call: EffectCall) -> object:
            calls.append(call.attempt)
            raise Dies()

        def status(self, call: EffectCall) -> None:
            return None
    tools = {"Note": DyingTool()}
    with pytest.raises(Dies):
        DurableRun.create(store, table, "r", tools).deliver("Tick")
    for _ in range(2):
        with pytest.raises(Dies):
            DurableRun.open(store, table, "r", tools, options=Options(max_attempts=3))
    run = DurableRun.open(store, table, "r", tools, options=Options(max_attempts=3))
    assert calls == [1, 2, 3], "retried with its key up to the bound, then left to the user"
    [decision] = run.decisions()
    assert "keeps outliving the lease" in decision.message


def test_not_run_is_trusted_only_once_the_stalled_owner_is_fenced_out(tmp_path: Path) -> None:
    """Defect 4: the new owner's status query said not-run, ran the effect, and the stalled old
    owner then ran it too. Now the status query fences the key at the new owner's token."""
    table = load_table(COUNTER)
    ledger = FileLedger(tmp_path / "effects")
    db = tmp_path / "j.db"
    setup = SqliteStore(db)
    first = setup.acquire("r", "old", 0.3)
    go, started = threading.Event(), threading.Event()
    outcome: list[BaseException] = []

    class Stalling(LedgerTool):
        def run(self, call: EffectCall) -> object:
            started.set()
            go.wait(30)  # the owner stalls between renewing its lease and calling the service
            return super().run(call)

    def old_owner() -> None:
        store = SqliteStore(db)
        run = DurableRun.create(FencedStore(store, first), table, "r", {"Note": Stalling(ledger, False, True)})
        try:
            run.deliver("Tick")
        except LeaseLost as exc:
            outcome.append(exc)
        store.close()
    thread = threading.Thread(target=old_owner)
    thread.start()
    assert started.wait(30)
    time.sleep(0.5)  # the old lease lapses (no heartbeat: the owner is stalled)
    second = setup.acquire("r", "new", 30)
    run = DurableRun.open(FencedStore(setup, second), table, "r", ledger_tools(table, ledger, True))
    assert run.st.effects["r/2/0"].status == "completed"
    go.set()
    thread.join(30)
    assert ledger.executions() == {"r/2/0": 1}, "the stalled owner's late call was refused"
    assert outcome and isinstance(outcome[0], LeaseLost), "and its outcome was not recorded"
    setup.close()


def test_a_non_fencing_not_run_is_not_trusted() -> None:
    """A status query that does not fence the key cannot rule out a stalled owner acting later:
    its not-run is no answer, and a non-idempotent effect becomes a decision."""
    table = load_table(COUNTER)
    ledger = MemoryLedger()

    class Unfenced(LedgerTool):
        fences = False
    store = MemoryStore()
    store.arm(6)  # boundaries: created 1-2, step 3-4, started 5-6: the process dies once it is durable
    with pytest.raises(Crash):
        DurableRun.create(store, table, "r", {"Note": Unfenced(ledger, False, True)}).deliver("Tick")
    store.arm(None)
    run = DurableRun.open(store, table, "r", {"Note": Unfenced(ledger, False, True)})
    assert run.st.effects["r/2/0"].status == "unknown" and ledger.executions() == {}
    assert [d.kind for d in run.decisions()] == ["unknown-effect"]


def test_a_worker_stalled_in_a_transaction_does_not_lock_the_run(pg_url: str, monkeypatch: pytest.MonkeyPatch) \
        -> None:
    """Defect 5: a worker stalled inside a write transaction kept the run locked until it woke."""
    monkeypatch.setattr(postgres, "IDLE_IN_TRANSACTION", 1.0)
    with fresh_schema(pg_url) as schema:
        a, b = PostgresStore(pg_url, schema), PostgresStore(pg_url, schema)
        submit(a, load_table(COUNTER), "r", [("Stop", {})])
        lease = a.claim("a", ["counter"], 0.5)
        assert lease is not None
        wake = threading.Event()

        def stalled() -> None:
            try:
                with a._conn.transaction():
                    a._check_fence(lease)  # the job row is locked until commit
                    wake.wait(30)
            except Exception:  # the server ended the idle session: the commit fails
                pass
        thread = threading.Thread(target=stalled)
        thread.start()
        deadline = time.monotonic() + 20
        taken: Lease | None = None
        while taken is None and time.monotonic() < deadline:
            time.sleep(0.2)
            taken = b.claim("b", ["counter"], 30)
        wake.set()
        thread.join(30)
        assert taken is not None and taken.token == lease.token + 1
        b.close()
        a.close()


def test_deciding_a_workers_blocked_run_goes_through_the_queue(pg_url: str, tmp_path: Path) -> None:
    """Defect 9: `run --resume --decide rerun` on a worker's run used the command's stub tool."""
    ledger = tmp_path / "effects"
    env = {**os.environ, "PYTHONPATH": TESTS, "AGENTFSM_TEST_LEDGER": str(ledger)}
    with fresh_schema(pg_url) as schema:
        url = f"{pg_url}?schema={schema}"
        store = PostgresStore(pg_url, schema)
        submit(store, load_table(COUNTER), "r", [("Tick", {}), ("Stop", {})])
        first = subprocess.Popen(worker_argv(url, "1"), env={**env, "AGENTFSM_TEST_TOOL_DELAY": "30"})
        deadline = time.monotonic() + 30
        while not (ledger.exists() and ledger.read_text()) and time.monotonic() < deadline:
            time.sleep(0.05)
        first.kill()
        first.wait()
        # the next worker has no status query: the non-idempotent effect is a decision
        blocked = subprocess.run([AGENTFSM, "worker", str(COUNTER), "--store", url, "--ledger", str(ledger),
                                  "--lease", "1", "--poll", "0.05", "--exit-when-idle"],
                                 capture_output=True, text=True, timeout=60)
        assert blocked.returncode == 0, blocked.stderr
        [job] = store.jobs()
        assert job.status == "blocked"
        resumed = subprocess.run([AGENTFSM, "run", str(COUNTER), "--script", str(_script(tmp_path)), "--store", url,
                                  "--run-id", "r", "--resume", "--decide", "r/2/0=rerun"],
                                 capture_output=True, text=True, timeout=60)
        assert resumed.returncode == 2 and "served by workers" in resumed.stderr, resumed.stdout + resumed.stderr
        decided = subprocess.run([AGENTFSM, "jobs", "--store", url, "--run", "r", "--decide", "r/2/0=rerun",
                                  "--table", str(COUNTER)], capture_output=True, text=True, timeout=60)
        assert decided.returncode == 0 and "queued again" in decided.stdout, decided.stderr
        again = subprocess.run(worker_argv(url, "5"), env=env, capture_output=True, text=True, timeout=60)
        assert again.returncode == 0, again.stderr
        [job] = store.jobs()
        assert job.status == "done", job
        assert FileLedger(ledger).executions() == {"r/2/0": 2}, "rerun on the user's word, by the real tool"
        kinds = [r.kind for r in store.records("r")]
        assert kinds[:4] == ["created", "step", "started", "unknown"]
        at = kinds.index("decided")
        assert kinds[at:] == ["decided", "started", "completed"]
        store.close()


def _script(tmp_path: Path) -> Path:
    path = tmp_path / "events.yaml"
    path.write_text("events: [Tick, Stop]\n")
    return path


class Closable:
    def close(self) -> None:
        pass


@pytest.mark.parametrize("reason", [
    "Connection refused",
    # connected while the server was being killed (server-kill, CI): its backend ended at once
    "FATAL:  terminating connection due to unexpected postmaster exit",
    "server closed the connection unexpectedly",
])
def test_a_worker_started_while_its_server_is_down_waits_for_it(reason: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Chaos campaign server-kill: workers started while the server restarted exited 2 at once,
    and every run stayed queued. A starting worker waits for a refused server (bounded)."""
    from agentfsm.cli import workers as commands
    from agentfsm.cli.exits import BadInput

    attempts: list[str] = []

    def refused_twice(url: str) -> Closable:
        attempts.append(url)
        if len(attempts) < 3:
            raise BadInput(f"cannot connect to the PostgreSQL store: connection to {url} failed: {reason}")
        return Closable()
    monkeypatch.setattr(commands, "_open", refused_twice)
    monkeypatch.setattr(time, "sleep", lambda seconds: None)
    commands._wait_for_store("postgresql://x@127.0.0.1:1/db", 60.0)
    assert len(attempts) == 3

    def refused(url: str) -> Closable:
        raise BadInput("cannot connect to the PostgreSQL store: Connection refused")
    monkeypatch.setattr(commands, "_open", refused)
    with pytest.raises(BadInput, match="Connection refused"):
        commands._wait_for_store("postgresql://x@127.0.0.1:1/db", 0.0)  # the bound spent: reported


def test_a_worker_reports_a_store_it_cannot_use_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from agentfsm.cli import workers as commands
    from agentfsm.cli.exits import BadInput

    def no_retry(seconds: float) -> None:
        raise AssertionError("a failure other than an unavailable server is not waited out")

    def denied(url: str) -> Closable:
        raise BadInput('cannot connect to the PostgreSQL store: password authentication failed for user "x"')
    monkeypatch.setattr(commands, "_open", denied)
    monkeypatch.setattr(time, "sleep", no_retry)
    with pytest.raises(BadInput, match="password authentication failed"):
        commands._wait_for_store("postgresql://x@127.0.0.1:1/db", 60.0)
