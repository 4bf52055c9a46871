"""System files and action parameters: the loader's errors (FILE:LINE:COL, exit 2) and what it builds."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from agentfsm.impl.engine import Engine
from agentfsm.spec import TableError, load_table_bytes
from agentfsm.spec.semantics import step
from agentfsm.spec.system_load import is_system_file, load_system

from agentfsm.cli import main

FIXTURES = Path(__file__).resolve().parent.parent / "systems"


def errors_of(tmp_path: Path, text: str) -> list[str]:
    shutil.copy(FIXTURES / "pingpong.yaml", tmp_path / "pingpong.yaml")
    path = tmp_path / "system.yaml"
    path.write_text(text)
    with pytest.raises(TableError) as info:
        load_system(path)
    return [str(d).replace(f"{tmp_path}/", "") for d in info.value.diagnostics]


HEAD = "format: 1\nsystem: bad\ninstances:\n  left: {table: pingpong.yaml}\n  right: {table: pingpong.yaml, count: 2}\n"


def test_unknown_field_is_placed(tmp_path: Path) -> None:
    assert errors_of(tmp_path, "format: 1\nsystem: bad\ninstances:\n  left: {table: pingpong.yaml, cont: 2}\n") == [
        "system.yaml:4:32: error: unknown field 'cont' in instances.left; did you mean 'count'? "
        "(expected one of: count, description, durable, mailbox, passive, set, table)"]


def test_references_actions_events_and_values(tmp_path: Path) -> None:
    assert errors_of(tmp_path, HEAD + """links:
  - {from: left, action: SendPeng, to: "right[*]", event: Ping}
  - {from: left, action: SendPing, to: "right[5]", event: Ping}
  - {from: left, action: SendPing, to: right, event: Ping}
  - {from: "right[*]", action: SendPong, to: left, event: Pong, params: {n: m}}
environment:
  left: [Go, Jump, {event: Ping, params: {n: [7]}}]
""") == [
        "system.yaml:7:26: error: pingpong has no action 'SendPeng'",
        "system.yaml:8:41: error: right has members 0..1",
        "system.yaml:9:40: error: right is a group of 2: write right[*] (every member), right[0], ... or right[any]",
        "system.yaml:10:77: error: nothing gives Pong.n: SendPong has no arg 'm' (map it in 'params', or 'sender')",
        "system.yaml:12:14: error: pingpong has no event 'Jump'",
        "system.yaml:12:47: error: 7 is not a value of Ping.n",
    ]


def test_expressions(tmp_path: Path) -> None:
    assert errors_of(tmp_path, HEAD + """invariants:
  - {name: x, expr: "left.seq + "}
  - {name: y, expr: "right.seq == 1"}
  - {name: z, expr: "count(right[*], state == Nowhere) == 0"}
  - {name: w, expr: "left.nothing"}
  - {name: v, expr: "open(left)"}
  - {name: u, expr: "left.seq"}
""") == [
        "system.yaml:7:22: error: invalid expression: invalid syntax",
        "system.yaml:8:22: error: 'right' is a group: name a member (right[0]) or use count/all/any(right[*], ...)",
        "system.yaml:9:47: error: pingpong has no state 'Nowhere'",
        "system.yaml:10:22: error: left (pingpong) has no variable or constant 'nothing'",
        "system.yaml:11:22: error: function call not allowed: only count, all, any(group[*], condition)",
        "system.yaml:12:22: error: expected a bool expression, found int",
    ]


def test_tables_and_overrides(tmp_path: Path) -> None:
    assert errors_of(tmp_path, """format: 1
system: bad
instances:
  left: {table: missing.yaml}
  right: {table: pingpong.yaml, set: {nope: 1}, durable: [state, nothing]}
""") == [
        "system.yaml:4:17: error: instance left: no table file 'missing.yaml'",
        "system.yaml:5:38: error: instance right: nope: the table has no constant 'nope'",
    ]


def test_cli_reports_and_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copy(FIXTURES / "pingpong.yaml", tmp_path / "pingpong.yaml")
    path = tmp_path / "system.yaml"
    path.write_text("format: 1\nsystem: bad\ninstances: {left: {table: pingpong.yaml, count: 0}}\n")
    for command in ("check", "verify"):   # check stops at once; verify reports it and goes on to the others
        code: int | str | None
        try:
            code = main([command, str(path)])
        except SystemExit as exited:
            code = exited.code
        assert code == 2
        err = capsys.readouterr().err
        assert f"{path}:3:49: error: instances.left.count: 0 is less than the minimum of 1" in err
        assert "Traceback" not in err
    assert is_system_file(path) and not is_system_file(FIXTURES / "pingpong.yaml")


def test_what_the_loader_builds() -> None:
    system = load_system(FIXTURES / "counter-race.yaml")
    assert [i.name for i in system.instances] == ["inc[0]", "inc[1]", "counter"]
    group = system.groups["inc"]
    assert group.counted and not group.symmetric and "sender" in group.why_not
    [reply] = system.links_by_source[(2, "Value")]
    assert (reply.mode, reply.targets, reply.route_arg) == ("arg", (0, 1), 0)
    assert system.links_by_source[(1, "Read")][0].params == (-1,)


TABLE = """format: 1
machine: versions
variables:
  version: {type: int, min: 0, max: 2, init: 0}
states:
  A: {initial: true}
  B: {transient: true}
  C: {}
events:
  Bump:
    params: {by: {type: int, min: 0, max: 1}}
actions:
  Plain: {}
  Report:
    params: {version: {type: int, min: 0, max: 3}, odd: {type: bool}}
transitions:
  - {from: A, on: Bump, to: B, set: {version: version + by},
     emit: [Plain, {action: Report, args: {version: version + by + 1, odd: by == 1}}]}
  - {from: B, to: C, emit: [{action: Report, args: {version: version, odd: false}}]}
"""


def test_action_args_follow_the_semantics_and_the_engine() -> None:
    table = load_table_bytes(TABLE.encode(), "versions.yaml")
    result = step(table, 0, (0,), "Bump", (1,))
    assert result.actions == ("Plain", "Report", "Report")
    assert result.args == ((), (2, True), (1, False))  # args read the row's environment before its set
    outcome = Engine(table).step("Bump", by=1)
    assert outcome.actions == result.actions and outcome.args == result.args


@pytest.mark.parametrize(("emit", "message"), [
    ("[Report]", "versions.yaml:19:29: error: action 'Report' needs arg 'version'"),
    ("[{action: Report, args: {version: 1, odd: false, even: true}}]",
     "versions.yaml:19:77: error: action 'Report' has no parameter 'even'"),
    ("[{action: Report, args: {version: version == 1, odd: false}}]",
     "versions.yaml:19:62: error: expected an int expression, found bool"),
    ("[{action: Plain, args: {x: 1}}]", "versions.yaml:19:52: error: action 'Plain' has no parameter 'x'"),
])
def test_action_arg_errors(emit: str, message: str) -> None:
    text = TABLE.replace("emit: [{action: Report, args: {version: version, odd: false}}]", f"emit: {emit}")
    with pytest.raises(TableError) as info:
        load_table_bytes(text.encode(), "versions.yaml")
    assert message in [str(d) for d in info.value.diagnostics]


def test_unhandled_emit_cannot_take_args() -> None:
    text = TABLE + "unhandled: {policy: reject, emit: [{action: Report, args: {version: 0, odd: false}}]}\n"
    with pytest.raises(TableError) as info:
        load_table_bytes(text.encode(), "versions.yaml")
    assert "only a row's emit can compute args" in str(info.value)
