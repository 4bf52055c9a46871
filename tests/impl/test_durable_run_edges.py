"""The durable run's refusals and descriptions, each value worked out by hand: a table without
tools for its external actions, a journal of another machine, an empty journal, a duplicate
event, and how an effect is shown to the user deciding it. The mutation run
(tests/mutation_run.py) found these pinned down by no other fast test."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from agentfsm.impl.durable.ledger import MemoryLedger, ledger_tools
from agentfsm.impl.durable.run import CallSpec, DecisionError, DurableRun, Options, Report, describe_call
from agentfsm.impl.durable.state import Effect, ReplayError
from agentfsm.impl.stores.journal import STARTED, Conflict, Entry, JournalError, Loaded, Record
from agentfsm.impl.stores.memory import MemoryStore
from agentfsm.impl.stores.sqlite import SqliteStore
from agentfsm.spec import Table, load_table, load_table_bytes
from conftest import ROOT, run_cli
from crashed_runs import crash_before_completed

LOOM = ROOT / "spec" / "loom-agent.yaml"


def effect(tool: str = "", args: object = None) -> Effect:
    return Effect("r/2/0", "ExecuteTools", 2, 0, False, tool=tool, args=args)


@pytest.mark.parametrize(("shown", "text"), [
    (effect(), "ExecuteTools"),
    (effect("grep", {"b": 1, "a": "é"}), 'grep {"a": "é", "b": 1}'),
    (effect("grep", {"arguments": '{"q": "x"}'}), 'grep {"q": "x"}'),     # a model's tool call: its arguments
    (effect("grep", {"arguments": "not json"}), 'grep "not json"'),
    (effect("grep", {"arguments": 3}), 'grep {"arguments": 3}'),
])
def test_an_effect_is_shown_by_its_tool_and_arguments(shown: Effect, text: str) -> None:
    assert describe_call(shown) == text


def test_long_arguments_are_cut_at_the_limit() -> None:
    assert describe_call(effect("t", "x" * 6), limit=8) == 't "xxxxxx"'            # 8 characters: whole
    assert describe_call(effect("t", "x" * 7), limit=8) == 't "xxxxxxx...'         # 9: cut to 8
    assert describe_call(effect("t", "x" * 400)) == 't "' + "x" * 299 + "..."      # 300 by default


def test_a_table_needs_a_tool_for_every_external_action(loom: Table) -> None:
    with pytest.raises(ValueError, match=r"^no tool for the external action\(s\) ExecuteTools, RunPostToolsHook"):
        DurableRun.create(MemoryStore(), loom, "r", {k: v for k, v in ledger_tools(loom, MemoryLedger(), False).items()
                                                     if k not in ("ExecuteTools", "RunPostToolsHook")})


def test_a_journal_of_another_machine_is_refused(loom: Table) -> None:
    store = MemoryStore()
    DurableRun.create(store, loom, "r", ledger_tools(loom, MemoryLedger(), False))
    other = load_table_bytes(b"format: 1\nmachine: other\nstates: {A: {initial: true}}\nevents: {}\ntransitions: []\n",
                             "o.yaml")
    with pytest.raises(JournalError, match=r"^run 'r' runs machine 'loom-agent', not 'other': give its own table$"):
        DurableRun.open(store, other, "r", {})


def test_a_duplicate_event_writes_nothing(loom: Table) -> None:
    store = MemoryStore()
    run = DurableRun.create(store, loom, "r", ledger_tools(loom, MemoryLedger(), False))
    first = run.deliver("UserInput", event_id="1")
    records = len(store.records("r"))
    again = run.deliver("UserInput", event_id="1")
    assert first.seq > 0 and (again.status, again.accepted, again.seq, again.actions) == ("duplicate", False, 0, ())
    assert len(store.records("r")) == records


class EmptyStore(MemoryStore):
    """A store whose journal lost every record, the created one too."""

    def load(self, run_id: str) -> Loaded:
        return Loaded(None, ())


def test_an_empty_journal_is_a_replay_error_at_record_one(loom: Table) -> None:
    store = EmptyStore()
    DurableRun.create(store, loom, "r", ledger_tools(loom, MemoryLedger(), False))
    with pytest.raises(ReplayError) as caught:
        DurableRun.open(store, loom, "r", ledger_tools(loom, MemoryLedger(), False))
    assert (str(caught.value), caught.value.seq) == ("run 'r': record 1 cannot be replayed: the journal is empty", 1)


def test_an_action_fanned_out_into_calls_is_one_effect_per_call_with_unique_keys(loom: Table) -> None:
    store = MemoryStore()
    run = DurableRun.create(store, loom, "r", ledger_tools(loom, MemoryLedger(), False))
    run.deliver("UserInput", event_id="1")
    calls = [CallSpec("c1", "grep", True, {"q": 1}), CallSpec("c1", "ls", False), CallSpec("c2", "cat", False)]
    run.deliver("LlmCompleted", {"tool_calls": 2}, event_id="2", payload={"text": "hi"},
                calls={"ExecuteTools": calls})
    [step] = [r for r in store.records("r") if r.kind == "step" and r.body["event"] == "LlmCompleted"]
    assert step.body["payload"] == {"text": "hi"}
    assert step.body["effects"] == [
        {"key": "r/5/c1", "action": "ExecuteTools", "call_id": 0, "idempotent": True, "tool": "grep", "args": {"q": 1}},
        {"key": "r/5/c1#1", "action": "ExecuteTools", "call_id": 0, "idempotent": False, "tool": "ls", "args": None},
        {"key": "r/5/c2", "action": "ExecuteTools", "call_id": 0, "idempotent": False, "tool": "cat", "args": None}]
    assert {k: e.status for k, e in run.st.effects.items() if k.startswith("r/5/")} == {
        "r/5/c1": "completed", "r/5/c1#1": "completed", "r/5/c2": "completed"}


def test_the_loom_agent_runs_durably_in_process(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The agent's effects go through the run's performer: each started, then settled (the demo's
    model fails once) and fed back by an event, none left unreported."""
    db = tmp_path / "j.db"
    code, out, err = run_cli(["run", str(LOOM), "--script", str(ROOT / "examples" / "loom-demo.yaml"),
                              "--store", str(db)], capsys)
    assert code == 0, err
    assert out.splitlines()[-1].strip().startswith("done: final state ShuttingDown, 0 anomalies")
    store = SqliteStore(db)
    loom = load_table(LOOM)
    for run_id in store.runs():
        run = DurableRun.attach(store, loom, run_id, ledger_tools(loom, MemoryLedger(), False))
        kinds = [r.kind for r in store.records(run_id)]
        assert run.st.effects and kinds.count("started") == kinds.count("completed") == len(run.st.effects)
        assert all(e.reported for e in run.st.effects.values())
        assert {e.status for e in run.st.effects.values()} == {"completed", "failed"}   # the demo's LLM fails once
        assert run.unreported() == []


