"""The Temporal runtime's protocol log, audited against temporal-run.yaml: the logs of the unknown
path (a stopped worker's stale attempt refused, a rerun, a fencing tool's status query) are
explained; a stale attempt whose check passed (the fence skipped) or that acts without a check is
not, at that record; logs damaged on purpose give a verdict, never a traceback."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from agentfsm.faults.temporal_audit import auditor, windows
from conftest import ROOT, run_cli
from hypothesis import given, settings
from hypothesis import strategies as st

AUDITOR = auditor()
SYSTEM = str(ROOT / "spec/systems/temporal-run.yaml")
KEY = "run/3/0"


def rec(op: str, attempt: int, owner: str = "w1", key: str = KEY, **fields: Any) -> dict[str, Any]:
    return {"at": 0.0, "owner": owner, "run": "run", "op": op, "key": key, "attempt": attempt, "token": attempt,
            "try": 1, **fields}


def performed(attempt: int, owner: str, key: str = KEY) -> list[dict[str, Any]]:
    """An attempt that passed its check, called the tool and got its answer."""
    return [rec("attempt", attempt, owner, key), rec("check", attempt, owner, key, result="passed"),
            rec("call", attempt, owner, key), rec("returned", attempt, owner, key, result="done")]


CLEAN = performed(1, "w1")
# A worker stopped before its check: the attempt timed out, the operator decided rerun (no status
# query), another worker performed attempt 2, and the stopped worker woke and refused.
STALE_REFUSED = [rec("attempt", 1, "w1"), rec("status", 1, "w2", answer="none", token=2), *performed(2, "w2"),
                 rec("check", 1, "w1", result="refused")]
# The same with a tool whose status query fences: not-run, so the workflow performs attempt 2 itself.
FENCED_QUERY = [rec("attempt", 1, "w1"), rec("status", 1, "w2", answer="not-run", token=2), *performed(2, "w2"),
                rec("check", 1, "w1", result="refused")]
# The fence skipped (a check that always passes): the stale attempt's check passes after the rerun.
FENCE_SKIPPED = [rec("attempt", 1, "w1"), rec("status", 1, "w2", answer="none", token=2), *performed(2, "w2"),
                 rec("check", 1, "w1", result="passed"), rec("call", 1, "w1")]


def audit(records: list[dict[str, Any]]) -> tuple[bool, list[str]]:
    verdict = AUDITOR.audit_records(records)
    return verdict.ok, verdict.unexplained


@pytest.mark.parametrize("records", [CLEAN, STALE_REFUSED, FENCED_QUERY], ids=["clean", "stale-refused", "fenced"])
def test_the_runtime_s_paths_are_explained(records: list[dict[str, Any]]) -> None:
    assert audit(records) == (True, [])


def test_a_stale_attempt_whose_check_passes_is_unexplained_at_that_record() -> None:
    ok, why = audit(FENCE_SKIPPED)
    assert not ok and len(why) == 1
    assert "record 7 of its window, worker[0] takes Act, is explained by no interleaving" in why[0]
    assert '{"op": "check", "result": "passed", "attempt": 1, "slot": 0}' in why[0]


def test_a_stale_attempt_whose_check_passes_after_a_settled_decision_is_unexplained() -> None:
    """No next attempt: the operator settled the unknown effect; the status query (unanswered) says
    the attempt had timed out, so its check cannot pass afterwards."""
    records = [rec("attempt", 1, "w1"), rec("status", 1, "w2", answer="none", token=2),
               rec("check", 1, "w1", result="passed")]
    ok, why = audit(records)
    assert not ok and "record 3 of its window, worker[0] takes Act" in why[0]
    assert audit([*records[:2], rec("check", 1, "w1", result="refused")]) == (True, [])


def test_a_stale_attempt_that_acts_without_its_check_is_unexplained() -> None:
    records = [*FENCE_SKIPPED[:-2], rec("call", 1, "w1")]
    ok, why = audit(records)
    assert not ok and "record 7 of its window, tool takes Run(who=0, token=1)" in why[0]


def test_a_fencing_tool_s_refusal_of_the_stale_call_is_explained() -> None:
    """Without the check, a tool whose status query fenced the key refuses the stale attempt's call."""
    records = [rec("attempt", 1, "w1"), rec("status", 1, "w2", answer="not-run", token=2), *performed(2, "w2"),
               rec("call", 1, "w1"), rec("returned", 1, "w1", result="refused")]
    # the check is part of the runtime: a call with none before it is still unexplained
    assert not audit(records)[0]
    records.insert(7, rec("check", 1, "w1", result="passed"))
    assert not audit(records)[0]   # a stale attempt's check cannot pass


def test_a_worker_killed_before_its_first_record_is_explained() -> None:
    """The campaign's unexplained effect (agent-run-42/call-1): a worker killed after it took the
    attempt and before it noted it (an agent's task builds its replica first), so the log's first
    record of the effect is the status query after the timeout."""
    records = [rec("status", 1, "w2", answer="none", token=2), *performed(2, "w2")]
    assert audit(records) == (True, [])


