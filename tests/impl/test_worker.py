"""A worker's own rules (impl/workers/worker.py), one test a rule, against a real queue
(PostgreSQL) where the queue matters and stand-ins where only the worker's choices do: the
script a run is queued with, the renewal before a tool, the heartbeats while a run is served,
each run's outcome (done, blocked, failed, a lost lease, a store's own trouble), the count of
what was done, the renewal between events, and the threads that serve until stopped or idle.
A bug here is a step lost, an event delivered twice, or a run served by two workers."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import cast

import psycopg
import pytest
from agentfsm.impl.durable.ledger import MemoryLedger, ledger_tools
from agentfsm.impl.durable.protocol_log import ProtocolLog
from agentfsm.impl.durable.run import DurableRun, EffectCall, Options, StatusReply
from agentfsm.impl.stores import leases as leases_module
from agentfsm.impl.stores.journal import CREATED, JSON
from agentfsm.impl.stores.leases import FencedStore, Lease, LeaseLost, LeasingStore
from agentfsm.impl.stores.postgres import PostgresStore
from agentfsm.impl.workers.worker import GuardedTool, Tally, Worker, check_events, serve, submit
from agentfsm.spec import load_table
from agentfsm.spec.expr import Value
from agentfsm.spec.model import Table
from pg_support import fresh_schema
from psycopg import sql

COUNTER = Path(__file__).parent.parent / "tables" / "counter.yaml"


@pytest.fixture
def table() -> Table:
    return load_table(COUNTER, {"max": 2})


@pytest.fixture
def store(pg_url: str) -> Iterator[PostgresStore]:
    with fresh_schema(pg_url) as schema:
        opened = PostgresStore(pg_url, schema)
        yield opened
        opened.close()


def plain(*names: str) -> list[tuple[str, dict[str, Value]]]:
    return [(name, {}) for name in names]


def heartbeats(run_id: str) -> int:
    return sum(t.name == f"heartbeat {run_id}" for t in threading.enumerate())


def test_an_event_script_is_checked_and_its_errors_count_events_from_1(table: Table) -> None:
    assert check_events(table, [("Tick", {}), ("Stop", {})]) == [{"event": "Tick", "params": {}},
                                                                 {"event": "Stop", "params": {}}]
    with pytest.raises(ValueError, match=r"^event 2: counter has no event 'Jump'$"):
        check_events(table, plain("Tick", "Jump"))
    with pytest.raises(ValueError, match=r"^event 1: .*'x'"):
        check_events(table, [("Tick", {"x": 1})])


def test_a_submitted_run_is_created_in_its_initial_configuration_and_queued_with_its_script(
        table: Table, store: PostgresStore) -> None:
    before = time.time()
    submit(store, table, "now", plain("Tick"))
    submit(store, table, "then", plain("Tick", "Stop"), now=12.5)
    [created] = store.records("then")
    assert (created.kind, created.time) == (CREATED, 12.5)
    assert created.body["machine"] == "counter"
    assert cast(dict[str, JSON], created.body["config"])["vars"] == {"n": 0}
    assert before <= store.records("now")[0].time <= time.time()
    assert [(j.run_id, j.machine, j.status) for j in store.jobs()] == [("now", "counter", "queued"),
                                                                        ("then", "counter", "queued")]
    lease = store.claim("w", ["counter"], 30.0)
    assert lease is not None and lease.script == [{"event": "Tick", "params": {}}]
    with pytest.raises(ValueError):
        submit(store, table, "bad", plain("Jump"))
    assert "bad" not in store.runs()


class Recorded:
    """A tool that notes each call and the heartbeats of its run while it runs."""

    fences = True

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []

    def run(self, call: EffectCall) -> JSON:
        self.calls.append((call.key, heartbeats(call.run_id)))
        return {"receipt": call.key}

    def status(self, call: EffectCall) -> StatusReply | None:
        return ("done", {"receipt": call.key})


class Unfenced(Recorded):
    """A tool that says nothing of fences."""

    def __getattribute__(self, name: str) -> object:
        if name == "fences":
            raise AttributeError(name)
        return super().__getattribute__(name)


def test_a_guarded_tool_renews_first_and_runs_under_a_heartbeat_unless_told_not_to() -> None:
    lease = Lease("g", "counter", 3, "w", 30.0)
    renewed: list[int] = []
    tool = Recorded()
    call = EffectCall("g", "Note", "g/2/0", 1)
    guarded = GuardedTool(tool, lease, lambda held: renewed.append(held.token))
    assert guarded.run(call) == {"receipt": "g/2/0"}
    assert GuardedTool(tool, lease, lambda held: renewed.append(held.token), heartbeat=False).run(call) == \
        {"receipt": "g/2/0"}
    assert renewed == [3, 3] and tool.calls == [("g/2/0", 1), ("g/2/0", 0)]
    assert guarded.status(call) == ("done", {"receipt": "g/2/0"})
    assert guarded.fences is True
    assert GuardedTool(Unfenced(), lease, lambda held: None).fences is False


def test_a_guarded_tool_whose_lease_cannot_be_renewed_gives_the_run_up() -> None:
    tool = Recorded()

    def unreachable(_: Lease) -> None:
        raise OSError("connection reset")
    with pytest.raises(LeaseLost) as lost:
        GuardedTool(tool, Lease("g", "counter", 3, "w", 30.0), unreachable).run(EffectCall("g", "Note", "g/2/0", 1))
    assert (lost.value.run_id, lost.value.token) == ("g", 3)
    assert str(lost.value) == "run 'g': lease 3 lost: could not renew it: connection reset"
    assert tool.calls == []


def test_a_tally_starts_at_nothing_and_sums_what_it_is_told() -> None:
    tally = Tally()
    assert tally.summary() == ("0 claimed, 0 done, 0 blocked, 0 failed, 0 leases lost, 0 abandoned, "
                               "0 events delivered")
    tally.add(claimed=2, events=3)
    tally.add(claimed=1, done=1, blocked=1, failed=1, lost=1, abandoned=1)
    assert tally.summary() == ("3 claimed, 1 done, 1 blocked, 1 failed, 1 leases lost, 1 abandoned, "
                               "3 events delivered")


def worker(store: LeasingStore, table: Table, tool: object = None, **settings: object) -> Worker:
    tools = {"Note": tool} if tool is not None else ledger_tools(table, MemoryLedger(), True)
    return Worker(store, {"counter": table}, {"counter": tools}, "w", **settings)  # type: ignore[arg-type,dict-item]


def test_a_worker_serves_a_run_to_its_end_and_says_so(table: Table, store: PostgresStore, tmp_path: Path) -> None:
    lines: list[str] = []
    served = worker(store, table, log=lines.append)
    served.protocol = ProtocolLog(tmp_path / "protocol.jsonl", "w")
    assert served.serve_one() is False, "nothing queued"
    submit(store, table, "ok", plain("Tick", "Tick", "Stop"))
    assert served.serve_one() is True
    assert [(j.run_id, j.status, j.outcome) for j in store.jobs()] == [("ok", "done", "Stopped {'n': 2}")]
    assert lines == ["w: run ok done: Stopped {'n': 2}"]
    assert (served.tally.claimed, served.tally.done, served.tally.events) == (1, 1, 3)
    served.protocol.close()
    ops = [json.loads(line)["op"] for line in (tmp_path / "protocol.jsonl").read_text().splitlines()]
    assert ops[0] == "claim" and ops[-1] == "release"


def test_a_run_left_with_a_decision_is_blocked_and_says_which(table: Table, store: PostgresStore) -> None:
    submit(store, table, "illegal", plain("Tick", "Tick", "Tick"))
    served = worker(store, table)
    assert served.serve_one()
    [job] = store.jobs()
    assert job.status == "blocked" and "illegal event Tick" in (job.outcome or "")
    assert (served.tally.blocked, served.tally.done) == (1, 0)


def test_a_run_whose_serving_raises_is_failed_with_the_error(table: Table, store: PostgresStore) -> None:
    submit(store, table, "broken", plain("Tick"))
    warned: list[str] = []
    served = Worker(store, {"counter": table}, {}, "w", warn=warned.append)   # no tools for its machine
    assert served.serve_one()
    [job] = store.jobs()
    assert (job.status, job.outcome) == ("failed", "KeyError: 'counter'")
    assert warned == ["w: run broken failed: KeyError: 'counter'"]
    assert (served.tally.failed, served.tally.claimed, served.tally.done) == (1, 1, 0)


def test_a_stores_own_trouble_leaves_the_run_to_its_lease(table: Table, store: PostgresStore) -> None:
    submit(store, table, "r", plain("Tick"))
    served = Worker(store, {"counter": table}, {}, "w")
    store.transient_errors = (KeyError,)   # the missing tools now read as the store's trouble
    with pytest.raises(KeyError):
        served.serve_one()
    assert [j.status for j in store.jobs()] == ["queued"] and served.tally.failed == 0


def expire(pg_url: str, store: PostgresStore, run_id: str, claim: bool = True) -> None:
    """Another worker took the run (the token moved on) and its lease has lapsed."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(sql.SQL("UPDATE {}.jobs SET token = token + %s, expires_at = clock_timestamp() - "
                             "interval '1 second' WHERE run_id = %s").format(sql.Identifier(str(store.schema))),
                     (int(claim), run_id))


