"""Running vectors on several adapter processes at once, reported as one adapter would have.

``conform --jobs N`` forks N harness worker processes, each driving its own ``Runner`` and
so its own adapter (pipelined as ever, replaced when it breaks): the judging of replies
runs on N cores, not in turns in one process. The vectors go out in chunks of
consecutive indices, each to the worker that asks next; a worker makes a chunk's vectors
itself from its copy of the source (a list, or ``Vectors.span``, which skips the
extension vectors before the chunk unmade), so no vector crosses a pipe, and only a
source that is neither (an iterator) is read here and sent. The workers send back each
chunk's results (``Batch``: the passing ones only as seconds and lengths) and they are
merged in vector order into ``Results``: the report is the one ``--jobs 1`` gives — the
same results, messages, counts, early stop and JSON/JUnit, only the seconds differ. A
chunk is handed out at most ``AHEAD`` chunks a worker past the oldest one not back, so a
slow chunk holds up the others instead of piling up results to merge.

An early stop needs care there: one adapter, stopping, reports as not run the vectors it
had already sent (its window, ``WINDOW`` requests) and only counts the rest of a lazily
made sequence; ``SerialWindow`` replays that window from the results in order, so the
same vectors end up listed and counted.

The first worker runs alone until its adapter has answered a reset: an adapter that
cannot start is started once and is bad input, as with one job. Equality holds for an
adapter whose replies depend only on the vector it is answering (each vector starts with
a reset); one that breaks the protocol (unsolicited output) is still caught, but maybe
at another vector. A worker that dies is an error of the run, named, never a hang; any
end of the run (an early stop, Ctrl-C, an exception) ends every worker, and each worker
kills its adapters' process groups on its way out.
"""

from __future__ import annotations

import contextlib
import itertools
import multiprocessing
import os
import signal
import time
import traceback
from array import array
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sized
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from types import FrameType
from typing import Any, Protocol

from agentfsm.spec.model import Table
from agentfsm.spec.vectorfile import Vector
from agentfsm.verify.conformance.conform import STRAY_CHECKS, WINDOW, Runner
from agentfsm.verify.conformance.harness import AdapterDidNotStart, AdapterFailure, Transport, kill_all
from agentfsm.verify.conformance.results import Report, Results, VectorResult, vector_ids

JOIN_GRACE = 5.0   # seconds a worker gets to end its adapters once told to stop, before it is killed
CHUNKS_PER_JOB = 16   # a sized source is cut into about this many chunks per worker (so that all end together)
MIN_CHUNK, MAX_CHUNK = 8, 2048   # vectors per chunk
LOOKAHEAD = 64   # vectors made at once here when an early stop's window needs lengths no worker sent yet
AHEAD = 4   # chunks per worker handed out past the oldest chunk whose results are not back


class Spanned(Protocol):
    """A source a worker can take any run of consecutive vectors from (``Vectors``)."""

    def __len__(self) -> int: ...

    def span(self, start: int, stop: int) -> Iterator[Vector]: ...


class SerialWindow:
    """Which vectors one adapter would have had in flight: ``Runner.results``'s sending, replayed.

    ``read`` takes the results in vector order; ``sent`` is then how many vectors a run
    on one adapter would have sent by the time it read that result. ``length(i)`` is the
    number of requests of vector ``i`` (None past the last).
    """

    def __init__(self, length: Callable[[int], int | None]) -> None:
        self.length = length
        self.inflight: deque[int] = deque()
        self.queued = 0
        self.sent = 0
        self.held = False
        self.stray_checks = STRAY_CHECKS

    def read(self, result: VectorResult | None) -> None:
        """The next result (None: a passing one)."""
        while not self.held and self.queued < WINDOW and (n := self.length(self.sent)) is not None:
            self.inflight.append(n)
            self.queued += n
            self.sent += 1
        self.queued -= self.inflight.popleft()
        failure = result is not None and bool(result.failure)
        if result is not None and result.status == "fail" and not failure and self.stray_checks > 0:
            self.held = True
        if self.held and not self.inflight:
            # The check after a wrong reply; skipped when the adapter had just been closed.
            self.stray_checks -= not failure
            self.held = False


# A chunk as sent to a worker: its first index and either its end (the worker makes the
# vectors) or the vectors themselves; None: there are no more.
Chunk = tuple[int, int, list[Vector] | None] | None


