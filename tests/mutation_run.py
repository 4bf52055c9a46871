"""The mutation run over the project's own code: does the suite notice when the code is wrong?

Each mutant of the modules in ``TESTS`` (tests/mutation_operators.py) is written into a
temporary copy of the package, never into the working tree, and run against that module's test
files (``pytest -x``, the fast files that exercise it), with a timeout. A mutant is *killed* when
a test fails, *survives* when all pass, *times out* when the run outlasts its timeout (counted as
detected). A mutant first runs only the tests that execute its line (measured once per module
with coverage, tests/mutation_coverage.py); one that survives them runs the rest of the list
before it counts as a survivor, so the selection saves time and decides nothing. Two worker processes
share the mutants; each keeps its own copy of the package and forks a pytest per mutant from a
process that has already imported the heavy libraries (not agentfsm).

    .venv/bin/python tests/mutation_run.py [--module spec/semantics.py] [--changed] [--check]
                                           [--out results.json] [--survivors results.json] [--write-baseline]
                                           [--resume results.json]

``make mutation`` runs every mutant and checks the result against the published one in
tests/mutation_baseline.json; ``make test-slow`` (so CI) runs ``--changed``: every mutant of a
module whose source differs from the one its baseline was measured on, and a fixed sample of the
others (docs/testing.md, "Mutation score").
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import copy
import ctypes
import functools
import hashlib
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from pathlib import Path
from typing import Any

from pytest import ExitCode

sys.path.insert(0, str(Path(__file__).resolve().parent))
import mutation_coverage
from mutation_coverage import LineMap
from mutation_operators import Mutant, mutants

ROOT = Path(__file__).resolve().parent.parent
# Which test files exercise each module: fast ones, the most telling first (-x stops at the
# first failure, so a killed mutant costs little).
TESTS: dict[str, tuple[str, ...]] = {
    "spec/semantics.py": ("tests/spec/test_step_semantics.py", "tests/impl/test_engine_differential.py",
                          "tests/verify/test_verify_explore.py"),
    "verify/table/checks.py": ("tests/verify/test_verify_verdict.py", "tests/verify/test_verify_checks.py",
                               "tests/verify/test_verify_liveness.py", "tests/verify/test_verify_explore.py"),
    "impl/durable/run.py": ("tests/impl/test_durable_run_edges.py", "tests/impl/test_durable_run_defaults.py",
                            "tests/impl/test_durable_repair_unknown.py",
                            "tests/impl/test_durable_snapshots.py",
                            "tests/impl/test_journal_durable.py", "tests/impl/test_durable_approvals.py",
                            "tests/faults/test_crash_faults.py", "tests/impl/test_durable_interrupt.py",
                            "tests/impl/test_durable_tool_call.py", "tests/impl/test_durable_decision_lines.py",
                            "tests/faults/test_protocol_audit.py"),
    "verify/conformance/harness.py": ("tests/verify/test_harness_replies.py",
                                      "tests/verify/test_harness_process.py",
                                      "tests/verify/test_harness_transport.py",
                                      "tests/verify/test_conformance_harness.py",
                                      "tests/verify/test_conformance_history.py",
                                      "tests/verify/test_conformance_seen_replies.py"),
    "verify/table/liveness.py": ("tests/verify/test_verify_liveness.py", "tests/verify/test_verify_oracle.py",
                                 "tests/verify/test_verify_checks.py", "tests/verify/test_verify_verdict.py",
                                 "tests/verify/test_verify_narrow.py"),
    "verify/conformance/distinguish.py": ("tests/verify/test_conformance_distinguish.py",
                                          "tests/verify/test_conformance_vectors.py"),
    "impl/stores/leases.py": ("tests/impl/test_leases.py", "tests/faults/test_protocol_audit.py"),
    "verify/system/reduction.py": ("tests/verify/test_system_reduction_parts.py", "tests/verify/test_system_por.py"),
    "impl/durable/ownership.py": ("tests/impl/test_ownership.py", "tests/faults/test_protocol_walk.py"),
    "impl/durable/ledger.py": ("tests/impl/test_ledger.py", "tests/impl/test_durable_run_defaults.py",
                               "tests/impl/test_durable_run_edges.py", "tests/impl/test_journal_durable.py",
                               "tests/impl/test_journal_concurrency.py"),
    "verify/system/step.py": ("tests/verify/test_system_steps.py", "tests/verify/test_system_checker.py",
                              "tests/verify/test_system_verify.py", "tests/verify/test_system_limits.py"),
    "verify/system/checks.py": ("tests/verify/test_system_checks.py", "tests/verify/test_system_steps.py",
                                "tests/verify/test_system_checker.py", "tests/verify/test_system_verify.py",
                                "tests/verify/test_system_limits.py"),
    "verify/system/explore.py": ("tests/verify/test_system_steps.py", "tests/verify/test_system_limits.py",
                                 "tests/verify/test_system_checker.py", "tests/verify/test_system_por.py"),
    "verify/system/batched.py": ("tests/verify/test_system_levels.py", "tests/verify/test_system_steps.py"),
    "verify/table/intervals.py": ("tests/verify/test_verify_interval_plans.py",
                                  "tests/verify/test_verify_intervals.py"),
    "verify/conformance/vectors.py": ("tests/verify/test_conformance_vectors_edges.py",
                                      "tests/verify/test_conformance_vectors.py"),
    "verify/table/ahead.py": ("tests/verify/test_verify_ahead.py",),
    "verify/table/batched.py": ("tests/verify/test_verify_batched_parts.py",
                                "tests/verify/test_verify_explore_levels.py",
                                "tests/verify/test_verify_without_edges.py"),
    "verify/kernel/visited.py": ("tests/verify/test_kernel_visited.py",),
    "verify/table/explore.py": ("tests/verify/test_verify_explore_parts.py", "tests/verify/test_verify_explore.py",
                                "tests/verify/test_verify_differential.py",
                                "tests/verify/test_verify_explore_levels.py",
                                "tests/verify/test_verify_without_edges.py", "tests/verify/test_verify_ahead.py",
                                "tests/verify/test_verify_limits.py"),
    "impl/stores/sqlite.py": ("tests/impl/test_sqlite_store.py", "tests/impl/test_store_conformance.py"),
    "impl/workers/worker.py": ("tests/impl/test_worker.py",),
    "impl/stores/postgres.py": ("tests/impl/test_postgres_store.py", "tests/impl/test_store_conformance.py"),
    "verify/system/rows.py": ("tests/verify/test_system_levels.py", "tests/verify/test_system_steps.py"),
    "verify/spin/promela.py": ("tests/verify/test_promela_export.py", "tests/verify/test_system_promela_shapes.py",
                               "tests/verify/test_verify_promela.py"),
    "verify/spin/system_promela.py": ("tests/verify/test_system_promela_export.py",
                                      "tests/verify/test_system_promela_shapes.py"),
}
# The package's source directories and where each sits in the installed package.
PACKAGE = {"agentfsm": "", "spec": "spec", "impl": "impl", "verify": "verify", "faults": "faults",
           "diagrams": "diagrams"}
# Imported once per worker before forking; agentfsm itself must not be (each mutant's pytest imports it).
PRELOAD = ("pytest", "hypothesis", "numpy", "scipy.sparse", "yaml", "jsonschema", "transitions", "graphviz",
           "sqlite3", "_pytest.pytester")
BASELINE = ROOT / "tests" / "mutation_baseline.json"
PR_SET_CHILD_SUBREAPER = 36
# Mutants a CI run takes from each module that has not changed since its baseline.
SAMPLE = 20
# Points a module's score may fall below the published one: a few kills depend on timing (an adapter's
# 0.5 s reply timeout under load), so an idle machine can let one of them survive. Every revived
# mutant is still printed; a real regression costs more than this.
NOISE = 2.0


def copy_package(into: Path) -> Path:
    """A copy of the package laid out as it is installed (agentfsm/spec, ...), without bytecode."""
    package = into / "agentfsm"
    for source, target in PACKAGE.items():
        shutil.copytree(ROOT / source, package / target, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return into


_copy: Path | None = None


def _start_worker(scratch: str) -> None:
    global _copy
    _copy = copy_package(Path(tempfile.mkdtemp(dir=scratch)))
    sys.path.insert(0, str(_copy))
    os.environ["PYTHONPATH"] = str(_copy)  # the tests' agentfsm subprocesses import the copy too
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
    sys.dont_write_bytecode = True
    os.chdir(_copy)
    # A mutant may stop the harness from killing its adapters (which run in sessions of their
    # own): as the subreaper, this worker inherits them and kills them after each mutant.
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    for name in PRELOAD:
        __import__(name)
    assert "agentfsm" not in sys.modules
    from hypothesis import Phase, settings
    # The same examples as make test, but a failing one is not shrunk: a mutant needs only one.
    settings.register_profile("mutation", derandomize=True, database=None,
                              phases=[Phase.explicit, Phase.reuse, Phase.generate])


PYTEST_ARGS = ["-x", "-q", "-p", "no:cacheprovider", "--hypothesis-profile=mutation"]


def _in_child(body: Callable[[], int], timeout: float) -> str:
    """Run ``body`` (a pytest run against the copy as it is now) in a forked child, in a session of
    its own: killed (non-zero exit), survived (zero) or timeout."""
    pid = os.fork()
    if pid == 0:
        os.setsid()
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        os._exit(body())
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return "survived" if os.waitstatus_to_exitcode(status) == 0 else "killed"
        if time.monotonic() > deadline:
            os.killpg(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return "timeout"
        time.sleep(0.05)


def _pytest(tests: list[str], nothing_left: int = int(ExitCode.NO_TESTS_COLLECTED)) -> Callable[[], int]:
    """A pytest run of ``tests``; ``nothing_left``: its status when every test is deselected."""
    def body() -> int:
        import pytest
        status = int(pytest.main([*PYTEST_ARGS, *tests]))
        return nothing_left if status == ExitCode.NO_TESTS_COLLECTED else status
    return body


def _kill_orphans() -> None:
    """Kill and reap whatever the mutant's tests left running (inherited by this subreaper)."""
    me = str(os.getpid())
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[1] == me:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(stat.parent.name), signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(int(stat.parent.name), 0)


