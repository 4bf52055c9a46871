"""The Python API of docs/verifier.md: its example runs and prints what the page shows."""

from __future__ import annotations

import re
import subprocess
import sys

import agentfsm.verify
from conftest import ROOT


def test_the_documented_example_prints_what_the_page_shows() -> None:
    page = (ROOT / "docs" / "verifier.md").read_text(encoding="utf-8")
    section = page.split("## Python API\n", 1)[1].split("\n## ", 1)[0]
    [(code, shown)] = re.findall(r"```python\n(.*?)```\n\n```text\n(.*?)```", section, re.S)
    done = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert done.stdout == shown


def test_the_page_names_every_export() -> None:
    page = (ROOT / "docs" / "verifier.md").read_text(encoding="utf-8")
    section = page.split("## Python API\n", 1)[1].split("\n## ", 1)[0]
    assert [name for name in agentfsm.verify.__all__ if f"`{name}`" not in section] == []