@dataclass
class Batch:
    """A chunk's results as a worker sends them back: each vector's requests (and seconds, in a
    timed run), and whole only the results that did not pass (every one, when passing ones are kept)."""

    seconds: array[float] = field(default_factory=lambda: array("d"))
    requests: array[int] = field(default_factory=lambda: array("L"))
    whole: dict[int, VectorResult] = field(default_factory=dict)   # by place in the chunk


def run(table: Table, connect: Callable[[], Transport], vectors: Iterable[Vector], jobs: int = 1,
        stop_at_first_failure: bool = False, progress: Callable[[int], None] | None = None,
        max_failures: int | None = None, must_start: bool = False, keep_passing: bool = True,
        timed: bool = True) -> Report:
    """``Runner.run`` on ``jobs`` adapters at once, each driven by a process of its own; the same report as on one."""
    if isinstance(vectors, Sized):
        jobs = min(jobs, len(vectors))
    if jobs <= 1:
        return Runner(table, connect, must_start, timed).run(vectors, stop_at_first_failure, progress, max_failures,
                                                             keep_passing)
    return _Parallel(table, connect, vectors, jobs, must_start, keep_passing, timed).run(
        1 if stop_at_first_failure else max_failures, progress)


def _spanned(vectors: Iterable[Vector]) -> Spanned | list[Vector] | None:
    if isinstance(vectors, list) or (isinstance(vectors, Sized) and callable(getattr(vectors, "span", None))):
        return vectors   # type: ignore[return-value]
    return None


def _span(source: Spanned | list[Vector], start: int, stop: int) -> Iterator[Vector]:
    return iter(source[start:stop]) if isinstance(source, list) else source.span(start, stop)


class _Worker:
    """One harness process: chunks asked for one ahead, run through a ``Runner``, results sent per chunk."""

    def __init__(self, conn: Connection, table: Table, connect: Callable[[], Transport], must_start: bool,
                 source: Spanned | list[Vector] | None, keep_passing: bool, timed: bool, announce: bool) -> None:
        self.conn = conn
        self.runner = Runner(table, connect, must_start, timed)
        self.source = source
        self.keep_passing = keep_passing
        self.announce = announce
        self.chunks: deque[tuple[int, int]] = deque()   # (first index, size) of the chunks being run
        self.batch = Batch()
        self.ended = False

    def ask(self) -> Iterator[Vector] | None:
        """The next chunk's vectors (the chunk recorded), or None when there are no more."""
        self.conn.send(("more",))
        chunk: Chunk = self.conn.recv()
        if chunk is None:
            self.ended = True
            return None
        first, stop, given = chunk
        self.chunks.append((first, stop - first))
        if given is not None:
            return iter(given)
        assert self.source is not None
        return _span(self.source, first, stop)

    def feed(self) -> Iterator[Vector]:
        ahead = self.ask()
        while ahead is not None:
            current, ahead = ahead, self.ask()
            yield from current

    def work(self) -> None:
        inflight: deque[tuple[Vector, AdapterFailure | None]] = deque()
        last: VectorResult | None = None
        try:
            for result in self.runner.results(self.feed(), inflight):
                if last is not None:
                    self.emit(last)
                last = result
                if self.announce:
                    self.announce = False
                    self.conn.send(("started",))
            if last is not None:
                self.runner.check_quiet(last)   # as one adapter's run ends: anything unasked for is a failure
                self.emit(last)
        finally:
            self.runner.close()

    def emit(self, result: VectorResult) -> None:
        batch = self.batch
        if result.status != "pass" or self.keep_passing:
            batch.whole[len(batch.requests)] = result
        if self.runner.timed:
            batch.seconds.append(result.seconds)
        batch.requests.append(len(result.vector.steps) + 1)   # a passing vector agreed on every step
        first, size = self.chunks[0]
        if len(batch.requests) == size:
            self.chunks.popleft()
            self.conn.send(("results", first, batch))
            self.batch = Batch()


def _worker_main(conn: Connection, *args: Any) -> None:
    """A worker process's body: whatever ends it (a stop, an error) ends its adapters first."""
    def stop(signum: int, frame: FrameType | None) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)   # one stop: a second must not cut the ending short
        raise SystemExit(0)

    signal.signal(signal.SIGINT, signal.SIG_IGN)   # the run's own process decides on Ctrl-C
    signal.signal(signal.SIGTERM, stop)
    try:
        _Worker(conn, *args).work()
        conn.send(("done",))
    except SystemExit:
        pass
    except AdapterDidNotStart as exc:
        failure = exc.failure
        conn.send(("did-not-start", failure.kind, failure.message, failure.stderr))
    except BaseException as exc:   # handed to the run's process, which raises it
        conn.send(("error", f"{type(exc).__name__}: {exc}", traceback.format_exc()))
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)   # a stop now must not cut short the adapters' ending
        kill_all()


