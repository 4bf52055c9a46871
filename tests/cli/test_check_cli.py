"""``agentfsm check``: a summary line per good table, exit 0; bad input exits 2, no traceback."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from agentfsm.spec import load_table
from agentfsm.spec.semantics import step
from conftest import SPEC, TABLES, run_cli
from json_envelope import enveloped

AGENTFSM = Path(sys.executable).parent / "agentfsm"
LOOM = SPEC / "loom-agent.yaml"
SMALL = """\
format: 1
machine: small
constants: {top: 2, strict: false}
variables:
  n: {type: int, min: 0, max: top, init: 0}
states:
  A: {initial: true}
events:
  Go: {}
transitions:
  - {from: A, on: Go, when: n < top or strict, to: A, set: {n: n + 1}}
"""


@pytest.fixture
def small(tmp_path: Path) -> Path:
    path = tmp_path / "small.yaml"
    path.write_text(SMALL)
    return path


@pytest.mark.parametrize("path", TABLES, ids=[p.name for p in TABLES])
def test_every_bundled_table_checks(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(["check", str(path)], capsys)
    table = load_table(path)
    assert (code, err) == (0, "")
    match = re.fullmatch(r"(.+): ok: (\S+): (\d+) states, (\d+) events, (\d+) actions, (\d+) rows, (\d+) variables\n",
                         out)
    assert match is not None
    assert match.groups() == (str(path), table.machine, *(str(len(x)) for x in (
        table.states, table.events, table.actions, table.rows, table.variables)))


def test_the_installed_command_checks_several_tables() -> None:
    proc = subprocess.run([str(AGENTFSM), "check", *map(str, TABLES)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stderr == ""
    assert [line.split(": ok: ")[0] for line in proc.stdout.splitlines()] == [str(p) for p in TABLES]


def test_a_missing_file_and_a_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope.yaml"
    code, out, err = run_cli(["check", str(missing), str(tmp_path)], capsys)
    assert (code, out) == (2, "")
    assert err.splitlines() == [f"{missing}:1:1: error: cannot read file: No such file or directory",
                                f"{tmp_path}:1:1: error: cannot read file: Is a directory"]


def test_set_overrides_a_constant(small: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run_cli(["check", str(small), "--set", "top=5", "--set", "strict=true"], capsys)
    assert (code, err) == (0, "")
    assert load_table(small, {"top": 5}).variables[0].domain == (0, 1, 2, 3, 4, 5)


@pytest.mark.parametrize(("option", "message"), [
    ("nosuch=1", "3:12: error: --set nosuch: the table has no constant 'nosuch'"),
    ("top=true", "3:18: error: --set top: expected an integer, got a boolean"),
    ("strict=1", "3:29: error: --set strict: expected a boolean, got an integer"),
    ("top=-1", "5:31: error: empty range: min 0 is above max -1"),
])
def test_set_errors_point_into_the_table(small: Path, option: str, message: str,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(["check", str(small), "--set", option], capsys)
    assert (code, out) == (2, "")
    assert err.splitlines() == [f"{small}:{message}"]


@pytest.mark.parametrize(("option", "message"), [
    ("bad", "agentfsm: error: --set 'bad': expected NAME=VALUE"),
    ("max_tools=x", "agentfsm: error: --set 'max_tools=x': VALUE must be an integer or true/false"),
])
def test_malformed_set_options(option: str, message: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(["check", str(LOOM), "--set", option], capsys)
    assert (code, out, err) == (2, "", message + "\n")


def test_no_table_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(["check"], capsys)
    assert (code, out) == (2, "")
    assert "the following arguments are required: TABLE" in err and "Traceback" not in err


def test_the_documented_example_behaves_as_documented(tmp_path: Path) -> None:
    doc = (SPEC.parent / "docs" / "table-format.md").read_text(encoding="utf-8")
    block = re.search(r"```yaml\n(.*?)```", doc, re.S)
    assert block is not None
    path = tmp_path / "door.yaml"
    path.write_text(block.group(1))
    table = load_table(path)
    state, values = table.initial.index, table.initial_vars()
    seen = []
    for event, params in [("Key", (False,)), ("Key", (True,)), ("Push", ()), ("Push", ()), ("Smash", ()),
                          ("Key", (True,))]:
        result = step(table, state, values, event, params)
        state, values = result.state, result.vars
        seen.append((result.status, table.states[state].name, result.actions))
    assert seen == [("fired", "Closed", ("Beep",)), ("fired", "Open", ("OpenDoor",)), ("fired", "Closed", ()),
                    ("rejected", "Closed", ("Beep",)), ("fired", "Broken", ()), ("final", "Broken", ())]


def test_check_json_lists_every_file_with_its_diagnostics(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("machine: x\nstates: [A\n")
    system = SPEC / "systems" / "loom-with-tools.yaml"
    code, out, _ = run_cli(["check", "--json", str(SPEC / "loom-agent.yaml"), str(bad), str(system)], capsys)
    assert code == 2
    data = enveloped(json.loads(out), "check")
    assert data["format"] == 1 and data["command"] == "check" and data["ok"] is False
    loom, broken, composed = data["files"]
    assert loom["ok"] and loom["kind"] == "table" and loom["summary"].startswith("loom-agent: 7 states")
    assert not broken["ok"] and broken["summary"] is None
    [diagnostic] = broken["diagnostics"]
    assert (diagnostic["file"], diagnostic["line"], diagnostic["col"]) == (str(bad), 3, 1)
    assert "YAML syntax" in diagnostic["message"]
    assert composed["ok"] and composed["kind"] == "system"
    code, out, _ = run_cli(["check", "--json", str(SPEC / "loom-agent.yaml")], capsys)
    assert code == 0 and json.loads(out)["ok"] is True