def test_an_idempotent_effect_that_keeps_outliving_its_owner_becomes_a_decision(loom: Table) -> None:
    """SendLlmRequest (idempotent) is started and its owner dies before ``completed``, twice:
    with ``max_attempts=2`` it is not retried a third time but left to the user, saying why."""
    store, ledger = MemoryStore(), MemoryLedger()
    run = DurableRun.create(store, loom, "r", ledger_tools(loom, ledger, False))
    crash_before_completed(store, lambda: run.deliver("UserInput", event_id="1"))
    crash_before_completed(store, lambda: DurableRun.open(store, loom, "r", ledger_tools(loom, ledger, False),
                                                          options=Options(max_attempts=2)))
    again = DurableRun.open(store, loom, "r", ledger_tools(loom, ledger, False), options=Options(max_attempts=2))
    [decision] = again.decisions()
    assert (decision.kind, decision.id, again.st.effects["r/2/0"].attempts) == ("unknown-effect", "r/2/0", 2)
    assert "(started 2 times and no outcome journaled: each time its owner stopped, or lost the lease before it " \
           "could journal the outcome, so it may have run, even to completion, every time" in decision.message
    retried = DurableRun.open(store, loom, "r", ledger_tools(loom, ledger, False), options=Options(max_attempts=3))
    assert retried.decisions() == [] and retried.st.effects["r/2/0"].status == "completed"
    assert ledger.executions()["r/2/0"] == 1     # idempotent: the service ran it once, whatever the retries


def test_an_unknown_event_or_report_is_refused_before_anything_is_written(loom: Table) -> None:
    store = MemoryStore()
    run = DurableRun.create(store, loom, "r", ledger_tools(loom, MemoryLedger(), False))
    with pytest.raises(ValueError, match=r"^loom-agent has no event 'Nope'$"):
        run.deliver("Nope")
    with pytest.raises(ValueError, match=r"^no effect 'r/9/0' to report$"):
        run.deliver("UserInput", reports=Report("r/9/0", "completed", None))
    assert [r.kind for r in store.records("r")] == ["created"]


class Contended(MemoryStore):
    """A store where another writer always got there first: every append is a lost CAS."""

    def __init__(self) -> None:
        super().__init__()
        self.tries = 0

    def append(self, run_id: str, expect: int, entries: Sequence[Entry],
               snapshot: Mapping[str, object] | None = None) -> list[Record]:
        self.tries += 1
        raise Conflict(run_id, expect, expect + 1)


