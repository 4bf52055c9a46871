"""``pip install agentfsm`` from the wheel the project builds: the wheel carries the bundled
tables and the schema, and an installed copy verifies and draws a bundled table from a
directory that is not the checkout (so nothing can come from the source tree)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest
from conftest import ROOT, TABLES

SOURCES = ("pyproject.toml", "README.md", "agentfsm", "spec", "impl", "verify", "faults", "diagrams")


def build_wheel(tmp: Path) -> Path:
    """``python -m build --wheel`` on a copy of the sources (the checkout's build/ stays as it is);
    what the build printed is kept in ``tmp/build.log``."""
    src = tmp / "src"
    src.mkdir()
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.svg", "*.mmd"))
        else:
            shutil.copy(ROOT / name, src / name)
    done = subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(tmp / "dist"),
                           str(src)], check=True, capture_output=True, text=True, timeout=600)
    (tmp / "build.log").write_text(done.stdout + done.stderr)
    [wheel] = (tmp / "dist").glob("agentfsm-*.whl")
    return wheel


def fresh_venv(where: Path, wheel: Path, with_deps: bool) -> Path:
    """A new virtual environment with the wheel installed; without ``with_deps`` its
    dependencies come from this environment's site-packages (a .pth line), not the network."""
    venv.create(where, with_pip=with_deps)
    python = where / "bin" / "python"
    if with_deps:
        subprocess.run([str(python), "-m", "pip", "install", "--quiet", str(wheel)], check=True, timeout=900)
    else:
        subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps",
                        "--no-index", str(wheel)], check=True, timeout=300)
        site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                              check=True, capture_output=True, text=True).stdout.strip()
        (Path(site) / "agentfsm_test_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return where / "bin"


def use_installed(bin_dir: Path, cwd: Path) -> None:
    def agentfsm(*argv: str) -> str:
        proc = subprocess.run([str(bin_dir / "agentfsm"), *argv], capture_output=True, text=True, cwd=cwd,
                              timeout=300)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    where = subprocess.run([str(bin_dir / "python"), "-c", "import agentfsm; print(agentfsm.__file__)"],
                           capture_output=True, text=True, cwd=cwd, check=True).stdout
    assert where.startswith(str(bin_dir.parent)), f"agentfsm imported from {where}, not the new environment"
    listed = agentfsm("tables").split()
    systems = sorted((ROOT / "spec" / "systems").glob("*.yaml"))
    assert [Path(p).name for p in listed] == [t.name for t in TABLES] + [s.name for s in systems]
    assert all(p.startswith(str(bin_dir.parent)) for p in listed)
    paths = listed[:len(TABLES)]
    [system] = agentfsm("tables", "loom-with-tools").split()
    assert "all checks hold" in agentfsm("verify", system), "a bundled system finds its tables where it is installed"
    [loom] = agentfsm("tables", "loom-agent").split()
    assert "loom-agent: 76 configurations" in agentfsm("verify", "--summary", loom)
    assert "checks hold" in agentfsm("verify", *paths)
    agentfsm("diagram", loom, "-o", "loom.svg")
    assert (cwd / "loom.svg").read_text().lstrip().startswith(("<?xml", "<svg"))
    assert agentfsm("diagram", loom, "--format", "mermaid").startswith(("stateDiagram", "---", "%%"))


def test_wheel_has_the_tables_and_the_schema(tmp_path: Path) -> None:
    wheel = build_wheel(tmp_path)
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {f"agentfsm/spec/{t.name}" for t in TABLES} | {"agentfsm/spec/schema.json", "agentfsm/py.typed"} <= names
    [metadata] = [name for name in names if name.endswith(".dist-info/METADATA")]
    assert "License-Expression: MIT" in zipfile.ZipFile(wheel).read(metadata).decode().splitlines()
    assert "project.license" not in (tmp_path / "build.log").read_text(), "the license is an SPDX string"
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    use_installed(fresh_venv(tmp_path / "venv", wheel, with_deps=False), outside)


@pytest.mark.slow
def test_pip_install_of_the_wheel_with_its_dependencies(tmp_path: Path) -> None:
    """As a user would: a new environment, ``pip install agentfsm-*.whl`` pulls the dependencies."""
    wheel = build_wheel(tmp_path)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    use_installed(fresh_venv(tmp_path / "venv", wheel, with_deps=True), outside)