def test_a_worker_whose_lease_was_taken_stops_and_counts_it_lost(table: Table, store: PostgresStore,
                                                                 pg_url: str) -> None:
    submit(store, table, "r", plain("Tick", "Stop"))
    warned: list[str] = []

    class TakenOver(Recorded):
        def run(self, call: EffectCall) -> JSON:
            expire(pg_url, store, call.run_id)
            return super().run(call)
    served = worker(store, table, TakenOver(), warn=warned.append)
    assert served.serve_one() is True
    assert (served.tally.lost, served.tally.claimed, served.tally.done, served.tally.failed) == (1, 1, 0, 0)
    assert len(warned) == 1 and warned[0].startswith("w: run 'r': lease 1 lost")
    assert [j.status for j in store.jobs()] == ["queued"]


def test_a_failed_run_whose_lease_was_taken_is_counted_lost_not_failed(table: Table, store: PostgresStore,
                                                                       pg_url: str) -> None:
    submit(store, table, "r", plain("Tick"))
    served = Worker(store, {"counter": table}, {}, "w")
    real = store.claim

    def claim_and_lose(owner: str, machines: Sequence[str], seconds: float) -> Lease | None:
        lease = real(owner, machines, seconds)
        expire(pg_url, store, "r")
        return lease
    store.claim = claim_and_lose  # type: ignore[method-assign]
    assert served.serve_one() is True
    assert (served.tally.lost, served.tally.failed) == (1, 0)


