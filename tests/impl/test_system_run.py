"""``agentfsm run SYSTEM --script TRACE``: the engines, one per instance with asyncio queues as
mailboxes, reproduce the explorer's counterexamples configuration for configuration."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from agentfsm.impl.system_run import RunDiverged, run_trace
from agentfsm.spec.system_load import load_system
from agentfsm.spec.system_trace import load_system_trace
from agentfsm.verify.system.checks import run_system_checks
from agentfsm.verify.system.explore import explore_system
from agentfsm.verify.system.paths import replay
from json_envelope import run_line

from agentfsm.cli import main

ROOT = Path(__file__).resolve().parent.parent.parent
SYSTEMS = ROOT / "spec" / "systems"


@pytest.mark.parametrize("name", ["durable-run-as-it-was-sqlite", "durable-run-as-it-was-pool"])
def test_every_counterexample_replays_through_the_runtime(name: str) -> None:
    system = load_system(SYSTEMS / f"{name}.yaml")
    checks = [c for c in run_system_checks(explore_system(system)).checks if not c.ok]
    assert len(checks) == 4
    for check in checks:
        assert check.trace is not None
        model = replay(system, check.trace.steps)[-1][1]
        reached = asyncio.run(run_trace(system, check.trace.steps, lambda line: None))
        assert reached == model, check.name


def test_cli_run_reaches_the_counterexample(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = str(SYSTEMS / "durable-run-as-it-was-sqlite.yaml")
    trace = tmp_path / "rerun.json"
    assert main(["verify", path, "--trace-out", str(trace)]) == 1
    capsys.readouterr()
    assert main(["run", path, "--script", str(trace), "--json"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "durable-run-as-it-was-sqlite: running 12 steps, one engine per instance"
    assert "    tool: Up {busy0=true busy1=true runs=2 fence=0 answered_not_run=false}" in out
    final = run_line(json.loads(out[-1]))["configuration"]
    system = load_system(path)
    steps = replay(system, load_system_trace(system, trace.read_text()).steps)
    assert json.loads(json.dumps(steps[-1][1])) == final


def test_a_step_that_cannot_happen_is_a_divergence(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = str(SYSTEMS / "durable-run-fixed.yaml")
    trace = tmp_path / "bad.json"
    trace.write_text(json.dumps({"steps": [
        {"step": "env", "instance": "worker[0]", "event": "Resume", "params": {}},
        {"step": "deliver", "instance": "store", "event": "Claim", "params": {"who": 1}}]}))
    assert main(["run", path, "--script", str(trace)]) == 1
    assert "store's next message is Claim(0,), not Claim(1,)" in capsys.readouterr().err
    system = load_system(path)
    with pytest.raises(RunDiverged, match="no crash fault left"):
        asyncio.run(run_trace(system, [("crash", 0, "", (), ()), ("crash", 1, "", (), ())], lambda line: None))
