"""The ledgers crash injection counts real executions in (impl/durable/ledger.py), held to their rules
one by one: a ledger that miscounts or fences the wrong call would let a duplicated effect pass."""

from __future__ import annotations

import fcntl
from collections import Counter
from pathlib import Path

import pytest
from agentfsm.impl.durable.ledger import Fenced, FileLedger, Ledger, LedgerTool, MemoryLedger
from agentfsm.impl.durable.run import EffectCall


@pytest.fixture(params=["memory", "file"])
def ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Ledger:
    return MemoryLedger() if request.param == "memory" else FileLedger(tmp_path / "ledger")


def test_a_new_ledger_has_run_nothing(ledger: Ledger) -> None:
    assert ledger.executions() == Counter()


def test_a_fence_refuses_older_tokens_of_its_key_only(ledger: Ledger) -> None:
    ledger.fence("k", 2)
    ledger.fence("j", 5)
    ledger.execute("k", 2)
    ledger.execute("k", 3)
    with pytest.raises(Fenced, match="k: fenced at token 2, the call has 1"):
        ledger.execute("k", 1)
    with pytest.raises(Fenced, match="j: fenced at token 5, the call has 4"):
        ledger.execute("j", 4)
    ledger.execute("other", 0)
    assert ledger.executions() == Counter({"k": 2, "other": 1})


def test_a_fence_never_moves_back(ledger: Ledger) -> None:
    ledger.fence("k", 3)
    ledger.fence("k", 1)
    with pytest.raises(Fenced, match="fenced at token 3"):
        ledger.execute("k", 2)
    assert ledger.executions() == Counter()


def test_a_call_without_a_token_is_a_call_outside_leases(ledger: Ledger) -> None:
    """faults/temporal_baseline.py executes without a token: token 0, passed by a fence at 0,
    refused by one at 1."""
    ledger.fence("k", 0)
    ledger.execute("k")
    ledger.fence("j", 1)
    with pytest.raises(Fenced, match="the call has 0"):
        ledger.execute("j")
    assert ledger.executions() == Counter({"k": 1})


def test_a_clone_starts_with_the_counts_and_fences_and_goes_its_own_way() -> None:
    first = MemoryLedger()
    first.execute("k")
    first.fence("j", 2)
    second = first.clone()
    assert second.executions() == Counter({"k": 1})
    with pytest.raises(Fenced):
        second.execute("j", 1)
    second.execute("k")
    second.fence("k", 4)
    assert first.executions() == Counter({"k": 1})
    first.execute("k", 1)
    assert (first.executions(), second.executions()) == (Counter({"k": 2}), Counter({"k": 2}))


def test_the_file_ledger_checks_the_fence_and_writes_under_one_lock(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Another process's fence cannot slip between the check and the execution: both happen while
    the file is locked (a second lock on it, taken without waiting, is refused then)."""
    ledger = FileLedger(tmp_path / "ledger")
    checked = FileLedger._fenced_at
    seen: list[bool] = []

    def fenced_at(self: FileLedger, key: str) -> int:
        with self.path.open("a") as other:
            try:
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                seen.append(True)
            else:
                seen.append(False)
        return checked(self, key)

    monkeypatch.setattr(FileLedger, "_fenced_at", fenced_at)
    ledger.execute("k", 1)
    assert seen == [True]
    assert (tmp_path / "ledger").read_text() == "k\n"


def test_a_status_query_fences_its_key_at_the_callers_token_and_answers_from_the_ledger(ledger: Ledger) -> None:
    tool = LedgerTool(ledger, idempotent=False, has_status=True)
    newer, older = EffectCall("r", "Call", "k", 1, token=2), EffectCall("r", "Call", "k", 1, token=1)
    assert tool.status(newer) == ("not-run", None)
    with pytest.raises(Fenced, match="fenced at token 2, the call has 1"):
        tool.run(older)
    assert tool.run(newer) == {"action": "Call", "receipt": "k"}
    assert tool.status(newer) == ("done", {"action": "Call", "receipt": "k"})
    assert ledger.executions() == Counter({"k": 1})
    assert LedgerTool(ledger, idempotent=False, has_status=False).status(older) is None
