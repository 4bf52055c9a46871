"""conform --jobs N: the vectors run on N adapters at once, and the report is the one a single adapter gives."""

from __future__ import annotations

import multiprocessing
import os
import re
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from agentfsm.spec import Table, load_table
from agentfsm.spec.vectorfile import Vector
from agentfsm.verify.conformance import parallel
from agentfsm.verify.conformance.conform import Runner, format_report, junit_suite, report_json
from agentfsm.verify.conformance.harness import FunctionTransport, ProcessTransport, Transport
from agentfsm.verify.conformance.results import Report
from agentfsm.verify.conformance.vectors import generate, generate_extended
from agentfsm.verify.junit import junit_xml
from conformance_helpers import LOOM, ROOT, OracleHandler, broken_adapter, semantics_adapter
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentfsm.cli import main

TABLES = sorted((ROOT / "spec").glob("*.yaml"))
SECONDS = re.compile(r'\(\d+\.\d+ s\)|"seconds": [0-9.]+|time="[0-9.]+"')


def same_text(text: str) -> str:
    """A report with its timings taken out."""
    return SECONDS.sub("", text)


def summary(report: Report) -> tuple[Any, ...]:
    """Everything a report says, but its timings."""
    results = [(r.vector.id, r.status, r.message, r.failure, r.agreed,
                [(s.number, s.problems, s.actual) for s in r.steps]) for r in report.results]
    junit = junit_xml("conform", [junit_suite(report)]).decode()
    data = {k: v for k, v in report_json(report).items() if k != "seconds"}
    return results, report.stopped, report.unlisted, same_text(format_report(report)), same_text(junit), data


class Faulty:
    """The naive interpreter, with some events answered wrongly or refused (per process, like an adapter)."""

    def __init__(self, table: Table, wrong: frozenset[str], refused: frozenset[str], yielding: frozenset[str]) -> None:
        self.oracle = OracleHandler(table)
        self.wrong, self.refused, self.yielding = wrong, refused, yielding

    def __call__(self, request: dict[str, Any]) -> dict[str, Any]:
        event = request.get("event", "")
        if event in self.yielding:
            time.sleep(0)   # gives up the CPU here: the workers run at uneven speeds, as the hypothesis picks
        if event in self.refused:
            return {"ok": False, "error": f"{event} is not implemented"}
        reply = self.oracle(request)
        if event in self.wrong and reply.get("accepted"):
            reply["actions"] = [*reply["actions"], "Extra"]
        return reply


def in_process(table: Table, wrong: frozenset[str] = frozenset(), refused: frozenset[str] = frozenset(),
               yielding: frozenset[str] = frozenset()) -> Callable[[], Transport]:
    return lambda: FunctionTransport(Faulty(table, wrong, refused, yielding))


@pytest.mark.parametrize("path", TABLES, ids=lambda p: p.stem)
def test_every_bundled_table_gives_the_same_report_on_three_adapters(path: Path) -> None:
    table = load_table(path)
    vectors = generate(table, sets=["rows", "row-pairs", "walks", "invalid"], walks=5)[1]
    connect = in_process(table)
    serial = Runner(table, connect).run(vectors)
    assert serial.ok
    assert summary(parallel.run(table, connect, vectors, jobs=3)) == summary(serial)


def kinds(vectors: list[Vector], kind: str) -> Sequence[Vector] | Iterator[Vector]:
    """The vectors as a list, as a sequence that is not one (made lazily), or as a bare iterator."""
    if kind == "list":
        return vectors
    if kind == "sequence":
        return Lazy(vectors)
    return iter(vectors)


class Lazy(Sequence[Vector]):
    def __init__(self, vectors: list[Vector]) -> None:
        self.vectors = vectors

    def __len__(self) -> int:
        return len(self.vectors)

    def __getitem__(self, index: Any) -> Any:
        return self.vectors[index]

    def __iter__(self) -> Iterator[Vector]:
        yield from self.vectors


