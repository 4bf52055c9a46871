"""``agentfsm verify``, ``replay`` and ``export`` end to end, and the Spin cross-check."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from agentfsm.spec import load_table
from agentfsm.verify.spin import runner as spin
from agentfsm.verify.table.explore import explore
from conftest import SPEC, TABLES
from json_envelope import enveloped
from spin_support import needs_spin
from verify_tables import HEADER

from agentfsm.cli import main

BROKEN = HEADER.format(machine="broken") + """
variables: {n: {type: int, min: 0, max: 3, init: 0}}
states: {A: {initial: true}, B: {}, Done: {final: true}}
events: {inc: {}, go: {params: {fast: {type: bool}}}, stop: {}}
transitions:
  - {from: A, on: inc, when: n < 3, to: A, set: {n: n + 1}}
  - {from: A, on: go, when: fast, to: B}
  - {from: B, on: inc, to: B}
  - {from: "*", on: stop, to: Done}
invariants:
  - {name: small, expr: n <= 1}
properties:
  - {name: inc-terminates, no-cycle-within: {events: [inc]}}
"""


@pytest.fixture
def broken(tmp_path: Path) -> Path:
    path = tmp_path / "broken.yaml"
    path.write_text(BROKEN)
    return path


def test_verify_bundled_tables_exit_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", *map(str, TABLES)]) == 0
    out = capsys.readouterr().out
    assert "all checks hold" in out and "row fire counts" in out


def test_verify_json_shape_and_exit_1(broken: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", "--json", str(broken)]) == 1
    data = enveloped(json.loads(capsys.readouterr().out), "verify")
    assert data["ok"] is False
    [table] = data["tables"]
    assert {"file", "machine", "configurations", "transitions", "checks"} <= set(table)
    assert table["machine"] == "broken" and table["configurations"] == 12
    for entry in table["checks"]:
        assert {"kind", "name", "ok", "message", "counterexample"} <= set(entry)
    small = next(c for c in table["checks"] if c["name"] == "small")
    assert small["ok"] is False
    assert small["counterexample"] == [{"event": "inc", "params": {}}, {"event": "inc", "params": {}}]
    cycle = next(c for c in table["checks"] if c["name"] == "inc-terminates")
    assert cycle["counterexample"] == [{"event": "go", "params": {"fast": True}}, {"event": "inc", "params": {}}]
    assert cycle["loop_start"] == 1


def test_set_grows_the_space(broken: Path, capsys: pytest.CaptureFixture[str]) -> None:
    main(["verify", "--json", str(SPEC / "loom-agent.yaml"), "--set", "max_retries=10"])
    grown = json.loads(capsys.readouterr().out)["tables"][0]["configurations"]
    main(["verify", "--json", str(SPEC / "loom-agent.yaml")])
    assert grown > json.loads(capsys.readouterr().out)["tables"][0]["configurations"]


def test_bad_input_exits_2(tmp_path: Path, broken: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", str(tmp_path / "missing.yaml")]) == 2
    assert main(["verify", str(broken), "--set", "n"]) == 2
    assert "expected NAME=VALUE" in capsys.readouterr().err


def test_junit_trace_out_and_replay(tmp_path: Path, broken: Path, capsys: pytest.CaptureFixture[str]) -> None:
    junit, trace = tmp_path / "report.xml", tmp_path / "trace.json"
    assert main(["verify", str(broken), "--junit", str(junit), "--trace-out", str(trace)]) == 1
    out = capsys.readouterr().out
    assert "FAIL invariant small" in out and "counterexample:" in out
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite is not None and suite.get("failures") == "2"
    failed = [c.get("name") for c in suite.iter("testcase") if c.find("failure") is not None]
    assert failed == ["invariant small", "no-cycle-within inc-terminates"]
    data = json.loads(trace.read_text())
    assert data == {"machine": "broken", "check": "small", "kind": "invariant",
                    "steps": [{"event": "inc", "params": {}}, {"event": "inc", "params": {}}], "loop_start": None}
    assert main(["replay", str(broken), str(trace)]) == 1
    replay = capsys.readouterr().out
    assert "A {n: 2}" in replay and "invariant violated: small" in replay
    assert "violated: invariant small: false in A {n: 2}" in replay


def test_replay_rejects_a_trace_for_another_machine(tmp_path: Path, broken: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "t.json"
    trace.write_text(json.dumps({"machine": "other", "check": None, "kind": None, "steps": [], "loop_start": None}))
    assert main(["replay", str(broken), str(trace)]) == 2
    assert "machine 'other'" in capsys.readouterr().err
    trace.write_text('{"machine": "broken", "steps": [{"event": "go", "params": {"fast": 3}}]}')
    assert main(["replay", str(broken), str(trace)]) == 2
    assert "fast" in capsys.readouterr().err


def test_export_promela(broken: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", "--promela", str(broken)]) == 0
    out = capsys.readouterr().out
    assert "active proctype machine()" in out and "d_step" in out




@needs_spin
@pytest.mark.parametrize("path", TABLES, ids=lambda p: p.stem)
def test_spin_agrees_on_bundled_tables(path: Path, tmp_path: Path) -> None:
    table = load_table(path)
    run = spin.run_spin(table, tmp_path)
    assert run.states == explore(table).count
    assert run.errors == 0


@needs_spin
def test_spin_finds_the_planted_invariant_violation(broken: Path, tmp_path: Path) -> None:
    table = load_table(broken)
    run = spin.run_spin(table, tmp_path)
    assert run.errors >= 1 and "assertion violated" in run.output


def test_trace_out_dir_writes_one_trace_per_failing_check(tmp_path: Path, broken: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "traces"
    assert main(["verify", str(broken), "--trace-out", f"{out}/"]) == 1
    assert sorted(p.name for p in out.iterdir()) == ["broken.invariant.small.json",
                                                     "broken.no-cycle-within.inc-terminates.json"]
    cycle = json.loads((out / "broken.no-cycle-within.inc-terminates.json").read_text())
    assert cycle["loop_start"] == 1 and cycle["check"] == "inc-terminates"
    for path in out.iterdir():
        assert main(["replay", str(broken), str(path)]) == 1
    assert "violated: no-cycle-within inc-terminates: the cycle from step 2 uses only inc" in capsys.readouterr().out


def test_trace_out_file_with_check_picks_that_check(tmp_path: Path, broken: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "t.json"
    assert main(["verify", str(broken), "--trace-out", str(trace), "--check", "inc-terminates"]) == 1
    assert json.loads(trace.read_text())["check"] == "inc-terminates"
    assert main(["verify", str(broken), "--trace-out", str(trace), "--check", "nope"]) == 2
    assert "--check nope: no check of that name" in capsys.readouterr().err


def test_replay_is_a_regression_test(tmp_path: Path, broken: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A kept counterexample fails (exit 1) while the defect is there and passes once fixed."""
    trace = tmp_path / "t.json"
    assert main(["verify", str(broken), "--trace-out", str(trace), "--check", "small"]) == 1
    assert main(["replay", str(broken), str(trace)]) == 1
    fixed = tmp_path / "fixed.yaml"
    fixed.write_text(BROKEN.replace("n <= 1", "n <= 3"))
    capsys.readouterr()
    assert main(["replay", str(fixed), str(trace)]) == 0
    assert "no check is violated by this trace" in capsys.readouterr().out
    raising = tmp_path / "raising.yaml"
    raising.write_text(BROKEN.replace("when: n < 3, to: A", "to: A"))
    steps = [{"event": "inc", "params": {}}] * 4
    trace.write_text(json.dumps({"machine": "broken", "steps": steps}))
    assert main(["replay", str(raising), str(trace)]) == 1
    assert "violated: bounds: step 4 raises: row 1 sets n = 4" in capsys.readouterr().out


def test_replay_judges_a_liveness_lasso(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = tmp_path / "live.yaml"
    table.write_text(BROKEN.replace("properties:", "properties:\n  - {name: done, eventually: Done}"))
    trace = tmp_path / "t.json"
    assert main(["verify", str(table), "--trace-out", str(trace), "--check", "done"]) == 1
    data = json.loads(trace.read_text())
    assert data["kind"] == "eventually" and data["loop_start"] is not None
    capsys.readouterr()
    assert main(["replay", str(table), str(trace)]) == 1
    assert "violated: eventually done: the cycle from step" in capsys.readouterr().out
    table.write_text(table.read_text() + "fairness: {strong: [stop]}\n")
    assert main(["verify", str(table), "--check", "done", "--trace-out", str(tmp_path / "none.json")]) == 1
    assert not (tmp_path / "none.json").exists()
