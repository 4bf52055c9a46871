"""The durable run's defaults and boundaries, each worked out by hand: an idempotent effect
is retried until its fifth start, a call outside leases carries token 0, an approval is
valid up to its expiry instant, an expiry another writer journaled first is not journaled
again, an effect handed to the async performer is not the user's decision, damage
before the tail is never "repaired", and a status query's ``resume`` (a sub-agent's child
run) performs a non-idempotent effect again where nothing else would. The mutation run
(tests/mutation_run.py) found these pinned down by no other fast test."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import pytest
from agentfsm.impl.durable.ledger import Fenced, LedgerTool, MemoryLedger, ledger_tools
from agentfsm.impl.durable.run import DurableRun, EffectCall, Options, repair_torn_tail
from agentfsm.impl.stores.journal import APPROVAL_EXPIRED, Conflict, CorruptJournal, Entry, OtherMachine, Record
from agentfsm.impl.stores.memory import Crash, MemoryStore
from agentfsm.spec import Table
from crashed_runs import crash_before_completed
from strategies_tables import build


def ask_then_call(lifetime: float) -> Table:
    """Ask (an approval with ``lifetime``), then Answer runs Call, an external effect."""
    return build({"format": 1, "machine": "t", "states": {"A": {"initial": True}, "B": {}},
                  "events": {"Ask": {}, "Answer": {}},
                  "actions": {"Request": {"approval": {"lifetime": lifetime}}, "Call": {"effect": "external"}},
                  "transitions": [{"from": "A", "on": "Ask", "to": "B", "emit": ["Request"]},
                                  {"from": "B", "on": "Answer", "to": "A", "emit": ["Call"]}]})


def test_an_idempotent_effect_is_started_five_times_by_default_then_left_to_the_user(loom: Table) -> None:
    store, tools = MemoryStore(), ledger_tools(loom, MemoryLedger(), False)
    run = DurableRun.create(store, loom, "r", tools)
    crash_before_completed(store, lambda: run.deliver("UserInput", event_id="1"))
    for attempt in range(2, 6):
        crash_before_completed(store, lambda: DurableRun.open(store, loom, "r", tools))
        assert DurableRun.attach(store, loom, "r", tools).st.effects["r/2/0"].attempts == attempt
    again = DurableRun.open(store, loom, "r", tools)
    [decision] = again.decisions()
    assert (decision.kind, again.st.effects["r/2/0"].attempts) == ("unknown-effect", 5)
    assert "(started 5 times and no outcome journaled" in decision.message


class Recording:
    """A tool without a status query that records each call."""

    idempotent = False

    def __init__(self) -> None:
        self.calls: list[EffectCall] = []

    def run(self, call: EffectCall) -> Any:
        self.calls.append(call)
        return {"done": call.key}

    def status(self, call: EffectCall) -> None:
        return None


def test_a_call_outside_leases_carries_token_zero() -> None:
    table, tool = ask_then_call(60), Recording()
    run = DurableRun.create(MemoryStore(), table, "r", {"Call": tool})
    run.deliver("Ask", event_id="1")
    run.deliver("Answer", event_id="2")
    assert [(c.action, c.token) for c in tool.calls] == [("Call", 0)]


def test_a_call_built_without_a_token_is_a_call_outside_leases() -> None:
    # Tools and their tests build EffectCall without a token (tests/impl/test_workers.py): such a call
    # must be the call of a writer outside leases, token 0. A status query outside leases
    # (fenced at 0) does not refuse it; one made under the first lease (fenced at 1) does.
    call = EffectCall("r", "Call", "r/2/0", 1)
    outside, leased = MemoryLedger(), MemoryLedger()
    outside.fence(call.key, 0)
    leased.fence(call.key, 1)
    LedgerTool(outside, idempotent=False, has_status=True).run(call)
    assert outside.executions()[call.key] == 1
    with pytest.raises(Fenced, match="fenced at token 1, the call has 0"):
        LedgerTool(leased, idempotent=False, has_status=True).run(call)
    assert leased.executions()[call.key] == 0


def reopened_at(store: MemoryStore, table: Table, now: float) -> DurableRun:
    return DurableRun.open(store, table, "r", {"Call": Recording()}, options=Options(clock=lambda: now))


def test_an_approval_is_valid_up_to_its_expiry_instant() -> None:
    table, store = ask_then_call(60), MemoryStore()
    DurableRun.create(store, table, "r", {"Call": Recording()}, options=Options(clock=lambda: 1000.0)).deliver("Ask")
    assert reopened_at(store, table, 1060.0).decisions() == []
    assert [d.kind for d in reopened_at(store, table, 1060.5).decisions()] == ["approval-expired"]


class ExpiredElsewhere(MemoryStore):
    """Another writer journals the approval's expiry just before ours, which then conflicts."""

    def append(self, run_id: str, expect: int, entries: Sequence[Entry],
               snapshot: Mapping[str, object] | None = None) -> list[Record]:
        if [e.kind for e in entries] == [APPROVAL_EXPIRED] and expect == self.version(run_id):
            super().append(run_id, expect, entries)
            raise Conflict(run_id, expect, expect + 1)
        return super().append(run_id, expect, entries, snapshot)


