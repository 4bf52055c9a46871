"""docs/tutorial.md runs as written: its files are written, its commands run in a fresh
directory with the installed agentfsm first on PATH, and their output is what the page
shows (timings aside)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from agentfsm.spec import load_table
from conftest import ROOT

TUTORIAL = ROOT / "docs" / "tutorial.md"
FENCE = re.compile(r"^( *)```(\w+)\n(.*?)^\1```\n", re.S | re.M)
TIMING = re.compile(r"\d+\.\d+ ?s\b")


def blocks() -> list[tuple[str, str]]:
    return [(m.group(2), textwrap.dedent(m.group(3))) for m in FENCE.finditer(TUTORIAL.read_text())]


def sessions() -> list[tuple[str, str]]:
    """Each ``$ command`` of the console blocks with the output the page shows for it."""
    found: list[tuple[str, str]] = []
    for kind, text in blocks():
        if kind != "console":
            continue
        for line in text.splitlines(keepends=True):
            if line.startswith("$ "):
                found.append((line[2:].strip(), ""))
            else:
                found[-1] = (found[-1][0], found[-1][1] + line)
    return found


def normal(text: str) -> str:
    return TIMING.sub("N s", text)


def test_every_command_prints_what_the_tutorial_shows(tmp_path: Path) -> None:
    for kind, text in blocks():
        first = text.splitlines()[0]
        if kind == "yaml" and first.startswith("# file: "):
            (tmp_path / first.removeprefix("# file: ")).write_text(text)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    steps = sessions()
    assert len(steps) >= 12
    for command, expected in steps:
        proc = subprocess.run(["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True,
                              timeout=600)
        assert normal(proc.stdout + proc.stderr) == normal(expected), command


def test_the_tutorial_table_is_the_example() -> None:
    [table] = [t for k, t in blocks() if k == "yaml" and t.startswith("# file: support-agent.yaml")]
    example = (ROOT / "examples" / "support-agent.yaml").read_text()
    body = example[example.index("format: 1"):]
    assert table.removeprefix("# file: support-agent.yaml\n") == body


def test_the_yaml12_loader_recipe_keeps_on_a_string(monkeypatch: pytest.MonkeyPatch) -> None:
    """The page's PyYAML recipe reads the table as agentfsm does (plain safe_load would not)."""
    [recipe] = [t for k, t in blocks() if k == "python" and "class Yaml12" in t]
    monkeypatch.chdir(ROOT / "examples")
    scope: dict[str, object] = {}
    exec(compile(recipe, "docs/tutorial.md", "exec"), scope)
    data = scope["table"]
    assert isinstance(data, dict)
    assert [row["on"] for row in data["transitions"]] == [r.event for r in load_table("support-agent.yaml").rows]
    assert True in yaml.safe_load("transitions:\n  - {on: x}")["transitions"][0], "what the recipe avoids"
