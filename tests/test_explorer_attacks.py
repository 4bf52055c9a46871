"""The explorer's read-only shell attacked as a prompt-injected model would (issue 32): in a work
directory holding a git repository and a symlink to a secret outside it, no command of the
model's choosing runs, nothing is written, nothing outside is read."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from agent_runs import run
from agentfsm.impl.agents.explorer_commands import Command, CommandRunner

SECRET = "TOP-SECRET"
ALLOWED = ("git", "cat", "head", "find", "ls")


def _git(workdir: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=workdir, check=True,
                   capture_output=True)


@pytest.fixture()
def layout(tmp_path: Path) -> Path:
    """``work/`` (a git repository, readable by others) beside ``outside/secret.txt``;
    ``work/innocent.txt -> ../outside/secret.txt``."""
    outside, work = tmp_path / "outside", tmp_path / "work"
    outside.mkdir()
    (outside / "secret.txt").write_text(f"{SECRET}\n")
    work.mkdir()
    work.chmod(0o755)
    (work / "a.txt").write_text("hello\n")
    _git(work, "init", "-q")
    _git(work, "add", "a.txt")
    _git(work, "commit", "-q", "-m", "first")
    (work / "innocent.txt").symlink_to(Path("..") / "outside" / "secret.txt")
    return work


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """Every path under ``root`` with its size and modification time (symlinks not followed)."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = Path(dirpath) / name
            info = path.lstat()
            found[str(path.relative_to(root))] = (info.st_size, info.st_mtime_ns)
    return found


# The issue's table: what the model proposed, and the one thing that must not happen.
ROWS = [
    ("run", 'git -c core.fsmonitor="touch PWNED1" status'),
    ("run", 'git -c alias.x="!touch PWNED2" x'),
    ("run", "git log --output=written.txt"),
    ("run", "find . -newer a.txt -fprint0 out.txt"),
    ("run", "head innocent.txt"),
    ("text-search", '"TOP"'),
    ("view", "innocent.txt"),
]


@pytest.mark.parametrize(("name", "argument"), ROWS)
def test_the_issues_table(name: str, argument: str, layout: Path) -> None:
    before = snapshot(layout.parent)
    output = run(CommandRunner(layout, timeout=5, run_allowed=ALLOWED).run(Command(name, argument)))
    assert SECRET not in output
    assert snapshot(layout.parent) == before, "nothing is written"
