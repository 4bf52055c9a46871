"""Running vectors: the reference passes, each planted fault is caught by the right vector."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

import pytest
from agentfsm.spec import Table, load_table
from agentfsm.spec.vectorfile import REFUSED, Step, Vector, read_vectors
from agentfsm.verify.conformance import parallel
from agentfsm.verify.conformance.conform import (
    Requests,
    Runner,
    format_report,
    format_trace,
    junit_suite,
    row_coverage,
)
from agentfsm.verify.conformance.harness import FunctionTransport, ProcessTransport
from agentfsm.verify.conformance.results import Report, Results
from agentfsm.verify.conformance.vectors import generate
from conformance_helpers import LOOM, ROOT, OracleHandler, semantics_adapter
from json_envelope import enveloped
from test_conformance_parallel import summary

from agentfsm.cli import main


@pytest.fixture(scope="module")
def vectors(loom: Table) -> list[Vector]:
    return generate(loom)[1]


def run_process(table: Table, vectors: list[Vector], *extra: str) -> Report:
    return Runner(table, lambda: ProcessTransport(semantics_adapter(*extra), 5.0)).run(vectors)


def test_an_implementation_of_the_semantics_passes_every_vector(loom: Table, vectors: list[Vector]) -> None:
    report = run_process(loom, vectors)
    assert report.ok and report.count("pass") == len(vectors)


def test_vars_are_optional(loom: Table, vectors: list[Vector]) -> None:
    report = run_process(loom, vectors, "--no-vars")
    assert report.ok


@pytest.mark.parametrize(("fault", "cover", "step"), [
    # Retrying once too often shows first on the shortest way to the retry bound.
    ("retry-bound", "row:6", 8),
    # A missing DisplayMessage shows on the shortest vector through row 2.
    ("silent-text", "row:2", 2),
    # Accepting an unhandled event shows on the first rejected pair of the initial state.
    ("accept-everything",
     "event:WaitingForUserInput{retries=0,pending=0,failed=0,mutated=false,origin=0}/TextDelta", 1),
])
def test_each_planted_fault_is_named_by_its_shortest_vector(loom: Table, vectors: list[Vector], fault: str,
                                                           cover: str, step: int) -> None:
    report = run_process(loom, vectors, "--fault", fault)
    shortest = report.shortest_failure()
    assert shortest is not None
    assert cover in shortest.vector.covers
    assert shortest.failed_step == step
    text = format_report(report)
    assert text.startswith("shortest failing vector:\n" + shortest.vector.id)
    assert "✗" in format_trace(shortest)


@pytest.mark.parametrize("fault", ["retry-kept", "retry-early"])
def test_a_counter_bug_is_caught_even_when_the_implementation_hides_its_vars(
        loom: Table, vectors: list[Vector], fault: str) -> None:
    report = run_process(loom, vectors, "--fault", fault, "--no-vars")
    shortest = report.shortest_failure()
    assert shortest is not None and shortest.failed_step is not None
    # The failing step answers wrongly in what an implementation always reports.
    problems = shortest.steps[-1].problems
    assert problems and not any(p.startswith("vars") for p in problems)


def test_a_counter_left_wrong_is_caught_only_by_a_distinguishing_suffix(loom: Table, vectors: list[Vector]) -> None:
    # A retry counter not reset by LlmCompleted shows only when failures follow later:
    # no shortest-prefix vector fails, the suffix after the step that left it wrong does.
    without = [v for v in vectors if not v.id.split("/")[-1].startswith(("suffix-", "guided-"))]
    assert run_process(loom, without, "--fault", "retry-kept", "--no-vars").ok
    report = run_process(loom, vectors, "--fault", "retry-kept", "--no-vars")
    shortest = report.shortest_failure()
    assert shortest is not None
    assert any(c.startswith("suffix:") and "/LlmCompleted" in c for c in shortest.vector.covers)
    assert shortest.failed_step == len(shortest.vector.steps)


def test_a_wrong_initial_state_fails_at_the_reset(loom: Table, vectors: list[Vector]) -> None:
    def handle(request: dict[str, Any]) -> dict[str, Any]:
        return {"ok": True, "state": "CallingLlm"} if request["op"] == "reset" else {"ok": True}

    report = Runner(loom, lambda: FunctionTransport(handle)).run(vectors[:1])
    [result] = report.results
    assert result.status == "fail" and result.failed_step == 0
    assert result.message == "reset: state: expected WaitingForUserInput, got CallingLlm"


def test_reported_vars_are_compared_one_by_one(loom: Table, vectors: list[Vector]) -> None:
    def partial(request: dict[str, Any]) -> dict[str, Any]:
        reply = base(request)
        if "vars" in reply:
            reply["vars"] = {"pending": reply["vars"]["pending"]}
        return reply

    def unknown(request: dict[str, Any]) -> dict[str, Any]:
        reply = base(request)
        reply["vars"] = {**reply.get("vars", {}), "budget": 1}
        return reply

    base = OracleHandler(loom)
    assert Runner(loom, lambda: FunctionTransport(partial)).run(vectors).ok
    report = Runner(loom, lambda: FunctionTransport(unknown)).run(vectors[:1])
    assert "reports 'budget', which the table does not declare" in report.results[0].message


def test_a_bool_is_not_an_int(loom: Table, vectors: list[Vector]) -> None:
    base = OracleHandler(loom)

    def numeric(request: dict[str, Any]) -> dict[str, Any]:
        reply = base(request)
        if "vars" in reply:
            reply["vars"]["mutated"] = int(reply["vars"]["mutated"])
        return reply

    report = Runner(loom, lambda: FunctionTransport(numeric)).run(vectors[:1])
    assert "vars.mutated: expected false, got 0" in report.results[0].message


def test_junit_and_coverage_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    junit, coverage = tmp_path / "conform.xml", tmp_path / "coverage.json"
    argv = ["conform", str(LOOM), "--adapter", " ".join(semantics_adapter("--fault", "silent-text")),
            "--junit", str(junit), "--coverage-out", str(coverage), "--sets", "rows,events"]
    assert main(argv) == 1
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None
    cases = suite.findall("testcase")
    failed = [c.get("name") for c in cases if c.find("failure") is not None]
    assert int(suite.get("failures", "0")) == len(failed) > 0
    assert "loom-agent/row-02" in failed
    assert suite.get("name") == "conform.loom-agent"   # the layout verify --junit uses (verify/junit.py)
    assert {c.get("classname") for c in cases} == {"agentfsm.conform.loom-agent"}
    data = json.loads(coverage.read_text())
    assert data["machine"] == "loom-agent"
    assert set(data["rows"]) == {str(i) for i in range(1, 25)}
    assert data["rows"]["1"] > 0
    assert "conform loom-agent:" in capsys.readouterr().out


def test_coverage_counts_rows_in_agreed_steps(loom: Table, vectors: list[Vector]) -> None:
    report = Runner(loom, lambda: FunctionTransport(OracleHandler(loom))).run(vectors)
    counts = row_coverage(loom, report.results)
    assert all(counts[str(row.index)] > 0 for row in loom.rows)


def test_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    vectors_file = tmp_path / "v.jsonl"
    assert main(["vectors", str(LOOM), "-o", str(vectors_file), "--sets", "rows"]) == 0
    adapter = " ".join(semantics_adapter())
    assert main(["conform", str(LOOM), "--adapter", adapter, "--vectors", str(vectors_file)]) == 0
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x", "machine": "loom-agent", "steps": [}\n')
    assert main(["conform", str(LOOM), "--adapter", adapter, "--vectors", str(bad)]) == 2
    assert f"{bad}:1: error: not JSON" in capsys.readouterr().err
    other = tmp_path / "other.jsonl"
    other.write_text(vectors_file.read_text().replace('"machine":"loom-agent"', '"machine":"other"'))
    assert main(["conform", str(LOOM), "--adapter", adapter, "--vectors", str(other)]) == 2
    assert "for machine 'other'" in capsys.readouterr().err
    assert main(["conform", str(LOOM), "--adapter", "node 'unterminated"]) == 2


def test_not_implemented_fails_unless_allowed(capsys: pytest.CaptureFixture[str]) -> None:
    adapter = f"{semantics_adapter()[0]} {ROOT}/tests/adapters/adapter_broken.py unsupported"
    assert main(["conform", str(LOOM), "--adapter", adapter, "--sets", "rows"]) == 1
    assert main(["conform", str(LOOM), "--adapter", adapter, "--sets", "rows", "--allow-not-implemented"]) == 0
    assert "23 not implemented" in capsys.readouterr().out


def test_the_command_line_end_to_end(tmp_path: Path) -> None:
    vectors_file = tmp_path / "loom.jsonl"
    exe = str(ROOT / ".venv" / "bin" / "agentfsm")
    subprocess.run([exe, "vectors", str(LOOM), "-o", str(vectors_file)], check=True, capture_output=True)
    manifest, vectors = read_vectors(vectors_file)
    assert manifest is not None and manifest.vectors == len(vectors)
    done = subprocess.run([exe, "conform", str(LOOM), "--vectors", str(vectors_file), "--adapter",
                           " ".join(semantics_adapter("--fault", "retry-bound"))], capture_output=True, text=True)
    assert done.returncode == 1
    assert "shortest failing vector:\nloom-agent/row-06" in done.stdout


def test_no_vars_on_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    # The adapter reports vars and keeps a counter wrong: --no-vars ignores what it reports,
    # so only the distinguishing suffixes can catch the fault (the rows set cannot).
    adapter = " ".join(semantics_adapter("--fault", "retry-kept"))
    rows = ["conform", str(LOOM), "--adapter", adapter, "--sets", "rows,events"]
    assert main(rows) == 1
    assert main([*rows, "--no-vars"]) == 0
    assert main(["conform", str(LOOM), "--adapter", adapter, "--sets", "suffixes", "--no-vars"]) == 1
    capsys.readouterr()


def test_actions_out_of_order_fail_the_step() -> None:
    """docs/conformance.md: actions are compared in order (a reordering is a failure)."""
    table = load_table(ROOT / "spec" / "tool-call.yaml")
    base = OracleHandler(table)

    def reordered(request: dict[str, Any]) -> dict[str, Any]:
        reply = base(request)
        if "actions" in reply:
            reply["actions"] = reply["actions"][::-1]
        return reply

    vectors = generate(table, sets=["rows"])[1]
    report = Runner(table, lambda: FunctionTransport(reordered)).run(vectors)
    failed = [r for r in report.results if r.status == "fail"]
    assert failed and all("actions: expected" in r.message for r in failed)
    assert Runner(table, lambda: FunctionTransport(OracleHandler(table))).run(vectors).ok


def test_junit_after_an_early_stop_lists_every_vector_that_did_not_run(loom: Table, vectors: list[Vector]) -> None:
    """Vectors made lazily are counted, not made, after an early stop: the JUnit report still
    skips as many as did not run."""
    def lazily() -> Iterator[Vector]:
        yield from vectors

    made = Runner(loom, lambda: ProcessTransport(semantics_adapter("--fault", "silent-text"), 5.0))
    report = made.run(lazily(), max_failures=1)
    assert report.stopped and report.unlisted > 0
    suite = junit_suite(report)
    ran = [c for c in suite.cases if c.status in ("pass", "failure")]
    skipped = [c for c in suite.cases if c.status == "skipped"]
    assert len(ran) + report.count("not-run") == len(vectors)
    assert skipped[-1].name == f"({report.unlisted} more vectors)"
    assert sum(1 for c in skipped if c.name.startswith("(")) == 1
    assert len(skipped) - 1 + report.unlisted == report.count("not-run")


def test_json_report(capsys: pytest.CaptureFixture[str]) -> None:
    """conform --json: counts, the shortest failing vector with its trace, the vectors that did not pass."""
    argv = ["conform", str(LOOM), "--adapter", " ".join(semantics_adapter("--fault", "silent-text")),
            "--sets", "rows", "--json"]
    assert main(argv) == 1
    data = enveloped(json.loads(capsys.readouterr().out), "conform")
    assert data["format"] == 1 and data["command"] == "conform" and data["machine"] == "loom-agent"
    assert data["ok"] is False and data["stopped"] is None
    counts = data["counts"]
    assert counts["fail"] == len(data["not_passed"]) > 0 and sum(counts.values()) == data["vectors"]
    shortest = data["shortest_failure"]
    assert shortest["id"] == "loom-agent/row-02" and shortest["failed_step"] == 2 and "✗" in shortest["trace"]
    assert main(["conform", str(LOOM), "--adapter", " ".join(semantics_adapter()), "--sets", "rows", "--json"]) == 0
    passing = enveloped(json.loads(capsys.readouterr().out), "conform")
    assert passing["ok"] is True and passing["shortest_failure"] is None and passing["not_passed"] == []


@pytest.mark.parametrize("adapter", ["nosuch-adapter-command",
                                     "SHELL: echo started >> {log}; echo 'no model file' >&2; exit 3",
                                     f"{semantics_adapter()[0]} {ROOT}/tests/adapters/adapter_broken.py exit-at-start"],
                         ids=["missing", "exits", "exits-python"])
def test_an_adapter_that_never_answers_a_reset_is_bad_input(adapter: str, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """Not a verdict on the implementation: exit 2 at once (one start, not one per vector), saying why."""
    log = tmp_path / "starts.log"
    shell = adapter.startswith("SHELL: ")
    command = adapter.removeprefix("SHELL: ").format(log=log)
    assert main(["conform", str(LOOM), "--adapter", command, *(["--shell"] if shell else [])]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "never answered its first reset" in err and "Traceback" not in err
    assert "no vector was judged" in err
    if shell:
        assert log.read_text() == "started\n" and "exit status 3" in err and "no model file" in err
    elif adapter.startswith("nosuch"):
        assert "cannot start nosuch-adapter-command: No such file or directory" in err
    else:
        assert "exit status 4" in err and "adapter: cannot open model file" in err


def test_an_adapter_that_answered_a_reset_and_then_died_is_a_failed_run(capsys: pytest.CaptureFixture[str]) -> None:
    adapter = f"{semantics_adapter()[0]} {ROOT}/tests/adapters/adapter_broken.py crash"
    assert main(["conform", str(LOOM), "--adapter", adapter, "--sets", "rows", "--max-failures", "2"]) == 1
    assert "exited" in capsys.readouterr().out


def test_requests_are_encoded_once_per_event_and_typed_values(loom: Table) -> None:
    steps = (Step("ToolCompleted", {"mutating": True}, REFUSED), Step("ToolCompleted", {"mutating": 1}, REFUSED),
             Step("ToolCompleted", {"mutating": True}, REFUSED), Step("ToolCompleted", {"mutating": [1]}, REFUSED))
    messages, lines = Requests(loom).of(Vector("v", "loom-agent", (), steps))
    assert [json.loads(line)["params"] for line in lines[1:]] == [{"mutating": True}, {"mutating": 1},
                                                                  {"mutating": True}, {"mutating": [1]}]
    assert messages[1] is messages[3] and messages[1] is not messages[2]


def test_no_junit_report_is_built_unless_asked_for(monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """A run of millions of vectors built one JUnit case per vector, then dropped it (7 GB
    at --extra-states 3 on Loom), when --junit was not given."""
    from agentfsm.cli import conformance as cli

    def refuse(*_: object) -> None:
        raise AssertionError("a JUnit report was built")

    monkeypatch.setattr(cli, "junit_suite", refuse)
    assert main(["conform", str(LOOM), "--adapter", " ".join(semantics_adapter()), "--sets", "rows"]) == 0
    assert "passed" in capsys.readouterr().out


@pytest.mark.parametrize("jobs", [1, 2])
@pytest.mark.parametrize("fault", [None, "retry-kept"])
def test_a_run_that_shows_no_seconds_measures_and_keeps_none_and_says_the_same(
        loom: Table, vectors: list[Vector], jobs: int, fault: str | None) -> None:
    """Only a JUnit report shows a vector's seconds: without it ``conform`` neither measures
    them nor keeps them (8 bytes a vector at depth), and every report says what a timed run's does."""
    argv = semantics_adapter(*(("--fault", fault) if fault else ()))
    reports = [parallel.run(loom, lambda: ProcessTransport(argv, 5.0), vectors, jobs, keep_passing=False, timed=timed)
               for timed in (True, False)]
    timed, untimed = reports
    assert summary(timed) == summary(untimed)
    assert timed.ok == (fault is None)
    assert isinstance(untimed.results, Results) and untimed.results.seconds is None
    assert {r.seconds for r in untimed.results} == {0.0}
    assert isinstance(timed.results, Results) and len(timed.results.seconds or ()) == len(vectors)
    assert any(r.seconds > 0 for r in timed.results)
