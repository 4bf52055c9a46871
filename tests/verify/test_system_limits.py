"""``verify`` on systems never takes the others down: a system that does not load is reported
(text, ``--json``, ``--junit``) and the rest still verified; ``--max-configurations`` stops a
system's exploration as it stops a table's, and a default limit stops both, saying so and
naming the flag that raises it."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest
from conftest import ROOT, run_cli

from agentfsm.cli import verify as commands

SYSTEMS = ROOT / "spec" / "systems"
FIXTURES = ROOT / "tests" / "systems"
SCHEMA = json.loads((ROOT / "docs" / "verify-json.schema.json").read_text())


def bad_system(tmp_path: Path) -> Path:
    path = tmp_path / "bad-system.yaml"
    path.write_text("format: 1\nsystem: bad\ninstances:\n  a: {table: missing.yaml}\n")
    return path


def test_a_system_that_does_not_load_is_reported_and_the_others_verified(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    junit = tmp_path / "report.xml"
    good = SYSTEMS / "vibework-with-user.yaml"
    code, out, err = run_cli(["verify", "--json", "--junit", str(junit), str(bad_system(tmp_path)), str(good),
                              str(ROOT / "tests" / "systems" / "toggle.yaml")], capsys)
    assert code == 2
    assert "missing.yaml" in err
    report = json.loads(out)
    jsonschema.validate(report, SCHEMA)
    assert report["ok"] is False
    assert report["tables"][0]["ok"] is True
    bad, verified = report["systems"]
    assert bad["ok"] is False and bad["error"]["kind"] == "load" and bad["file"].endswith("bad-system.yaml")
    assert verified["system"] == "vibework-with-user" and verified["ok"] is True and verified["configurations"] > 0
    suites = ET.parse(junit).getroot().findall("testsuite")
    errors = [s for s in suites if s.get("errors") == "1"]
    assert len(errors) == 1 and errors[0].get("file", "").endswith("bad-system.yaml")
    assert any(s.get("name") == "verify.system.vibework-with-user" for s in suites)
    code, out, err = run_cli(["verify", str(bad_system(tmp_path)), str(good)], capsys)
    assert code == 2 and "system vibework-with-user" in out and "missing.yaml" in err


def test_max_configurations_stops_a_system(capsys: pytest.CaptureFixture[str]) -> None:
    system = str(SYSTEMS / "durable-run-fixed.yaml")
    code, out, err = run_cli(["verify", "--max-configurations", "100", "--json", system], capsys)
    assert code == 2
    assert "durable-run-fixed: exploration stopped, more than 100 configurations (--max-configurations 100)" in err
    entry = json.loads(out)["systems"][0]
    assert entry["ok"] is False and entry["error"]["kind"] == "limit" and entry["system"] == "durable-run-fixed"
    code, out, _ = run_cli(["verify", "--max-configurations", "1000", str(SYSTEMS / "loom-with-tools.yaml")], capsys)
    assert code == 0 and "262 configurations" in out


@pytest.mark.parametrize("path", [SYSTEMS / "loom-with-tools.yaml", ROOT / "spec" / "loom-agent.yaml"],
                         ids=["system", "table"])
def test_a_default_limit_says_so_and_names_the_flag(path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(commands, "DEFAULT_MAX_CONFIGURATIONS", 50)
    monkeypatch.setattr(commands, "DEFAULT_MAX_SYSTEM_CONFIGURATIONS", 50)
    code, _, err = run_cli(["verify", str(path)], capsys)
    assert code == 2
    assert "more than 50 configurations (the default limit; raise it with --max-configurations N)" in err


def test_the_systems_of_verify_json_follow_the_schema(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["verify", "--json", str(FIXTURES / "toggles-system.yaml"),
                            str(FIXTURES / "heartbeat-system.yaml")], capsys)
    assert code == 1
    report = json.loads(out)
    jsonschema.validate(report, SCHEMA)
    traces = [c["counterexample"] for s in report["systems"] for c in s["checks"] if not c["ok"]]
    assert [t["kind"] for t in traces] == ["invariant", "no-cycle-within"]
    assert traces[1]["loop_start"] == 0
    assert "systems" in SCHEMA["properties"] and "verified_system" in SCHEMA["$defs"]
