"""Every ``agentfsm SUBCOMMAND --flag`` that README.md or docs/ mentions is exercised by a test.

The scanner reads the docs for command lines, then reads the test modules' string constants:
a (subcommand, flag) pair counts as exercised when one test module holds both as strings of
a command line (``"verify"`` and ``"--verbose"``, or ``"agentfsm verify ... --verbose"``).
A pair exercised somewhere else (the Makefile, CI) is listed in ``EXERCISED_ELSEWHERE`` with
where: add to it rather than weaken the scan. The tests below exercise the flags the scan
found documented and untested.
"""

from __future__ import annotations

import ast
import http.server
import json
import re
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from conformance_helpers import ADAPTERS, LOOM
from conftest import ROOT, run_cli
from json_envelope import enveloped

from agentfsm import __version__

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
TESTS = ROOT / "tests"
COMMAND = re.compile(r"agentfsm((?: [a-z][a-z-]*)?)([^\n`|]*)")
FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")

# (subcommand, flag) -> where it is exercised, when not by a test module.
EXERCISED_ELSEWHERE: dict[tuple[str, str], str] = {
    ("crash", "--kill"): "Makefile: make crash",
    ("worker", "--status-query"): "faults/chaos.py: the workers campaign (make chaos)",
}


def documented() -> dict[tuple[str, str], str]:
    """(subcommand, flag) for every flag written after ``agentfsm SUBCOMMAND`` in the docs
    ("" for ``agentfsm --flag``), with the first file that mentions it."""
    found: dict[tuple[str, str], str] = {}
    for path in DOCS:
        for match in COMMAND.finditer(path.read_text(encoding="utf-8")):
            sub = match.group(1).strip()
            for flag in FLAG.findall(match.group(2)):
                found.setdefault((sub, flag), path.name)
    return found


def strings(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)}


def exercised(sub: str, flag: str, texts: set[str]) -> bool:
    def has_flag(text: str) -> bool:
        return any(word == flag or word.startswith(flag + "=") for word in text.split())
    if not any(has_flag(t) for t in texts):
        return False
    if not sub:
        return True
    return any(t == sub or t.startswith(f"{sub} ") or f"agentfsm {sub}" in t for t in texts)


def test_every_documented_flag_is_exercised_by_a_test() -> None:
    found = documented()
    assert ("verify", "--verbose") in found and ("", "--version") in found, "the scan reads no command lines"
    tests = sorted(TESTS.glob("test_*.py")) + sorted(TESTS.glob("*/test_*.py"))   # flat, or in a package's folder
    modules = [strings(p) for p in [*tests, TESTS / "agent_runs.py"]]
    missing = sorted(f"agentfsm {sub} {flag} ({where})".replace("  ", " ") for (sub, flag), where in found.items()
                     if (sub, flag) not in EXERCISED_ELSEWHERE
                     and not any(exercised(sub, flag, texts) for texts in modules))
    assert not missing, "documented but exercised by no test:\n" + "\n".join(missing)


def test_the_scanner_sees_a_missing_flag() -> None:
    assert not exercised("verify", "--no-such-flag", {"verify", "--verbose"})
    assert not exercised("verify", "--verbose", {"journal", "--verbose"})
    assert exercised("verify", "--verbose", {"verify", "--verbose"})
    assert exercised("run", "--openai", {"agentfsm run spec/x.yaml --openai http://h/v1"})


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run_cli(["--version"], capsys)
    assert code == 0 and out.strip() == f"agentfsm {__version__}"