@pytest.fixture(scope="module")
def loom_vectors(loom: Table) -> list[Vector]:
    return generate(loom, sets=["rows", "events", "suffixes", "walks"], walks=5)[1]


EVENTS = sorted(e.name for e in load_table(LOOM).events)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(jobs=st.integers(2, 5), start=st.integers(0, 600), count=st.integers(0, 200),
       wrong=st.frozensets(st.sampled_from(EVENTS), max_size=3),
       refused=st.frozensets(st.sampled_from(EVENTS), max_size=2),
       yielding=st.frozensets(st.sampled_from(EVENTS), max_size=4),
       max_failures=st.none() | st.integers(1, 40), kind=st.sampled_from(["list", "sequence", "iterator"]))
def test_any_split_gives_the_report_of_one_adapter(loom: Table, loom_vectors: list[Vector], jobs: int, start: int,
                                                   count: int, wrong: frozenset[str], refused: frozenset[str],
                                                   yielding: frozenset[str], max_failures: int | None,
                                                   kind: str) -> None:
    """Faults, refusals, early stops and interleavings chosen by hypothesis: the same results, in
    the same order, the same not-run vectors listed and counted, the same report, JSON and JUnit."""
    chosen = loom_vectors[start:start + count]
    connect = in_process(loom, wrong, refused, yielding)
    serial = Runner(loom, connect).run(kinds(chosen, kind), max_failures=max_failures)
    split = parallel.run(loom, connect, kinds(chosen, kind), jobs, max_failures=max_failures)
    assert summary(split) == summary(serial)


def test_lazily_made_extension_vectors_stop_as_on_one_adapter() -> None:
    """The --extra-states vectors are made as they are read: an early stop counts the rest, as one adapter does."""
    table = load_table(ROOT / "spec" / "explorer-evaluator.yaml")
    vectors = generate_extended(table, sets=["suffixes"], extra_states=1)[1]
    connect = in_process(table, wrong=frozenset(e.name for e in table.events))
    serial = Runner(table, connect).run(vectors, max_failures=3)
    split = parallel.run(table, connect, vectors, 2, max_failures=3)
    assert serial.unlisted > 0 and summary(split) == summary(serial)


def conform(capsys: pytest.CaptureFixture[str], tmp_path: Path, adapter: Sequence[str], jobs: int,
            *extra: str) -> tuple[int, str, str]:
    junit = tmp_path / f"conform-{jobs}.xml"
    status = main(["conform", str(LOOM), "--adapter", " ".join(adapter), "--jobs", str(jobs),
                   "--junit", str(junit), *extra])
    return status, same_text(capsys.readouterr().out), same_text(junit.read_text())


@pytest.mark.parametrize(("adapter", "extra"), [
    (semantics_adapter("--fault", "silent-text"), ["--sets", "rows,row-pairs", "--json"]),
    (semantics_adapter("--fault", "retry-bound"), ["--sets", "rows,row-pairs", "--max-failures", "3"]),
    (semantics_adapter("--fault", "accept-everything"), ["--sets", "rows,walks", "--walks", "5",
                                                          "--stop-at-first-failure"]),
    # An adapter that dies on every event: several failures in a row stop the run.
    (broken_adapter("crash"), ["--sets", "rows", "--max-failures", "2"]),
    (semantics_adapter(), ["--sets", "rows", "--json"]),
], ids=["fault-json", "max-failures", "first-failure", "crashing", "passing"])
def test_the_command_gives_the_same_output_exit_status_and_junit(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, adapter: list[str], extra: list[str]) -> None:
    one = conform(capsys, tmp_path, adapter, 1, *extra)
    assert conform(capsys, tmp_path, adapter, 3, *extra) == one


