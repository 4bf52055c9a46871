"""The verifier never falls over: limits and memory exhaustion are exit 2 with how far it
got, huge ranges cost what their reachable values cost, and every output format survives
a table that fails to load."""

from __future__ import annotations

import json
import re
import resource
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest
from conftest import ROOT, SPEC, run_cli
from verify_tables import HEADER

COUNTER = HEADER.format(machine="count") + """
constants: {top: 100000000}
variables: {x: {type: int, min: 0, max: top, init: 0}}
states: {A: {initial: true}, Done: {final: true}}
events: {inc: {}, stop: {}}
transitions:
  - {from: A, on: inc, when: x < top, to: A, set: {x: x + 1}}
  - {from: A, on: stop, to: Done}
"""

HUGE = HEADER.format(machine="huge") + """
variables: {x: {type: int, min: -100000000000000000000, max: 100000000000000000000, init: 0}}
states: {A: {initial: true}, B: {}, Done: {final: true}}
events: {go: {}, back: {}, stop: {}}
transitions:
  - {from: A, on: go, when: x == 0, to: B, set: {x: x + 100000000000000000000}}
  - {from: B, on: back, to: A, set: {x: x - 100000000000000000000}}
  - {from: '*', on: stop, to: Done}
invariants:
  - {name: bounded, expr: x >= 0}
"""


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _limit_memory() -> None:
    limit = 450 * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def test_out_of_memory_is_exit_2_with_how_far_it_got(tmp_path: Path) -> None:
    table = write(tmp_path, "count.yaml", COUNTER)
    done = subprocess.run([sys.executable, "-m", "agentfsm.cli", "verify", str(table)], capture_output=True,
                          text=True, preexec_fn=_limit_memory, timeout=300, check=False, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and "MemoryError" not in done.stderr
    assert "exploration stopped, out of memory:" in done.stderr
    assert "configurations and" in done.stderr and "breadth-first depth" in done.stderr
    assert "--set NAME=VALUE (constants: top=100000000); the widest ranges: x 0..100000000" in done.stderr


def test_max_configurations_is_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = write(tmp_path, "count.yaml", COUNTER.replace("100000000", "1000"))
    code, out, err = run_cli(["verify", "--max-configurations", "100", "--json", str(table)], capsys)
    assert code == 2
    assert "more than 100 configurations (--max-configurations 100)" in err
    data = json.loads(out)
    assert data["format"] == 1 and data["ok"] is False
    assert data["tables"][0]["error"]["kind"] == "limit"
    code, out, _ = run_cli(["verify", "--max-configurations", "5000", str(table)], capsys)
    assert code == 0 and "2,002 configurations" in out


def test_a_huge_range_costs_only_its_reachable_values(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = write(tmp_path, "huge.yaml", HUGE)
    code, out, _ = run_cli(["verify", "--json", str(table)], capsys)
    data = json.loads(out)
    assert code == 0, out
    assert data["tables"][0]["configurations"] == 4
    code, out, _ = run_cli(["export", "--promela", str(table)], capsys)
    assert code == 2
    vectors = tmp_path / "huge.jsonl"
    code, out, err = run_cli(["vectors", str(table), "-o", str(vectors)], capsys)
    assert code == 0, err
    assert vectors.read_text().count('"id"') >= 4


def test_vectors_out_of_memory_is_exit_2_without_a_traceback(tmp_path: Path) -> None:
    """``vectors --set max_tools=100000`` raised MemoryError past exploration (exit 1, traceback)."""
    done = subprocess.run([sys.executable, "-m", "agentfsm.cli", "vectors", str(SPEC / "loom-agent.yaml"),
                           "--set", "max_tools=100000", "-o", str(tmp_path / "v.jsonl")], capture_output=True,
                          text=True, preexec_fn=_limit_memory, timeout=300, check=False, cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and "MemoryError" not in done.stderr
    assert "out of memory" in done.stderr and "--set NAME=VALUE" in done.stderr


def test_a_parameter_range_too_wide_to_enumerate_is_exit_2(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    wide = "go: {params: {k: {type: int, min: 0, max: 99999999}}}"
    table = write(tmp_path, "wide.yaml", HUGE.replace("go: {}", wide))
    code, _, err = run_cli(["verify", str(table)], capsys)
    assert code == 2 and "event go has 100,000,000 parameter value combinations" in err


def test_a_load_error_is_reported_in_every_format_and_the_other_tables_verified(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = write(tmp_path, "bad.yaml", HEADER.format(machine="bad") + "states: {A: {}}\n")
    junit = tmp_path / "x.xml"
    code, out, err = run_cli(["verify", str(SPEC / "loom-agent.yaml"), str(bad), "--junit", str(junit), "--json"],
                             capsys)
    assert code == 2
    assert f"{bad}:" in err and "error:" in err
    data = json.loads(out)
    assert data["format"] == 1 and data["ok"] is False
    good, failed = data["tables"]
    assert good["machine"] == "loom-agent" and good["ok"] is True and good["configurations"] > 0
    assert failed["file"] == str(bad) and failed["error"]["kind"] == "load" and failed["machine"] is None
    root = ET.parse(junit).getroot()
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == ["verify.loom-agent", f"verify.{bad}"]
    assert suites[0].get("errors") == "0" and int(suites[0].get("tests", "0")) > 5
    [case] = suites[1].findall("testcase")
    error = case.find("error")
    assert case.get("name") == "load" and error is not None and "error:" in (error.text or "")
    assert root.get("errors") == "1"
    assert all(c.get("classname") == "agentfsm.verify.loom-agent" for c in suites[0].iter("testcase"))


def test_json_output_follows_its_published_schema(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    schema = json.loads((ROOT / "docs" / "verify-json.schema.json").read_text())
    bad = write(tmp_path, "bad.yaml", HEADER.format(machine="bad") + "states: {A: {}}\n")
    limited = write(tmp_path, "count.yaml", COUNTER.replace("100000000", "1000"))
    bundled = [str(p) for p in sorted(SPEC.glob("*.yaml"))]
    _, out, _ = run_cli(["verify", "--json", "--max-configurations", "500", *bundled, str(bad), str(limited)], capsys)
    data = json.loads(out)
    jsonschema.validate(data, schema)
    kinds = {c["kind"] for t in data["tables"] for c in t.get("checks", [])}
    assert {"eventually", "leads-to", "always-reachable", "no-cycle-within"} <= kinds
    assert [t["error"]["kind"] for t in data["tables"] if "error" in t] == ["load", "limit"]


@pytest.mark.parametrize("command", [["vectors"], ["mutants"], ["crash"],
                                     ["diagram", "--explored", "--format", "mermaid"]],
                         ids=["vectors", "mutants", "crash", "diagram"])
def test_every_command_that_explores_stops_at_the_default_limit(
        command: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Not only ``verify``: a huge bound stopped ``vectors`` nowhere (nothing printed for minutes)."""
    from agentfsm.verify.table import explore
    monkeypatch.setattr(explore, "DEFAULT_MAX_CONFIGURATIONS", 50)
    acting = COUNTER.replace("states:", "actions: {Call: {effect: external, idempotent: true}}\nstates:").replace(
        "set: {x: x + 1}}", "set: {x: x + 1}, emit: [Call]}")   # crash skips a table that acts on nothing
    table = write(tmp_path, "count.yaml", acting)
    code, _, err = run_cli([*command, str(table)], capsys)
    assert code == 2, err
    assert "more than 50 configurations (the default limit" in err
    assert "Traceback" not in err


def test_vectors_take_max_configurations(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = write(tmp_path, "count.yaml", COUNTER.replace("100000000", "1000"))
    code, _, err = run_cli(["vectors", "--max-configurations", "100", str(table)], capsys)
    assert code == 2 and "more than 100 configurations (--max-configurations 100)" in err
    code, _, err = run_cli(["vectors", "--max-configurations", "5000", "--sets", "rows", str(table)], capsys)
    assert code == 0, err


def test_the_documented_default_limits_are_the_ones_applied() -> None:
    """docs/verifier.md's figures (exploring to 5,000,000 takes 0.7 GB and 18 s, so the figure is
    checked here and the stop itself at a small stand-in above)."""
    from agentfsm.verify.table import explore

    from agentfsm.cli.verify import DEFAULT_MAX_SYSTEM_CONFIGURATIONS
    text = " ".join((ROOT / "docs" / "verifier.md").read_text().split())
    documented = re.search(r"stops at a default that keeps .*?: ([\d,]+) configurations for a table, ([\d,]+) for a "
                           r"system", text)
    assert documented is not None
    table, system = (int(figure.replace(",", "")) for figure in documented.groups())
    assert (table, system) == (explore.DEFAULT_MAX_CONFIGURATIONS, DEFAULT_MAX_SYSTEM_CONFIGURATIONS)


def test_a_limit_reads_as_its_reason() -> None:
    from agentfsm.verify.table.explore import ExplorationLimit
    stop = ExplorationLimit("more than 9 configurations", 10, 12, 3)
    assert str(stop) == "more than 9 configurations" and stop.args == ("more than 9 configurations",)


def test_memory_running_out_before_the_first_chunk_reports_the_initial_configuration(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """How far it got, before any chunk reported: the initial configuration, no transition,
    depth 0."""
    from agentfsm.spec import load_table
    from agentfsm.verify.table import explore

    def no_room(*args: object, **kwargs: object) -> int:
        raise MemoryError

    monkeypatch.setattr(explore, "_scalar", no_room)
    with pytest.raises(explore.ExplorationLimit) as stopped:
        explore.explore(load_table(write(tmp_path, "count.yaml", COUNTER)))
    assert (stopped.value.reason, stopped.value.configurations, stopped.value.transitions,
            stopped.value.depth) == ("out of memory", 1, 0, 0)
