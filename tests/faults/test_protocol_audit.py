"""The durable runtime's protocol log, audited against durable-run-fixed.yaml: a real run's log is
explained; a log whose records show a fencing or exclusivity mistake is not, at that record;
logs damaged on purpose give a verdict, never a traceback."""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from agentfsm.faults.chaos import COUNTER_TABLE, pg_protocol_log
from agentfsm.faults.protocol_audit import Auditor, read_protocol, windows
from agentfsm.impl.durable.ledger import LedgerTool, MemoryLedger
from agentfsm.impl.durable.protocol_log import ENV, LoggedStore, ProtocolLog
from agentfsm.impl.durable.run import DecisionError, DurableRun, EffectCall, StatusReply
from agentfsm.impl.stores.journal import JSON
from agentfsm.impl.stores.leases import Heartbeat, Lease, LeaseLost, OwnedStore, RunHeld
from agentfsm.impl.stores.sqlite import SqliteStore
from agentfsm.spec import load_table
from conftest import ROOT, run_cli
from hypothesis import given, settings
from hypothesis import strategies as st
from pg_support import fresh_schema
from protocol_plants import PLANTS, RUNTIME_PLANTS

AUDITOR = Auditor()
SYSTEM = str(ROOT / "spec/systems/durable-run-fixed.yaml")
KEY = "run/2/0"
SCRIPT = """workdir: .
allow: [run_command]
inputs: []
replies:
  - - {tool_call: {name: run_command, arguments: {argv: [sh, -c, "echo t1 >> ledger"]}}}
    - {tool_call: {name: run_command, arguments: {argv: [sh, -c, "echo t2 >> ledger"]}}}
"""


def claim(owner: str, token: int | None = None) -> dict[str, Any]:
    if token is None:
        return {"run": "run", "owner": owner, "op": "claim", "result": "refused"}
    return {"run": "run", "owner": owner, "op": "claim", "result": "granted", "token": token}


def write(owner: str, what: str, token: int, result: str = "ack", key: str = KEY) -> dict[str, Any]:
    extra = {"attempt": 1} if what == "started" else {}
    return {"run": "run", "owner": owner, "op": "write", "what": what, "key": key, "token": token,
            "result": result, **extra}


# A taken over: A started the effect and stalled past its lease, B claimed and completed it,
# A's completion under its old token was rejected.
TAKEN_OVER = [claim("A", 1), write("A", "started", 1), claim("B", 2), write("B", "completed", 2),
              write("A", "completed", 1, "rejected")]


def test_a_real_run_writes_its_protocol_log_and_the_system_explains_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(ENV, raising=False)
    (tmp_path / "s.yaml").write_text(SCRIPT)
    code, out, err = run_cli(["run", str(ROOT / "spec/tool-call.yaml"), "--script", "s.yaml", "--store", "j.db"],
                             capsys)
    assert code == 0, out + err
    log = tmp_path / "j.db.protocol.jsonl"
    records = [json.loads(line) for line in log.read_text().splitlines()]
    effect = [("write", "started", "sent"), ("write", "started", "ack"), ("call", None, None),
              ("returned", None, "done"), ("write", "completed", "sent"), ("write", "completed", "ack")]
    assert [(r["op"], r.get("what"), r.get("result")) for r in records if r["op"] != "renew"] == [
        ("claim", None, "granted"), *effect, *effect, ("release", None, None)]
    verdict = AUDITOR.audit_log(log)
    assert (verdict.windows, verdict.explained, verdict.unexplained) == (2, 2, [])
    code, out, err = run_cli(["audit", SYSTEM, "j.db.protocol.jsonl"], capsys)
    assert code == 0 and "2 of 2 effects' windows explained" in out, out + err
    code, _, err = run_cli(["run", str(ROOT / "spec/tool-call.yaml"), "--script", "s.yaml", "--store", "j.db",
                            "--resume"], capsys)
    assert code == 0, err
    assert AUDITOR.audit_log(log).explained == 2   # the resumer's claim comes after both effects completed