def test_effects_and_runs_are_windows_of_their_own() -> None:
    other = performed(1, "w2", key="run/5/0")
    interleaved = [r for pair in zip(CLEAN, other, strict=True) for r in pair]
    verdict = AUDITOR.audit_records(interleaved)
    assert verdict.ok and verdict.windows == 2 and verdict.explained == 2


def test_what_the_system_does_not_describe_is_cut() -> None:
    retried = [*CLEAN[:1], {**CLEAN[1], "try": 2}]
    third = [*STALE_REFUSED, *performed(3, "w3")]
    spawned = [*CLEAN[:3], rec("returned", 1, "w1", result="started")]
    for records, why in ((retried, "retry"), (third, "third attempt"), (spawned, "past its task")):
        [window] = windows(records)
        assert why in window.cut
        assert AUDITOR.audit_records(records).ok


def test_damaged_logs_give_a_verdict(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A record dropped or two swapped: the audit names the record, exit 1; a foreign record (an
    answer no rule translates) or a line that is not a record is bad input, exit 2; never a traceback."""
    dropped = [r for r in STALE_REFUSED if r is not STALE_REFUSED[2]]   # attempt 2 without its task taken
    swapped = [*CLEAN[:1], CLEAN[2], CLEAN[1], CLEAN[3]]
    for n, records in enumerate((dropped, swapped)):
        log = tmp_path / f"{n}.jsonl"
        log.write_text("".join(json.dumps(r) + "\n" for r in records))
        code, out, err = run_cli(["audit", SYSTEM, str(log)], capsys)
        assert code == 1 and "Traceback" not in out + err, (n, out, err)
        assert ": not explained: " in out
        assert "0 of 1 effects' windows explained" in out
    log = tmp_path / "foreign.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in [*CLEAN, rec("status", 1, "w1", answer="maybe")]))
    code, _, err = run_cli(["audit", SYSTEM, str(log)], capsys)
    assert code == 2 and "(line 5 of the log): error: no rule of" in err and "matches this record" in err
    log = tmp_path / "bad.jsonl"
    log.write_text("not json\n")
    code, _, err = run_cli(["audit", SYSTEM, str(log)], capsys)
    assert code == 2 and "bad.jsonl:1: error: not JSON" in err


def test_the_cli_explains_a_clean_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "temporal.protocol.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in [*STALE_REFUSED, *performed(1, "w3", "run/9/0")]))
    code, out, _ = run_cli(["audit", SYSTEM, str(log)], capsys)
    assert code == 0 and "audit temporal-run: 2 of 2 effects' windows explained" in out


@settings(max_examples=40, deadline=None)
@given(st.permutations(range(len(STALE_REFUSED))))
def test_any_order_of_a_log_gets_a_verdict(order: list[int]) -> None:
    """Shuffled records: one window, explained or unexplained, never an exception; the log's own
    order explained, and any order that puts attempt 2's call before its check not."""
    verdict = AUDITOR.audit_records([STALE_REFUSED[i] for i in order])
    assert verdict.windows == 1 and verdict.explained + len(verdict.unexplained) == 1
    if order == sorted(order):
        assert verdict.ok
    if order.index(4) < order.index(3):
        assert not verdict.ok


@pytest.mark.parametrize("chosen", [True, False], ids=["chosen-file", "none"])
def test_an_activity_without_its_client_still_answers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     chosen: bool) -> None:
    """An activity run without a client (a test's environment) logs to $AGENTFSM_PROTOCOL_LOG when one
    is chosen, and to nothing otherwise: the log never fails the activity."""
    from agentfsm.impl.durable.ledger import MemoryLedger, ledger_tools
    from agentfsm.impl.durable.protocol_log import ENV
    from agentfsm.impl.temporal.activities import EffectActivities
    from agentfsm.impl.temporal.messages import EffectTask, table_hash
    from temporalio.testing import ActivityEnvironment

    log = tmp_path / "chosen.protocol.jsonl"
    monkeypatch.delenv(ENV, raising=False)
    if chosen:
        monkeypatch.setenv(ENV, str(log))
    activities = EffectActivities(lambda table: ledger_tools(table, MemoryLedger(), True))
    tool_call = ROOT / "spec" / "tool-call.yaml"
    text = tool_call.read_text(encoding="utf-8")
    task = EffectTask(text, table_hash(text), str(tool_call), {}, "run", "InvokeTool", KEY, 1, 2)
    answer = asyncio.run(ActivityEnvironment().run(activities.status, task))
    assert (answer.known, answer.status, answer.fences) == (True, "not-run", True)
    records = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    assert [(r["op"], r["key"], r["token"], r["answer"]) for r in records] == ([("status", KEY, 2, "not-run")]
                                                                              if chosen else [])