@contextlib.contextmanager
def _installed(module: str, source: str) -> Iterator[Path]:
    """``source`` in place of ``module`` in this worker's copy, for the length of the block."""
    assert _copy is not None
    path = _copy / "agentfsm" / module
    original = path.read_text()
    path.write_text(source)
    try:
        yield path
    finally:
        path.write_text(original)
        _kill_orphans()


def _measure(module: str, timeout: float) -> tuple[str, float, LineMap]:
    """The module's tests on its unmutated, reprinted source, with the lines each test runs."""
    started = time.monotonic()
    with _installed(module, _reprinted(module)) as path, tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "lines.json"
        tests = [str(ROOT / t) for t in TESTS[module]]
        status = _in_child(lambda: mutation_coverage.measure(path, tests, PYTEST_ARGS, out), timeout)
        return status, time.monotonic() - started, mutation_coverage.load(out)


def rest_of(files: list[str], passed: list[str]) -> list[str]:
    """pytest's arguments for ``files`` without the tests ``passed`` (node ids, as the line map has them)."""
    return [*files, *(arg for node in passed for arg in ("--deselect", node))]


def _run_one(module: str, source: str, first: list[str], timeouts: tuple[float, float]) -> tuple[str, float]:
    """The mutant against the tests that run its line (``first``), then, if it survives them,
    against the rest of the module's whole list: the selection saves time on kills and decides
    nothing. ``timeouts``: for the selected tests, for the whole list."""
    rest = rest_of([str(ROOT / t) for t in TESTS[module]], first)
    started = time.monotonic()
    with _installed(module, source):
        status = _in_child(_pytest([f"{ROOT}/{node}" for node in first]), timeouts[0]) if first else "survived"
        if status == "survived":
            status = _in_child(_pytest(rest, nothing_left=0), timeouts[1])
    return status, time.monotonic() - started


