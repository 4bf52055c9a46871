"""A long conform run forgets the vectors it has passed: the same report, no passed vector held."""

from __future__ import annotations

import itertools

import pytest
from agentfsm.spec import Table, load_table
from agentfsm.verify.conformance import parallel
from agentfsm.verify.conformance.conform import Runner
from agentfsm.verify.conformance.vectors import generate_extended
from conformance_helpers import ROOT
from test_conformance_parallel import in_process, summary

EXPLORER = ROOT / "spec" / "explorer-evaluator.yaml"


@pytest.fixture(scope="module")
def explorer() -> Table:
    return load_table(EXPLORER)


@pytest.mark.parametrize("jobs", [1, 3])
@pytest.mark.parametrize("wrong", [frozenset({"CommandsExecuted"}), frozenset({"PlannerReplied", "EvaluatorDone"})])
def test_forgetting_passed_vectors_changes_no_report(explorer: Table, jobs: int, wrong: frozenset[str]) -> None:
    vectors = generate_extended(explorer, sets=["rows", "suffixes"], extra_states=1)[1]
    chosen = list(itertools.islice(vectors, 0, len(vectors), 15))
    connect = in_process(explorer, wrong)
    kept = Runner(explorer, connect).run(chosen, max_failures=25)
    forgetting = parallel.run(explorer, connect, chosen, jobs, max_failures=25, keep_passing=False)
    assert summary(forgetting) == summary(kept)
    # Only the last result each adapter's runner read may still hold its passed vector.
    held = [r for r in forgetting.results if r.status == "pass" and r.vector.steps]
    assert len(held) <= jobs and forgetting.count("pass") > 0


def test_lazily_made_vectors_are_not_held_after_they_pass(explorer: Table) -> None:
    """--extra-states vectors are made as they are read and, once passed, dropped: memory bounded by a window."""
    vectors = generate_extended(explorer, sets=["suffixes"], extra_states=1)[1]
    report = Runner(explorer, in_process(explorer)).run(itertools.islice(vectors, 1000), keep_passing=False)
    assert report.ok and report.count("pass") == 1000
    assert sum(1 for r in report.results if r.vector.steps or r.vector.covers) == 1
