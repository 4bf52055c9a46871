"""The durable runtime's protocol log, audited against durable-run-fixed.yaml: a real run's log is
explained; a log whose records show a fencing or exclusivity mistake is not, at that record;
logs damaged on purpose give a verdict, never a traceback."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from agentfsm.faults.chaos import COUNTER_TABLE, pg_protocol_log
from agentfsm.faults.protocol_audit import Auditor, windows
from agentfsm.impl.durable.protocol_log import ENV, LoggedStore, ProtocolLog
from agentfsm.impl.durable.run import DecisionError, DurableRun, EffectCall, StatusReply
from agentfsm.impl.stores.journal import JSON
from agentfsm.impl.stores.sqlite import SqliteStore
from agentfsm.spec import load_table
from conftest import ROOT, run_cli
from hypothesis import given, settings
from hypothesis import strategies as st
from pg_support import fresh_schema
from protocol_plants import RUNTIME_PLANTS

AUDITOR = Auditor()
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
    assert [(r["op"], r.get("what"), r.get("result")) for r in records] == [
        ("claim", None, "granted"), ("write", "started", "ack"), ("write", "completed", "ack"),
        ("write", "started", "ack"), ("write", "completed", "ack"), ("release", None, None)]
    verdict = AUDITOR.audit_log(log)
    assert (verdict.windows, verdict.explained, verdict.unexplained) == (2, 2, [])
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


def test_a_takeover_with_a_fenced_out_completion_is_explained() -> None:
    verdict = AUDITOR.audit_records(TAKEN_OVER)
    assert (verdict.windows, verdict.explained, verdict.records) == (1, 1, 5), verdict.unexplained


@pytest.mark.parametrize(("name", "records", "record"), [
    ("an unfenced journal acks the fenced-out completion",
     [*TAKEN_OVER[:4], write("A", "completed", 1, "ack")], 5),
    ("a second resumer granted while the first owner journals on",
     [claim("A", 1), write("A", "started", 1), claim("B", 2), write("A", "completed", 1)], 4),
    ("a claim that keeps the previous owner's token",
     [claim("A", 1), write("A", "started", 1), claim("B", 1)], 3),
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
    for records in (third, decided):
        [window] = windows(records)
        assert window.cut and len(window.records) == 3
        verdict = AUDITOR.audit_records(records)
        assert (verdict.cut, verdict.explained) == (1, 1), verdict.unexplained


@pytest.mark.parametrize(("damage", "says"), [
    ("dropped", "record 1 of its window"),
    ("swapped", "record 3 of its window"),
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


def process(store: SqliteStore, name: str, act: Callable[[LoggedStore], None]) -> None:
    """One process on the run: claim, act through the logging fenced store, release."""
    log = ProtocolLog(store.path.with_name("j.db.protocol.jsonl"), name)
    lease = store.acquire("run", name, 30.0)
    log.claimed(lease)
    with contextlib.suppress(Crash, DecisionError):
        act(LoggedStore(store, lease, log))
    store.release(lease)
    log.released(lease)
    log.close()


def decided_twice(tmp_path: Path) -> tuple[list[str], Path]:
    """A dies in the tool; B resumes, the effect is a decision, B decides rerun; C is given the
    same decision: the real DurableRun code throughout, each process's protocol log written."""
    table = tmp_path / "counter.yaml"
    table.write_text(COUNTER_TABLE)
    counter = load_table(table)
    store = SqliteStore(tmp_path / "j.db")
    ran: list[str] = []

    def first(fenced: LoggedStore) -> None:
        DurableRun.create(fenced, counter, "run", {"Note": Note(ran, crash=True)}).deliver("Tick")

    def decide(fenced: LoggedStore) -> None:
        run = DurableRun.open(fenced, counter, "run", {"Note": Note(ran)})
        run.decide(ran[0], "rerun")

    process(store, "A", first)
    process(store, "B", decide)
    process(store, "C", decide)
    store.close()
    return ran, tmp_path / "j.db.protocol.jsonl"


def test_a_rerun_decision_begins_a_window_the_system_explains(tmp_path: Path) -> None:
    ran, log = decided_twice(tmp_path)
    assert len(ran) == 2   # the crashed call and the one rerun the user allowed
    verdict = AUDITOR.audit_log(log)
    assert (verdict.windows, verdict.explained, verdict.cut) == (2, 2, 1), verdict.unexplained


def test_a_decision_applied_twice_is_caught_from_the_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    RUNTIME_PLANTS["decision-applied-twice"](monkeypatch)
    ran, log = decided_twice(tmp_path)
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
