"""Running vectors on several adapter processes at once, reported as one adapter would have.

``conform --jobs N`` hands the vectors, in order, to N threads, each driving its own
``Runner`` and so its own adapter process (pipelined as ever, replaced when it breaks).
The results are put back in vector order, and the report is the one ``--jobs 1`` gives:
the same results, messages, counts, early stop and JSON/JUnit, only the seconds differ.
An early stop needs care there: one adapter, stopping, reports as not run the vectors it
had already sent (its window, ``WINDOW`` requests) and only counts the rest of a lazily
made sequence; ``SerialWindow`` replays that window from the results in order, so the
same vectors end up listed and counted.

The first adapter runs alone until it has answered a reset: an adapter that cannot start
is started once and is bad input, as with one job. Equality holds for an adapter whose
replies depend only on the vector it is answering (each vector starts with a reset); one
that breaks the protocol (unsolicited output) is still caught, but maybe at another vector.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sized
from dataclasses import dataclass

from agentfsm.spec.model import Table
from agentfsm.spec.vectorfile import Vector
from agentfsm.verify.conformance.conform import STRAY_CHECKS, WINDOW, Report, Runner, VectorResult
from agentfsm.verify.conformance.harness import AdapterFailure, Transport, kill_all

JOIN_GRACE = 5.0   # seconds to wait for a worker after the run was cancelled (its adapters are killed first)


class _Cancelled(Exception):
    """Raised inside a worker's run once the results it would read are no longer wanted."""


class _Source:
    """The vectors, fetched once from the caller's iterable and handed out in order under a lock.

    A vector is kept only until it has been both handed to a worker and merged back (its
    result then holds it), or, past an early stop, until the report lists it as not run.
    """

    def __init__(self, vectors: Iterable[Vector]) -> None:
        self.pending = iter(vectors)
        self.lock = threading.Lock()
        self.kept: dict[int, Vector] = {}
        self.fetched = 0
        self.handed = 0
        self.stopped = False

    def _fetch(self, index: int) -> Vector | None:
        while self.fetched <= index:
            vector = next(self.pending, None)
            if vector is None:
                return None
            self.kept[self.fetched] = vector
            self.fetched += 1
        return self.kept[index]

    def take(self) -> tuple[int, Vector] | None:
        with self.lock:
            if self.stopped or (vector := self._fetch(self.handed)) is None:
                return None
            index = self.handed
            self.handed += 1
            return index, vector

    def vector(self, index: int) -> Vector | None:
        with self.lock:
            return self._fetch(index)

    def merged(self, index: int) -> None:
        """The result of vector ``index`` (handed, since it has one) holds it now."""
        with self.lock:
            del self.kept[index]

    def stop(self) -> None:
        with self.lock:
            self.stopped = True

    def rest(self) -> int:
        """The vectors not fetched yet, counted (after the run, for an early stop)."""
        with self.lock:
            return sum(1 for _ in self.pending)


