"""What the durable commands say when the input is wrong (issue 25, defect 6): bad input is
exit 2 with a message about what was given (a script, a store URL, a table), never a
traceback or a message meant for something else; a run that stops on an anomaly says the
same with or without ``--store``."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_durable_agent import LOOM
from test_durable_damage import EVENTS, TOOL_CALL, clean_error, durable_run, run

SPEC = Path(LOOM).parent
EXPLORER = str(SPEC / "explorer-evaluator.yaml")


def test_journal_with_another_machines_table_is_bad_input(tmp_path: Path) -> None:
    durable_run(tmp_path)
    shown = run("journal", "--store", "j.db", "--table", TOOL_CALL, cwd=tmp_path)
    clean_error(shown, "j.db", "runs 'loom-agent'")


def test_resuming_a_run_of_another_machine_is_bad_input(tmp_path: Path) -> None:
    durable_run(tmp_path)
    script = str(SPEC.parent / "examples" / "tool-call-demo.yaml")
    clean_error(run("run", TOOL_CALL, "--script", script, "--store", "j.db", "--resume", cwd=tmp_path), "j.db",
                "runs machine 'loom-agent', not 'tool-call'")


def test_a_full_disk_when_the_store_is_created_is_not_called_a_bad_store(tmp_path: Path) -> None:
    (tmp_path / "e.yaml").write_text(EVENTS)
    full = run("run", LOOM, "--script", "e.yaml", "--store", "j.db", cwd=tmp_path, limit=2048)
    clean_error(full, "j.db", "the disk is full or failing")
    assert "not a journal store" not in full.stderr


@pytest.mark.parametrize(("text", "message"), [
    ("events:\n  - UserInput\n  - LlmCompleted: {tool_calls: many}\n",
     "event 2: LlmCompleted: parameter 'tool_calls' is 'many': a parameter's value is an integer or a boolean"),
    ("", "empty: a script is a mapping"),
    ("events:\n" + "  - UserInput\n" * 50_000, "larger than 512 KiB: too large for a script"),
])
def test_a_bad_script_is_told_as_a_script(text: str, message: str, tmp_path: Path) -> None:
    (tmp_path / "s.yaml").write_text(text)
    proc = run("run", LOOM, "--script", "s.yaml", "--store", "j.db", cwd=tmp_path)
    clean_error(proc, "s.yaml", message)
    assert "table" not in proc.stderr


@pytest.mark.parametrize("command", [["run", LOOM, "--script", "e.yaml", "--store"], ["journal", "--store"]])
def test_a_store_url_of_an_unknown_kind_is_named_as_such(command: list[str], tmp_path: Path) -> None:
    (tmp_path / "e.yaml").write_text(EVENTS)
    proc = run(*command, "mysql://user@host/db", cwd=tmp_path)
    clean_error(proc, "mysql://user@host/db", "no store of kind 'mysql'")


def test_a_run_stopped_by_an_anomaly_says_the_same_with_and_without_a_store(tmp_path: Path) -> None:
    (tmp_path / "halt.yaml").write_text(Path(EXPLORER).read_text().replace("anomaly: log", "anomaly: halt"))
    (tmp_path / "r.yaml").write_text("events:\n  - TaskReceived: {plan: true}\n  - CommandsExecuted\n")
    memory = run("run", "halt.yaml", "--script", "r.yaml", cwd=tmp_path)
    durable = run("run", "halt.yaml", "--script", "r.yaml", "--store", "j.db", cwd=tmp_path)
    assert memory.returncode == durable.returncode == 1, memory.stdout + durable.stdout
    assert "blocked: state Planning" in memory.stdout and "blocked: state Planning" in durable.stdout
    logged = run("run", EXPLORER, "--script", "r.yaml", cwd=tmp_path)  # anomaly: log goes on
    assert logged.returncode == 0 and "done: state Planning, 1 anomalies" in logged.stdout, logged.stdout
    assert "final state Planning" not in logged.stdout