class WorkerError(RuntimeError):
    """A worker process failed (an error in the harness, not in the adapter), or died."""


@dataclass
class _Process:
    process: multiprocessing.process.BaseProcess
    conn: Connection
    done: bool = False


class _Parallel:
    def __init__(self, table: Table, connect: Callable[[], Transport], vectors: Iterable[Vector], jobs: int,
                 must_start: bool, keep_passing: bool, timed: bool) -> None:
        self.table = table
        self.connect = connect
        self.vectors = vectors
        self.jobs = jobs
        self.must_start = must_start
        self.keep_passing = keep_passing
        self.timed = timed
        self.spanned = _spanned(vectors)
        self.pending = iter(vectors) if self.spanned is None else None
        self.total = len(vectors) if isinstance(vectors, Sized) else None
        self.chunk = MIN_CHUNK if self.total is None else max(MIN_CHUNK, min(
            MAX_CHUNK, self.total // (jobs * CHUNKS_PER_JOB)))
        self.handed = 0   # vectors handed out in chunks so far
        self.read = 0   # vectors read here from an iterator so far
        self.kept: dict[int, Vector] = {}   # those, until merged
        self.waiting: dict[int, Batch] = {}   # results back from a worker, by their chunk's first index
        self.holders: dict[int, _Process] = {}   # the worker running each chunk handed out, by its first index
        self.asking: deque[_Process] = deque()   # workers waiting for a chunk until the oldest comes back
        self.ahead: dict[int, int] = {}   # requests of vectors made here for an early stop's window
        self.exhausted = False
        self.stopped = False
        self.context = multiprocessing.get_context("fork")
        self.workers: list[_Process] = []

    def run(self, max_failures: int | None, progress: Callable[[int], None] | None) -> Report:
        start = time.monotonic()
        try:
            results, stopped, unlisted = self._merge(max_failures, progress)
            if isinstance(results, Results):
                results.settle()
        finally:
            self._end()
        return Report(self.table.machine, results, time.monotonic() - start, stopped, unlisted)

    def _start(self, n: int) -> None:
        ours, theirs = self.context.Pipe()
        process = self.context.Process(
            target=_worker_main, name=f"conform-{n}", daemon=True,
            args=(theirs, self.table, self.connect, self.must_start and n == 0, self.spanned, self.keep_passing,
                  self.timed, n == 0))
        process.start()
        theirs.close()
        self.workers.append(_Process(process, ours))

    def _end(self) -> None:
        """Tell every worker to stop (each ends its adapters), then make sure each is gone."""
        for worker in self.workers:
            if worker.process.is_alive():
                with contextlib.suppress(OSError):
                    os.kill(worker.process.pid or 0, signal.SIGTERM)
        deadline = time.monotonic() + JOIN_GRACE
        for worker in self.workers:
            worker.process.join(max(deadline - time.monotonic(), 0.0))
            if worker.process.is_alive():
                worker.process.kill()
                worker.process.join()
            worker.conn.close()
        kill_all()

    def _next_chunk(self) -> Chunk:
        if self.stopped or self.exhausted:
            return None
        first = self.handed
        if self.spanned is not None:
            stop = min(first + self.chunk, len(self.spanned))
            if stop <= first:
                self.exhausted = True
                return None
            self.handed = stop
            return first, stop, None
        given = [self.kept[i] for i in range(first, min(self.read, first + self.chunk))]
        assert self.pending is not None
        more = list(itertools.islice(self.pending, self.chunk - len(given)))
        self.kept.update(enumerate(more, self.read))
        self.read += len(more)
        given += more
        if not given:
            self.exhausted = True
            return None
        self.handed += len(given)
        return first, self.handed, given

    def _merge(self, max_failures: int | None,
               progress: Callable[[int], None] | None) -> tuple[list[VectorResult] | Results, str, int]:
        # The others start once the first adapter has answered: a broken command is started once.
        self._start(0)
        window = SerialWindow(self._length) if max_failures is not None else None
        merged: list[VectorResult] | Results = [] if self.keep_passing else Results(
            self.table.machine, None if self.pending is not None else vector_ids(self.vectors), self.timed)
        waiting = self.waiting
        failures = 0
        while not self.stopped and not all(w.done for w in self.workers):
            for worker in self._ready():
                message = self._receive(worker)
                kind = message[0]
                if kind == "more":
                    self.asking.append(worker)
                elif kind == "started":
                    for n in range(1, self.jobs):
                        self._start(n)
                elif kind == "results":
                    waiting[message[1]] = message[2]
                    del self.holders[message[1]]
                elif kind == "done":
                    worker.done = True
                elif kind == "did-not-start":
                    raise AdapterDidNotStart(AdapterFailure(message[1], message[2], message[3]))
                else:
                    raise WorkerError(f"a conform worker failed: {message[1]}\n{message[2]}")
            while not self.stopped and (batch := waiting.pop(len(merged), None)) is not None:
                for place, requests in enumerate(batch.requests):
                    result = batch.whole.get(place)
                    if window is not None:
                        window.read(result)
                    vector = self.kept.pop(len(merged), None)
                    if result is not None:
                        merged.append(result)
                    else:
                        assert isinstance(merged, Results)
                        merged.add_passed(batch.seconds[place] if self.timed else 0.0, requests - 1,
                                          vector.id if vector is not None else "")
                    failures += result is not None and result.status != "pass"
                    if progress is not None:
                        progress(len(merged))
                    if max_failures is not None and failures >= max_failures:
                        self.stopped = True
                        break
            self._hand_out(len(merged))
        if not self.stopped:
            return merged, "", 0
        assert window is not None and max_failures is not None
        stopped = ("stopped at the first failure" if max_failures == 1
                   else f"stopped after {failures} vectors did not pass")
        merged.extend(self._not_run(len(merged), window.sent))
        return merged, stopped, self._unlisted(window.sent)

    def _hand_out(self, merged: int) -> None:
        """Answer the workers asking for a chunk, but hand none out further than ``AHEAD``
        chunks a worker past the oldest one not back, unless to the worker running that one
        (which may ask before its last results are read): the results waiting to be merged in
        order stay bounded however slow one chunk is, and that chunk's worker never waits."""
        oldest = self.holders.get(merged)
        for worker in list(self.asking):
            if (self.stopped or self.exhausted or worker is oldest
                    or self.handed < merged + AHEAD * self.jobs * self.chunk):
                self.asking.remove(worker)
                chunk = self._next_chunk()
                if chunk is not None:
                    self.holders[chunk[0]] = worker
                worker.conn.send(chunk)

    def _ready(self) -> list[_Process]:
        by_conn = {w.conn: w for w in self.workers if not w.done}
        return [by_conn[c] for c in wait(list(by_conn)) if isinstance(c, Connection)]

    @staticmethod
    def _receive(worker: _Process) -> tuple[Any, ...]:
        try:
            message: tuple[Any, ...] = worker.conn.recv()
        except (EOFError, OSError):
            worker.process.join(1.0)
            raise WorkerError(f"a conform worker process ({worker.process.name}) ended without its results "
                              f"(exit code {worker.process.exitcode})") from None
        return message

    def _length(self, index: int) -> int | None:
        """The requests of vector ``index``: from its result if back, else from the vector (made or read here)."""
        if isinstance(self.vectors, list):
            return len(self.vectors[index].steps) + 1 if index < len(self.vectors) else None
        if self.spanned is not None:
            if index >= len(self.spanned):
                return None
            chunk = self.waiting.get(index - index % self.chunk)
            if chunk is not None:
                return chunk.requests[index % self.chunk]
            if index not in self.ahead:
                self.ahead = {i: len(v.steps) + 1
                              for i, v in enumerate(_span(self.spanned, index, index + LOOKAHEAD), index)}
            return self.ahead.get(index)
        if index >= self.read:   # past what was read: read on, keeping it for a chunk or the not-run list
            assert self.pending is not None
            vector = next(self.pending, None)
            if vector is None:
                return None
            self.kept[self.read] = vector
            self.read += 1
        return len(self.kept[index].steps) + 1

    def _not_run(self, first: int, sent: int) -> list[VectorResult]:
        """What one adapter would list as not run: the vectors it had sent, and the rest of a list."""
        if isinstance(self.vectors, list):
            return [VectorResult(v, "not-run") for v in self.vectors[first:]]
        if self.spanned is not None:
            return [VectorResult(v, "not-run") for v in _span(self.spanned, first, sent)]
        return [VectorResult(self.kept[i], "not-run") for i in range(first, sent)]

    def _unlisted(self, sent: int) -> int:
        if isinstance(self.vectors, list):
            return 0
        if self.total is not None:
            return self.total - sent
        assert self.pending is not None
        return self.read - sent + sum(1 for _ in self.pending)
