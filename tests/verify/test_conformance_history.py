"""A fault behind a history the table does not model: why --extra-states and guided walks exist.

The test adapter's "stream-history" fault loses an LLM response's tool calls, but only
right after TextDelta, ToolCallDelta, TextDelta: a state the Loom table does not have.
The distinguishing suffixes assume the implementation has no more states than the table,
so they miss it, and so does the Wp extension for 1 extra state; the extension for 2 (the
history's first TextDelta is on the way to CallingLlm already) and the guided walks catch it.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Any

import pytest
from agentfsm.spec import Table
from agentfsm.verify.conformance.conform import Runner
from agentfsm.verify.conformance.harness import FunctionTransport, Message, ProcessTransport
from agentfsm.verify.conformance.vectors import generate, generate_extended
from conformance_helpers import ADAPTERS, LOOM, semantics_adapter
from conftest import run_cli
from naive_semantics import NaiveTable


def _adapter_module() -> Any:
    """The test adapter's module (a script, not a package: loaded by path)."""
    spec = importlib.util.spec_from_file_location("adapter_semantics", ADAPTERS / "adapter_semantics.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


planted = _adapter_module().planted


class HistoryFault:
    """The adapter's planted fault, in process (the same ``planted`` function on the same naive
    interpreter), for speed."""

    def __init__(self, table: Table) -> None:
        self.oracle = NaiveTable.from_file(table.file)
        self.state, self.values = self.oracle.initial()
        self.history: tuple[str, ...] = ()

    def __call__(self, request: Message) -> Message:
        oracle = self.oracle
        if request["op"] == "reset":
            self.state, self.values = oracle.initial()
            self.history = ()
            return {"ok": True, "state": self.state}
        if request["op"] != "event":
            return {"ok": True}
        event = request["event"]
        params = oracle.parse_params(event, request.get("params"))
        if isinstance(params, str):
            return {"ok": False, "error": params}
        result = planted("stream-history", oracle, self.state, self.values, event,
                         oracle.step(self.state, self.values, event, params), self.history)
        self.state, self.values = result.state, result.vars
        self.history = (*self.history, event)[-3:]
        reply: dict[str, Any] = {"ok": True, "accepted": result.accepted, "state": result.state,
                                 "actions": list(result.actions)}
        return reply


def test_the_distinguishing_suffixes_and_the_other_plain_sets_miss_it(loom: Table) -> None:
    vectors = generate(loom, sets=["rows", "events", "row-pairs", "walks", "suffixes", "invalid"])[1]
    report = Runner(loom, lambda: ProcessTransport(semantics_adapter("--fault", "stream-history"), 10.0)).run(vectors)
    assert report.ok, [r.message for r in report.results if r.status != "pass"]


def test_extra_states_2_catches_it(loom: Table) -> None:
    manifest, vectors = generate_extended(loom, sets=["suffixes"], extra_states=2)
    assert manifest.sets["suffixes"]["extended"] == vectors.extra_count > 0
    failing = Runner(loom, lambda: FunctionTransport(HistoryFault(loom))).first_failure(vectors)
    assert failing is not None
    events = [s.event for s in failing.vector.steps]
    at = failing.failed_step
    assert at is not None and events[at - 4:at] == ["TextDelta", "ToolCallDelta", "TextDelta", "LlmCompleted"]
    assert "+" in failing.vector.covers[0]


@pytest.mark.slow
def test_extra_states_1_is_not_enough(loom: Table) -> None:
    # All 27 280 vectors pass: one event in front of a pair never makes the whole history.
    vectors = generate_extended(loom, sets=["suffixes"], extra_states=1)[1]
    assert Runner(loom, lambda: FunctionTransport(HistoryFault(loom))).first_failure(vectors) is None


def test_guided_walks_catch_it_within_the_default_budget(loom: Table) -> None:
    manifest, vectors = generate(loom, sets=["guided"])
    assert manifest.sets["guided"]["steps"] == manifest.sets["guided"]["budget"]
    report = Runner(loom, lambda: ProcessTransport(semantics_adapter("--fault", "stream-history"), 10.0)).run(vectors)
    assert report.count("fail") > 0
    # The same budget spent on random walks does not.
    walks = manifest.sets["guided"]["budget"] // 60
    random_walks = generate(loom, sets=["walks"], walks=walks)[1]
    assert Runner(loom, lambda: FunctionTransport(HistoryFault(loom))).first_failure(random_walks) is None


def test_the_extended_count_is_printed_before_the_run(loom: Table, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["conform", str(LOOM), "--adapter", " ".join(semantics_adapter("--fault", "stream-history")),
            "--sets", "suffixes", "--extra-states", "1", "--max-failures", "1"]
    code, out, err = run_cli(argv, capsys)
    count = len(generate_extended(loom, sets=["suffixes"], extra_states=1)[1])
    assert re.search(rf"loom-agent: {count} vectors, \d+ of them for up to 1 extra states", err), err
    assert code == 0 and f"conform loom-agent: {count} vectors: {count} passed" in out


def test_guided_coverage_is_printed(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run_cli(["vectors", str(LOOM), "--sets", "guided", "--budget", "300",
                            "-o", str(tmp_path / "v.jsonl")], capsys)
    assert code == 0
    assert re.search(r"guided walks: 300 steps in \d+ walks reached 1-grams \d+, 2-grams \d+, 3-grams \d+, "
                     r"4-grams \d+, rejected \d+, row-pairs \d+, rows \d+", err), err
