"""The CLI's seams made even: --store and --format everywhere (old spellings warn), bundled
tables by name, --out-dir refusing to overwrite, suggestions for mistyped options, every
subcommand described, make verify's one-line summaries, crash shards adding up."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import ROOT, SPEC, TABLES, run_cli

from agentfsm.cli import build_parser, main

LOOM = str(SPEC / "loom-agent.yaml")
APPROVAL_DEMO = str(ROOT / "tests" / "tables" / "approval-demo.yaml")


def test_export_takes_format_and_warns_on_the_old_flag(capsys: pytest.CaptureFixture[str]) -> None:
    code, new, err = run_cli(["export", "--format", "promela", LOOM], capsys)
    assert code == 0 and "active proctype" in new and err == ""
    code, old, err = run_cli(["export", "--promela", LOOM], capsys)
    assert code == 0 and old == new
    assert "'export --promela' is deprecated" in err and "use 'export --format promela'" in err
    code, _, err = run_cli(["export", LOOM], capsys)
    assert code == 2 and "--format promela" in err


def test_journal_takes_store_and_warns_on_the_positional(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "s.yaml"
    script.write_text("events:\n  - UserInput\n  - ShutdownRequested\n")
    db = str(tmp_path / "j.db")
    assert main(["run", LOOM, "--script", str(script), "--store", db]) == 0
    capsys.readouterr()
    code, new, err = run_cli(["journal", "--store", db, "--json"], capsys)
    assert code == 0 and err == "" and json.loads(new)["runs"]
    code, old, err = run_cli(["journal", db, "--json"], capsys)
    assert code == 0 and old == new and "'journal URL' is deprecated" in err
    code, _, err = run_cli(["journal"], capsys)
    assert code == 2 and "--store URL" in err
    code, _, err = run_cli(["journal", db, "--store", db], capsys)
    assert code == 2


def test_out_dir_refuses_two_tables_of_one_machine(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    copy = tmp_path / "copy.yaml"
    shutil.copy(LOOM, copy)
    out = tmp_path / "pictures"
    code, _, err = run_cli(["diagram", LOOM, str(copy), "--out-dir", str(out)], capsys)
    assert code == 2 and "both draw machine 'loom-agent'" in err
    assert not out.exists(), "nothing is written when the names clash"
    code, out_text, _ = run_cli(["diagram", LOOM, "--out-dir", str(out)], capsys)
    assert code == 0 and out_text.count("\n") == 1 and (out / "loom-agent.svg").exists()


def test_tables_prints_bundled_paths(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["tables"], capsys)
    assert code == 0
    assert [Path(line).name for line in out.splitlines()] == [t.name for t in TABLES]
    assert all(Path(line).is_file() for line in out.splitlines())
    code, out, _ = run_cli(["tables", "tool-call"], capsys)
    assert code == 0 and Path(out.strip()).read_bytes() == (SPEC / "tool-call.yaml").read_bytes()


def test_every_subcommand_has_a_description() -> None:
    parser = build_parser()
    [sub] = [a for a in parser._actions if a.dest == "command"]
    choices = getattr(sub, "choices", {})
    missing = [name for name, p in choices.items() if not p.description]
    assert choices and not missing


def test_verify_summary_is_one_line_per_table(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["verify", "--summary", *map(str, TABLES)], capsys)
    assert code == 0
    assert len(out.splitlines()) == len(TABLES) and all("checks hold" in line for line in out.splitlines())


def test_verify_summary_still_reports_a_failure_in_full(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = tmp_path / "t.yaml"
    support = (ROOT / "examples" / "support-agent.yaml").read_text()
    table.write_text(support.replace("expr: failures < max_lookups", "expr: failures == 0"))
    code, out, _ = run_cli(["verify", "--summary", str(table)], capsys)
    assert code == 1 and "FAIL" in out and "counterexample" in out


def test_crash_shards_add_up_to_one_process(capsys: pytest.CaptureFixture[str]) -> None:
    """Forked shards (and forked SIGKILL children) check exactly what one process checks."""
    reports = []
    for jobs in ("1", "3"):
        code, out, _ = run_cli(["crash", APPROVAL_DEMO, "--approval", "AskApproval=30", "--kill", "3",
                                "--json", "--jobs", jobs], capsys)
        assert code == 0
        reports.append(json.loads(out))
    assert reports[0] == reports[1]
    assert reports[0]["kills"] == 3 and reports[0]["scenarios"] > 0


TOOL_CALL = str(SPEC / "tool-call.yaml")
DEMO = str(ROOT / "examples" / "tool-call-demo.yaml")


def worker_outcomes(url: str, script: Path | str, tmp: Path, capsys: pytest.CaptureFixture[str]) -> list[str]:
    assert main(["submit", "--store", url, TOOL_CALL, "--script", str(script), "--count", "2"]) == 0
    assert main(["worker", "--store", url, "--ledger", str(tmp / "ledger"), "--exit-when-idle", TOOL_CALL]) == 0
    capsys.readouterr()
    assert main(["jobs", "--store", url, "--json"]) == 0
    return sorted({f"{j['status']}: {j['outcome']}" for j in json.loads(capsys.readouterr().out)["jobs"]})


def test_durable_run_and_worker_agree_on_the_demo(tmp_path: Path, pg_url: str,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """The worker's demo jobs ended 'blocked' where run ended done: the demo's last TimedOut
    loses its race and is refused. The tool-call table's anomaly policy is now ``log`` (a
    refused event is journaled and the run goes on), so both end done, and agree."""
    from pg_support import fresh_schema
    code, out, _ = run_cli(["run", TOOL_CALL, "--script", DEMO, "--store", str(tmp_path / "demo.db")], capsys)
    assert code == 0 and "Completed --TimedOut--> Completed" in out and "(rejected)" in out
    assert "done: final state Returned" in out
    with fresh_schema(pg_url) as schema:
        [outcome] = worker_outcomes(f"{pg_url}?schema={schema}", DEMO, tmp_path, capsys)
        assert outcome.startswith("done: Returned")
