"""The kit measures itself: every mutant of the Loom table is killed or proved equivalent."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from agentfsm.spec import Table, load_table
from agentfsm.spec.expr import Binary, Lit, Ref, to_source
from agentfsm.verify.conformance import mutants as mutation
from agentfsm.verify.conformance.conform import Runner
from agentfsm.verify.conformance.harness import FunctionTransport
from agentfsm.verify.conformance.vectors import generate
from conformance_helpers import LOOM, OracleHandler
from conftest import TABLES
from json_envelope import enveloped

from agentfsm.cli import main


@pytest.fixture(scope="module")
def results(loom: Table) -> list[mutation.MutantResult]:
    return mutation.run_mutants(loom, generate(loom)[1])


def test_no_mutant_of_the_loom_table_survives(results: list[mutation.MutantResult]) -> None:
    summary = mutation.summary(results)
    assert summary["survived"] == 0, summary["survivors"]
    assert summary["killed"] > 150 and summary["invalid"] == 0


@pytest.fixture(scope="module")
def hidden(loom: Table) -> list[mutation.MutantResult]:
    return mutation.run_mutants(loom, generate(loom)[1], with_vars=False)


# With vars hidden, a counter left wrong is caught only by the suffixes, the last vectors a
# mutant meets: about a minute over the Loom table's 400 mutants, so these two are slow.
@pytest.mark.slow
def test_no_mutant_of_the_loom_table_survives_when_its_vars_are_hidden(
        hidden: list[mutation.MutantResult]) -> None:
    summary = mutation.summary(hidden, with_vars=False)
    assert summary["survived"] == 0, summary["survivors"]
    assert summary["vars"] is False and summary["killed"] > 150


@pytest.mark.slow
def test_hiding_vars_only_makes_more_mutants_equivalent(results: list[mutation.MutantResult],
                                                        hidden: list[mutation.MutantResult]) -> None:
    shown = {r.name: r.verdict for r in results}
    hidden_verdict = {r.name: r.verdict for r in hidden}
    assert all(hidden_verdict[name] == "equivalent" for name, verdict in shown.items() if verdict == "equivalent")
    more = {name for name, verdict in hidden_verdict.items() if verdict == "equivalent" and shown[name] != verdict}
    # Giving up on retries leaves retries at 0 either way or at a value the next UserInput
    # resets unread: invisible without vars, a difference with them.
    assert {"row 6: update of retries dropped", "row 6: update retries = 0 + 1"} <= more
    assert all(shown[r.name] == "killed" for r in hidden if r.verdict == "killed")


def test_without_suffixes_a_counter_left_wrong_survives_hidden_vars(loom: Table) -> None:
    older = generate(loom, sets=["rows", "events", "row-pairs", "walks"])[1]
    source = mutation.table_source(loom)
    dropped = next(m for m in mutation.mutants(loom, source.data) if m.name == "row 4: update of retries dropped")
    result = mutation.judge(loom, source, dropped, older, mutation.reference, with_vars=False)
    assert result.verdict == "survived"
    detail = result.detail
    # The difference is a whole sequence: the fault shows several steps after row 4 fired.
    assert detail.startswith("ToolExecutionFailed in ExecutingTools{retries=2,pending=1,failed=0,mutated=false,"
                             "origin=0} after UserInput, LlmError, RetryTimeoutFired, LlmCompleted{tool_calls=1}, ")
    assert detail.endswith("table accepted -> Error [WaitForInput]; mutant accepted -> CallingLlm [SendLlmRequest]")


def test_every_kind_of_mutant_is_made(results: list[mutation.MutantResult]) -> None:
    names = " | ".join(r.name for r in results)
    for kind in ("dropped", "target", "guard negated", "bound off by one", "action", "update of",
                 "update pending = ", "unhandled: policy reject -> ignore", "unhandled: action WaitForInput dropped"):
        assert kind in names


def test_equivalent_mutants_really_are(loom: Table, results: list[mutation.MutantResult]) -> None:
    # Row 1 resets retries, which is already 0 whenever the agent waits for input: the
    # product exploration finds no difference, so the mutant is equivalent, not a gap.
    equivalent = {r.name for r in results if r.verdict == "equivalent"}
    assert "row 1: update of retries dropped" in equivalent


def test_a_weak_vector_set_lets_mutants_survive_and_names_the_difference(loom: Table) -> None:
    only_rows = generate(loom, sets=["rows"])[1]
    results = mutation.run_mutants(loom, only_rows)
    survivors = [r for r in results if r.verdict == "survived"]
    assert survivors
    flipped = next(r for r in survivors if r.name == "unhandled: policy reject -> ignore")
    idle = "{retries=0, pending=0, failed=0, mutated=false, origin=0}"
    assert flipped.detail == ("TextDelta in WaitingForUserInput{retries=0,pending=0,failed=0,mutated=false,origin=0}: "
                              f"table rejected -> WaitingForUserInput [WaitForInput] {idle}; mutant "
                              f"accepted -> WaitingForUserInput [WaitForInput] {idle}")


def test_off_by_one_moves_each_comparison_bound() -> None:
    guard = Binary("and", Binary("==", Ref("pending", "var", "int", 2), Lit(1)), Ref("m", "param", "bool", 4))
    assert [to_source(e) for e in mutation.off_by_one(guard)] == ["pending == 1 + 1 and m", "pending == 1 - 1 and m"]
    boolean = Binary("==", Ref("m", "param", "bool", 4), Lit(True))
    assert list(mutation.off_by_one(boolean)) == []


def test_a_mutant_that_breaks_the_table_is_invalid_not_counted(loom: Table) -> None:
    source = mutation.table_source(loom)
    data: dict[str, Any] = json.loads(json.dumps(source.data))
    data["transitions"] = [t for t in data["transitions"] if t["from"] != "ProcessingLlmResponse"]
    broken = mutation.Mutant("transient rows dropped", data)
    assert mutation.judge(loom, source, broken, [], mutation.reference).verdict == "invalid"


def test_json_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["mutants", str(LOOM), "--json", "--sets", "rows,events"]) == 0
    data = enveloped(json.loads(capsys.readouterr().out), "mutants")
    assert {"mutants", "killed", "equivalent", "survived", "survivors"} <= set(data)
    assert data["mutants"] == data["killed"] + data["equivalent"] and data["survivors"] == []
    assert data["vars"] is True


def test_no_vars_on_the_command_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["mutants", str(LOOM), "--no-vars", "--sets", "rows"]) == 1
    out = capsys.readouterr().out
    assert "survived   row 4: update of retries dropped (" in out
    assert "mutants loom-agent (vars hidden): " in out
    assert main(["mutants", str(LOOM), "--no-vars", "--sets", "rows", "--json"]) == 1
    data = json.loads(capsys.readouterr().out)  # that every set kills them all: the ``hidden`` tests
    assert data["vars"] is False and "row 4: update of retries dropped" in {s["mutant"] for s in data["survivors"]}


def test_real_adapter_processes_give_the_same_verdicts(loom: Table, results: list[mutation.MutantResult],
                                                       tmp_path: Path) -> None:
    vectors = generate(loom)[1]
    source = mutation.table_source(loom)
    connect = mutation.reference_process(tmp_path, 10.0)
    sample = list(itertools.islice(mutation.mutants(loom, source.data), 0, None, 40))
    assert len(sample) >= 8
    by_name = {r.name: r for r in results}
    verdicts = [mutation.judge(loom, source, mutant, vectors, connect) for mutant in sample]
    assert verdicts == [by_name[mutant.name] for mutant in sample]


@pytest.mark.parametrize("path", TABLES, ids=lambda p: p.stem)
def test_the_reference_adapter_passes_every_bundled_tables_vectors(path: Path) -> None:
    table = load_table(path)
    vectors = generate(table)[1]
    report = Runner(table, lambda: mutation.reference(table, {})).run(vectors)
    assert report.ok and report.count("pass") == len(vectors)


@pytest.mark.parametrize("path", TABLES, ids=lambda p: p.stem)
def test_the_naive_interpreter_passes_every_bundled_tables_vectors(path: Path) -> None:
    """The vectors (from the reference semantics) against an implementation sharing no code with it."""
    table = load_table(path)
    vectors = generate(table)[1]
    report = Runner(table, lambda: FunctionTransport(OracleHandler(table))).run(vectors)
    assert report.ok and report.count("pass") == len(vectors)


@pytest.mark.slow
@pytest.mark.parametrize("path", TABLES, ids=lambda p: p.stem)
def test_no_mutant_of_any_bundled_table_survives(path: Path) -> None:
    table = load_table(path)
    summary = mutation.summary(mutation.run_mutants(table, generate(table)[1]))
    assert summary["survived"] == 0, summary["survivors"]


@pytest.mark.slow
@pytest.mark.parametrize("path", TABLES, ids=lambda p: p.stem)
def test_no_mutant_of_any_bundled_table_survives_hidden_vars(path: Path) -> None:
    table = load_table(path)
    summary = mutation.summary(mutation.run_mutants(table, generate(table)[1], with_vars=False), with_vars=False)
    assert summary["survived"] == 0, summary["survivors"]


@pytest.mark.parametrize("path", TABLES, ids=lambda p: p.stem)
def test_every_other_order_of_a_rows_actions_is_a_killed_mutant(path: Path) -> None:
    # Every row that emits two or more actions gets each other order of them as a mutant,
    # and the vectors kill each one, with vars and without.
    table = load_table(path)
    source = mutation.table_source(table)
    vectors = generate(table)[1]
    several = [row for row in table.rows if len(row.emit) > 1]
    made = [m for m in mutation.mutants(table, source.data) if "actions in another order" in m.name]
    expected = sum(len(set(itertools.permutations(row.emit))) - 1 for row in several)
    assert len(made) == expected
    assert {m.name.split(":")[0] for m in made} == {f"row {row.index}" for row in several}
    for mutant in made:
        for with_vars in (True, False):
            verdict = mutation.judge(table, source, mutant, vectors, mutation.reference, with_vars)
            assert verdict.verdict == "killed", (mutant.name, with_vars, verdict)


def test_reorderings_are_distinct_and_leave_out_the_original() -> None:
    assert mutation.reorderings(["A", "B"]) == [("B", "A")]
    assert len(mutation.reorderings(["A", "B", "C"])) == 5
    assert mutation.reorderings(["A", "A"]) == []
    assert len(mutation.reorderings([str(i) for i in range(6)])) == 24
