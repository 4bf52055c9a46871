"""Spin for the tests: the mark that skips without it, and a system's export searched by a small pan."""

from __future__ import annotations

from pathlib import Path

import pytest
from agentfsm.spec.system_model import System
from agentfsm.verify.spin import runner as spin
from agentfsm.verify.spin.system_promela import export_system_promela

needs_spin = pytest.mark.skipif(not spin.available(), reason="spin and gcc are not installed")


def spin_system(system: System, workdir: Path, assertions: bool = False) -> spin.SpinRun:
    """pan unoptimised, with a small stack and hash table; ``assertions=False`` counts states
    past a broken invariant (``-A``)."""
    flags = ("-w16",) if assertions else ("-A", "-w16")
    return spin.run_spin_model(export_system_promela(system), workdir, depth=100_000, timeout=120,
                               pan_flags=flags, optimise=False)