@pytest.mark.parametrize(("options", "tries"), [(Options(), 100), (Options(max_conflicts=3), 3)])
def test_a_run_gives_up_after_max_conflicts_lost_writes(loom: Table, options: Options, tries: int) -> None:
    store = Contended()
    run = DurableRun.create(store, loom, "r", ledger_tools(loom, MemoryLedger(), False), options=options)
    with pytest.raises(JournalError, match=f"^run 'r': gave up after {tries} write conflicts$"):
        run.deliver("UserInput")
    assert store.tries == tries


class StartedElsewhere(MemoryStore):
    """A store where another writer journals the same ``started`` first (``conflicts`` times when
    ``lost_only``: the write is lost but nobody else wrote), so our ``started`` append conflicts."""

    def __init__(self, conflicts: int, lost_only: bool = False) -> None:
        super().__init__()
        self.conflicts, self.lost_only, self.started_tries = conflicts, lost_only, 0

    def append(self, run_id: str, expect: int, entries: Sequence[Entry],
               snapshot: Mapping[str, object] | None = None) -> list[Record]:
        if any(e.kind == STARTED for e in entries):
            self.started_tries += 1
            if self.started_tries <= self.conflicts:
                if not self.lost_only:
                    super().append(run_id, expect, entries)   # the other writer got there first
                raise Conflict(run_id, expect, expect + 1)
        return super().append(run_id, expect, entries, snapshot)


def test_an_effect_started_by_another_writer_is_left_to_it(loom: Table) -> None:
    """The lost ``started`` write is read back (reload): the effect is no longer ours to start."""
    store, ledger = StartedElsewhere(conflicts=1), MemoryLedger()
    run = DurableRun.create(store, loom, "r", ledger_tools(loom, ledger, False))
    run.deliver("UserInput", event_id="1")
    assert store.started_tries == 1 and not ledger.executions()
    assert [r.kind for r in store.records("r")].count(STARTED) == 1


def test_effect_progress_gives_up_after_max_conflicts_lost_writes(loom: Table) -> None:
    store = StartedElsewhere(conflicts=10**6, lost_only=True)
    run = DurableRun.create(store, loom, "r", ledger_tools(loom, MemoryLedger(), False),
                            options=Options(max_conflicts=3))
    with pytest.raises(JournalError, match=r"^run 'r': gave up after 3 write conflicts$"):
        run.deliver("UserInput", event_id="1")
    assert store.started_tries == 3


def unknown_tools_effect(loom: Table) -> tuple[MemoryStore, MemoryLedger, DurableRun]:
    """A run whose ExecuteTools effect (not idempotent, no status query) crashed before its
    outcome: after the reopen it is unknown, a decision for the user."""
    store, ledger = MemoryStore(), MemoryLedger()
    run = DurableRun.create(store, loom, "r", ledger_tools(loom, ledger, False))
    run.deliver("UserInput", event_id="1")
    crash_before_completed(store, lambda: run.deliver("LlmCompleted", {"tool_calls": 1}, event_id="2"))
    return store, ledger, DurableRun.open(store, loom, "r", ledger_tools(loom, ledger, False))


def test_settled_outcomes_are_unreported_until_an_event_feeds_them_back(loom: Table) -> None:
    _, _, run = unknown_tools_effect(loom)
    assert [(e.key, e.status, e.via) for e in run.unreported()] == [("r/2/0", "completed", "run")]
    run.decide("r/5/0", "completed", {"note": "by hand"})
    assert [(e.key, e.status, e.via) for e in run.unreported()] == [("r/2/0", "completed", "run"),
                                                                     ("r/5/0", "completed", "user")]


@pytest.mark.parametrize(("id", "decision", "message"), [
    ("r/2/0", "completed", "no unknown effect 'r/2/0' to decide"),       # settled long ago
    ("r/7/0", "completed", "no unknown effect 'r/7/0' to decide"),       # no such effect
    ("r/5/0", "continue", "decide 'r/5/0' as completed, failed or rerun, not 'continue'"),
])
def test_a_decision_that_settles_nothing_is_refused(loom: Table, id: str, decision: str, message: str) -> None:
    store, _, run = unknown_tools_effect(loom)
    records = len(store.records("r"))
    with pytest.raises(DecisionError) as caught:
        run.decide(id, decision)
    assert str(caught.value) == message and len(store.records("r")) == records


def test_a_non_idempotent_effect_is_never_said_to_outlive_its_owners(loom: Table) -> None:
    store, ledger, _ = unknown_tools_effect(loom)
    run = DurableRun.open(store, loom, "r", ledger_tools(loom, ledger, False), options=Options(max_attempts=1))
    [decision] = run.decisions()
    assert run.st.effects["r/5/0"].attempts == 1 and "(started" not in decision.message
    assert decision.message.endswith("may or may not have run: its outcome is unknown; decide completed, failed "
                                     "or rerun")