def reprinted_lines(text: str) -> dict[int, int]:
    """Each line of ``text`` that holds a node, mapped to that node's line once reprinted by
    ``ast.unparse`` (the text mutants are written as, and the text coverage is measured on).
    Empty if reprinting changed the tree's shape, so that nothing is selected by a wrong line."""
    original = list(ast.walk(ast.parse(text)))
    again = list(ast.walk(ast.parse(ast.unparse(ast.parse(text)))))
    if [type(node) for node in original] != [type(node) for node in again]:
        return {}
    lines: dict[int, int] = {}
    for a, b in zip(original, again, strict=True):
        if isinstance(a, (ast.stmt, ast.expr)) and isinstance(b, (ast.stmt, ast.expr)):
            lines.setdefault(a.lineno, b.lineno)
    return lines


def run(modules: dict[str, set[str] | None], jobs: int = 2, log: bool = True,
        done: Callable[[dict[str, dict[str, str]]], None] | None = None) -> dict[str, dict[str, str]]:
    """The mutants of each module (all of them, or the keys given): {module: {mutant key: status}}.
    Each module's tests first run on its unmutated (but reprinted) source, measuring which tests
    run which line; if they fail there, the run stops with an error. ``done`` is handed the
    results so far after each mutant (a long run's checkpoint)."""
    found = {module: [m for m in module_mutants(module) if only is None or m.key in only]
             for module, only in modules.items()}
    results: dict[str, dict[str, str]] = {module: {} for module in modules}
    with (tempfile.TemporaryDirectory(prefix="agentfsm-mutation-") as scratch,
          ProcessPoolExecutor(jobs, mp_context=get_context("fork"), initializer=_start_worker,
                              initargs=(scratch,)) as pool):
        timeouts: dict[str, tuple[float, float]] = {}
        first: dict[str, list[str]] = {}
        measured = {module: pool.submit(_measure, module, 900.0) for module in modules if found[module]}
        for module, measuring in measured.items():
            status, seconds, line_map = measuring.result()
            if status != "survived":
                raise SystemExit(f"{module}: its tests fail on the unmutated source ({status}); no mutation run")
            reprinted = reprinted_lines((ROOT / module).read_text())
            for m in found[module]:
                first[m.key] = line_map.tests_for(reprinted.get(m.line, -1))
                if first[m.key] == list(line_map.order):
                    first[m.key] = []   # every test runs the line: the whole list at once, not twice
                timeouts[m.key] = (3 * line_map.cost(first[m.key]) + 20, 2 * seconds + 10)
            if log:
                print(f"{module}: {len(found[module])} mutants, tests take {seconds:.1f} s unmutated "
                      f"(traced), {len(line_map.order)} tests, "
                      f"{sum(bool(first[m.key]) for m in found[module])} mutants run the tests of their line first",
                      flush=True)
        jobs_by_mutant = {pool.submit(_run_one, m.module, m.source, first[m.key], timeouts[m.key]): m
                          for module in modules for m in found[module]}
        for future in as_completed(jobs_by_mutant):
            mutant = jobs_by_mutant[future]
            status, seconds = future.result()
            results[mutant.module][mutant.key] = status
            if done is not None:
                done(results)
            if log and status != "killed":
                print(f"  {status} ({seconds:.1f} s) line {mutant.line}: {mutant.key}", flush=True)
    return results


