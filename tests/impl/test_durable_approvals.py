"""Pending approvals declared by the table (``approval:`` on an action) and checked by ``agentfsm crash``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from agentfsm.faults.crash import CrashChecker
from agentfsm.impl.durable.ledger import MemoryLedger, ledger_tools
from agentfsm.impl.durable.run import DurableRun, Options
from agentfsm.impl.stores.memory import MemoryStore
from agentfsm.spec import Table, load_table
from agentfsm.spec.errors import TableError
from conftest import SPEC, run_cli
from strategies_tables import build

TOOL_CALL = SPEC / "tool-call.yaml"


def table_with(approval: Any) -> Table:
    return build({"format": 1, "machine": "t", "states": {"A": {"initial": True}, "B": {}},
                  "events": {"Ask": {}, "Answer": {}},
                  "actions": {"Request": {"approval": approval}, "Plain": {}, "Call": {"effect": "external"}},
                  "transitions": [{"from": "A", "on": "Ask", "to": "B", "emit": ["Request"]},
                                  {"from": "B", "on": "Answer", "to": "A", "emit": ["Call"]}]})


def test_the_approval_flag_is_optional_and_carries_a_lifetime() -> None:
    assert [(a.name, a.approval, a.approval_lifetime) for a in table_with({"lifetime": 90}).actions] == [
        ("Request", True, 90.0), ("Plain", False, None), ("Call", False, None)]
    assert table_with(True).action_index["Request"].approval_lifetime is None
    assert not table_with(False).action_index["Request"].approval
    tool_call = load_table(TOOL_CALL)
    assert [(a.name, a.approval_lifetime) for a in tool_call.actions if a.approval] == [("RequestApproval", 3600.0)]


@pytest.mark.parametrize(("approval", "message"), [
    ({"lifetime": 0}, "less than or equal to the minimum of 0"),
    ({"life": 3}, "unknown field 'life' in actions.Request.approval"),
    ({}, "missing field 'lifetime' in actions.Request.approval"),
    ("soon", "actions.Request.approval must be a boolean or a mapping"),
])
def test_a_bad_approval_flag_is_reported(approval: Any, message: str) -> None:
    with pytest.raises(TableError) as caught:
        table_with(approval)
    assert message in str(caught.value)


def test_a_durable_run_keeps_the_tables_approvals_without_options() -> None:
    table = table_with({"lifetime": 60})
    clock = [1000.0]
    store, ledger = MemoryStore(), MemoryLedger()
    run = DurableRun.create(store, table, "r", ledger_tools(table, ledger, False),
                            options=Options(clock=lambda: clock[0]))
    run.deliver("Ask", event_id="1")
    [approval] = run.pending_approvals
    assert (approval.action, approval.expires_at) == ("Request", 1060.0)
    clock[0] = 2000.0
    again = DurableRun.open(store, table, "r", ledger_tools(table, ledger, False),
                            options=Options(clock=lambda: clock[0]))
    assert [d.kind for d in again.decisions()] == ["approval-expired"]


class LifetimeIgnored(DurableRun):
    """Keeps pending approvals across a restart but never re-validates their lifetime."""

    def _expire(self, id: str, now: float) -> None:
        return None


def test_crash_checks_the_tool_call_tables_approvals_and_catches_a_lifetime_not_revalidated() -> None:
    table = load_table(TOOL_CALL)
    report = CrashChecker(table, depth=1).check()
    assert report.ok, report.violations[:3]
    assert report.approvals > 0, "scenarios ending with RequestApproval pending were checked"
    faulty = CrashChecker(table, LifetimeIgnored, depth=1).check()
    found = [v for v in faulty.violations if v.kind == "approval-lifetime"]
    assert found and all("restart after the approvals' lifetime" in v.scenario for v in found)
    assert any("ArgumentsValid(ask_user=true" in v.scenario for v in found)


def test_crash_skips_a_table_without_external_actions(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t.yaml"
    path.write_text("format: 1\nmachine: quiet\nstates: {A: {initial: true}}\nevents: {E: {}}\n"
                    "transitions: [{from: A, on: E, to: A}]\n")
    code, out, _ = run_cli(["crash", str(path)], capsys)
    assert code == 0 and out.strip() == "quiet: no external actions, nothing a crash could run twice; skipped"
    code, out, _ = run_cli(["crash", str(path), "--json"], capsys)
    assert code == 0 and json.loads(out)["ok"] is True
