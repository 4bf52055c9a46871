"""Each file a subcommand is given is parsed once: ``verify`` with tables (and ``--set`` spread
over several of them) and systems, ``run``, ``replay`` and ``export`` with a system file. Every
YAML parse goes through a PyYAML reader, so counting the readers built per file's text counts the
parses, whatever module does them."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import ROOT, run_cli

SYSTEMS = ROOT / "tests" / "systems"
RACE = SYSTEMS / "counter-race.yaml"
MEMBERS = [SYSTEMS / "incrementer.yaml", SYSTEMS / "counter.yaml"]
TABLES = [ROOT / "spec" / "tool-call.yaml", ROOT / "spec" / "loom-agent.yaml"]


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[str]]:
    """The YAML texts parsed from now on, counted (a text is a file's whole content)."""
    counted: Counter[str] = Counter()
    built = yaml.reader.Reader.__init__

    def counting(self: yaml.reader.Reader, stream: Any) -> None:
        counted[stream if isinstance(stream, str) else bytes(stream).decode("utf-8")] += 1
        built(self, stream)

    monkeypatch.setattr(yaml.reader.Reader, "__init__", counting)
    yield counted


def per_file(counted: Counter[str], files: list[Path]) -> dict[str, int]:
    return {path.name: counted[path.read_text(encoding="utf-8")] for path in files}


def test_the_counter_sees_every_parse(parses: Counter[str]) -> None:
    from agentfsm.spec import load_table

    load_table(TABLES[0])
    load_table(TABLES[0])
    assert per_file(parses, TABLES) == {"tool-call.yaml": 2, "loom-agent.yaml": 0}


def test_verify_parses_each_table_and_system_once(parses: Counter[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, _, _ = run_cli(["verify", *map(str, TABLES), str(RACE), "--set", "max_attempts=2"], capsys)
    assert code == 1, "the race system's planted lost update"
    assert per_file(parses, [*TABLES, RACE, *MEMBERS]) == {path.name: 1 for path in [*TABLES, RACE, *MEMBERS]}


def test_verify_of_one_table_parses_it_once(parses: Counter[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["verify", str(TABLES[0])], capsys)[0] == 0
    assert per_file(parses, TABLES[:1]) == {"tool-call.yaml": 1}


@pytest.fixture
def race_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    trace = tmp_path / "race.json"
    assert run_cli(["verify", str(RACE), "--trace-out", str(trace)], capsys)[0] == 1
    return trace


@pytest.mark.parametrize("argv", [["replay", "{system}", "{trace}"], ["run", "{system}", "--script", "{trace}"],
                                  ["export", "--format", "promela", "{system}"]], ids=["replay", "run", "export"])
def test_a_system_file_is_parsed_once(argv: list[str], race_trace: Path, parses: Counter[str],
                                      capsys: pytest.CaptureFixture[str]) -> None:
    args = [a.format(system=RACE, trace=race_trace) for a in argv]
    assert run_cli(args, capsys)[0] in (0, 1)
    assert per_file(parses, [RACE, *MEMBERS]) == {path.name: 1 for path in [RACE, *MEMBERS]}


@pytest.mark.parametrize("argv", [["verify", "--summary"], ["check"], ["check", "--json"], ["diagram", "--out-dir"]])
def test_a_bundled_system_and_its_tables_are_parsed_once(argv: list[str], parses: Counter[str], tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """Telling a system file from a table parses it; loading it, and its tables, takes what was parsed."""
    system = ROOT / "spec" / "systems" / "loom-with-tools.yaml"
    args = [*argv, str(tmp_path), str(system)] if argv[-1] == "--out-dir" else [*argv, str(system)]
    assert run_cli(args, capsys)[0] == 0
    assert per_file(parses, [system]) == {system.name: 1} and set(parses.values()) == {1}
