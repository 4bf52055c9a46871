"""The adapter protocol (docs/conformance.md): one reply per request, never dying on bad input."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from agentfsm.impl.adapter import Adapter
from agentfsm.spec import Table
from conftest import ROOT

AGENTFSM = str(ROOT / ".venv" / "bin" / "agentfsm")
LOOM = str(ROOT / "spec" / "loom-agent.yaml")


def test_protocol_session(loom: Table) -> None:
    adapter = Adapter(loom)
    reply, stop = adapter.handle('{"op": "reset", "machine": "loom-agent"}')
    idle = {"retries": 0, "pending": 0, "failed": 0, "mutated": False, "origin": 0}
    assert reply == {"ok": True, "state": "WaitingForUserInput", "vars": idle} and not stop
    adapter.handle('{"op": "event", "event": "UserInput", "params": {}}')
    reply, _ = adapter.handle('{"op": "event", "event": "LlmCompleted", "params": {"tool_calls": 2}}')
    assert reply == {"ok": True, "accepted": True, "state": "ExecutingTools", "actions": ["ExecuteTools"],
                     "vars": {**idle, "pending": 2}}
    reply, _ = adapter.handle('{"op": "event", "event": "UserInput"}')
    assert reply["ok"] and reply["accepted"] is False and reply["actions"] == ["WaitForInput"]
    assert adapter.handle('{"op": "quit"}') == ({"ok": True}, True)


def test_bad_requests_are_answered_not_fatal(loom: Table) -> None:
    adapter = Adapter(loom)
    bad = ["garbage", "[1, 2]", "42", '{"op": "dance"}', '{"op": "event"}', '{"op": "event", "event": "Nope"}',
           '{"op": "event", "event": "LlmCompleted", "params": {"tool_calls": 99}}',
           '{"op": "event", "event": "LlmCompleted", "params": {"tool_calls": true}}',
           '{"op": "event", "event": "LlmCompleted", "params": []}',
           '{"op": "event", "event": "UserInput", "params": {"extra": 1}}',
           '{"op": "reset", "machine": "other"}', "[" * 100_000]
    for line in bad:
        reply, stop = adapter.handle(line)
        assert reply["ok"] is False and isinstance(reply["error"], str) and reply["error"] and not stop, line
    assert adapter.engine.state == "WaitingForUserInput"


def test_adapter_process_survives_garbage(tmp_path: Path) -> None:
    requests = [b'{"op": "reset", "machine": "loom-agent"}', b"\xff\xfe not utf-8", b"{{{", b"",
                b'{"op": "event", "event": "UserInput", "params": {}}',
                b'{"op": "event", "event": "ShutdownRequested"}',
                b'{"op": "event", "event": "UserInput"}', b'{"op": "quit"}', b'{"op": "reset"}']
    result = subprocess.run([AGENTFSM, "adapter", LOOM], input=b"\n".join(requests) + b"\n", capture_output=True,
                            timeout=60, check=True)
    replies = [json.loads(line) for line in result.stdout.decode().splitlines()]
    assert [r["ok"] for r in replies] == [True, False, False, True, True, True, True]
    assert [r.get("state") for r in replies[3:6]] == ["CallingLlm", "ShuttingDown", "ShuttingDown"]
    assert replies[5]["accepted"] is False and replies[5]["actions"] == []


def test_adapter_bad_table_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("format: 1\nmachine: x\n")
    result = subprocess.run([AGENTFSM, "adapter", str(bad)], input=b"", capture_output=True, timeout=60)
    assert result.returncode == 2 and b"bad.yaml:" in result.stderr and b"Traceback" not in result.stderr