def test_a_recovered_run_delivers_the_rest_of_its_script_and_counts_only_that(table: Table, store: PostgresStore,
                                                                             pg_url: str) -> None:
    submit(store, table, "r", plain("Tick", "Stop"))
    first = store.claim("gone", ["counter"], 30.0)
    assert first is not None
    tools = ledger_tools(table, MemoryLedger(), True)
    DurableRun.open(FencedStore(store, first), table, "r", tools).deliver("Tick", event_id="script-1")
    expire(pg_url, store, "r", claim=False)
    served = worker(store, table)
    assert served.serve_one()
    assert served.tally.events == 1, "the script's first event was delivered before, under its id"
    assert [(j.status, j.outcome) for j in store.jobs()] == [("done", "Stopped {'n': 1}")]


def test_an_events_parameters_reach_the_run(store: PostgresStore) -> None:
    wide = load_table(Path(__file__).parent.parent / "tables" / "wide-counters.yaml")
    submit(store, wide, "r", [("Mode", {"m": 2}), ("Up", {})])
    served = Worker(store, {"wide_counters": wide}, {"wide_counters": {}}, "w")
    assert served.serve_one()
    [job] = store.jobs()
    assert (job.status, job.outcome) == ("done", "Running {'a': 1, 'b': 0, 'c': 0, 'd': 2, 'lit': False}")


def test_a_lease_more_than_half_spent_is_renewed_before_each_event(monkeypatch: pytest.MonkeyPatch, table: Table,
                                                                   store: PostgresStore) -> None:
    clock = Clock()
    clock.now = 1e12   # every lease's deadline is long past by this clock
    monkeypatch.setattr(leases_module, "time", clock)
    submit(store, table, "r", plain("Tick", "Stop"))
    renewed: list[int] = []
    real = store.renew

    def renew(lease: Lease) -> None:
        renewed.append(lease.token)
        real(lease)
    store.renew = renew  # type: ignore[method-assign]
    served = worker(store, table)
    assert served.serve_one()
    assert renewed == [1, 1, 1], "before each of the two events, and before the tool"
    assert [j.status for j in store.jobs()] == ["done"]


