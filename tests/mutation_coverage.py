"""Which tests run which line of a module: the mutation run gives each mutant only the tests
that execute its line, as mutation tools do (mutmut, cosmic-ray), so a killed mutant costs a
few tests instead of the module's whole list.

The map is measured once per module with coverage.py, one coverage context per pytest node id
(the same idea as pytest-cov's ``--cov-context=test``), in a forked child of the mutation
worker. It only ever narrows the tests a mutant runs first: a mutant that survives them is run
again against the module's whole list before it counts as a survivor, so the selection changes
the cost of a run, never a verdict.
"""

from __future__ import annotations

import json
import time
from collections.abc import Generator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import coverage
import pytest


class _ContextPerTest:
    """A pytest plugin: every line a test runs is recorded under the test's node id."""

    def __init__(self, cov: coverage.Coverage) -> None:
        self.cov = cov
        self.seconds: dict[str, float] = {}   # in the order the tests ran

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> Generator[None, Any, None]:
        self.cov.switch_context(item.nodeid)
        started = time.monotonic()
        yield
        self.seconds[item.nodeid] = time.monotonic() - started
        self.cov.switch_context("")


@dataclass(frozen=True)
class LineMap:
    """The tests in the order they ran, how long each took (traced), and for each line of the
    module the tests that ran it."""

    order: tuple[str, ...] = ()
    lines: dict[int, frozenset[str]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    def tests_for(self, line: int) -> list[str]:
        """The node ids that ran ``line``, in run order (the module's most telling files first).
        Empty when no test ran it in-process (module-level code, or code only a subprocess runs)."""
        ran = self.lines.get(line, frozenset())
        return [node for node in self.order if node in ran]

    def cost(self, tests: list[str]) -> float:
        """Seconds ``tests`` took together when the map was measured."""
        return sum(self.seconds.get(node, 0.0) for node in tests)


def measure(source: Path, tests: list[str], args: list[str], out: Path) -> int:
    """Run ``tests`` (pytest ``args`` first) with ``source`` traced; write its ``LineMap`` to
    ``out`` as JSON and return pytest's exit code. Meant for a child process that has not yet
    imported ``source``."""
    cov = coverage.Coverage(data_file=None, include=[str(source)], config_file=False)
    plugin = _ContextPerTest(cov)
    cov.start()
    code = pytest.main([*args, *tests], plugins=[plugin])
    cov.stop()
    by_line = cov.get_data().contexts_by_lineno(str(source))
    lines = {str(line): sorted(n for n in nodes if n) for line, nodes in by_line.items()}
    lines = {line: nodes for line, nodes in lines.items() if nodes}
    out.write_text(json.dumps({"seconds": plugin.seconds, "lines": lines}))
    return int(code)


def load(path: Path) -> LineMap:
    """The map ``measure`` wrote; empty (every mutant runs the whole list) when there is none."""
    if not path.is_file() or path.stat().st_size == 0:
        return LineMap()
    data = json.loads(path.read_text())
    return LineMap(tuple(data["seconds"]), {int(k): frozenset(v) for k, v in data["lines"].items()}, data["seconds"])
