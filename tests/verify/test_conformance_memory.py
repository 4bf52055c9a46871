"""A long conform run keeps the vectors it has passed as no object: the same report, no passed vector held."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from agentfsm.spec import Table, load_table
from agentfsm.verify.conformance import parallel
from agentfsm.verify.conformance.conform import Runner
from agentfsm.verify.conformance.results import Results
from agentfsm.verify.conformance.vectors import generate_extended
from conformance_helpers import LOOM, ROOT, semantics_adapter
from test_conformance_parallel import in_process, same_text, summary

from agentfsm.cli import conformance, main

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
    # No passing result is held as an object: only the ones that did not pass.
    assert isinstance(forgetting.results, Results)
    assert forgetting.results.last is None and forgetting.count("pass") > 0
    assert all(r.status != "pass" for r in forgetting.results.others.values())


@pytest.mark.parametrize("source", ["vectors", "iterator"])
def test_lazily_made_vectors_are_not_held_after_they_pass(explorer: Table, source: str) -> None:
    """--extra-states vectors are made as they are read and, once passed, kept as no object;
    their ids are rebuilt from their indices (kept, from a bare iterator)."""
    vectors = generate_extended(explorer, sets=["suffixes"], extra_states=1)[1]
    assert len(vectors) > 1000 > len(vectors.made)
    run = vectors if source == "vectors" else itertools.islice(vectors, len(vectors))
    report = Runner(explorer, in_process(explorer)).run(run, keep_passing=False)
    assert report.ok and report.count("pass") == len(vectors)
    results = report.results
    assert isinstance(results, Results) and not results.others and results.last is None
    assert (results.kept_ids is None) == (source == "vectors")
    assert [(r.vector.id, r.agreed) for r in results] == [(v.id, len(v.steps)) for v in vectors]
    assert [r.vector.id for r in results[-3:]] == [v.id for v in vectors[-3:]]


@pytest.mark.parametrize("jobs", [1, 2])
@pytest.mark.parametrize(("table", "adapter", "extra"), [
    (EXPLORER, semantics_adapter(table=EXPLORER), ["--sets", "rows,suffixes", "--extra-states", "1"]),
    (LOOM, semantics_adapter("--fault", "silent-text"), ["--sets", "rows,suffixes"]),
    (LOOM, semantics_adapter("--fault", "retry-bound"), ["--sets", "rows,suffixes", "--max-failures", "3"]),
], ids=["faithful", "silent", "retry"])
def test_the_command_prints_what_it_printed_with_every_result_kept(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, table: Path, adapter: list[str], extra: list[str],
        jobs: int) -> None:
    """Text, JSON and JUnit from results kept as no object are those of whole results (which
    --coverage-out keeps), byte for byte but the seconds."""
    def conform(*more: str) -> tuple[int, str, str, str]:
        junit = tmp_path / "conform.xml"
        args = ["conform", str(table), "--adapter", " ".join(adapter), "--jobs", str(jobs), "--junit", str(junit),
                *extra, *more]
        status = main(args)
        text = capsys.readouterr().out
        assert main([*args, "--json"]) == status
        return status, same_text(text), same_text(capsys.readouterr().out), same_text(junit.read_text())

    compact = conform()
    assert compact == conform("--coverage-out", str(tmp_path / "coverage.json"))
    assert compact[3].count("<testcase") > 100


def test_the_html_report_draws_the_coverage_of_every_passing_vector(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--html draws the rows the passing vectors fired (as --coverage-out counts them), so it keeps them whole."""
    entries: list[Any] = []
    monkeypatch.setattr(conformance, "write_report", lambda args, command, made, tables: entries.extend(made))
    coverage = tmp_path / "coverage.json"
    args = ["conform", str(LOOM), "--adapter", " ".join(semantics_adapter()), "--sets", "rows", "--jobs", "1"]
    assert main([*args, "--coverage-out", str(coverage)]) == 0
    assert main([*args, "--html", str(tmp_path / "report.html")]) == 0
    counts = json.loads(coverage.read_text())["rows"]
    assert sum(counts.values()) > 0 and entries[-1]["coverage"] == counts