class Clock:
    """Stands in for ``leases``' time: a lease's remaining time reads this clock."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return self.now


def test_a_lease_is_renewed_between_events_once_half_of_it_is_spent(monkeypatch: pytest.MonkeyPatch,
                                                                     table: Table) -> None:
    clock = Clock()
    monkeypatch.setattr(leases_module, "time", clock)
    renewed: list[float] = []

    class Renewing:
        def renew(self, lease: Lease) -> None:
            renewed.append(lease.remaining())
    kept = worker(cast(LeasingStore, Renewing()), table)
    for left in (20.0, 15.0, 14.9, 0.0):
        kept._keep(Lease("r", "counter", 1, "w", 30.0, deadline=clock.now + left))
    assert renewed == [14.9, 0.0]


class Beat:
    """A second connection's renewals, counted."""

    def __init__(self, store: PostgresStore) -> None:
        self.store = store
        self.renewals = 0
        self.closed = False

    def renew(self, lease: Lease) -> None:
        self.renewals += 1
        self.store.renew(lease)

    def close(self) -> None:
        self.closed = True


def test_a_worker_with_a_second_connection_beats_for_the_whole_run_and_only_there(
        table: Table, store: PostgresStore, pg_url: str) -> None:
    submit(store, table, "r", plain("Tick", "Stop"))
    tool = Recorded()
    beat = Beat(PostgresStore(pg_url, store.schema))
    served = worker(store, table, tool, beat=beat)
    assert served.serve_one()
    beat.store.close()
    assert [j.status for j in store.jobs()] == ["done"]
    assert tool.calls == [("r/2/0", 1)], "one heartbeat, the second connection's"
    assert heartbeats("r") == 0


class Holding:
    """Stands in for a heartbeat process: which leases it holds, and when."""

    def __init__(self) -> None:
        self.held: list[tuple[str, str]] = []
        self.closed = False

    @contextmanager
    def holding(self, lease: Lease) -> Iterator[None]:
        self.held.append(("hold", lease.run_id))
        yield
        self.held.append(("drop", lease.run_id))

    def close(self) -> None:
        self.closed = True


def test_a_heartbeat_process_holds_the_lease_while_the_run_is_served(table: Table, store: PostgresStore) -> None:
    submit(store, table, "r", plain("Tick", "Stop"))
    beats = Holding()

    class Seen(Recorded):
        def run(self, call: EffectCall) -> JSON:
            assert beats.held == [("hold", "r")]
            return super().run(call)
    served = worker(store, table, Seen(), beats=beats)
    assert served.serve_one()
    assert beats.held == [("hold", "r"), ("drop", "r")]
    assert [j.status for j in store.jobs()] == ["done"]


class Closing:
    """A connection that records its closing, or fails it."""

    def __init__(self, fails: bool = False) -> None:
        self.fails = fails
        self.closed = False

    def close(self) -> None:
        self.closed = True
        if self.fails:
            raise OSError("connection already broken")


