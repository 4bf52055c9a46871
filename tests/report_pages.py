"""The report pages the tests and the screenshots look at: a failing table, a failing system and a
failing conformance run, each written by the command line's ``--html`` as a user would."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from agentfsm.cli import main

ROOT = Path(__file__).resolve().parent.parent
BROKEN_TABLE = ROOT / "tests" / "tables" / "report-broken.yaml"
BROKEN_SYSTEM = ROOT / "spec" / "systems" / "durable-run-as-it-was-pool.yaml"
LOOM = ROOT / "spec" / "loom-agent.yaml"
FAULTY_ADAPTER = f"{sys.executable} {ROOT}/tests/adapters/adapter_semantics.py {LOOM} --fault retry-bound"
_DATA = re.compile(r'<script type="application/json" id="report-data">(.*?)</script>', re.S)


def write_pages(folder: Path) -> dict[str, Path]:
    """The three pages, by kind (``table``, ``system``, ``conform``); each command must fail."""
    pages = {kind: folder / f"{kind}.html" for kind in ("table", "system", "conform")}
    assert main(["verify", str(BROKEN_TABLE), "--html", str(pages["table"])]) == 1
    assert main(["verify", str(BROKEN_SYSTEM), "--html", str(pages["system"])]) == 1
    assert main(["conform", str(LOOM), "--adapter", FAULTY_ADAPTER, "--sets", "rows", "--walks", "0",
                 "--html", str(pages["conform"])]) == 1
    return pages


_WRITTEN: dict[str, Path] = {}


def shared_pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The three pages, written once per test session for every module that asks."""
    if not _WRITTEN:
        _WRITTEN.update(write_pages(tmp_path_factory.mktemp("report")))
    return dict(_WRITTEN)


def page_data(page: Path) -> Any:
    """The JSON a page embeds (what its script draws from)."""
    match = _DATA.search(page.read_text(encoding="utf-8"))
    assert match, f"{page}: no embedded report data"
    return json.loads(match.group(1))


def stepped(data: Any) -> list[tuple[int, int]]:
    """(entry, check) of every counterexample the page can step through."""
    return [(e, c) for e, entry in enumerate(data["entries"]) for c, check in enumerate(entry["checks"])
            if check["trace"]]
