"""The pytest entry point, used the way a Python implementation's own suite would use it."""

from __future__ import annotations

import shutil
from typing import Any

import pytest
from agentfsm.spec import Table
from agentfsm.spec.vectorfile import Vector
from agentfsm.verify.conformance.vectors import generate
from agentfsm.verify.pytest_plugin import assert_conforms, conformance_vectors
from conformance_helpers import LOOM, ROOT, OracleHandler


@conformance_vectors(LOOM, sets=["rows", "row-pairs"])
def test_an_in_process_implementation(table: Table, vector: Vector) -> None:
    assert_conforms(table, vector, OracleHandler(table))


EXAMPLE_ADAPTER = ROOT / "examples" / "conformance" / "dist" / "adapter.js"


@pytest.mark.skipif(shutil.which("node") is None or shutil.which("npm") is None, reason="node or npm is not installed")
@conformance_vectors(LOOM, sets=["rows"])
def test_an_adapter_process(table: Table, vector: Vector) -> None:
    assert EXAMPLE_ADAPTER.exists(), "the TypeScript example is not built: run scripts/setup.sh"
    assert_conforms(table, vector, f"node {EXAMPLE_ADAPTER}")


def test_a_failure_shows_the_trace(loom: Table) -> None:
    base = OracleHandler(loom)

    def wrong(request: dict[str, Any]) -> dict[str, Any]:
        reply = base(request)
        if reply.get("actions") == ["DisplayMessage"]:
            reply["actions"] = []
        return reply

    vector = next(v for v in generate(loom, sets=["rows"])[1] if "row:2" in v.covers)
    with pytest.raises(pytest.fail.Exception) as caught:
        assert_conforms(loom, vector, wrong)
    assert "actions: expected ['DisplayMessage'], got []" in str(caught.value)
    assert "loom-agent/row-02" in str(caught.value)
