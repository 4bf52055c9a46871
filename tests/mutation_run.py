"""The mutation run over the project's own code: does the suite notice when the code is wrong?

Each mutant of the modules in ``TESTS`` (tests/mutation_operators.py) is written into a
temporary copy of the package, never into the working tree, and only that module's test files
run against it (``pytest -x``, the fast files that exercise it), with a timeout. A mutant is
*killed* when a test fails, *survives* when all pass, *times out* when the run outlasts its
timeout (counted as detected). Two worker processes share the mutants; each keeps its own copy
of the package and forks a pytest per mutant from a process that has already imported the
heavy libraries (not agentfsm), so a mutant costs its tests, not an interpreter start.

    .venv/bin/python tests/mutation_run.py [--module spec/semantics.py] [--out results.json] [--survivors results.json]

``tests/test_mutation.py`` runs it under ``make test-slow`` and compares with the published
results in tests/mutation_baseline.json (docs/testing.md, "Mutation score").
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import ctypes
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor, as_completed
from multiprocessing import get_context
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from mutation_operators import mutants

ROOT = Path(__file__).resolve().parent.parent
# Which test files exercise each module: fast ones, the most telling first (-x stops at the
# first failure, so a killed mutant costs little).
TESTS: dict[str, tuple[str, ...]] = {
    "spec/semantics.py": ("tests/test_step_semantics.py", "tests/test_engine_differential.py",
                          "tests/test_verify_explore.py"),
    "verify/table/checks.py": ("tests/test_verify_verdict.py", "tests/test_verify_checks.py",
                               "tests/test_verify_liveness.py", "tests/test_verify_explore.py"),
    "impl/durable/run.py": ("tests/test_durable_run_edges.py", "tests/test_durable_run_defaults.py",
                            "tests/test_durable_repair_unknown.py",
                            "tests/test_durable_snapshots.py",
                            "tests/test_journal_durable.py", "tests/test_durable_approvals.py",
                            "tests/test_crash_faults.py", "tests/test_durable_interrupt.py",
                            "tests/test_durable_tool_call.py"),
    "verify/conformance/harness.py": ("tests/test_harness_replies.py", "tests/test_harness_process.py",
                                      "tests/test_harness_transport.py", "tests/test_conformance_harness.py",
                                      "tests/test_conformance_history.py"),
}
# The package's source directories and where each sits in the installed package.
PACKAGE = {"agentfsm": "", "spec": "spec", "impl": "impl", "verify": "verify", "faults": "faults",
           "diagrams": "diagrams"}
# Imported once per worker before forking; agentfsm itself must not be (each mutant's pytest imports it).
PRELOAD = ("pytest", "hypothesis", "numpy", "scipy.sparse", "yaml", "jsonschema", "transitions", "graphviz",
           "sqlite3", "_pytest.pytester")
BASELINE = ROOT / "tests" / "mutation_baseline.json"
PR_SET_CHILD_SUBREAPER = 36


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


def _pytest_exit(tests: tuple[str, ...], timeout: float) -> str:
    """Run ``tests`` against the copy as it is now, in a forked child; killed, survived or timeout."""
    pid = os.fork()
    if pid == 0:
        os.setsid()
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        import pytest
        code = pytest.main(["-x", "-q", "-p", "no:cacheprovider", "--hypothesis-profile=mutation",
                            *[str(ROOT / t) for t in tests]])
        os._exit(int(code))
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


def _run_one(module: str, source: str, timeout: float) -> tuple[str, float]:
    assert _copy is not None
    path = _copy / "agentfsm" / module
    original = path.read_text()
    path.write_text(source)
    started = time.monotonic()
    try:
        return _pytest_exit(TESTS[module], timeout), time.monotonic() - started
    finally:
        path.write_text(original)
        _kill_orphans()


def run(modules: list[str], jobs: int = 2, log: bool = True, only: set[str] | None = None) -> dict[str, dict[str, str]]:
    """Every mutant of ``modules`` (or those named in ``only``): {module: {mutant key: status}}.
    Each module's tests first run on its unmutated (but re-printed) source; if they fail there,
    the run stops with an error."""
    found = {module: [m for m in mutants(module, (ROOT / module).read_text()) if only is None or m.key in only]
             for module in modules}
    results: dict[str, dict[str, str]] = {module: {} for module in modules}
    with (tempfile.TemporaryDirectory(prefix="agentfsm-mutation-") as scratch,
          ProcessPoolExecutor(jobs, mp_context=get_context("fork"), initializer=_start_worker,
                              initargs=(scratch,)) as pool):
        timeouts: dict[str, float] = {}
        baselines = {module: pool.submit(_run_one, module, _reprinted(module), 600.0) for module in modules}
        for module, future in baselines.items():
            status, seconds = future.result()
            if status != "survived":
                raise SystemExit(f"{module}: its tests fail on the unmutated source ({status}); no mutation run")
            timeouts[module] = 2 * seconds + 10
            if log:
                print(f"{module}: {len(found[module])} mutants, tests take {seconds:.1f} s unmutated", flush=True)
        jobs_by_mutant = {pool.submit(_run_one, m.module, m.source, timeouts[m.module]): m
                          for module in modules for m in found[module]}
        for future in as_completed(jobs_by_mutant):
            mutant = jobs_by_mutant[future]
            status, seconds = future.result()
            results[mutant.module][mutant.key] = status
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


def write_baseline(results: dict[str, dict[str, str]]) -> None:
    """Publish this run: the killed mutants and the scores of the modules it ran (the other
    modules keep their published entries); equivalence reasons are kept (written by hand)."""
    published = json.loads(BASELINE.read_text()) if BASELINE.exists() else {"score": {}, "killed": {}, "equivalent": {}}
    equivalent = published["equivalent"]
    baseline = {"score": {**published["score"], **scores(results, equivalent)},
                "killed": {**published["killed"], **{m: sorted(k for k, s in statuses.items() if s != "survived")
                                                     for m, statuses in results.items()}},
                "equivalent": equivalent}
    BASELINE.write_text(json.dumps(baseline, indent=1, sort_keys=True, ensure_ascii=False) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--module", action="append", choices=sorted(TESTS), help="only this module (repeatable)")
    parser.add_argument("--out", type=Path, help="write {module: {mutant: status}} as JSON here")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--write-baseline", action="store_true", help=f"publish this run as {BASELINE.name}")
    parser.add_argument("--survivors", type=Path, metavar="RESULTS",
                        help="run only the mutants that survived in this earlier --out file (the rest keep its status)")
    args = parser.parse_args()
    started = time.monotonic()
    modules = args.module or list(TESTS)
    if args.survivors:
        earlier: dict[str, dict[str, str]] = json.loads(args.survivors.read_text())
        again = run(modules, args.jobs, only={k for s in earlier.values() for k, v in s.items() if v == "survived"})
        results = {m: {**earlier.get(m, {}), **again[m]} for m in modules}
    else:
        results = run(modules, args.jobs)
    equivalent = json.loads(BASELINE.read_text())["equivalent"] if BASELINE.exists() else {}
    print("\n".join(summary(results, equivalent)))
    for statuses in results.values():
        for key, status in sorted(statuses.items()):
            if status == "survived" and key not in equivalent:
                print(f"unexplained survivor: {key}")
    print(f"{time.monotonic() - started:.0f} s")
    if args.out:
        args.out.write_text(json.dumps(results, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    if args.write_baseline:
        write_baseline(results)


if __name__ == "__main__":
    main()