def _reprinted(module: str) -> str:
    """The module as its mutants are printed (ast.unparse), unmutated: the baseline they differ from."""
    return ast.unparse(ast.parse((ROOT / module).read_text()))


def scores(results: dict[str, dict[str, str]], equivalent: dict[str, str]) -> dict[str, float]:
    """Per module: detected (killed or timed out) over mutants not known to be equivalent, in percent."""
    found = {}
    for module, statuses in results.items():
        counted = [status for key, status in statuses.items() if key not in equivalent]
        detected = sum(status != "survived" for status in counted)
        found[module] = round(100 * detected / len(counted), 1) if counted else 100.0
    return found


def summary(results: dict[str, dict[str, str]], equivalent: dict[str, str]) -> list[str]:
    """The per-module table docs/testing.md publishes."""
    lines = ["| module | mutants | killed | timed out | survived | of them equivalent | score |",
             "|---|---|---|---|---|---|---|"]
    score = scores(results, equivalent)
    for module, statuses in results.items():
        counts = Counter(statuses.values())
        same = sum(status == "survived" and key in equivalent for key, status in statuses.items())
        lines.append(f"| `{module}` | {len(statuses)} | {counts['killed']} | {counts['timeout']} | "
                     f"{counts['survived']} | {same} | {score[module]}% |")
    return lines


