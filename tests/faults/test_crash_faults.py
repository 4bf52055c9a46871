"""The crash checker catches planted runtime faults, each with the scenario that shows it.

Every fault is a small subclass of the real ``DurableRun`` that breaks one rule of seed
003; the real runtime passes the same checks (the first tests), so each catch is the
fault's doing.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from agentfsm.faults.crash import CrashChecker, CrashReport
from agentfsm.impl.durable.run import DurableRun
from agentfsm.impl.durable.state import Effect, RunState
from agentfsm.impl.stores.journal import STARTED, Entry, Record
from agentfsm.spec import Table, load_table

APPROVAL_TABLE = Path(__file__).parent.parent / "tables" / "approval-demo.yaml"
APPROVALS = {"AskApproval": None}


@pytest.fixture(scope="module")
def approval_table() -> Table:
    return load_table(APPROVAL_TABLE)


def check(table: Table, runtime: type[DurableRun] = DurableRun, depth: int | None = 2,
          snapshot_every: int = 0) -> CrashReport:
    checker = CrashChecker(table, runtime, approvals=APPROVALS if table.machine == "approval-demo" else None,
                           depth=depth)
    checker.options.snapshot_every = snapshot_every
    return checker.check()


def kinds(report: CrashReport) -> set[str]:
    return {v.kind for v in report.violations}


def scenarios(report: CrashReport, kind: str) -> list[str]:
    return [v.scenario for v in report.violations if v.kind == kind]


def test_the_real_runtime_survives_every_crash_of_the_loom_table(loom: Table) -> None:
    report = check(loom)
    assert report.ok, report.violations[:3]
    assert report.crashes == report.boundaries > 100 and report.double_crashes > report.crashes
    assert report.races == report.scenarios // 2


def test_the_real_runtime_survives_every_crash_with_approvals_and_snapshots(approval_table: Table) -> None:
    for every in (0, 1, 3):
        report = check(approval_table, depth=None, snapshot_every=every)
        assert report.ok, (every, report.violations[:3])
        assert report.configurations == 10


class EffectBeforeStarted(DurableRun):
    """Runs the tool first and only then writes ``started``: the dangerous window, widened."""

    def _perform(self, effect: Effect, retry: bool = False) -> None:
        attempt = effect.attempts + 1
        self._tool(effect).run(self._call(effect, attempt))
        self._append_retrying(Entry(STARTED, {"key": effect.key, "attempt": attempt, "retry": retry}, 0.0),
                              lambda: True)
        self._complete(effect.key, "completed", {"action": effect.action, "receipt": effect.key}, "run")


def test_effect_run_before_started_is_durable_is_caught(loom: Table) -> None:
    report = check(loom, EffectBeforeStarted, depth=2)
    found = scenarios(report, "effect-twice")
    assert any("then LlmCompleted(tool_calls=1)" in s and "crash before write 'started'" in s for s in found), found
    assert any("ExecuteTools" not in s for s in found)


class UnknownAsFailed(DurableRun):
    """Treats a started-but-not-completed effect as failed instead of unknown."""

    def _settle(self, key: str) -> None:
        if self.st.effects[key].status == "started":
            self._complete(key, "failed", {"error": "interrupted"}, "recovery")
            return
        super()._settle(key)


def test_unknown_treated_as_failed_is_caught(loom: Table) -> None:
    report = check(loom, UnknownAsFailed, depth=1)
    found = [v for v in report.violations if v.kind == "outcome"]
    assert found and all("'failed'" in v.message for v in found)
    assert any("crash before write 'completed'" in v.scenario for v in found)


class SnapshotReplayedTwice(DurableRun):
    """Recovery replays records the snapshot already holds."""

    def _replay(self, records: Sequence[Record]) -> None:
        if self.last_snapshot and records is not None:
            again = [r for r in self.store.records(self.run_id) if r.seq > 1 and r.seq <= self.last_snapshot]
            records = [*again, *records]
        super()._replay(records)


def test_snapshot_replayed_twice_is_caught(approval_table: Table) -> None:
    report = check(approval_table, SnapshotReplayedTwice, depth=None, snapshot_every=2)
    assert "recovery-error" in kinds(report)
    assert any("cannot be replayed" in v.message for v in report.violations)


class CasSkipped(DurableRun):
    """Writes at whatever version the store is at, without reloading the state it computed from."""

    def _append(self, entries: Sequence[Entry]) -> list[Record]:
        self.st.version = self.store.version(self.run_id)
        return super()._append(entries)


def test_cas_skipped_is_caught_as_a_lost_update(loom: Table) -> None:
    report = check(loom, CasSkipped, depth=1)
    found = scenarios(report, "lost-update")
    assert any("then UserInput from two writers" in s for s in found), found


class ApprovalDropped(DurableRun):
    """Forgets pending approvals at restart."""

    def recover(self) -> None:
        self.st = RunState(self.st.state, self.st.vars, self.st.version, self.st.halted, self.st.effects, {},
                           self.st.events)
        super().recover()


def test_approval_dropped_at_restart_is_caught(approval_table: Table) -> None:
    report = check(approval_table, ApprovalDropped, depth=1)
    found = scenarios(report, "approval-skipped")
    assert any(s.startswith("prefix [] then Request") and "crash after write 'step'" in s for s in found), found