def test_closing_a_worker_closes_every_connection_and_quietly_skips_a_broken_one(
        table: Table, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    main, beat, beats = Closing(), Closing(fails=True), Closing()
    closing = worker(cast(LeasingStore, main), table, beat=beat, beats=beats)
    closing.protocol = ProtocolLog(tmp_path / "p.jsonl", "w")
    closing.protocol.note("r", "claim")
    closing.close(quietly=True)
    assert main.closed and beat.closed and beats.closed
    assert capsys.readouterr().err == "closing a broken store connection: connection already broken\n"
    assert closing.protocol._fd is None
    with pytest.raises(OSError, match="connection already broken"):
        worker(cast(LeasingStore, Closing(fails=True)), table).close()
    worker(cast(LeasingStore, Closing()), table).close()


class Stop:
    """Stands in for ``serve``'s stop event: each wait records its timeout; set after ``waits`` of them."""

    def __init__(self, waits: int) -> None:
        self.timeouts: list[float | None] = []
        self.waits = waits

    def is_set(self) -> bool:
        return len(self.timeouts) >= self.waits

    def wait(self, timeout: float | None = None) -> bool:
        self.timeouts.append(timeout)
        return self.is_set()


class Idle(Closing):
    """A queue with ``queued`` runs that no claim gets (all backing off)."""

    transient_errors = ()

    def __init__(self, queued: int) -> None:
        super().__init__()
        self.queued = queued
        self.claims = 0

    def claim(self, owner: str, machines: list[str], seconds: float) -> Lease | None:
        self.claims += 1
        return None

    def pending(self) -> int:
        return self.queued


@pytest.mark.parametrize(("exit_when_idle", "queued", "waits"), [(True, 0, []), (True, 1, [0.5, 0.5]),
                                                                 (False, 0, [0.5, 0.5])])
def test_a_worker_thread_polls_until_stopped_or_idle(table: Table, exit_when_idle: bool, queued: int,
                                                     waits: list[float]) -> None:
    opened: list[Idle] = []

    def open_store() -> LeasingStore:
        opened.append(Idle(queued))
        return cast(LeasingStore, opened[-1])
    stop = Stop(waits=2)
    tally = serve(open_store, {"counter": table}, lambda t: {}, "w", exit_when_idle=exit_when_idle, poll=0.5,
                  stop=stop)  # type: ignore[arg-type]
    assert stop.timeouts == waits
    assert len(opened) == 2 and opened[0].claims == max(len(waits), 1), "one thread: a store and its beat"
    assert all(s.closed for s in opened) and tally.claimed == 0


def test_a_thread_whose_store_cannot_be_opened_abandons_and_reconnects(table: Table) -> None:
    attempts: list[int] = []
    warned: list[str] = []

    def open_store() -> LeasingStore:
        attempts.append(1)
        if len(attempts) == 1:
            raise OSError("server down")
        return cast(LeasingStore, Idle(0))
    stop = Stop(waits=5)
    tally = serve(open_store, {"counter": table}, lambda t: {}, "w", exit_when_idle=True, poll=0.5,
                  stop=stop, warn=warned.append)  # type: ignore[arg-type]
    assert tally.abandoned == 1 and warned == ["w/0: OSError: server down; reconnecting"]
    assert stop.timeouts == [1.0] and len(attempts) == 3


def test_serve_runs_its_threads_until_the_queue_is_empty(table: Table, store: PostgresStore, pg_url: str,
                                                         tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AGENTFSM_PROTOCOL_LOG", str(tmp_path / "protocol.jsonl"))
    for n in range(3):
        submit(store, table, f"r{n}", plain("Tick", "Stop"))
    ledger = MemoryLedger()
    lines: list[str] = []
    tally = serve(lambda: PostgresStore(pg_url, store.schema), {"counter": table},
                  lambda t: ledger_tools(t, ledger, True), "w", concurrency=2, exit_when_idle=True,
                  options=Options(snapshot_every=1), log=lines.append)
    assert (tally.claimed, tally.done, tally.events) == (3, 3, 6)
    assert [j.status for j in store.jobs()] == ["done"] * 3
    assert {line.split(":")[0] for line in lines} <= {"w/0", "w/1"} and len(lines) == 3
    assert all(store.load(f"r{n}").snapshot is not None for n in range(3)), "the options reached the runs"
    logged = [json.loads(line) for line in (tmp_path / "protocol.jsonl").read_text().splitlines()]
    owners = {record["owner"] for record in logged if "owner" in record}
    assert owners <= {"w/0", "w/1"} and owners
    assert ledger.executions() == {f"r{n}/2/0": 1 for n in range(3)}


def test_a_thread_serves_the_next_queued_run_without_waiting(table: Table, store: PostgresStore, pg_url: str) -> None:
    submit(store, table, "r0", plain("Stop"))
    submit(store, table, "r1", plain("Stop"))
    stop = Stop(waits=1)
    tally = serve(lambda: PostgresStore(pg_url, store.schema), {"counter": table},
                  lambda t: ledger_tools(t, MemoryLedger(), True), "w", poll=0.5,
                  stop=stop)  # type: ignore[arg-type]
    assert tally.done == 2 and stop.timeouts == [0.5], "one wait: once the queue was empty"


class Broken(Idle):
    """A connection that breaks at its first claim."""

    def claim(self, owner: str, machines: list[str], seconds: float) -> Lease | None:
        raise OSError("connection reset")


def test_a_thread_whose_connection_breaks_closes_it_before_reconnecting(table: Table) -> None:
    opened: list[Idle] = []

    def open_store() -> LeasingStore:
        opened.append(Broken(0) if not opened else Idle(0))
        return cast(LeasingStore, opened[-1])
    stop = Stop(waits=5)
    tally = serve(open_store, {"counter": table}, lambda t: {}, "w", exit_when_idle=True, poll=0.5,
                  stop=stop)  # type: ignore[arg-type]
    assert tally.abandoned == 1 and stop.timeouts == [1.0]
    assert len(opened) == 4 and all(s.closed for s in opened), "the broken worker's store and beat too"
