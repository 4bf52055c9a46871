"""Bundled systems grown to more instances: the series the tests and the benchmarks scale, written
once here so that both grow the same system."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from agentfsm.spec.system_load import load_system
from agentfsm.spec.system_model import System

SPEC = Path(__file__).resolve().parent


def loom_system(calls: int, directory: Path, changes: Sequence[tuple[str, str]] = ()) -> System:
    """The bundled Loom system (systems/loom-with-tools.yaml) with ``calls`` tool-call instances (an
    LLM response asks for all of them) and ``changes`` (old, new) to its text, written into
    ``directory`` with its tables' paths made absolute."""
    text = (SPEC / "systems" / "loom-with-tools.yaml").read_text(encoding="utf-8")
    for old, new in (("count: 2", f"count: {calls}"), ("tool_calls: [0, 2]", f"tool_calls: [0, {calls}]"),
                     ("agent: {table: ../loom-agent.yaml, mailbox: 2}",
                      f"agent: {{table: ../loom-agent.yaml, mailbox: {calls}, set: {{max_tools: {calls}}}}}"),
                     *changes, ("table: ../", f"table: {SPEC}/"),
                     ("table: tables/", f"table: {SPEC / 'systems'}/tables/")):
        if old not in text:
            raise ValueError(f"loom-with-tools.yaml has no {old!r} to change")
        text = text.replace(old, new)
    path = directory / f"loom-{calls}.yaml"
    path.write_text(text, encoding="utf-8")
    return load_system(path)