def test_verify_verbose_lists_every_unhandled_pair(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Thirteen (state, event) combinations without rows: twelve shown, then all with --verbose."""
    table = tmp_path / "many.yaml"
    table.write_text(json.dumps({"format": 1, "machine": "many", "states": {"A": {"initial": True}},
                                 "events": {f"E{k}": {} for k in range(14)},
                                 "transitions": [{"from": "A", "on": "E0", "to": "A"}],
                                 "unhandled": {"policy": "ignore"}}))
    code, out, _ = run_cli(["verify", str(table)], capsys)
    assert code == 0 and "... 1 more (--verbose lists all)" in out and "A x E13" not in out
    code, out, _ = run_cli(["verify", str(table), "--verbose"], capsys)
    assert code == 0 and "more (--verbose" not in out
    assert [line.strip() for line in out.splitlines() if line.strip().startswith("A x ")] == [
        f"A x E{k}: 1" for k in range(1, 14)]


def test_vectors_walks_length_and_seed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def walks(*extra: str) -> list[list[str]]:
        code, out, _ = run_cli(["vectors", str(LOOM), "--sets", "walks", *extra], capsys)
        assert code == 0
        lines = [json.loads(line) for line in out.splitlines()]
        assert lines[0]["options"]["walks"] == int(extra[extra.index("--walks") + 1])
        return [[s["event"] for s in v["steps"]] for v in lines[1:]]

    three = walks("--walks", "3", "--walk-length", "5", "--seed", "1")
    assert len(three) == 3 and all(1 <= len(w) <= 5 for w in three)
    assert walks("--walks", "3", "--walk-length", "5", "--seed", "1") == three
    others = [walks("--walks", "3", "--walk-length", "5", "--seed", str(seed)) for seed in (2, 3, 4)]
    assert any(w != three for w in others), "--seed changes nothing"


def test_conform_shell_runs_the_adapter_through_sh(capsys: pytest.CaptureFixture[str]) -> None:
    command = f"cd {ADAPTERS} && exec {sys.executable} adapter_semantics.py {LOOM}"
    code, out, err = run_cli(["conform", str(LOOM), "--adapter", command, "--shell", "--sets", "rows"], capsys)
    assert code == 0, err
    assert "conform loom-agent:" in out
    code, _, _ = run_cli(["conform", str(LOOM), "--adapter", command, "--sets", "rows"], capsys)
    assert code != 0   # without --shell, `cd` is a program name, not a shell built-in


def test_chaos_json_counts_one_trial(capsys: pytest.CaptureFixture[str]) -> None:
    """The cheapest campaign (a second resumer races the first, about 4 s): one JSON object,
    every count of the row the table output prints, and the fault really injected."""
    code, out, err = run_cli(["chaos", "--scenario", "two-resumers", "--trials", "1", "--seed", "3", "--json"], capsys)
    assert code == 0, err
    report = enveloped(json.loads(out), "chaos")
    assert set(report) == {"format", "kind", "ok", "seed", "rows"} and report["ok"] is True and report["seed"] == 3
    audited = report["rows"][0].pop("audited")
    assert audited > 0   # the run's effects, each audited against durable-run-fixed.yaml
    assert report["rows"] == [{"scenario": "two-resumers", "agent": "loom-agent", "trials": 1, "runs": 1, "faults": 1,
                               "duplicated": 0, "lost": 0, "stuck": 0, "unclean": 0, "damaged": 0, "repaired": 0,
                               "unexplained": 0, "cut": 0, "notes": []}]


@pytest.mark.slow   # every mutant in its own adapter process
def test_mutants_processes_and_a_vectors_file_give_the_same_verdicts(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    counter = str(TESTS / "tables" / "counter.yaml")
    vectors = str(tmp_path / "v.jsonl")
    assert run_cli(["vectors", counter, "-o", vectors], capsys)[0] == 0
    code, inline, _ = run_cli(["mutants", counter, "--vectors", vectors, "--json"], capsys)
    code_p, processes, _ = run_cli(["mutants", counter, "--json", "--processes"], capsys)
    assert (code, code_p) == (0, 0)
    a, b = json.loads(inline), json.loads(processes)
    assert {k: v for k, v in a.items() if k != "seconds"} == {k: v for k, v in b.items() if k != "seconds"}


def test_journal_run_and_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    table = TESTS / "tables" / "counter.yaml"
    script = tmp_path / "s.yaml"
    script.write_text("events: [Tick, Tick, Stop]\n")
    store = str(tmp_path / "j.db")
    for run_id in ("first", "second"):
        code, _, err = run_cli(["run", str(table), "--script", str(script), "--store", store, "--run-id", run_id],
                               capsys)
        assert code == 0, err
    code, out, err = run_cli(["journal", store, "--run", "second", "--table", str(table), "--json"], capsys)
    assert code == 0, err
    [run] = enveloped(json.loads(out), "journal")["runs"]
    assert run["run_id"] == "second" and run["current"]["state"] == "Stopped"
    code, out, err = run_cli(["journal", store, "--run", "second", "--json"], capsys)
    assert code == 0 and "current" not in json.loads(out)["runs"][0]   # not bundled: --table names the table
    code, out, err = run_cli(["journal", store, "--table", str(table), "--json"], capsys)
    assert code == 0, err
    assert [r["run_id"] for r in json.loads(out)["runs"]] == ["first", "second"]
    code, _, err = run_cli(["journal", store, "--run", "third", "--table", str(table)], capsys)
    assert code == 2 and "third" in err


class FakeOpenAI(http.server.BaseHTTPRequestHandler):
    """An OpenAI-compatible /chat/completions that streams one text reply; keeps each request."""

    requests: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        FakeOpenAI.requests.append({"path": self.path, **body})
        events = [{"choices": [{"index": 0, "delta": {"content": "Hello from the fake model"}}]},
                  {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}]
        data = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
        payload = data.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture()
def fake_openai() -> Iterator[str]:
    FakeOpenAI.requests = []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), FakeOpenAI)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def test_run_openai_model_against_a_local_server(fake_openai: str, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "s.yaml"
    script.write_text("inputs: [hi]\nreplies: []\n")
    code, out, err = run_cli(["run", str(LOOM), "--script", str(script), "--openai", fake_openai,
                              "--model", "tiny-test-model", "--workdir", str(tmp_path), "--timeout", "60"], capsys)
    assert code == 0, err
    assert "Hello from the fake model" in out
    [request] = FakeOpenAI.requests
    assert request["path"] == "/v1/chat/completions" and request["model"] == "tiny-test-model"
    assert request["stream"] is True
    assert any(m.get("content") == "hi" for m in request["messages"])
    code, _, err = run_cli(["run", str(LOOM), "--script", str(script), "--openai", fake_openai], capsys)
    assert code == 2 and "--openai needs --model NAME" in err
