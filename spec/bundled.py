"""The tables that ship inside the package, one per seed machine, and the systems of them."""

from __future__ import annotations

from importlib import resources
from pathlib import Path


def bundled_tables() -> list[Path]:
    """Paths of every bundled table, sorted by file name."""
    root = resources.files("agentfsm.spec")
    return sorted(Path(str(p)) for p in root.iterdir() if p.name.endswith(".yaml"))


def bundled_systems() -> list[Path]:
    """Paths of every bundled system file (``systems/``, not the tables only systems use), sorted."""
    root = resources.files("agentfsm.spec").joinpath("systems")
    return sorted(Path(str(p)) for p in root.iterdir() if p.name.endswith(".yaml"))
