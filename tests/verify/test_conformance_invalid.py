"""The invalid set: requests an adapter must refuse, with its configuration left as it was."""

from __future__ import annotations

import io
import sys
from pathlib import Path
from typing import Any

import pytest
from agentfsm.spec import Table
from agentfsm.spec.vectorfile import (
    REFUSED,
    Refused,
    Vector,
    VectorError,
    invalid_request,
    read_vectors,
    vector_labels,
    write_vectors,
)
from agentfsm.verify.conformance.conform import Runner, format_trace
from agentfsm.verify.conformance.harness import FunctionTransport, ProcessTransport
from agentfsm.verify.conformance.vectors import generate
from conformance_helpers import LOOM, OracleHandler
from conftest import run_cli

# The installed command (``python -m`` from the repository root would import the bare folder).
AGENTFSM = str(Path(sys.executable).parent / "agentfsm")


@pytest.fixture(scope="module")
def invalid(loom: Table) -> list[Vector]:
    return generate(loom, sets=["invalid"])[1]


def test_every_kind_of_invalid_request_is_sent(invalid: list[Vector], loom: Table) -> None:
    covers = " | ".join(v.covers[0] for v in invalid)
    for what in ("missing tool_calls", "tool_calls not an integer (true)", "tool_calls not an integer (\"0\")",
                 "tool_calls not an integer (0.5)", "tool_calls below its range (-1)",
                 "tool_calls above its range (3)", "tool_calls a 65-bit integer (2^64 + 0, 0 in 64-bit arithmetic)",
                 "mutating not a boolean (1)", "extra parameter extra",
                 "NoSuchEvent: unknown event"):
        assert what in covers, what
    for vector in invalid:
        refused = [n for n, s in enumerate(vector.steps) if isinstance(s.expect, Refused)]
        # One refused request, then a valid event judged from the unchanged configuration.
        assert len(refused) == 1 and refused[0] == len(vector.steps) - 2
    # Every event is sent bad (with an extra parameter at least), and an unknown event in every stable state.
    assert {v.steps[-2].event for v in invalid} == {e.name for e in loom.events} | {"NoSuchEvent"}
    unknown = [v for v in invalid if v.steps[-2].event == "NoSuchEvent"]
    assert len(unknown) == sum(1 for s in loom.states if not s.transient)


def test_the_python_reference_adapter_refuses_every_invalid_request(invalid: list[Vector], loom: Table) -> None:
    argv = [AGENTFSM, "adapter", str(LOOM)]
    report = Runner(loom, lambda: ProcessTransport(argv, 10.0)).run(invalid)
    assert report.ok and report.count("pass") == len(invalid), [r.message for r in report.results]


def test_an_adapter_that_accepts_bad_requests_fails_them(invalid: list[Vector], loom: Table) -> None:
    # Lenient: unknown parameters are dropped, a missing one defaults, out-of-range values clamp.
    handler = OracleHandler(loom)

    def lenient(request: dict[str, Any]) -> dict[str, Any]:
        if request["op"] == "event" and request["event"] in loom.event_index:
            event = loom.event(request["event"])
            params = {p.name: request["params"].get(p.name, p.lo) for p in event.params}
            fixed = {}
            for p in event.params:
                value = params[p.name]
                fixed[p.name] = bool(value) if p.type == "bool" else max(p.lo, min(p.hi, int(value)))
            request = {**request, "params": fixed}
        return handler(request)

    report = Runner(loom, lambda: FunctionTransport(lenient)).run(invalid)
    failed = [r for r in report.results if r.status == "fail"]
    unknown = [v for v in invalid if v.steps[-2].event == "NoSuchEvent"]
    assert len(failed) == len(invalid) - len(unknown)
    trace = format_trace(failed[0])
    assert 'expected {"ok": false}' in trace and "invalid request" in failed[0].message


def test_applying_the_bad_request_shows_in_the_next_step(loom: Table, invalid: list[Vector]) -> None:
    # An adapter that answers {"ok": false} but still applies the event with a default value.
    inner = OracleHandler(loom)

    def refuses_too_late(request: dict[str, Any]) -> dict[str, Any]:
        if request["op"] == "event" and request["event"] == "LlmCompleted" \
                and invalid_request(loom, "LlmCompleted", request["params"]) is not None:
            inner({**request, "params": {"tool_calls": 1}})
            return {"ok": False, "error": "bad parameters"}
        return inner(request)

    report = Runner(loom, lambda: FunctionTransport(refuses_too_late)).run(invalid)
    failed = [r for r in report.results if r.status == "fail"]
    bad_llm = [v for v in invalid if v.steps[-2].event == "LlmCompleted"]
    # The refusal itself passes; the step after it shows the configuration moved.
    assert len(failed) == len(bad_llm)
    assert all(r.failed_step == len(r.vector.steps) for r in failed)


def test_refusals_survive_the_vectors_file(loom: Table, invalid: list[Vector], tmp_path: Path) -> None:
    out = io.StringIO()
    manifest = generate(loom, sets=["invalid"])[0]
    write_vectors(out, manifest, invalid)
    path = tmp_path / "invalid.jsonl"
    path.write_text(out.getvalue())
    assert '"expect":{"ok":false}' in out.getvalue()
    assert read_vectors(path)[1] == invalid
    for vector in invalid:
        vector_labels(loom, vector)
    # A refusal expected of a valid request is not a vector the table can mean.
    good = invalid[0].steps[-1]
    bad = Vector("loom-agent/x", "loom-agent", (), (*invalid[0].steps[:-2], type(good)(good.event, good.params,
                                                                                        REFUSED)))
    with pytest.raises(VectorError, match="expects a refusal of a valid request"):
        vector_labels(loom, bad)


def test_conform_runs_the_invalid_set(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["conform", str(LOOM), "--adapter", f"{AGENTFSM} adapter {LOOM}",
            "--sets", "rows,invalid"]
    code, out, _ = run_cli(argv, capsys)
    assert code == 0, out
