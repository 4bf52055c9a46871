"""The malformed-table corpus: every defect is reported at its place, exit 2, no traceback.

Each file in ``tests/malformed/`` is a small table with exactly one defect; ``CASES``
holds the exact diagnostics (``LINE:COL: error: MESSAGE`` after the file name) that
``agentfsm check`` must print for it.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import run_cli

MALFORMED = Path(__file__).resolve().parent.parent / "malformed"
AGENTFSM = Path(sys.executable).parent / "agentfsm"

ALLOWED = "expressions have names, integers, true/false, + -, comparisons, and/or/not and 'state in (...)'"
TOP_FIELDS = (" (expected one of: actions, constants, description, events, fairness, format, invariants, machine, "
              "properties, runtime, source, states, title, transitions, unhandled, variables)")
ROW_FIELDS = " (expected one of: description, emit, from, on, set, to, when)"

CASES: dict[str, list[str]] = {
    "alias-bomb": ['2:14: error: document too large: more than 50000 nodes (after alias expansion)'],
    "bad-name": ["10:3: error: 'Work-ing' in states is not a name (letters, digits, '_')"],
    "bool-init-int": ['6:28: error: expected a bool expression, found int'],
    "bool-set-int": ['21:64: error: expected a bool expression, found int'],
    "compare-int-bool": ['22:37: error: cannot compare int with bool'],
    "deeply-nested-flow": ['2:73: error: document nested deeper than 64 levels'],
    "deeply-parenthesised": ['21:228: error: invalid expression: too many nested parentheses'],
    "duplicate-key-row": ["23:43: error: duplicate key 'to' (first defined at line 23)"],
    "duplicate-key-state": ["11:3: error: duplicate key 'Idle' (first defined at line 8)"],
    "empty-file": ["1:1: error: empty document: expected a table (a mapping with 'format: 1')"],
    "event-row-from-transient": [
        "22:26: error: transient state 'Checking' is left only by eventless rows (drop"
        " 'on')"],
    "eventless-row-from-stable": [
        "23:5: error: row from 'Working' needs an event ('on'): only transient states have eventless"
        " rows"],
    "huge-expression": ['21:28: error: expression longer than 2000 characters'],
    "init-outside-range": ["5:48: error: init 5 is outside count's range 0..2"],
    "int-guard": ['21:28: error: expected a bool expression, found int'],
    "int-set-bool": ['20:56: error: expected an int expression, found bool'],
    "key-read-as-boolean": ["3:23: error: mapping key 'true' is read as a boolean: quote it to use it as a name"],
    "list-not-mapping": ["1:1: error: a table must be a mapping with 'format: 1', 'machine', 'states', ..."],
    "missing-field": ["1:1: error: missing field 'machine' in the table"],
    "no-initial-state": ["7:1: error: no initial state: mark exactly one state 'initial: true'"],
    "non-ascii-name": [
        "21:28: error: character 'ｃ' is not allowed in an expression (names, digits, operators and"
        " parentheses are ASCII)"],
    "non-utf8": ['2:11: error: file is not valid UTF-8'],
    "only-comment": ["1:1: error: empty document: expected a table (a mapping with 'format: 1')"],
    "order-bool": ["21:28: error: '>' needs int operands, found bool"],
    "param-out-of-scope": ["23:56: error: unknown name 'n' (a parameter of Start, not of this row's event)"],
    "param-shadows-constant": ["13:56: error: parameter 'limit' of Start shadows the constant of the same name"],
    "param-shadows-variable": ["13:56: error: parameter 'count' of Start shadows the variable of the same name"],
    "python-tag": [
        "2:10: error: unsupported YAML tag '!!python/object:os.system': a table holds only mappings,"
        " lists, strings, integers and booleans"],
    "python-true": ['21:41: error: write true, not True: booleans are lowercase'],
    "range-min-above-max": ['5:35: error: empty range: min 3 is above max 2'],
    "renamed-field": [
        "1:1: error: missing field 'transitions' in the table",
        "19:1: error: unknown field 'rows' in the table" + TOP_FIELDS],
    "reserved-constant": ["3:23: error: 'lambda' is a reserved word: expressions could not refer to it"],
    "reserved-param": ["13:56: error: 'state' is a reserved word: expressions could not refer to it"],
    "reserved-variable": ["7:3: error: 'state' is a reserved word: expressions could not refer to it"],
    "row-from-final": ["25:12: error: final state 'Done' cannot have outgoing rows"],
    "set-constant": ["23:49: error: cannot set 'limit': it is a constant"],
    "several-documents": ['32:1: error: expected one YAML document, found several'],
    "syntax-error": [
        "16:1: error: YAML syntax: expected ',' or '}', but got '<scalar>' (while parsing a flow"
        " mapping started at line 14)"],
    "transient-initial": [
        "9:3: error: state 'Checking': a transient state cannot be initial (observable states are never"
        " transient)"],
    "transient-no-rows": ["12:3: error: transient state 'Limbo' has no eventless row to leave it by"],
    "two-initial-states": ["10:3: error: second initial state 'Working' (first is 'Idle')"],
    "unknown-action-emit": ["23:70: error: unknown action 'Ende'; did you mean 'End'?"],
    "unknown-action-unhandled": ["25:36: error: unknown action 'Beep'"],
    "unknown-constant-bound": ["5:35: error: unknown name 'lim'; did you mean 'limit'?"],
    "unknown-event-no-cycle": ["30:55: error: unknown event 'Restart'; did you mean 'Start'?"],
    "unknown-event-on": ["23:25: error: unknown event 'Finsh'; did you mean 'Finish'?"],
    "unknown-field-row": ["23:43: error: unknown field 'guard' in transitions[3]; did you mean 'when'?" + ROW_FIELDS],
    "unknown-field-state": [
        "10:13: error: unknown field 'stable' in states.Working (expected one of: description, final,"
        " initial, transient)"],
    "unknown-field-top": ["3:1: error: unknown field 'version' in the table" + TOP_FIELDS],
    "unknown-name-guard": ["21:36: error: unknown name 'lmit'; did you mean 'limit'?"],
    "unknown-name-invariant": ["27:36: error: unknown name 'limits'; did you mean 'limit'?"],
    "unknown-state-always-reachable": ["29:40: error: unknown state 'Finished'"],
    "unknown-state-from": ["23:12: error: unknown state 'Wrking'; did you mean 'Working'?"],
    "unknown-state-in": ["27:44: error: unknown state 'Wrking'; did you mean 'Working'?"],
    "unknown-state-to": ["23:37: error: unknown state 'Idel'; did you mean 'Idle'?"],
    "unknown-variable-set": ["23:49: error: cannot set 'bussy': no such variable; did you mean 'busy'?"],
    "unsafe-attribute": ["21:28: error: attribute access not allowed: " + ALLOWED],
    "unsafe-call": ["21:28: error: function call not allowed: " + ALLOWED],
    "unsafe-fstring": ["21:29: error: f-string not allowed: " + ALLOWED],
    "unsafe-lambda": ["21:30: error: lambda not allowed: " + ALLOWED],
    "unsafe-listcomp": ["27:28: error: comprehension not allowed: " + ALLOWED],
    "unsafe-multiply": ["21:28: error: operator '*' not allowed: integers have only '+' and '-'"],
    "unsafe-power": ["21:28: error: operator '**' not allowed: integers have only '+' and '-'"],
    "unsafe-subscript": ["21:29: error: subscript not allowed: " + ALLOWED],
    "unsafe-walrus": ["21:29: error: assignment ':=' not allowed: " + ALLOWED],
    "wildcard-eventless": ["24:13: error: a wildcard row needs an event ('on')"],
    "wrong-format": ['1:9: error: unsupported table format 2: this agentfsm reads format 1'],
    "wrong-type": ['10:12: error: states.Working must be a mapping or null, found a list'],
    "yes-is-not-bool": ["6:28: error: unknown name 'yes' (booleans are true and false)"],
}


def run_check(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    return run_cli(["check", *args], capsys)


def test_the_corpus_is_complete() -> None:
    files = {p.stem for p in MALFORMED.glob("*.yaml")}
    assert files == set(CASES)
    assert len(files) >= 30


@pytest.mark.parametrize("name", sorted(CASES))
def test_malformed_table_is_rejected(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    path = MALFORMED / f"{name}.yaml"
    code, out, err = run_check([str(path)], capsys)
    assert code == 2
    assert out == ""
    assert "Traceback" not in err
    assert err.splitlines() == [f"{path}:{line}" for line in CASES[name]]


@pytest.mark.parametrize("name", ["syntax-error", "non-utf8", "alias-bomb", "python-tag", "unsafe-call"])
def test_the_installed_command_reports_the_same(name: str) -> None:
    path = MALFORMED / f"{name}.yaml"
    proc = subprocess.run([str(AGENTFSM), "check", str(path)], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.splitlines() == [f"{path}:{line}" for line in CASES[name]]


def test_independent_errors_are_reported_together(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "many.yaml"
    path.write_text(textwrap.dedent("""\
        format: 1
        machine: many
        variables:
          n: {type: int, min: 0, max: top, init: 0}
        states:
          A: {initial: true}
          B: {initial: true}
        events:
          Go: {}
        actions:
          Beep: {}
        transitions:
          - {from: A, on: Went, to: B}
          - {from: B, on: Go, to: A, emit: [Boop]}
          - {from: A, on: Go, to: C, set: {n: n + true}}
        invariants:
          - {name: small, expr: n + 1}
        properties:
          - {name: back, always-reachable: Z}
        """))
    code, out, err = run_check([str(path)], capsys)
    assert code == 2 and out == ""
    assert err.splitlines() == [f"{path}:{line}" for line in [
        "4:31: error: unknown name 'top'",
        "7:3: error: second initial state 'B' (first is 'A')",
        "13:19: error: unknown event 'Went'",
        "14:37: error: unknown action 'Boop'",
        "15:27: error: unknown state 'C'",
        "15:43: error: '+'/'-' needs int operands, found bool",
        "17:25: error: expected a bool expression, found int",
        "19:36: error: unknown state 'Z'",
    ]]


def test_errors_of_several_tables_are_all_reported(capsys: pytest.CaptureFixture[str]) -> None:
    first, second = MALFORMED / "unknown-event-on.yaml", MALFORMED / "two-initial-states.yaml"
    code, _, err = run_check([str(first), str(second)], capsys)
    assert code == 2
    assert err.splitlines() == ([f"{first}:{line}" for line in CASES["unknown-event-on"]]
                                + [f"{second}:{line}" for line in CASES["two-initial-states"]])