class SerialWindow:
    """Which vectors one adapter would have had in flight: ``Runner.run``'s sending, replayed.

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

    def read(self, result: VectorResult) -> None:
        while not self.held and self.queued < WINDOW and (n := self.length(self.sent)) is not None:
            self.inflight.append(n)
            self.queued += n
            self.sent += 1
        self.queued -= self.inflight.popleft()
        if result.status == "fail" and not result.failure and self.stray_checks > 0:
            self.held = True
        if self.held and not self.inflight:
            # The check after a wrong reply; skipped when the adapter had just been closed.
            self.stray_checks -= not result.failure
            self.held = False


class _Worker(Runner):
    """A ``Runner`` on vectors taken from the shared source, passing each result on as it is read."""

    def __init__(self, table: Table, connect: Callable[[], Transport], must_start: bool, source: _Source,
                 results: queue.Queue[tuple[int, VectorResult] | _Done], cancelled: threading.Event,
                 keep_passing: bool) -> None:
        super().__init__(table, connect, must_start)
        self.keep_passing = keep_passing
        self.source = source
        self.results = results
        self.cancelled = cancelled
        self.indices: deque[int] = deque()

    def feed(self) -> Iterator[Vector]:
        while not self.cancelled.is_set() and (item := self.source.take()) is not None:
            self.indices.append(item[0])
            yield item[1]

    def _read(self, vector: Vector, failure: AdapterFailure | None) -> VectorResult:
        if self.cancelled.is_set():
            raise _Cancelled
        result = super()._read(vector, failure)
        self.results.put((self.indices.popleft(), result))
        return result

    def work(self) -> None:
        error: BaseException | None = None
        try:
            self.run(self.feed(), keep_passing=self.keep_passing)
        except _Cancelled:
            pass
        except BaseException as exc:   # handed to the main thread, which raises it
            error = exc
        self.results.put(_Done(error))


@dataclass(frozen=True)
class _Done:
    error: BaseException | None


def run(table: Table, connect: Callable[[], Transport], vectors: Iterable[Vector], jobs: int = 1,
        stop_at_first_failure: bool = False, progress: Callable[[int], None] | None = None,
        max_failures: int | None = None, must_start: bool = False, keep_passing: bool = True) -> Report:
    """``Runner.run`` on ``jobs`` adapters at once; the same report as on one."""
    if isinstance(vectors, Sized):
        jobs = min(jobs, len(vectors))
    if jobs <= 1:
        return Runner(table, connect, must_start).run(vectors, stop_at_first_failure, progress, max_failures,
                                                      keep_passing)
    return _Parallel(table, connect, vectors, jobs, must_start, keep_passing).run(
        1 if stop_at_first_failure else max_failures, progress)


class _Parallel:
    def __init__(self, table: Table, connect: Callable[[], Transport], vectors: Iterable[Vector], jobs: int,
                 must_start: bool, keep_passing: bool) -> None:
        self.table = table
        self.vectors = vectors
        self.source = _Source(vectors)
        self.results: queue.Queue[tuple[int, VectorResult] | _Done] = queue.Queue()
        self.cancelled = threading.Event()
        self.workers = [_Worker(table, connect, must_start and n == 0, self.source, self.results, self.cancelled,
                                keep_passing) for n in range(jobs)]
        self.threads = [threading.Thread(target=w.work, name=f"conform-{n}", daemon=True)
                        for n, w in enumerate(self.workers)]

    def run(self, max_failures: int | None, progress: Callable[[int], None] | None) -> Report:
        start = time.monotonic()
        try:
            results, stopped, unlisted = self._merge(max_failures, progress)
        except BaseException:
            self._cancel()
            kill_all()
            self._join(JOIN_GRACE)
            raise
        return Report(self.table.machine, results, time.monotonic() - start, stopped, unlisted)

    def _join(self, timeout: float) -> None:
        for thread in self.threads:
            if thread.ident is not None:
                thread.join(timeout)

    def _merge(self, max_failures: int | None,
               progress: Callable[[int], None] | None) -> tuple[list[VectorResult], str, int]:
        # The others start once the first adapter has answered: a broken command is started once.
        self.threads[0].start()
        running, waiting_first = 1, True
        window = SerialWindow(self._length)
        merged: list[VectorResult] = []
        waiting: dict[int, VectorResult] = {}
        failures, error = 0, None
        while running:
            item = self.results.get()
            if isinstance(item, _Done):
                running -= 1
                if item.error is not None and error is None:
                    error = item.error
                    self._cancel()
                continue
            if waiting_first:
                waiting_first = False
                for thread in self.threads[1:]:
                    thread.start()
                running += len(self.threads) - 1
            waiting[item[0]] = item[1]
            while not self.cancelled.is_set() and (result := waiting.pop(len(merged), None)) is not None:
                window.read(result)
                self.source.merged(len(merged))
                merged.append(result)
                failures += result.status != "pass"
                if progress is not None:
                    progress(len(merged))
                if max_failures is not None and failures >= max_failures:
                    self._cancel()
        if error is not None:
            raise error
        if max_failures is None or failures < max_failures:
            return merged, "", 0
        stopped = ("stopped at the first failure" if max_failures == 1
                   else f"stopped after {failures} vectors did not pass")
        return merged + self._not_run(len(merged), window.sent), stopped, self._unlisted(window.sent)

    def _cancel(self) -> None:
        self.cancelled.set()
        self.source.stop()

    def _length(self, index: int) -> int | None:
        vector = self.source.vector(index)
        return None if vector is None else len(vector.steps) + 1

    def _not_run(self, first: int, sent: int) -> list[VectorResult]:
        """What one adapter would list as not run: the vectors it had sent, and the rest of a list."""
        if isinstance(self.vectors, list):
            return [VectorResult(v, "not-run") for v in self.vectors[first:]]
        return [VectorResult(v, "not-run") for v in map(self.source.vector, range(first, sent)) if v is not None]

    def _unlisted(self, sent: int) -> int:
        if isinstance(self.vectors, list):
            return 0
        if isinstance(self.vectors, Sized):
            return len(self.vectors) - sent
        return self.source.fetched - sent + self.source.rest()