def test_a_postgresql_run_writes_its_log_in_the_state_folder(
        pg_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(ENV, raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    (tmp_path / "s.yaml").write_text(SCRIPT)
    with fresh_schema(pg_url) as schema:
        code, out, err = run_cli(["run", str(ROOT / "spec/tool-call.yaml"), "--script", "s.yaml", "--store",
                                  f"{pg_url}?schema={schema}"], capsys)
        assert code == 0, out + err
        [log] = (tmp_path / "state" / "agentfsm").glob(f"protocol-{schema}-*.protocol.jsonl")
        assert log == pg_protocol_log(pg_url, schema)
    verdict = AUDITOR.audit_log(log)
    assert (verdict.windows, verdict.explained) == (2, 2), verdict.unexplained
    code, out, err = run_cli(["audit", SYSTEM, str(log), "--json"], capsys)
    assert code == 0 and json.loads(out)["protocol"]["explained"] == 2, out + err


def test_a_takeover_with_a_fenced_out_completion_is_explained() -> None:
    verdict = AUDITOR.audit_records(TAKEN_OVER)
    assert (verdict.windows, verdict.explained, verdict.records) == (1, 1, 6), verdict.unexplained   # with the expiry


@pytest.mark.parametrize(("name", "records", "record"), [
    ("an unfenced journal acks the fenced-out completion",
     [*TAKEN_OVER[:4], write("A", "completed", 1, "ack")], 6),
    ("a second resumer granted while the first owner journals on",
     [claim("A", 1), write("A", "started", 1), claim("B", 2), write("A", "completed", 1)], 5),
    ("a claim that keeps the previous owner's token",
     [claim("A", 1), write("A", "started", 1), claim("B", 1)], 4),
    ("a start under a token no claim granted",
     [claim("A", 1), write("A", "started", 2)], 1),
])
def test_a_protocol_mistake_is_unexplained_at_its_record(name: str, records: list[dict[str, Any]],
                                                          record: int) -> None:
    verdict = AUDITOR.audit_records(records)
    assert verdict.windows == 1 and len(verdict.unexplained) == 1, name
    assert f"record {record} of its window" in verdict.unexplained[0], verdict.unexplained[0]


def test_past_the_system_a_window_is_cut_and_its_prefix_audited() -> None:
    third = [claim("A", 1), write("A", "started", 1), claim("B", 2), claim("C", 3), write("C", "completed", 3)]
    decided = [claim("A", 1), write("A", "started", 1), claim("B", 2),
               {**write("B", "decided", 2), "decision": "failed"}]
    lost = [claim("A", 1), write("A", "started", 1), write("A", "completed", 1), claim("R", 2),
            write("R", "unknown", 2), claim("B", 3), {**write("B", "decided", 3), "decision": "rerun"},
            write("B", "started", 3)]   # the journal lost A's completion; the repair made the effect unknown
    [window, rerun] = windows(lost)
    assert window.cut and len(window.records) == 3 and not rerun.cut, (window, rerun)
    assert AUDITOR.audit_records(lost).explained == 2
    for records in (third, decided):
        [window] = windows(records)
        assert window.cut and len(window.records) == 4   # with the expiry before B's claim
        verdict = AUDITOR.audit_records(records)
        assert (verdict.cut, verdict.explained) == (1, 1), verdict.unexplained


@pytest.mark.parametrize(("damage", "says"), [
    ("dropped", "record 1 of its window"),
    ("swapped", "record 4 of its window"),
    ("foreign", "token=9 is past the system's bounds"),
    ("torn", "not a JSON record"),
    ("fieldless", "needs its 'run', 'op' and 'owner'"),
    ("wordy", "'token' and 'attempt' are integers"),
])
def test_a_damaged_log_gets_a_verdict(damage: str, says: str, tmp_path: Path) -> None:
    lines = [json.dumps(r) for r in TAKEN_OVER]
    if damage == "dropped":
        del lines[0]   # the claim: A writes under a lease no claim granted
    elif damage == "swapped":
        lines[1], lines[2] = lines[2], lines[1]   # B's claim before A's start: A's token was stale then
    elif damage == "foreign":
        lines.insert(3, json.dumps(write("B", "started", 9)))   # another store's record
    elif damage == "torn":
        lines[2] = lines[2][:20]
    elif damage == "fieldless":
        lines[2] = json.dumps({"op": "claim"})
    else:
        lines[2] = json.dumps({**claim("B", 2), "token": "two"})
    log = tmp_path / "damaged.jsonl"
    log.write_text("\n".join(lines) + "\n")
    verdict = AUDITOR.audit_log(log)
    assert not verdict.ok and says in verdict.unexplained[0], verdict.unexplained


def status(owner: str, answer: str, token: int) -> dict[str, Any]:
    return {"run": "run", "owner": owner, "op": "status", "key": KEY, "token": token, "answer": answer}


def returned(owner: str, result: str, token: int) -> dict[str, Any]:
    return {"run": "run", "owner": owner, "op": "returned", "key": KEY, "token": token, "result": result}


# The same takeover with the tool's side: B's status query fences A out and answers `not run`;
# B's call (its second `started`) completes; A's call, reaching the tool late, is refused.
SETTLED = [claim("A", 1), write("A", "started", 1), {**claim("A", 1), "op": "renew", "result": "ack"},
           claim("B", 2), status("B", "not-run", 2), {**write("B", "started", 2), "attempt": 2},
           returned("B", "done", 2), write("B", "completed", 2), returned("A", "refused", 1),
           write("A", "completed", 1, "rejected")]


@pytest.mark.parametrize(("damage", "says"), [
    ("none", ""),
    ("dropped", "record 8 of its window, store takes WriteCompleted(who=0, token=1)"),
    ("swapped", "record 8 of its window, worker[1] takes ToolDone"),   # B's answer stands after A's records
    ("foreign", "record 3 of its window, worker[1] takes ToolDone"),
    ("torn", ""),
    ("not JSON", "not a JSON record"),
    ("wordy", "'at' and 'until' are numbers"),
    ("answer", "(line 5 of the log): error: no rule of"),
])
def test_a_damaged_log_of_the_tools_side_gets_a_verdict(damage: str, says: str, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    lines = [json.dumps(r) for r in SETTLED]
    if damage == "dropped":
        del lines[8]   # A's refusal: A's completion then comes from a call the tool must have refused
    elif damage == "swapped":
        lines[6], lines[7] = lines[7], lines[6]   # B journals its completion before its call returned
    elif damage == "foreign":
        lines.insert(2, json.dumps(returned("B", "done", 2)))   # a return to a process that never called
    elif damage == "not JSON":
        lines[5] = "<html>"
    elif damage == "wordy":
        lines[2] = json.dumps({**SETTLED[2], "until": "soon"})
    elif damage == "answer":
        lines[4] = json.dumps(status("B", "maybe", 2))   # an answer the mapping does not know
    log = tmp_path / "damaged.jsonl"
    log.write_text("\n".join(lines) + ("\n" if damage != "torn" else "\n" + lines[-1][:25]))
    verdict = AUDITOR.audit_log(log)
    assert verdict.ok == (not says) and says in "".join(verdict.unexplained), verdict.unexplained
    code, out, err = run_cli(["audit", SYSTEM, str(log)], capsys)
    assert code == (2 if damage in ("not JSON", "wordy", "answer") else 1 if says else 0), out + err
    assert "Traceback" not in out + err and (damage != "torn" or "the last line is cut short" in out), out


def test_a_log_that_cannot_be_written_never_fails_the_run(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    log = ProtocolLog(tmp_path / "file" / "protocol.jsonl", "me")
    log.note("run", "claim", result="granted", token=1)
    log.note("run", "release", token=1)
    assert log.failed is not None and "protocol.jsonl" in log.failed
    log.close()
    assert os.listdir(tmp_path) == ["file"]


class Crash(BaseException):
    """The process dies inside the tool."""


class Note:
    """The counter's tool: a ledger of executions, no status query; ``crash`` dies mid-call."""

    def __init__(self, ran: list[str], crash: bool = False) -> None:
        self.ran = ran
        self.crash = crash

    def run(self, call: EffectCall) -> JSON:
        self.ran.append(call.key)
        if self.crash:
            raise Crash
        return None

    def status(self, call: EffectCall) -> StatusReply | None:
        return None


def process(store: OwnedStore, path: Path, name: str, act: Callable[[LoggedStore], None]) -> None:
    """One process on the run: claim, act through the logging fenced store, release; its log at ``path``."""
    log = ProtocolLog(path, name)
    lease = store.acquire("run", name, 30.0)
    log.claimed(lease)
    with contextlib.suppress(Crash, DecisionError):
        act(LoggedStore(store, lease, log))
    store.release(lease)
    log.released(lease)
    log.close()


def decided_twice(tmp_path: Path, opener: Opener) -> tuple[list[str], Path]:
    """A dies in the tool; B resumes, the effect is a decision, B decides rerun; C is given the
    same decision: the real DurableRun code throughout, each process's protocol log written."""
    table = tmp_path / "counter.yaml"
    table.write_text(COUNTER_TABLE)
    counter = load_table(table)
    store = opener()
    log = tmp_path / "j.db.protocol.jsonl"
    ran: list[str] = []

    def first(fenced: LoggedStore) -> None:
        DurableRun.create(fenced, counter, "run", {"Note": Note(ran, crash=True)}).deliver("Tick")

    def decide(fenced: LoggedStore) -> None:
        run = DurableRun.open(fenced, counter, "run", {"Note": Note(ran)})
        run.decide(ran[0], "rerun")

    process(store, log, "A", first)
    process(store, log, "B", decide)
    process(store, log, "C", decide)
    store.close()
    return ran, log


def test_a_rerun_decision_begins_a_window_the_system_explains(tmp_path: Path, opener: Opener) -> None:
    ran, log = decided_twice(tmp_path, opener)
    assert len(ran) == 2   # the crashed call and the one rerun the user allowed
    verdict = AUDITOR.audit_log(log)
    assert (verdict.windows, verdict.explained, verdict.cut) == (2, 2, 1), verdict.unexplained


def test_a_decision_applied_twice_is_caught_from_the_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         opener: Opener) -> None:
    RUNTIME_PLANTS["decision-applied-twice"](monkeypatch)
    ran, log = decided_twice(tmp_path, opener)
    assert len(ran) == 3
    verdict = AUDITOR.audit_log(log)
    assert len(verdict.unexplained) == 1, verdict
    assert "store takes WriteStarted(who=1, token=2), sending Ack" in verdict.unexplained[0], verdict.unexplained


RECORDS = st.lists(st.one_of(
    st.builds(claim, st.sampled_from("ABC"), st.one_of(st.none(), st.integers(0, 4))),
    st.builds(write, st.sampled_from("ABC"), st.sampled_from(["started", "completed", "unknown"]),
              st.integers(0, 4), st.sampled_from(["ack", "rejected"]), st.sampled_from([KEY, "run/3/0"]))),
    max_size=6)


@settings(max_examples=25, deadline=None)
@given(RECORDS)
def test_any_log_gets_a_verdict(records: list[dict[str, Any]]) -> None:
    """Whatever the records (in any order, from any owner), a verdict: every window explained or not."""
    verdict = AUDITOR.audit_records(records)
    found = windows(records)
    assert verdict.windows == len(found)
    assert verdict.explained + len(verdict.unexplained) == sum(bool(w.records) for w in found)


LEASE = 1.0   # seconds: the heartbeat beats every third of it


Opener = Callable[[], OwnedStore]


@pytest.fixture(params=["sqlite", "postgresql"])
def opener(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Opener]:
    """How each process opens the store: SQLite's file, or a PostgreSQL schema of the test's own."""
    if request.param == "sqlite":
        yield lambda: SqliteStore(tmp_path / "j.db")
        return
    from agentfsm.impl.stores.postgres import PostgresStore
    url = request.getfixturevalue("pg_url")
    with fresh_schema(url) as schema:
        yield lambda: PostgresStore(url, schema)


class Owner:
    """One process on the run, in-process: its own connection, lease, logged heartbeat and log."""

    def __init__(self, folder: Path, name: str, opener: Opener) -> None:
        self.store = opener()
        self.log = ProtocolLog(folder / "j.db.protocol.jsonl", name)
        self.name = name
        self.lease: Lease | None = None
        self.beating: Heartbeat | None = None
        self.beat_store: OwnedStore | None = None

    def claim(self) -> LoggedStore | None:
        try:
            self.lease = self.store.acquire("run", self.name, LEASE)
        except RunHeld:
            self.log.refused("run")
            return None
        self.log.claimed(self.lease)
        self.beat_store = self.store.reopen()
        self.beating = Heartbeat(self.lease, self.beat_store.renew, self.log.renewed).__enter__()
        return LoggedStore(self.store, self.lease, self.log)

    def stall(self) -> None:
        """The process stops (its heartbeat with it) for longer than its lease."""
        if self.beating is not None:
            self.beating.__exit__()
            self.beating = None
        time.sleep(LEASE * 1.3)

    def end(self, release: bool = True) -> None:
        if self.beating is not None:
            self.beating.__exit__()
        if self.beat_store is not None:
            self.beat_store.close()
        if release and self.lease is not None:
            with contextlib.suppress(LeaseLost):
                self.store.release(self.lease)
                self.log.released(self.lease)
        self.log.close()
        self.store.close()


class Meanwhile:
    """The ledger's tool, with a status query that fences; ``meanwhile`` runs as the first call
    reaches the service (the other process acts while the call is on its way)."""

    fences = True

    def __init__(self, ledger: MemoryLedger, meanwhile: Callable[[], None]) -> None:
        self.tool = LedgerTool(ledger, idempotent=False, has_status=True)
        self.meanwhile: Callable[[], None] | None = meanwhile

    def run(self, call: EffectCall) -> JSON:
        if self.meanwhile is not None:
            act, self.meanwhile = self.meanwhile, None
            act()
        return self.tool.run(call)

    def status(self, call: EffectCall) -> StatusReply | None:
        return self.tool.status(call)


def two_owners(folder: Path, scenario: str, opener: Opener) -> tuple[MemoryLedger, Path]:
    """A calls the effect's tool; while the call is on its way, B tries to take the run:
    ``contended``: A is alive (its heartbeat renews); ``taken-over``: A stalls past its lease, B
    takes the run over and settles the effect by a status query; ``claimed``: A stalls, B claims
    the run and dies at once. The real DurableRun, store, heartbeat and protocol log throughout."""
    table = folder / "counter.yaml"
    table.write_text(COUNTER_TABLE)
    counter = load_table(table)
    ledger = MemoryLedger()
    a, b = Owner(folder, "A", opener), Owner(folder, "B", opener)

    def meanwhile() -> None:
        if scenario == "contended":
            time.sleep(LEASE * 1.4)
        else:
            a.stall()
        fenced = b.claim()
        if fenced is not None and scenario != "claimed":
            with contextlib.suppress(LeaseLost):
                DurableRun.open(fenced, counter, "run", {"Note": LedgerTool(ledger, False, True)})
        b.end(release=scenario != "claimed")

    fenced = a.claim()
    assert fenced is not None
    with contextlib.suppress(LeaseLost):
        DurableRun.create(fenced, counter, "run", {"Note": Meanwhile(ledger, meanwhile)}).deliver("Tick")
    a.end()
    return ledger, folder / "j.db.protocol.jsonl"


@pytest.mark.parametrize("scenario", ["contended", "taken-over", "claimed"])
def test_two_owners_on_a_real_run_are_explained(scenario: str, tmp_path: Path, opener: Opener) -> None:
    ledger, log = two_owners(tmp_path, scenario, opener)
    assert sum(ledger.executions().values()) == 1
    verdict = AUDITOR.audit_log(log)
    assert (verdict.windows, verdict.explained) == (1, 1), verdict.unexplained
    ops = {(r["owner"], r["op"], r.get("result", r.get("answer"))) for r in read_protocol(log)}
    if scenario == "contended":
        assert {("A", "renew", "ack"), ("B", "claim", "refused"), ("A", "returned", "done")} <= ops
    elif scenario == "taken-over":
        assert {("B", "status", "not-run"), ("B", "returned", "done"), ("A", "returned", "refused")} <= ops


# Each plant, the scenario where it shows, and the first step of the log no interleaving explains.
PLANTED = {
    "journal-unfenced": ("claimed", "store takes WriteCompleted(who=0, token=1), sending Ack"),
    "tool-unfenced": ("taken-over", "worker[0] takes ToolDone"),
    "status-unfenced": ("taken-over", "worker[0] takes ToolDone"),
    "claim-ignores-owner": ("contended", "store takes Claim(who=1), sending Granted"),
    "claim-keeps-token": ("taken-over", "store takes Claim(who=1), sending Granted(journal=1, token=1)"),
    "expiry-ignores-heartbeat": ("contended", "store takes Claim(who=1), sending Granted"),
    "lease-not-renewed-while-a-tool-runs": ("contended", "store takes Claim(who=1), sending Granted"),
}


@pytest.mark.parametrize("plant", sorted(PLANTS))
def test_a_planted_defect_is_caught_from_a_real_runs_log(plant: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch, opener: Opener) -> None:
    """On each store: the first step of the run's log no interleaving explains, in the verdict and
    in ``agentfsm audit``'s report, with its line and its prefix drawn."""
    scenario, step = PLANTED[plant]
    PLANTS[plant](monkeypatch)
    _, log = two_owners(tmp_path, scenario, opener)
    verdict = AUDITOR.audit_log(log)
    assert len(verdict.unexplained) == 1, verdict
    assert step in verdict.unexplained[0], verdict.unexplained
    [window] = verdict.failed
    line = window.lines[AUDITOR.explain(window).unexplained[0].line - 1]   # the record's line in the log
    code, out, err = run_cli(["audit", SYSTEM, str(log), "--chart", str(tmp_path / "prefix.svg"), "--json"], capsys)
    report = json.loads(out)
    assert code == 1 and not report["ok"], out + err
    assert (report["unexplained"][0]["file"], report["unexplained"][0]["line"]) == (str(log), line), report
    assert report["unexplained"][0]["step"].startswith(step), report
    assert report["before"] and (tmp_path / "prefix.svg").read_bytes().startswith(b"<svg")


def test_an_answer_logged_before_other_processes_records_is_taken_with_its_owners_next_step() -> None:
    """A process logs a tool's or a status query's answer as it arrives, then sends its next
    message; the system's worker does both in one step. Another process's records between the two
    (here B's status answer, then A's fenced-out completion before B's) are a behaviour of the
    system, as the model-based walks of the runtime produce them."""
    records = [claim("A", 1), write("A", "started", 1), claim("B", 2), write("B", "unknown", 2),
               returned("A", "done", 1), status("B", "done", 2), write("A", "completed", 1, "rejected"),
               write("B", "completed", 2)]
    verdict = AUDITOR.audit_records(records)
    assert verdict.ok and verdict.windows == 1, verdict.unexplained


def damages(lines: list[str], foreign: str) -> Iterator[tuple[str, int, list[str]]]:
    """Each damage of a log, by kind and place: a record dropped, two records swapped (any two: a
    neighbour of a ``sent`` line is mostly its own acknowledgement, which a swap leaves as a real
    run may have it), a foreign record put in."""
    for i in range(len(lines)):
        yield "dropped", i + 1, lines[:i] + lines[i + 1:]
    for i in range(len(lines) - 1):
        for j in range(i + 1, len(lines)):
            yield "swapped", i + 1, [*lines[:i], lines[j], *lines[i + 1:j], lines[i], *lines[j + 1:]]
    for i in range(len(lines) + 1):
        yield "foreign", i + 1, [*lines[:i], foreign, *lines[i:]]


def test_a_real_runs_log_damaged_anywhere_gets_a_clear_verdict(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """The log a real run wrote (A taken over by B, its late call refused), each record dropped, each
    two records swapped, and a record of another real run's log (another store's: its owner A
    completing under token 1) put in at each place: every one gets a verdict, explained or its first
    unexplained record named, never a traceback; and ``agentfsm audit`` reports the first unexplained
    damage of each kind with the log's file and line (exit 1)."""
    for run in ("taken", "other"):
        (tmp_path / run).mkdir()
    _, log = two_owners(tmp_path / "taken", "taken-over", lambda: SqliteStore(tmp_path / "taken" / "j.db"))
    _, other = two_owners(tmp_path / "other", "contended", lambda: SqliteStore(tmp_path / "other" / "j.db"))
    lines = log.read_text().splitlines()
    foreign = next(line for line in other.read_text().splitlines() if '"what":"completed",' in line and '"ack"' in line)
    assert AUDITOR.audit_log(log).ok
    first: dict[str, tuple[int, list[str]]] = {}
    for kind, place, damaged in damages(lines, foreign):
        verdict = AUDITOR.audit_records([{**json.loads(line), "_line": n} for n, line in enumerate(damaged, 1)])
        assert verdict.windows >= 1 and all(" of its window" in why for why in verdict.unexplained), (kind, place)
        if not verdict.ok:
            first.setdefault(kind, (place, damaged))
    assert sorted(first) == ["dropped", "foreign", "swapped"], first   # each kind of damage is caught somewhere
    for place, damaged in first.values():
        path = tmp_path / f"damaged-{place}.jsonl"
        path.write_text("\n".join(damaged) + "\n")
        code, out, err = run_cli(["audit", SYSTEM, str(path)], capsys)
        assert code == 1 and "Traceback" not in out + err, out + err
        assert re.search(rf"the logs part from the system at {re.escape(str(path))}:\d+", out), out


def call(owner: str, token: int, key: str = KEY) -> dict[str, Any]:
    return {"run": "run", "owner": owner, "op": "call", "key": key, "token": token, "attempt": 1}


# The server-kill campaign's unexplained effect (CI, and again with --keep): worker A completed one
# effect, journaled the next one's `started` and was SIGKILLed before it logged the acknowledgement
# (the log is written after the store answers). B took the run over, journaled `unknown`, asked the
# tool (`not run`) and performed the effect.
EARLIER = "run/1/0"
LOST_LINE = [claim("A", 1), write("A", "started", 1, key=EARLIER), call("A", 1, EARLIER),
             {**returned("A", "done", 1), "key": EARLIER}, write("A", "completed", 1, key=EARLIER),
             claim("B", 2), write("B", "unknown", 2), status("B", "not-run", 2),
             {**write("B", "started", 2), "attempt": 2}, call("B", 2), returned("B", "done", 2),
             write("B", "completed", 2), {"run": "run", "owner": "B", "op": "release", "token": 2}]


def test_a_started_whose_log_line_a_crash_lost_is_restored_from_the_successors_unknown() -> None:
    """The successor's acknowledged ``unknown`` proves the effect's ``started`` was durable; the
    process that held the run before it, and never logged again, wrote it: its last line was lost."""
    verdict = AUDITOR.audit_records(LOST_LINE)
    assert verdict.ok and verdict.windows == 2 and verdict.restored == 1, verdict.unexplained
    [_, window] = windows(LOST_LINE)
    restored = window.records[1]
    assert (restored["owner"], restored["what"], restored["token"], window.lines[1]) == ("A", "started", 1, 0)


def test_agentfsm_audit_says_which_lines_it_restored(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "j.db.protocol.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in LOST_LINE))
    code, out, _ = run_cli(["audit", SYSTEM, str(log)], capsys)
    assert code == 0, out
    assert "note: 1 started write(s) a killed process acknowledged but never logged" in out
    code, out, _ = run_cli(["audit", SYSTEM, str(log), "--json"], capsys)
    assert json.loads(out)["protocol"]["restored"] == 1


@pytest.mark.parametrize("change, why", [
    ("A acts after B's claim", "A was alive: its log lost no line"),
    ("A released the run", "A gave the run up before: it did not write the started"),
    ("no earlier claim", "no process held the run before B"),
])
def test_a_started_no_record_shows_stays_unexplained_unless_a_crash_explains_it(change: str, why: str) -> None:
    records = list(LOST_LINE)
    if change == "A acts after B's claim":
        records.insert(7, {"run": "run", "owner": "A", "op": "renew", "result": "lost", "token": 1})
    elif change == "A released the run":
        records.insert(5, {"run": "run", "owner": "A", "op": "release", "token": 1})
    else:
        records = records[5:]
    verdict = AUDITOR.audit_records(records)
    assert not verdict.ok and verdict.restored == 0, why
    assert "takes AskStatus" in verdict.unexplained[0], verdict.unexplained


# The server-kill campaign's other unexplained effect (--keep, 1 trial in about 70): worker A's
# completion committed, then A was stopped before it logged the acknowledgement; B took the run
# over (its journal showed the effect completed, so B went on to the next one) and A, continued,
# logged the acknowledgement after B's claim. A's `sent` line, logged before the store was asked,
# shows the write in flight before B's claim.
NEXT = "run/3/0"
LATE_ACK = [claim("A", 1), write("A", "started", 1), call("A", 1), returned("A", "done", 1),
            write("A", "completed", 1, "sent"), claim("B", 2), write("B", "started", 2, key=NEXT),
            write("B", "completed", 2, key=NEXT), write("A", "completed", 1)]


def test_an_acknowledgement_logged_after_a_takeover_is_placed_where_its_write_was_in_flight() -> None:
    verdict = AUDITOR.audit_records(LATE_ACK)
    assert verdict.ok and verdict.windows == 2, verdict.unexplained


def test_a_write_sent_after_the_takeover_and_acknowledged_stays_unexplained() -> None:
    """The journal-unfenced plant: A's write leaves A after B's claim and is acknowledged under A's
    old token. Nothing was in flight before the claim, so nothing is moved."""
    records = [*LATE_ACK[:4], LATE_ACK[5], write("A", "completed", 1, "sent"), *LATE_ACK[6:]]
    verdict = AUDITOR.audit_records(records)
    assert not verdict.ok and "store takes WriteCompleted" in verdict.unexplained[0], verdict.unexplained
    assert not AUDITOR.audit_records([r for r in LATE_ACK if r.get("result") != "sent"]).ok, "no sent line, no move"
