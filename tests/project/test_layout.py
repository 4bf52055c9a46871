"""The package layout holds (docs/layout.md): no module imports from a layer above its own, no
import cycle (imports inside functions count too: a lazy import hides a cycle, it does not remove
it), and a subcommand imports only its own part of the package."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path

import networkx as nx
import pytest
from conftest import ROOT

from agentfsm.cli.main import build_parser
from agentfsm.cli.registry import COMMANDS

LAYERS = (
    ("agentfsm",),                                       # the version
    ("agentfsm.spec",),                                  # formats, loaders, semantics
    ("agentfsm.impl.llm", "agentfsm.impl.engine"),       # the runtime: LLM clients, the engine
    ("agentfsm.impl.driver", "agentfsm.impl.adapter"),   # the agent driver, the adapter protocol
    ("agentfsm.impl.stores.journal", "agentfsm.impl.stores.leases"),  # the protocols the stores implement,
    ("agentfsm.impl.stores",),                           # the stores
    ("agentfsm.impl.durable",),
    ("agentfsm.impl.agents", "agentfsm.impl.workers"),
    ("agentfsm.impl", "agentfsm.impl.agents.play"),     # scripts and play: what the CLI drives
    ("agentfsm.verify.kernel",),                         # the checker: the batched kernel,
    ("agentfsm.verify.table",),                          # one table,
    ("agentfsm.verify",),                                # systems, the Spin export, conformance, reports
    ("agentfsm.faults",),
    ("agentfsm.diagrams",),
    ("agentfsm.cli",),
)
"""Bottom to top: a module may import its own layer and those below. A module's layer is the one
of its longest prefix listed (``agentfsm.impl.stores.journal`` sits below the rest of
``agentfsm.impl.stores``, the stores that implement it)."""


def modules(root: Path, package_dirs: Mapping[str, str]) -> dict[str, Path]:
    """Each module's dotted name and file, from pyproject's package-dir map (a subpackage with its
    own entry is named by that entry, not by its parent's)."""
    found: dict[str, Path] = {}
    for package, folder in sorted(package_dirs.items(), key=lambda item: len(item[0])):
        for path in sorted((root / folder).rglob("*.py")):
            parts = path.relative_to(root / folder).with_suffix("").parts
            name = ".".join((package, *parts[:-1], *([] if parts[-1] == "__init__" else parts[-1:])))
            found[name] = path
    return found


def imports(path: Path, known: Mapping[str, Path]) -> Iterator[tuple[str, int]]:
    """(module imported, line) for every import of the package in ``path``, at any depth: in
    functions, under ``TYPE_CHECKING``. ``from PACKAGE import NAME`` imports module PACKAGE.NAME
    when there is one."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from ((alias.name, node.lineno) for alias in node.names if alias.name.startswith("agentfsm"))
        elif isinstance(node, ast.ImportFrom) and node.module is not None and node.module.startswith("agentfsm"):
            for alias in node.names:
                inner = f"{node.module}.{alias.name}"
                yield (inner if inner in known else node.module), node.lineno


def graph(root: Path, package_dirs: Mapping[str, str]) -> nx.DiGraph:
    """Module -> module it imports, each edge with the line of its first import."""
    known = modules(root, package_dirs)
    found = nx.DiGraph()
    found.add_nodes_from(known)
    for name, path in known.items():
        for target, line in imports(path, known):
            if target != name and not found.has_edge(name, target):
                found.add_edge(name, target, line=line, file=path.relative_to(root).as_posix())
    return found


def layer(module: str) -> int:
    matches = [(len(prefix), i) for i, prefixes in enumerate(LAYERS) for prefix in prefixes
               if module == prefix or module.startswith(prefix + ".")]
    return max(matches)[1]


def upward(imported: nx.DiGraph) -> list[str]:
    """Every import of a module from a layer above the importer's."""
    return [f"{data['file']}:{data['line']}: {source} imports {target}"
            for source, target, data in imported.edges(data=True) if layer(target) > layer(source)]


def cycles(imported: nx.DiGraph) -> list[set[str]]:
    return [set(component) for component in nx.strongly_connected_components(imported) if len(component) > 1]


@pytest.fixture(scope="module")
def project() -> nx.DiGraph:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return graph(ROOT, config["tool"]["setuptools"]["package-dir"])


def test_no_module_imports_from_a_layer_above_its_own(project: nx.DiGraph) -> None:
    assert upward(project) == []


def test_no_import_cycle(project: nx.DiGraph) -> None:
    assert cycles(project) == []


def test_the_checks_see_an_upward_import_and_a_cycle_through_a_function(tmp_path: Path) -> None:
    """The two checks above on a small tree: spec importing the CLI inside a function, and two
    verifier modules importing each other, one of them lazily."""
    (tmp_path / "spec").mkdir()
    (tmp_path / "verify").mkdir()
    (tmp_path / "cli").mkdir()
    (tmp_path / "spec" / "__init__.py").write_text("")
    (tmp_path / "spec" / "load.py").write_text("def f():\n    from agentfsm.cli import main\n")
    (tmp_path / "verify" / "__init__.py").write_text("")
    (tmp_path / "verify" / "a.py").write_text("from agentfsm.verify import b\n")
    (tmp_path / "verify" / "b.py").write_text("def g():\n    from agentfsm.verify.a import x\n")
    (tmp_path / "cli" / "__init__.py").write_text("")
    tree = graph(tmp_path, {"agentfsm.spec": "spec", "agentfsm.verify": "verify", "agentfsm.cli": "cli"})
    assert upward(tree) == ["spec/load.py:2: agentfsm.spec.load imports agentfsm.cli"]
    assert cycles(tree) == [{"agentfsm.verify.a", "agentfsm.verify.b"}]


def loaded_by(argv: list[str]) -> set[str]:
    """The package's modules a fresh interpreter has imported once ``agentfsm ARGV`` ran."""
    code = ("import json, sys\nfrom agentfsm.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit:\n"
            "    pass\nprint(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] == 'agentfsm')))")
    done = subprocess.run([sys.executable, "-P", "-c", code, *argv], capture_output=True, text=True, check=True,
                          cwd=ROOT)
    return set(json.loads(done.stdout.splitlines()[-1]))


ENTRY = {"agentfsm", "agentfsm.cli", "agentfsm.cli.main", "agentfsm.cli.registry", "agentfsm.cli.exits"}


def test_version_imports_only_the_entry_point() -> None:
    assert loaded_by(["--version"]) == ENTRY


def test_check_imports_only_the_cli_s_check_and_the_spec() -> None:
    found = loaded_by(["check", str(ROOT / "spec" / "tool-call.yaml"),
                       str(ROOT / "spec" / "systems" / "loom-with-tools.yaml")])
    others = {m for m in found - ENTRY if not m.startswith("agentfsm.spec")}
    assert "agentfsm.spec.system_load" in found and others == {"agentfsm.cli.check", "agentfsm.cli.util"}


def test_run_imports_the_openai_client_only_for_an_openai_model() -> None:
    """The OpenAI SDK is about a second of imports; a scripted run (each child of the agent crash
    check is one) must not pay it."""
    assert "agentfsm.impl.llm.openai" not in loaded_by(["run", "--help"])


def test_the_registry_says_what_each_module_registers() -> None:
    """Every subcommand, in order, with the help its module gives it and registered by the module
    the registry names; and ``agentfsm --help`` reads the same from the registry alone."""
    parser = build_parser()
    [sub] = [action for action in parser._actions if action.dest == "command"]
    choices = getattr(sub, "choices", {})
    helps = {action.dest: action.help for action in getattr(sub, "_choices_actions", [])}
    assert helps == {name: command.help for name, command in COMMANDS.items()}
    assert list(helps) == list(COMMANDS)
    for name, command in COMMANDS.items():
        assert choices[name].get_default("func").__module__ == command.module, name
    assert build_parser([]).format_help() == parser.format_help()
