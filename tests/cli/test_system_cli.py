"""``agentfsm check|verify|replay`` on system files (told apart from tables by ``system:``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentfsm.cli import main

ROOT = Path(__file__).resolve().parent.parent.parent
FIXTURES = Path(__file__).resolve().parent.parent / "systems"
LOOM = str(ROOT / "spec" / "systems" / "loom-with-tools.yaml")
RACE = str(FIXTURES / "counter-race.yaml")


def test_check_mixes_tables_and_systems(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", str(ROOT / "spec" / "loom-agent.yaml"), LOOM]) == 0
    out = capsys.readouterr().out
    assert "loom-agent.yaml: ok: loom-agent:" in out
    assert "loom-with-tools.yaml: ok: system loom-with-tools: 3 instances of 2 tables" in out


def test_verify_counts_with_and_without_symmetry(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["verify", LOOM]) == 0
    assert "262 configurations" in capsys.readouterr().out
    assert main(["verify", LOOM, "--no-symmetry", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    [system] = report["systems"]
    assert report["ok"] and system["configurations"] == 406 and system["symmetry"] is False


def test_verify_writes_a_trace_that_replays(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "race.json"
    assert main(["verify", RACE, "--trace-out", str(trace)]) == 1
    out = capsys.readouterr().out
    assert "FAIL invariant no-lost-update" in out and "counter takes Write(v=1)" in out
    data = json.loads(trace.read_text())
    assert data["system"] == "counter-race" and data["check"] == "no-lost-update" and len(data["steps"]) == 8
    assert data["steps"][0] == {"step": "env", "instance": "inc[0]", "event": "Go", "params": {}}
    assert main(["replay", RACE, str(trace)]) == 1, "the system still has the defect"
    out = capsys.readouterr().out
    assert "replaying invariant no-lost-update (8 steps)" in out and "counter: Up {value=1}" in out
    assert "violated: invariant no-lost-update:" in out
    data["steps"] = data["steps"][:2]
    trace.write_text(json.dumps(data))
    assert main(["replay", RACE, str(trace)]) == 0, "a prefix of the counterexample violates nothing"
    assert "no check is violated by this trace" in capsys.readouterr().out


@pytest.mark.parametrize("name", ["durable-run-as-it-was-sqlite", "durable-run-as-it-was-pool"])
def test_every_counterexample_of_the_protocol_as_it_was_replays_to_its_violation(
        name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Each failing check's trace, replayed, exits 1 naming that check: invariants, and the lassos
    of the no-cycle-within properties (kept counterexamples serve as regression tests)."""
    system = str(ROOT / "spec" / "systems" / f"{name}.yaml")
    traces = tmp_path / "traces"
    traces.mkdir()
    assert main(["verify", system, "--trace-out", f"{traces}/"]) == 1
    capsys.readouterr()
    written = sorted(traces.glob("*.json"))
    assert written
    for path in written:
        data = json.loads(path.read_text())
        assert main(["replay", system, str(path)]) == 1, path.name
        out = capsys.readouterr().out
        assert f"violated: {data['kind']} {data['check']}" in out, (path.name, out[-400:])


def test_replay_refuses_a_step_that_cannot_happen(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "bad.json"
    trace.write_text(json.dumps({"system": "counter-race", "steps": [
        {"step": "deliver", "instance": "counter", "event": "Read", "params": {"who": 0}}]}))
    assert main(["replay", RACE, str(trace)]) == 2
    assert "step 1 (counter takes Read(who=0)) cannot happen here" in capsys.readouterr().err
    trace.write_text(json.dumps({"steps": [{"step": "env", "instance": "nobody"}]}))
    assert main(["replay", RACE, str(trace)]) == 2
    assert "step 1: unknown instance 'nobody'" in capsys.readouterr().err


def test_diagram_draws_instances_links_and_a_sequence_chart(tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diagram", LOOM, "--format", "mermaid"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("flowchart LR") and 'i_agent <-->|"agent: ExecuteTools → Execute (each)<br/>' in out
    assert 'i_call["<b>call ×2</b><br/>loom-tool<br/><i>from the environment:</i><br/>Finished"]' in out
    picture = tmp_path / "loom.svg"
    assert main(["diagram", LOOM, "-o", str(picture)]) == 0
    assert b"<svg" in picture.read_bytes() and b"ExecuteTools" in picture.read_bytes()
    trace = tmp_path / "race.json"
    assert main(["verify", RACE, "--trace-out", str(trace)]) == 1
    capsys.readouterr()
    assert main(["diagram", RACE, "--trace", str(trace), "--format", "mermaid"]) == 0
    chart = capsys.readouterr().out.splitlines()
    assert chart[:2] == ["sequenceDiagram", "    title counter-race: invariant no-lost-update"]
    assert "    i_inc_0_-)i_counter: Write(v=1)" in chart
    assert chart[-2] == "    Note over i_counter: 8. takes Write(v=1)"
    assert chart[-1].startswith("    Note over environment,i_counter: ✗ invariant no-lost-update broken: ")
    assert chart[-1].endswith("(inc[0].state = Done, inc[1].state = Done,<br/>counter.mailbox = 0, counter.value = 1)")
    svg = tmp_path / "race.svg"
    assert main(["diagram", RACE, "--trace", str(trace), "-o", str(svg)]) == 0
    assert svg.read_bytes().count(b"marker-end") == 8  # 2 inputs and 6 messages
    assert main(["diagram", RACE, "--trace", str(trace), "--format", "dot"]) == 2


def test_export_promela_of_a_system(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["export", "--promela", RACE]) == 0
    model = capsys.readouterr().out
    assert "chan mb2 = [2] of { byte, int };" in model and "active proctype P2()" in model
    assert "never { do :: assert(INVARIANTS && v2_value == v2_value) od }" in model
    anyone = tmp_path / "any.yaml"
    anyone.write_text(Path(LOOM).read_text().replace('to: "call[*]", event: Execute', 'to: "call[any]", event: Execute')
                      .replace("table: ../", f"table: {ROOT}/spec/").replace("table: tables/",
                                                                             f"table: {ROOT}/spec/systems/tables/"))
    capsys.readouterr()
    assert main(["export", "--promela", str(anyone)]) == 0
    model = capsys.readouterr().out
    assert "hidden byte pk0[" in model and "pk0[np0] % 2 == 1 ->" in model
