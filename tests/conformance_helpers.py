"""What the conformance tests share: the test-only adapters and an in-process handler on the naive interpreter."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from agentfsm.spec import Table
from agentfsm.spec.vectorfile import to_json
from agentfsm.verify.conformance.vectors import generate
from naive_semantics import NaiveTable

ROOT = Path(__file__).resolve().parent.parent
ADAPTERS = ROOT / "tests" / "adapters"
LOOM = ROOT / "spec" / "loom-agent.yaml"


def semantics_adapter(*extra: str, table: Path = LOOM) -> list[str]:
    return [sys.executable, str(ADAPTERS / "adapter_semantics.py"), str(table), *extra]


def broken_adapter(mode: str) -> list[str]:
    return [sys.executable, str(ADAPTERS / "adapter_broken.py"), mode]


class OracleHandler:
    """An in-process implementation speaking the protocol's dicts, on the naive interpreter of
    tests/naive_semantics.py: independent of the reference semantics the vectors come from."""

    def __init__(self, table: Table, report_vars: bool = True) -> None:
        self.oracle = NaiveTable.from_file(table.file)
        self.report_vars = report_vars
        self.state, self.values = self.oracle.initial()

    def __call__(self, request: dict[str, Any]) -> dict[str, Any]:
        oracle = self.oracle
        reply: dict[str, Any]
        if request["op"] == "reset":
            self.state, self.values = oracle.initial()
            reply = {"ok": True, "state": self.state}
        elif request["op"] == "event":
            event = request["event"]
            params = oracle.parse_params(event, request.get("params"))
            if isinstance(params, str):
                return {"ok": False, "error": params}
            outcome = oracle.step(self.state, self.values, event, params)
            assert not outcome.error, f"the vectors lead into a step that breaks the table: {outcome.status}"
            self.state, self.values = outcome.state, outcome.vars
            reply = {"ok": True, "accepted": outcome.accepted, "state": self.state, "actions": outcome.actions}
        else:
            return {"ok": True}
        if self.report_vars:
            reply["vars"] = dict(self.values)
        return reply


def log_of(table: Table, walks: int = 3) -> list[dict[str, Any]]:
    """A production-like log: several runs, each a walk, separated by resets."""
    lines: list[dict[str, Any]] = []
    for vector in generate(table, sets=["walks"], walks=walks, walk_length=30)[1]:
        lines.append({"reset": True})
        for s in to_json(vector)["steps"]:
            lines.append({"event": s["event"], "params": s["params"], **s["expect"]})
    return lines[1:]


def write(path: Path, lines: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path
