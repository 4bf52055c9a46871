"""Auditing the logs of a system's processes: an interleaving explains them, or the first record
none does is named with the configurations before it; damaged logs get a verdict or FILE:LINE."""

from __future__ import annotations

import json
import random
import tempfile
from pathlib import Path
from typing import Any

import pytest
from agentfsm.spec.audit_mapping import plain_mapping
from agentfsm.spec.system_load import load_system
from agentfsm.spec.system_log import read_logs
from agentfsm.spec.system_trace import param_names
from agentfsm.verify.system.audit import audit_system, logged
from agentfsm.verify.system.step import Stepper, initial_config
from conftest import ROOT, run_cli
from hypothesis import given, settings
from hypothesis import strategies as st
from json_envelope import enveloped

FIXED = str(ROOT / "spec/systems/durable-run-fixed.yaml")
SYSTEM = load_system(FIXED)

W0, W1, STORE = "worker[0]", "worker[1]", "store"
CLEAN: list[dict[str, Any]] = [
    {"instance": W0, "event": "Resume"},
    {"instance": STORE, "event": "Claim", "params": {"who": 0}},
    {"instance": W0, "event": "Granted", "params": {"token": 1, "journal": 0}},
    {"instance": STORE, "event": "WriteStarted", "params": {"who": 0, "token": 1}},
    {"instance": W0, "event": "Ack"},
    {"instance": W0, "event": "Proceed"},
    {"instance": W0, "event": "ToolDone"},
    {"instance": STORE, "event": "WriteCompleted", "params": {"who": 0, "token": 1}},
    {"instance": W0, "event": "Ack", "state": "Done"},
]


def write(path: Path, records: list[Any]) -> str:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return str(path)