def fingerprint(module: str) -> str:
    """What the baseline of a module was measured on (``code_fingerprint`` of its source)."""
    return code_fingerprint((ROOT / module).read_text())


SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _normalised(text: str) -> ast.Module:
    """The code of a module without its imports and docstrings (which no mutant touches), and
    with every name an import binds read as one name, so that a module moved to another package,
    whose imports and imported modules' names alone change (``graph_fair.escape`` becoming
    ``liveness.escape``), keeps its baseline, and any other change to its code does not."""
    tree = ast.parse(text)
    imported = {alias.asname or alias.name.split(".")[0] for node in ast.walk(tree)
                if isinstance(node, (ast.Import, ast.ImportFrom)) for alias in node.names}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, *SCOPES)):
            node.body = [s for s in node.body if not isinstance(s, (ast.Import, ast.ImportFrom))
                         and not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant)
                                  and isinstance(s.value.value, str))] or [ast.Pass()]
        if isinstance(node, ast.Name) and node.id in imported:
            node.id = "<imported>"
    return tree


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def code_fingerprint(text: str) -> str:
    """A module's code as ``_normalised`` reads it, hashed: equal when no mutant can differ."""
    return _digest(ast.dump(_normalised(text)))


class _Hollow(ast.NodeTransformer):
    """A scope's own code: each class or function nested in it is replaced by its name, so that
    an edit inside a nested scope changes that scope's fingerprint and not its parent's."""

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> ast.AST:
        return ast.Expr(ast.Constant(f"<scope {node.name}>"))

    visit_AsyncFunctionDef = visit_ClassDef = visit_FunctionDef


def _scopes(node: ast.AST, scope: str) -> Iterator[tuple[str, ast.AST]]:
    """Each scope a mutant key can name, as ``mutation_operators`` names it, with its node."""
    yield scope or "<module>", node
    stack = list(ast.iter_child_nodes(node))
    while stack:
        child = stack.pop()
        if isinstance(child, SCOPES):
            yield from _scopes(child, f"{scope}.{child.name}" if scope else child.name)
        else:
            stack.extend(ast.iter_child_nodes(child))


def scope_fingerprints(text: str) -> dict[str, str]:
    """The fingerprint of each scope's own code (``<module>``, ``Class``, ``Class.method``, ...):
    a change to a module runs the mutants of the scopes it changed, not of the whole module."""
    dumps: dict[str, list[str]] = {}
    for scope, node in _scopes(_normalised(text), ""):
        dumps.setdefault(scope, []).append(ast.dump(_Hollow().generic_visit(copy.deepcopy(node))))
    return {scope: _digest("\n".join(parts)) for scope, parts in dumps.items()}


def module_scopes(module: str) -> dict[str, str]:
    """``scope_fingerprints`` of the module as it is now."""
    return scope_fingerprints((ROOT / module).read_text())


def scope_of(key: str) -> str:
    """The scope a mutant key names (``module:scope:operator:before -> after``)."""
    return key.split(":", 2)[1]


@functools.cache
def module_mutants(module: str) -> tuple[Mutant, ...]:
    """The module's mutants as its code is now, made once per run (planning, running and
    checking all need them)."""
    return tuple(mutants(module, (ROOT / module).read_text()))