def test_an_expiry_another_writer_journaled_first_is_not_journaled_again() -> None:
    table, store = ask_then_call(60), ExpiredElsewhere()
    DurableRun.create(store, table, "r", {"Call": Recording()}, options=Options(clock=lambda: 1000.0)).deliver("Ask")
    run = reopened_at(store, table, 2000.0)
    assert [d.kind for d in run.decisions()] == ["approval-expired"]
    assert [r.kind for r in store.records("r")].count(APPROVAL_EXPIRED) == 1


def test_an_effect_handed_to_the_performer_is_no_decision_while_it_runs(loom: Table) -> None:
    store, ledger = MemoryStore(), MemoryLedger()
    run = DurableRun.create(store, loom, "r", ledger_tools(loom, ledger, False))
    crash_before_completed(store, lambda: run.deliver("UserInput", event_id="1"))
    handed: list[tuple[str, str, bool]] = []
    again = DurableRun.attach(store, loom, "r", ledger_tools(loom, ledger, False))
    again.performer = lambda effect, retry: handed.append((effect.key, effect.status, retry))
    again.recover()
    assert handed == [("r/2/0", "unknown", True)]
    assert again.decisions() == []


def test_damage_before_the_tail_is_not_repaired(loom: Table) -> None:
    store = MemoryStore()
    run = DurableRun.create(store, loom, "r", ledger_tools(loom, MemoryLedger(), False))
    run.deliver("UserInput", event_id="1")
    records = store.stored("r")
    kept = len(records)
    records[1] = replace(records[1], body_text=records[1].body_text + " ")
    with pytest.raises(CorruptJournal, match="corrupt record at sequence 2"):
        repair_torn_tail(store, "r")
    assert len(store.stored("r")) == kept


class Resumable(Recording):
    """A non-idempotent tool whose status query answers ``resume``: its own work is journaled
    under the effect's key (a sub-agent's child run), so performing it again continues it."""

    def __init__(self, answer: str | None) -> None:
        super().__init__()
        self.answer = answer

    def status(self, call: EffectCall) -> Any:
        return None if self.answer is None else (self.answer, {})


def call_once() -> Table:
    return build({"format": 1, "machine": "t", "states": {"A": {"initial": True}, "B": {}},
                  "events": {"Go": {}}, "actions": {"Call": {"effect": "external"}},
                  "transitions": [{"from": "A", "on": "Go", "to": "B", "emit": ["Call"]}]})


def crashed_before_completed(table: Table, tool: Recording) -> MemoryStore:
    """A run whose Call started and was never completed (the process died in between)."""
    for boundary in range(1, 20):
        store = MemoryStore()
        run = DurableRun.create(store, table, "r", {"Call": tool})
        store.arm(boundary)
        try:
            run.deliver("Go", event_id="1")
        except Crash as crash:
            if "before completed" in str(crash):
                store.arm(None)
                return store
        tool.calls.clear()
    raise AssertionError("no boundary before the completed record")


@pytest.mark.parametrize("crashes", [1, 7])
def test_a_status_saying_resume_performs_a_non_idempotent_effect_again(crashes: int) -> None:
    """Not capped by the idempotent retries' five starts: each start continues the journaled work."""
    table, tool = call_once(), Resumable("resume")
    store = crashed_before_completed(table, tool)
    for _ in range(crashes - 1):
        # on reopening: unknown, started, then completed
        crash_before_completed(store, lambda: DurableRun.open(store, table, "r", {"Call": tool}))
    run = DurableRun.open(store, table, "r", {"Call": tool})
    assert not run.decisions()
    assert run.st.effects["r/2/0"].status == "completed"
    assert len(tool.calls) == crashes + 1


@pytest.mark.parametrize("answer", [None, "unknown"])
def test_without_resume_a_non_idempotent_effect_is_left_to_the_user(answer: str | None) -> None:
    table, tool = call_once(), Resumable(answer)
    store = crashed_before_completed(table, tool)
    run = DurableRun.open(store, table, "r", {"Call": tool})
    [decision] = run.decisions()
    assert decision.kind == "unknown-effect"
    assert len(tool.calls) == 1


def test_a_run_of_another_machine_is_not_attached(loom: Table) -> None:
    """Its records would replay against the wrong rows: refused, naming both machines."""
    store = MemoryStore()
    DurableRun.create(store, loom, "r", ledger_tools(loom, MemoryLedger(), False))
    other = call_once()
    with pytest.raises(OtherMachine) as refused:
        DurableRun.attach(store, other, "r", ledger_tools(other, MemoryLedger(), False))
    assert str(refused.value) == f"run 'r' runs machine 'loom-agent', not {other.machine!r}: give its own table"
