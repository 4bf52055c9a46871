"""The independent JavaScript implementation of the Loom table passes the vectors (CI runs it)."""

from __future__ import annotations

import shutil

import pytest
from agentfsm.spec import Table
from agentfsm.verify.conform import Runner
from agentfsm.verify.harness import ProcessTransport
from agentfsm.verify.vectors import generate
from conformance_helpers import ROOT

NODE = shutil.which("node")
ADAPTER = ROOT / "examples" / "conformance" / "adapter.mjs"

pytestmark = pytest.mark.skipif(NODE is None, reason="node is not installed")


def test_the_javascript_loom_agent_conforms(loom: Table) -> None:
    assert NODE is not None
    vectors = generate(loom)[1]
    report = Runner(loom, lambda: ProcessTransport([NODE, str(ADAPTER)], 10.0)).run(vectors)
    assert report.ok, "\n" + "\n".join(r.message for r in report.results if r.status != "pass")
    assert report.count("pass") == len(vectors)


def test_the_javascript_adapter_refuses_what_it_cannot_serve() -> None:
    assert NODE is not None
    transport = ProcessTransport([NODE, str(ADAPTER)], 10.0)
    try:
        assert transport.request({"op": "reset", "machine": "other"})["ok"] is False
        assert transport.request({"op": "reset", "machine": "loom-agent"})["ok"] is True
        reply = transport.request({"op": "event", "event": "LlmCompleted", "params": {"tool_calls": 7}})
        assert reply == {"ok": False, "error": "bad or missing parameter tool_calls of LlmCompleted"}
    finally:
        transport.close()