def current_mutants(module: str) -> tuple[str, ...]:
    """The keys of the module's mutants as its code is now."""
    return tuple(m.key for m in module_mutants(module))


def sample(keys: list[str], size: int) -> set[str]:
    """A fixed sample of ``keys``: the same ``size`` keys on every machine and every run."""
    return set(sorted(keys, key=lambda key: hashlib.sha256(key.encode()).hexdigest())[:size])


def changed_scopes(baseline: dict[str, Any], module: str) -> set[str] | None:
    """The scopes of ``module`` whose code differs from the baseline's (None: all of them, when
    the module changed and the baseline has no scopes for it)."""
    if baseline.get("source", {}).get(module) == fingerprint(module):
        return set()
    published = baseline.get("scopes", {}).get(module)
    if published is None:
        return None
    return {scope for scope, fp in module_scopes(module).items() if published.get(scope) != fp}


def plan(baseline: dict[str, Any], changed_only: bool, size: int = SAMPLE) -> dict[str, set[str] | None]:
    """What to run: every mutant of every module (None), or (``changed_only``, as CI does) every
    mutant in each scope whose code differs from the one the baseline was measured on, and a
    fixed sample of the mutants the baseline killed in the other scopes."""
    if not changed_only:
        return {module: None for module in TESTS}
    todo: dict[str, set[str] | None] = {}
    for module in TESTS:
        changed = changed_scopes(baseline, module)
        if changed is None:
            todo[module] = None
            continue
        kept = [k for k in baseline["killed"].get(module, []) if scope_of(k) not in changed]
        todo[module] = {k for k in current_mutants(module) if scope_of(k) in changed} | sample(kept, size)
    return todo


def merged(results: dict[str, str], baseline: dict[str, Any], module: str, now: tuple[str, ...]) -> dict[str, str]:
    """Every mutant the module has now, with this run's status where it ran and the baseline's
    elsewhere (killed if the baseline killed it, else survived): the score this run implies."""
    killed = set(baseline["killed"].get(module, []))
    return {key: results.get(key, "killed" if key in killed else "survived") for key in now}


def problems(results: dict[str, dict[str, str]], baseline: dict[str, Any],
             now: dict[str, tuple[str, ...]]) -> list[str]:
    """How this run falls short of the published one (``now``: each run module's mutant keys as
    its code is now): a mutant the baseline killed survives; an equivalence names a mutant that
    no longer exists; the score this run implies dropped more than ``NOISE`` points."""
    found = []
    for module, keys in baseline["killed"].items():
        found += [f"killed in the published run, survives now: {key}"
                  for key in keys if results.get(module, {}).get(key) == "survived"]
    for module in results:
        exist = set(now[module])
        found += [f"listed as equivalent, no longer a mutant (the code changed): {key}"
                  for key in sorted(baseline["equivalent"]) if key.startswith(module + ":") and key not in exist]
        score = scores({module: merged(results[module], baseline, module, now[module])}, baseline["equivalent"])
        published = baseline["score"].get(module)
        if published is not None and score[module] < published - NOISE:
            found.append(f"{module}: score {score[module]}% (published {published}%)")
    return found


def write_baseline(results: dict[str, dict[str, str]], now: dict[str, tuple[str, ...]]) -> None:
    """Publish this run, merged into the published one: each run module's killed mutants (this
    run's status where it ran, the baseline's elsewhere), score and fingerprints; the other
    modules keep their entries; equivalence reasons are kept (written by hand)."""
    published = json.loads(BASELINE.read_text()) if BASELINE.exists() else {"score": {}, "killed": {}, "equivalent": {}}
    equivalent = published["equivalent"]
    statuses = {m: merged(results[m], published, m, now[m]) for m in results}
    baseline = {"score": {**published["score"], **scores(statuses, equivalent)},
                "killed": {**published["killed"], **{m: sorted(k for k, s in st.items() if s != "survived")
                                                     for m, st in statuses.items()}},
                "equivalent": equivalent,
                "source": {**published.get("source", {}), **{m: fingerprint(m) for m in results}},
                "scopes": {**published.get("scopes", {}),
                           **{m: module_scopes(m) for m in results}}}
    _write_json(BASELINE, baseline)