def test_the_typescript_example_gives_the_same_report(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    built = ROOT / "examples" / "conformance" / "dist" / "adapter.js"
    if not built.exists() or not any((Path(p) / "node").exists() for p in os.environ["PATH"].split(os.pathsep)):
        pytest.skip("the TypeScript example is not built (make setup builds it) or node is missing")
    one = conform(capsys, tmp_path, ["node", str(built)], 1, "--sets", "rows,row-pairs")
    assert one[0] == 0 and conform(capsys, tmp_path, ["node", str(built)], 2, "--sets", "rows,row-pairs") == one


def gone(pid: int) -> bool:
    """The adapter and its process group are gone: no process left in the group, nor a zombie of it."""
    try:
        os.killpg(pid, 0)
    except ProcessLookupError:
        return True
    return False


def processes(argv: list[str], log: Path) -> Callable[[], Transport]:
    """Adapters started by the workers, each one's pid appended to ``log`` (the workers are other processes)."""
    def connect() -> Transport:
        transport = ProcessTransport(argv, 5.0)
        with log.open("a") as out:
            out.write(f"{transport.proc.pid}\n")
        return transport

    return connect


def started(log: Path) -> list[int]:
    return [int(line) for line in log.read_text().split()] if log.exists() else []


@pytest.mark.parametrize("max_failures", [None, 2])
def test_every_adapter_process_is_ended(loom: Table, loom_vectors: list[Vector], max_failures: int | None,
                                        tmp_path: Path) -> None:
    log = tmp_path / "pids"
    connect = processes(semantics_adapter("--fault", "silent-text"), log)
    report = parallel.run(loom, connect, loom_vectors[:400], 3, max_failures=max_failures)
    assert bool(report.stopped) == (max_failures is not None)
    assert len(started(log)) == 3 and all(map(gone, started(log)))


def test_adapters_are_ended_when_the_run_is_interrupted(loom: Table, loom_vectors: list[Vector],
                                                        tmp_path: Path) -> None:
    """Ctrl-C (or any exception) in the middle: every adapter, the children of each included, is killed."""
    log = tmp_path / "pids"
    connect = processes([sys.executable, str(ROOT / "tests" / "adapters" / "adapter_semantics.py"), str(LOOM)], log)

    def interrupt(done: int) -> None:
        if done == 50:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        parallel.run(loom, connect, loom_vectors, 3, progress=interrupt)
    assert started(log) and all(map(gone, started(log)))


def test_a_worker_that_dies_is_an_error_not_a_hang(loom: Table, loom_vectors: list[Vector]) -> None:
    """A harness process killed under the run (here: on starting its adapter) fails the run, named."""
    def connect() -> Transport:
        os._exit(7)

    with pytest.raises(parallel.WorkerError, match=r"conform-0\) ended without its results \(exit code 7\)"):
        parallel.run(loom, connect, loom_vectors[:50], 2)


def test_a_hanging_adapter_fails_its_vectors_on_every_worker(capsys: pytest.CaptureFixture[str],
                                                             tmp_path: Path) -> None:
    """Each worker's adapter hangs at the first event: timeouts, reported as with one job, never a hang of the run."""
    adapter = broken_adapter("hang")
    one = conform(capsys, tmp_path, adapter, 1, "--sets", "rows", "--timeout", "0.2", "--max-failures", "3")
    assert one[0] == 1 and "timeout: no reply within 0.2 s" in one[1]
    assert conform(capsys, tmp_path, adapter, 2, "--sets", "rows", "--timeout", "0.2", "--max-failures", "3") == one


@pytest.mark.parametrize(("table", "fault", "extra"), [
    ("explorer-evaluator", [], []),
    ("loom-agent", ["--fault", "retry-bound"], ["--max-failures", "5"]),
], ids=["faithful", "retry-bound"])
def test_extension_vectors_made_in_the_workers_give_the_same_report(capsys: pytest.CaptureFixture[str],
                                                                    table: str, fault: list[str],
                                                                    extra: list[str]) -> None:
    """--extra-states: each worker makes its own chunks of the extension (``Vectors.span``), on real adapter
    processes; an early stop lists and counts the vectors one adapter would have."""
    path = ROOT / "spec" / f"{table}.yaml"
    adapter = semantics_adapter(*fault, table=path)
    options = ["--sets", "suffixes", "--extra-states", "1", "--json", *extra]

    def run(jobs: int) -> tuple[int, str]:
        status = main(["conform", str(path), "--adapter", " ".join(adapter), "--jobs", str(jobs), *options])
        return status, same_text(capsys.readouterr().out)

    one = run(1)
    assert one[0] == (1 if fault else 0)
    assert run(3) == one


def test_a_command_that_cannot_start_is_started_once(loom: Table, loom_vectors: list[Vector],
                                                     capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    log = tmp_path / "starts.log"
    command = f"echo started >> {log}; exit 3"
    assert main(["conform", str(LOOM), "--adapter", command, "--shell", "--jobs", "4", "--sets", "rows"]) == 2
    assert log.read_text() == "started\n" and "never answered its first reset" in capsys.readouterr().err


@pytest.mark.parametrize("jobs", ["0", "-1", "two"])
def test_jobs_must_be_a_positive_count(jobs: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["conform", str(LOOM), "--adapter", "true", "--jobs", jobs])
    assert exit_.value.code == 2 and "--jobs" in capsys.readouterr().err


def test_the_default_is_the_cpu_count(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["conform", "--help"])
    assert f"here {len(os.sched_getaffinity(0))})" in " ".join(capsys.readouterr().out.split())


def test_no_vectors(loom: Table) -> None:
    connect = in_process(loom)
    assert summary(parallel.run(loom, connect, iter([]), 2)) == summary(Runner(loom, connect).run(iter([])))


class Stalling(Faulty):
    """The naive interpreter that, once in the whole run (a counter of resets shared by every
    worker's process), stalls on one reset until the other workers have answered ``past`` more
    (or 3 s have passed: they cannot get that far when they are held back)."""

    def __init__(self, table: Table, resets: Any, stall_at: int, past: int) -> None:
        super().__init__(table, frozenset(), frozenset(), frozenset())
        self.resets, self.stall_at, self.past = resets, stall_at, past

    def __call__(self, request: dict[str, Any]) -> dict[str, Any]:
        if request.get("op") == "reset":
            with self.resets.get_lock():
                self.resets.value += 1
                count = self.resets.value
            deadline = time.monotonic() + 3.0
            while count == self.stall_at and self.resets.value < count + self.past and time.monotonic() < deadline:
                time.sleep(0.01)
        return super().__call__(request)


def test_a_slow_chunk_bounds_the_results_waiting_to_be_merged(loom: Table, loom_vectors: list[Vector],
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """While one chunk is slow, the other workers get chunks only up to a window past it: what
    waits to be merged in order stays bounded, and the report is the one of one adapter."""
    vectors = (loom_vectors * 8)[:3000]
    resets = multiprocessing.get_context("fork").Value("q", 0)
    connect = lambda: FunctionTransport(Stalling(loom, resets, 400, len(vectors) // 2))   # noqa: E731
    ahead: list[int] = []
    hand_out = parallel._Parallel._hand_out

    def recording(self: Any, merged: int) -> None:
        hand_out(self, merged)
        ahead.append(self.handed - merged)

    monkeypatch.setattr(parallel._Parallel, "_hand_out", recording)
    jobs = 3
    split = parallel.run(loom, connect, vectors, jobs, keep_passing=False)
    chunk = max(parallel.MIN_CHUNK, len(vectors) // (jobs * parallel.CHUNKS_PER_JOB))
    # The window, and the two chunks (the one running and the next) its oldest one's worker may hold past it.
    assert 0 < max(ahead) <= (parallel.AHEAD * jobs + 2) * chunk < len(vectors) // 2
    assert summary(split) == summary(Runner(loom, in_process(loom)).run(vectors))
