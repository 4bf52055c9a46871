"""The agentfsm CLI of another revision, run beside this one: a bench's "before" in the same run.

``export_tree(rev, into)`` writes a revision's files (``git archive``) and lays the
``agentfsm`` package out from them as pyproject.toml's package-dir mapping does (links:
``agentfsm/verify`` to ``verify/``, ...), so it imports without being installed;
``command(tree, ...)`` runs that tree's CLI (the installed one, given None) in a process
that writes its own peak resident memory and that of the largest process it waited for
(harness processes, adapters) to a JSON file as it exits.

    python bench/source_tree.py TREE|- OUT ARGS...   (what ``command`` runs)
"""

from __future__ import annotations

import io
import json
import resource
import subprocess
import sys
import tarfile
import tomllib
from pathlib import Path


def export_tree(root: Path, rev: str, into: Path) -> Path:
    """``rev``'s files under ``into``, importable as the ``agentfsm`` package."""
    data = subprocess.run(["git", "-C", str(root), "archive", rev], check=True, capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(into, filter="data")
    return into


def _package(tree: Path) -> Path:
    """A directory holding ``agentfsm`` laid out from ``tree`` by its package-dir mapping."""
    mapping = tomllib.loads((tree / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]
    site = tree / ".bench-site"
    package = site / "agentfsm"
    if not package.exists():
        package.mkdir(parents=True)
        for entry in (tree / mapping["agentfsm"]).iterdir():
            (package / entry.name).symlink_to(entry)
        for name, folder in mapping.items():
            parts = name.split(".")
            if len(parts) == 2:
                (package / parts[1]).symlink_to(tree / folder)
    return site


def command(tree: Path | None, out: Path, args: list[str]) -> list[str]:
    """The argv that runs ``agentfsm ARGS`` from ``tree`` (None: as installed) and writes its peaks to ``out``."""
    return [sys.executable, str(Path(__file__).resolve()), "-" if tree is None else str(tree), str(out), *args]


def main() -> int:
    tree, out, args = sys.argv[1], Path(sys.argv[2]), sys.argv[3:]
    if tree != "-":
        sys.path.insert(0, str(_package(Path(tree))))
    from agentfsm.cli import main as cli  # the tree's, found first on the path

    try:
        return cli(args)
    finally:
        mine, theirs = (resource.getrusage(who).ru_maxrss / 1024
                        for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
        out.write_text(json.dumps({"main_mb": mine, "others_mb": theirs}))


if __name__ == "__main__":
    sys.exit(main())