def _write_json(path: Path, data: object) -> None:
    """Replace ``path`` whole (a killed run leaves the last complete checkpoint, never half of one)."""
    part = path.with_name(path.name + ".part")
    part.write_text(json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    part.replace(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--module", action="append", choices=sorted(TESTS), help="only this module (repeatable)")
    parser.add_argument("--changed", action="store_true",
                        help=f"as CI: every mutant of the scopes changed since the baseline, {SAMPLE} of the others")
    parser.add_argument("--check", action="store_true", help="exit 1 when the run falls short of the baseline")
    parser.add_argument("--out", type=Path, help="write {module: {mutant: status}} as JSON here")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--write-baseline", action="store_true",
                        help=f"merge this run into {BASELINE.name} (with --changed: the changed scopes only)")
    parser.add_argument("--survivors", type=Path, metavar="RESULTS",
                        help="run only the mutants that survived in this earlier --out file (the rest keep its status)")
    parser.add_argument("--resume", type=Path, metavar="RESULTS",
                        help="run only the mutants missing from this --out file of a stopped run")
    args = parser.parse_args()
    started = time.monotonic()
    baseline = json.loads(BASELINE.read_text()) if BASELINE.exists() else {"score": {}, "killed": {}, "equivalent": {}}
    todo = {m: only for m, only in plan(baseline, args.changed).items() if not args.module or m in args.module}
    earlier: dict[str, dict[str, str]] = json.loads((args.survivors or args.resume).read_text()) \
        if args.survivors or args.resume else {}
    again: dict[str, set[str] | None] = {}
    if args.survivors:
        again = {m: {k for k, v in earlier.get(m, {}).items() if v == "survived"} for m in todo}
    elif args.resume:
        again = {m: set(current_mutants(m)) - set(earlier.get(m, {})) for m in todo}

    def checkpoint(so_far: dict[str, dict[str, str]]) -> None:
        if args.out:   # written whole after each mutant: a stopped run resumes from it (--resume)
            _write_json(args.out, {m: {**earlier.get(m, {}), **so_far.get(m, {})} for m in todo})

    if args.survivors or args.resume:
        ran = run(again, args.jobs, done=checkpoint)
        results = {m: {**earlier.get(m, {}), **ran[m]} for m in todo}
    else:
        results = run(todo, args.jobs, done=checkpoint)
    now = {m: current_mutants(m) for m in results}
    equivalent = baseline["equivalent"]
    whole = {m for m, only in todo.items() if only is None} | (set(todo) if earlier else set())
    for module in sorted(set(todo) - whole):
        changed = sorted(changed_scopes(baseline, module) or ())
        survived = sorted(k for k, v in results[module].items() if v == "survived")
        implied = scores({module: merged(results[module], baseline, module, now[module])}, equivalent)[module]
        print(f"{module}: {len(changed)} scopes changed since its baseline ({', '.join(changed) or 'none'}); "
              f"{len(results[module])} mutants run (theirs and a sample of the others), {len(survived)} survive; "
              f"score {implied}% (published {baseline['score'].get(module)}%)")
    if whole:
        print("\n".join(summary({m: s for m, s in results.items() if m in whole}, equivalent)))
    for statuses in results.values():
        for key, status in sorted(statuses.items()):
            if status == "survived" and key not in equivalent:
                print(f"unexplained survivor: {key}")
    print(f"{time.monotonic() - started:.0f} s")
    if args.out:
        _write_json(args.out, results)
    if args.write_baseline:
        write_baseline(results, now)
    if args.check:
        found = problems(results, baseline, now)
        print("\n".join(found) if found else "no mutant the published run killed survives; no score dropped")
        sys.exit(1 if found else 0)


if __name__ == "__main__":
    main()
