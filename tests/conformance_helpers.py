"""What the conformance tests share: the test-only adapters and a semantics-backed handler."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from agentfsm.spec import Table
from agentfsm.spec.semantics import step

ROOT = Path(__file__).resolve().parent.parent
ADAPTERS = ROOT / "tests" / "adapters"
LOOM = ROOT / "spec" / "loom-agent.yaml"


def semantics_adapter(*extra: str, table: Path = LOOM) -> list[str]:
    return [sys.executable, str(ADAPTERS / "adapter_semantics.py"), str(table), *extra]


def broken_adapter(mode: str) -> list[str]:
    return [sys.executable, str(ADAPTERS / "adapter_broken.py"), mode]


class SemanticsHandler:
    """An in-process implementation speaking the protocol's dicts, on the reference semantics."""

    def __init__(self, table: Table, report_vars: bool = True) -> None:
        self.table = table
        self.report_vars = report_vars
        self.state, self.values = table.initial.index, table.initial_vars()

    def __call__(self, request: dict[str, Any]) -> dict[str, Any]:
        table = self.table
        reply: dict[str, Any]
        if request["op"] == "reset":
            self.state, self.values = table.initial.index, table.initial_vars()
            reply = {"ok": True, "state": table.states[self.state].name}
        elif request["op"] == "event":
            try:
                params = table.event(request["event"]).param_values(request["params"])
            except (KeyError, ValueError) as exc:
                return {"ok": False, "error": str(exc)}
            result = step(table, self.state, self.values, request["event"], params)
            self.state, self.values = result.state, result.vars
            reply = {"ok": True, "accepted": result.accepted, "state": table.states[self.state].name,
                     "actions": list(result.actions)}
        else:
            return {"ok": True}
        if self.report_vars:
            reply["vars"] = table.vars_dict(self.values)
        return reply