def audit(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """The audit of records that are steps as they are (not the program records the system's mapping reads)."""
    mapping = [] if "--mapping" in args else ["--mapping", "none"]
    return run_cli(["audit", FIXED, *args, *mapping], capsys)


def test_a_clean_run_is_explained(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = audit([write(tmp_path / "run.jsonl", CLEAN)], capsys)
    assert code == 0, out + err
    assert "9 logged steps explained" in out


def test_one_log_per_process_is_explained(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def own(name: str) -> list[Any]:
        return [{k: v for k, v in r.items() if k != "instance"} for r in CLEAN if r["instance"] == name]
    code, out, _ = audit([f"{W0}={write(tmp_path / 'w0.jsonl', own(W0))}",
                          f"{STORE}={write(tmp_path / 'store.jsonl', own(STORE))}"], capsys)
    assert code == 0, out


def test_a_grant_while_the_lease_is_held_is_the_first_unexplained(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    stolen = [*CLEAN[:5], {"instance": W1, "event": "Resume"},
              {"instance": STORE, "event": "Claim", "params": {"who": 1}},
              {"instance": W1, "event": "Granted", "params": {"token": 2, "journal": 1}}]
    log = write(tmp_path / "run.jsonl", stolen)
    chart = tmp_path / "chart.svg"
    code, out, _ = audit([log, "--chart", str(chart)], capsys)
    assert code == 1
    assert f"{log}:8: not explained: worker[1] takes Granted(token=2, journal=1)" in out
    assert "store: Open {leased=true owner=0 epoch=1 journal=1}" in out   # the configurations before it
    assert "7 of 8 logged steps explained" in out
    assert "takes Claim(who=1)" in chart.read_text()


def test_json_verdict(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = [*CLEAN[:4], {"instance": W0, "event": "Proceed"}]
    code, out, _ = audit([write(tmp_path / "run.jsonl", broken), "--json"], capsys)
    data = enveloped(json.loads(out), "audit")
    assert code == 1 and not data["ok"] and data["explained"] == 4
    assert data["unexplained"][0]["line"] == 5 and len(data["prefix"]) == 4


@pytest.mark.parametrize("damage", ["dropped", "swapped"])
def test_a_damaged_log_is_not_explained(damage: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    records = list(CLEAN)
    if damage == "dropped":
        del records[3]                   # the store's WriteStarted
    else:
        records[4], records[5] = records[5], records[4]
    code, out, err = audit([write(tmp_path / "run.jsonl", records)], capsys)
    assert code == 1 and "Traceback" not in err
    assert f"run.jsonl:{4 if damage == 'dropped' else 5}: not explained" in out


@pytest.mark.parametrize(("line", "message"), [
    ('{"instance": "worker[0]", "event": "Resum', "run.jsonl:2: error: not JSON"),
    ('{"who": 3, "op": "claim"}', "run.jsonl:2: error: a step needs its 'instance'"),
    ('{"instance": "printer", "event": "Resume"}', "run.jsonl:2: error: no instance 'printer'"),
    ('{"instance": "store", "event": "Fly"}', "run.jsonl:2: error: store (run-store) has no event 'Fly'"),
    ('[1, 2]', "run.jsonl:2: error: a record must be a JSON object"),
])
def test_a_foreign_or_garbled_record_is_bad_input(line: str, message: str, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = audit([write(tmp_path / "run.jsonl", [CLEAN[0], line, *CLEAN[1:]])], capsys)
    assert code == 2 and message in err and "Traceback" not in err


def test_an_empty_log_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = audit([write(tmp_path / "run.jsonl", [])], capsys)
    assert code == 2 and "run.jsonl: error: the log holds no records" in err


def test_a_value_past_the_bounds_is_a_verdict(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    records = [*CLEAN[:2], {"instance": W0, "event": "Granted", "params": {"token": 7, "journal": 0}}]
    code, out, _ = audit([write(tmp_path / "run.jsonl", records)], capsys)
    assert code == 1 and "run.jsonl:3: not explained" in out and "token=7 is past the system's bounds" in out


def test_the_search_is_bounded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = audit([write(tmp_path / "run.jsonl", CLEAN), "--max-configurations", "20"], capsys)
    assert code == 2 and "more than 20 configurations at one position" in err


def test_a_system_audit_takes_no_set(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = audit([write(tmp_path / "run.jsonl", CLEAN), "--set", "max_claims=3"], capsys)
    assert code == 2 and "--set overrides a table's constants" in err


def test_a_table_audit_takes_one_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = write(tmp_path / "run.jsonl", CLEAN)
    code, _, err = run_cli(["audit", str(ROOT / "spec/tool-call.yaml"), log, log], capsys)
    assert code == 2 and "a table's audit reads one log" in err


def walk_log(seed: int, length: int) -> list[dict[str, Any]]:
    """The records of a random interleaving of the system: its logged steps, as a program logs them."""
    rng = random.Random(seed)
    stepper, config = Stepper(SYSTEM), initial_config(SYSTEM)
    mapping = plain_mapping(SYSTEM, [SYSTEM.instance("tool").index])
    records: list[dict[str, Any]] = []
    for _ in range(length):
        steps = [s for s in stepper.successors(config) if s[1] is not config]
        if not steps:
            break
        label, config, effect = rng.choice(steps)
        _, i, event, params, _ = label
        if logged(mapping, label, effect):
            records.append({"instance": SYSTEM.instances[i].name, "event": event,
                            "params": param_names(SYSTEM, i, event, params)})
    return records


@settings(max_examples=15, deadline=None)
@given(st.integers(0, 2**32), st.integers(5, 25))
def test_every_interleaving_explains_its_own_log(seed: int, length: int) -> None:
    records = walk_log(seed, length)
    if not records:
        return
    with tempfile.TemporaryDirectory() as folder:
        log = write(Path(folder) / "run.jsonl", records)
        mapping = plain_mapping(SYSTEM, [SYSTEM.instance("tool").index])
        result = audit_system(SYSTEM, mapping, read_logs(SYSTEM, mapping, [log]), max_silent=12)
    assert result.ok, result.unexplained


def test_the_silent_steps_are_bounded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The tool's two steps (taking Run, finishing) lie between Proceed and ToolDone."""
    log = write(tmp_path / "run.jsonl", CLEAN)
    code, out, _ = audit([log, "--max-silent", "1"], capsys)
    assert code == 1 and "run.jsonl:7: not explained: worker[0] takes ToolDone" in out
    assert audit([log, "--max-silent", "2"], capsys)[0] == 0


MAPPING = """\
system: durable-run-fixed
silent: [tool]
unlogged: {"worker[*]": [Proceed]}
number: {pid: worker}
records:
  - when: {op: note}
    steps: []
  - when: {op: claim}
    steps:
      - {instance: "worker[$pid]", event: Resume}
      - {instance: store, event: Claim, params: {who: $pid}}
      - {instance: "worker[$pid]", event: Granted, params: {token: $token, journal: $journal}}
  - when: {op: write}
    steps:
      - {instance: store, event: $what, params: {who: $pid, token: $token}}
      - {instance: "worker[$pid]", event: Ack}
  - when: {op: tool}
    steps: [{instance: "worker[$pid]", event: ToolDone}]
"""
PROGRAM = [{"op": "claim", "pid": "host:41", "token": 1, "journal": 0},
           {"op": "note", "text": "starting the tool"},
           {"op": "write", "pid": "host:41", "what": "WriteStarted", "token": 1},
           {"op": "tool", "pid": "host:41"},
           {"op": "write", "pid": "host:41", "what": "WriteCompleted", "token": 1}]


def test_a_mapping_translates_a_programs_records(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mapping = tmp_path / "map.yaml"
    mapping.write_text(MAPPING)
    log = write(tmp_path / "run.jsonl", PROGRAM)
    assert audit([log, "--mapping", str(mapping)], capsys)[0] == 0
    third = [*PROGRAM[:1], {"op": "claim", "pid": "host:42", "token": 2, "journal": 1},
             {"op": "claim", "pid": "host:43", "token": 2, "journal": 1}]
    code, out, _ = audit([write(tmp_path / "three.jsonl", third), "--mapping", str(mapping)], capsys)
    assert code == 1 and "three.jsonl:2: not explained" in out   # host:42's grant while host:41 holds the lease
    later = [{"op": "claim", "pid": f"host:{pid}", "token": 1, "journal": 2} for pid in (42, 43)]
    code, out, _ = audit([write(tmp_path / "four.jsonl", [*PROGRAM, *later]), "--mapping", str(mapping)], capsys)
    assert code == 1 and "four.jsonl:7: not explained" in out
    assert "pid 'host:43' is a member more than group worker's 2" in out
    code, _, err = audit([write(tmp_path / "foreign.jsonl", [{"op": "fly"}]), "--mapping", str(mapping)], capsys)
    assert code == 2 and "foreign.jsonl:1: error: no rule of" in err


def test_a_mapping_for_another_system_is_bad_input(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mapping = tmp_path / "map.yaml"
    mapping.write_text(MAPPING.replace("durable-run-fixed", "counter-race"))
    code, _, err = audit([write(tmp_path / "run.jsonl", CLEAN), "--mapping", str(mapping)], capsys)
    assert code == 2 and "the mapping is for system 'counter-race'" in err
