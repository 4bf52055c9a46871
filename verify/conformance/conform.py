"""Running vectors against an implementation and judging what it reports.

Each vector starts with a reset. A step passes when the implementation reports the
expected ``accepted``, ``state`` and ``actions`` (in order), and the expected value for
every variable it chooses to report. The first step that differs ends the vector. A
transport failure (crash, hang, garbage) fails the vector with the adapter's stderr and
the next vector gets a fresh process. A run stops early only where asked to: at the first
failure, or after ``max_failures`` vectors that did not pass (``--max-failures``, which bounds
what a broken adapter costs in timeouts); an adapter that cannot start at all is reported
before any vector (``must_start``).
"""

from __future__ import annotations

import json
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence, Sized
from dataclasses import replace
from typing import Any

from agentfsm.spec.expr import Value
from agentfsm.spec.model import Table
from agentfsm.spec.vectorfile import Expect, Refused, Step, Vector, expected_run, vector_labels
from agentfsm.verify.conformance.harness import (
    AdapterDidNotStart,
    AdapterFailure,
    Message,
    Observation,
    ProcessTransport,
    Session,
    Transport,
    Unsupported,
    encode,
)
from agentfsm.verify.conformance.results import Report, Results, Status, StepReport, VectorResult, vector_ids
from agentfsm.verify.junit import Case, Suite

STRAY_WAIT = 0.05
STRAY_CHECKS = 5
WINDOW = 512   # requests sent and not yet answered, at most


def compare(expect: Expect, actual: Observation) -> tuple[str, ...]:
    """Every way an event's reply differs from the expectation."""
    problems = []
    if actual.accepted != expect.accepted:
        problems.append(f"accepted: expected {_json(expect.accepted)}, got {_json(actual.accepted)}")
    problems.extend(_compare_config(expect.state, expect.vars, actual))
    if actual.actions != expect.actions:
        problems.append(f"actions: expected {list(expect.actions)}, got {list(actual.actions)}")
    return tuple(problems)


def _compare_config(state: str, values: Mapping[str, Value], actual: Observation) -> list[str]:
    problems = []
    if actual.state != state:
        problems.append(f"state: expected {state}, got {actual.state}")
    for name, value in sorted((actual.vars or {}).items()):
        if name not in values:
            problems.append(f"vars: reports {name!r}, which the table does not declare")
        elif value != values[name] or isinstance(value, bool) != isinstance(values[name], bool):
            problems.append(f"vars.{name}: expected {_json(values[name])}, got {_json(value)}")
    return problems


def _json(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return "null" if value is None else str(value)


class Runner:
    """Runs vectors over transports made by ``connect``, replacing a broken one.

    Requests are pipelined: each vector's requests go out at once (a reset, then every
    event), and the next vectors' follow while up to ``WINDOW`` requests are unanswered;
    replies are read back and checked in order, so the implementation never waits for
    the harness. After the first step that differs the vector's remaining replies are
    still read (so the next vector starts in step with the adapter) but not judged. A
    crash, hang or garbled reply fails the vector, naming its step and event; the adapter
    is killed, and a fresh one gets the vectors that were in flight and the rest.
    """

    def __init__(self, table: Table, connect: Callable[[], Transport], must_start: bool = False,
                 timed: bool = True) -> None:
        """``must_start``: an adapter that cannot start or exits before answering the run's first
        reset raises AdapterDidNotStart at once instead of failing every vector (``conform``).
        ``timed``: each result's seconds are measured (only a JUnit report shows them)."""
        self.table = table
        self.connect = connect
        self.must_start = must_start
        self.timed = timed
        self.started = False   # some adapter has answered a reset
        self.session: Session | None = None
        self.stray_checks = STRAY_CHECKS
        self.awaiting = 0   # the reply being read: 0 the reset's, N step N's
        self.requests = Requests(table)
        self.initial = (table.initial.name, table.vars_dict(table.initial_vars()))

    def run(self, vectors: Iterable[Vector], stop_at_first_failure: bool = False,
            progress: Callable[[int], None] | None = None, max_failures: int | None = None,
            keep_passing: bool = True) -> Report:
        """Run every vector; stop early only at the first failure or after ``max_failures`` that did not pass.

        Without ``keep_passing`` a passing result is kept as no object (``Results``), once
        the next result is in: a run of millions of lazily made vectors then holds no
        vector it has passed (the report and JUnit need no more; ``row_coverage`` does).
        """
        if stop_at_first_failure:
            max_failures = 1
        start = time.monotonic()
        results: list[VectorResult] | Results = (
            [] if keep_passing else Results(self.table.machine, vector_ids(vectors), self.timed))
        failures, stopped, unlisted = 0, "", 0
        pending = iter(vectors)
        inflight: deque[tuple[Vector, AdapterFailure | None]] = deque()
        try:
            for result in self.results(pending, inflight):
                results.append(result)
                failures += result.status != "pass"
                if progress is not None:
                    progress(len(results))
                if max_failures is not None and failures >= max_failures:
                    stopped = ("stopped at the first failure" if max_failures == 1
                               else f"stopped after {failures} vectors did not pass")
                    sent = len(results) + len(inflight)
                    results.extend(VectorResult(v, "not-run") for v, _ in inflight)
                    if isinstance(vectors, list):
                        results.extend(VectorResult(v, "not-run") for v in pending)
                    elif isinstance(vectors, Sized):
                        unlisted = len(vectors) - sent
                    else:
                        unlisted = sum(1 for _ in pending)
                    break
            if not stopped and results:
                self.check_quiet(results[-1])
            if isinstance(results, Results):
                results.settle()
        finally:
            self.close()
        return Report(self.table.machine, results, time.monotonic() - start, stopped, unlisted)

    def results(self, pending: Iterator[Vector],
                inflight: deque[tuple[Vector, AdapterFailure | None]]) -> Iterator[VectorResult]:
        """The results of ``pending``'s vectors in order, read while the next ones are sent.

        ``inflight`` (empty at first) holds, between results, the vectors sent and not yet
        read, so that a caller that stops early knows which; a vector is taken from
        ``pending`` only once there is room in the window.
        """
        queued, held = 0, None
        while True:
            while held is None and queued < WINDOW and (vector := next(pending, None)) is not None:
                inflight.append((vector, self._send(vector)))
                queued += len(vector.steps) + 1
            if not inflight:
                return
            vector, failure = inflight.popleft()
            queued -= len(vector.steps) + 1
            result = self._read(vector, failure)
            if self.session is None and inflight:
                # The adapter was replaced: the vectors it had been sent go to the new one.
                moved = [v for v, _ in inflight]
                inflight.clear()
                inflight.extend((v, self._send(v)) for v in moved)
            if result.status == "fail" and not result.failure and self.stray_checks > 0:
                held = result   # send nothing more until the stray check after it
            if held is not None and not inflight:
                self._check_in_step(held)
                held = None
            yield result

    def first_failure(self, vectors: Iterable[Vector]) -> VectorResult | None:
        """The first vector that does not pass, or None; cheaper than ``run`` for a verdict alone."""
        try:
            return next((r for r in map(self.run_vector, vectors) if r.status != "pass"), None)
        finally:
            self.close()

    def close(self) -> None:
        if self.session is not None:
            session, self.session = self.session, None
            session.close()

    def run_vector(self, vector: Vector) -> VectorResult:
        """One vector on its own: sent, read, and checked for output nobody asked for."""
        result = self._read(vector, self._send(vector))
        if result.status == "fail" and not result.failure and self.stray_checks > 0:
            self._check_in_step(result)
        else:
            self.check_quiet(result)
        return result

    def _send(self, vector: Vector) -> AdapterFailure | None:
        """Send a vector's requests (starting an adapter if there is none); the failure to, if any."""
        try:
            if self.session is None:
                self.session = Session(self.connect())
            transport = self.session.transport
            if isinstance(transport, ProcessTransport):
                transport.send((), self.requests.lines(vector))
            else:
                transport.send(*self.requests.of(vector))
        except AdapterFailure as exc:
            self.close()
            return exc
        return None

    def _read(self, vector: Vector, failure: AdapterFailure | None) -> VectorResult:
        start = time.monotonic() if self.timed else 0.0
        result = VectorResult(vector, "pass")
        self.awaiting = 0
        try:
            if failure is not None:
                raise failure
            assert self.session is not None
            self._read_steps(self.session, vector, result)
        except AdapterFailure as exc:
            self._adapter_failed(result, exc)
        if self.timed:
            result.seconds = time.monotonic() - start
        return result

    def _adapter_failed(self, result: VectorResult, exc: AdapterFailure) -> None:
        if self.must_start and not self.started and exc.kind in ("start", "exited"):
            self.close()
            raise AdapterDidNotStart(exc)
        vector = result.vector
        where = _where(vector, self.awaiting)
        if result.status == "pass" and 0 < self.awaiting <= len(vector.steps):
            result.steps = [StepReport(n, s.event, s.params, s.expect, None)
                            for n, s in enumerate(vector.steps[:self.awaiting], 1)]
            result.steps[-1] = replace(result.steps[-1], problems=(f"{exc.kind}: {exc.message}",))
        if result.status != "fail":
            result.status, result.message = "fail", f"{where}: {exc.kind}: {exc.message}"
        result.failure = f"{where}: {exc.describe()}"
        self.close()

    def _read_steps(self, session: Session, vector: Vector, result: VectorResult) -> None:
        lines = session.transport if isinstance(session.transport, ProcessTransport) else None
        if lines is not None and lines.take_if(self.requests.passed_lines(vector)):
            self.started = True
            result.agreed = len(vector.steps)
            return
        reply = session.next_reply("reset")
        self.started = True
        left = len(vector.steps)
        if isinstance(reply, Unsupported):
            result.status, result.message = "not-implemented", f"reset: {reply.error}"
        elif problems := _compare_config(*self.initial, reply):
            result.status, result.message = "fail", "reset: " + "; ".join(problems)
        else:
            expected_replies, passing = self.requests.expected, self.requests.passing
            if lines is not None:
                self.requests.reset_passing = lines.last_line
            for number, expected in enumerate(vector.steps, start=1):
                left -= 1
                self.awaiting = number
                answer = session.transport.receive()
                canonical = expected_replies[id(expected)]
                if _as_expected(answer, canonical):
                    result.agreed = number
                elif self._judge(number, expected, session.observe(answer, "event"), result):
                    break
                if lines is not None:
                    passing[id(canonical)] = lines.last_line
        for _ in range(left):
            # Replies to requests already sent: read, so that the next vector starts in step.
            self.awaiting += 1
            session.transport.receive()

    def check_quiet(self, result: VectorResult) -> None:
        """With nothing in flight, output waiting to be read is a reply nobody asked for (``result``'s adapter's)."""
        if self.session is None:
            return
        stray = self.session.transport.stray(0.0)
        if stray is not None:
            self.awaiting = len(result.vector.steps) + 1
            self._adapter_failed(result, AdapterFailure(
                "protocol", f"unsolicited output after the last reply (replies out of order?): {stray}"))

    @staticmethod
    def _judge(number: int, expected: Step, actual: Observation | Unsupported, result: VectorResult) -> bool:
        """Judge one step; True when it ends the vector (its report and those before it are then recorded)."""
        expect = expected.expect
        status: Status = "fail"
        found: tuple[str, ...]
        if isinstance(expect, Refused):
            if isinstance(actual, Unsupported):
                result.agreed = number
                return False
            found = (f"expected {{\"ok\": false}} for an invalid request, got "
                     f"{format_observed(actual.accepted, actual.state, actual.actions, actual.vars)}",)
        elif isinstance(actual, Unsupported):
            status, found = "not-implemented", (f"not implemented: {actual.error}",)
        else:
            found = compare(expect, actual)
            if not found:
                result.agreed = number
                return False
        steps = result.vector.steps
        result.steps = [StepReport(n, s.event, s.params, s.expect, None) for n, s in enumerate(steps[:number - 1], 1)]
        result.steps.append(StepReport(number, expected.event, expected.params, expect,
                                       None if isinstance(actual, Unsupported) else actual, found))
        result.status = status
        why = actual.error if isinstance(actual, Unsupported) else "; ".join(found)
        result.message = f"step {number} ({expected.event}): {why}"
        return True

    def _check_in_step(self, result: VectorResult) -> None:
        """After a wrong reply, and nothing else in flight, make sure it was not an earlier reply arriving late.

        The wait costs time, so only the first few wrong replies of a run get it: an
        adapter that answers out of order does so from the start.
        """
        if self.session is None:
            return
        self.stray_checks -= 1
        stray = self.session.transport.stray(STRAY_WAIT)
        if stray is not None:
            self.awaiting = len(result.vector.steps) + 1
            self._adapter_failed(result, AdapterFailure(
                "protocol", f"unsolicited output after the reply to step {result.agreed + 1} "
                            f"(replies out of order?): {stray}"))


class Requests:
    """Each step's request as a message and as its encoded line, and the reply that passes it at a glance.

    Made once per step object (the extension vectors share theirs), so a long run does not
    encode the same request or build the same expectation again and again. Equal
    expectations share one canonical reply (``canonical``), and ``passing`` keeps, by its
    id, the last reply line an adapter passed it with (``reset_passing`` the reset's): a
    vector whose reply lines all equal those passes without a line parsed or judged
    (``passed_lines``), as the same line gets the same verdict for the same expectation.
    """

    def __init__(self, table: Table) -> None:
        self.reset: Message = {"op": "reset", "machine": table.machine}
        self.reset_line = encode(self.reset)
        # By the id of a step, which ``steps`` keeps alive (so no other object takes its id):
        self.steps: dict[int, Step] = {}
        self.message_of: dict[int, Message] = {}
        self.line_of: dict[int, bytes] = {}
        self.expected: dict[int, Canonical | None] = {}
        self.expected_id: dict[int, int] = {}   # the id of its canonical reply (id(None) for a refusal)
        self.encoded: dict[tuple[Any, ...], tuple[Message, bytes]] = {}   # by event and parameter values
        self.canonical: dict[tuple[Any, ...], Canonical] = {}
        self.passing: dict[int, bytes] = {}
        self.reset_passing: bytes | None = None

    def passed_lines(self, vector: Vector) -> list[bytes | None]:
        """The reply lines that passed the vector's reset and steps' expectations before (None
        where none has yet): a vector answered with exactly these passes. (``of`` has seen its
        steps: it is read after being sent.)"""
        return [self.reset_passing, *map(self.passing.get, map(self.expected_id.__getitem__, map(id, vector.steps)))]

    def of(self, vector: Vector) -> tuple[list[Message], list[bytes]]:
        lines = self.lines(vector)
        return [self.reset, *map(self.message_of.__getitem__, map(id, vector.steps))], lines

    def lines(self, vector: Vector) -> list[bytes]:
        """The vector's requests as encoded lines (all a process transport needs), its steps learnt."""
        try:
            return [self.reset_line, *map(self.line_of.__getitem__, map(id, vector.steps))]
        except KeyError:
            pass
        for s in vector.steps:
            if id(s) not in self.steps:
                self.steps[id(s)] = s
                self.message_of[id(s)], self.line_of[id(s)] = self._request(s)
                canonical = self.expected[id(s)] = self._canonical(s.expect)
                self.expected_id[id(s)] = id(canonical)
        return [self.reset_line, *map(self.line_of.__getitem__, map(id, vector.steps))]

    def _request(self, s: Step) -> tuple[Message, bytes]:
        """A step's request, encoded once per event and parameter values (valid ones repeat a lot).

        The values' types are part of the key: 1 == True, but they are different requests.
        """
        key = (s.event, *s.params.items(), *map(type, s.params.values()))
        try:
            return self.encoded[key]
        except KeyError:
            pass
        except TypeError:   # an invalid request's parameter may be a list or an object
            key = ()
        message: Message = {"op": "event", "event": s.event, "params": dict(s.params)}
        made = message, encode(message)
        if key:
            self.encoded[key] = made
        return made


    def _canonical(self, expect: Expect | Refused) -> Canonical | None:
        """The exact replies (with vars, without) that pass a step, and the types of the vars; None for
        a refusal. One object for equal expectations (the types part of the key: 1 == True)."""
        if isinstance(expect, Refused):
            return None
        types = tuple(map(type, expect.vars.values()))
        key = (expect.accepted, expect.state, expect.actions, tuple(expect.vars.items()), types)
        found = self.canonical.get(key)
        if found is None:
            bare = {"ok": True, "accepted": expect.accepted, "state": expect.state, "actions": list(expect.actions)}
            found = self.canonical[key] = {**bare, "vars": dict(expect.vars)}, bare, types
        return found


Canonical = tuple[Message, Message, tuple[type, ...]]


def _as_expected(reply: Message, canonical: Canonical | None) -> bool:
    """Whether a reply is exactly one that passes (the common case, checked at C speed); else judge it in full."""
    if canonical is None:
        return reply.get("ok") is False
    full, bare, types = canonical
    if reply == bare:
        return True
    if reply != full:
        return False
    # == takes true for 1: the types must match too (at C speed when the vars come in declared order).
    values, expected = reply["vars"], full["vars"]
    return tuple(map(type, values.values())) == types or all(
        type(values[name]) is type(value) for name, value in expected.items())


def _where(vector: Vector, awaiting: int) -> str:
    """Which request an adapter failure interrupted: the reset, or step N with its event."""
    if awaiting == 0:
        return "reset"
    if not 0 < awaiting <= len(vector.steps):
        return f"after step {len(vector.steps)}"
    s = vector.steps[awaiting - 1]
    return f"step {awaiting} ({s.event}{format_params(s.params)})"


def row_coverage(table: Table, results: Sequence[VectorResult]) -> dict[str, int]:
    """How often each row fired in the steps the implementation got right (for the diagram overlay)."""
    counts: Counter[int] = Counter()
    for result in results:
        agreed = sum(not isinstance(s.expect, Refused) for s in result.vector.steps[:result.agreed])
        labels = vector_labels(table, result.vector)[:agreed]
        for _, rows in expected_run(table, labels):
            counts.update(row.index for row in rows)
    return {str(row.index): counts[row.index] for row in table.rows}


def format_params(params: Mapping[str, Any]) -> str:
    if not params:
        return ""
    return "(" + ", ".join(f"{k}={_json(v) if isinstance(v, int) or v is None else json.dumps(v)}"
                           for k, v in params.items()) + ")"


def format_observed(accepted: bool | None, state: str, actions: Sequence[str],
                    values: Mapping[str, Value] | None) -> str:
    text = f"{'accepted' if accepted else 'rejected'} -> {state} [{', '.join(actions)}]"
    if values is not None:
        text += " {" + ", ".join(f"{k}={_json(v)}" for k, v in values.items()) + "}"
    return text


def format_trace(result: VectorResult) -> str:
    """The vector step by step, with expected and actual outcomes, ending at the failure."""
    vector = result.vector
    lines = [f"{vector.id}  ({len(vector.steps)} steps; covers {', '.join(vector.covers) or '-'})"]
    for report in result.steps:
        e = report.expect
        mark = "  " if not report.problems else "✗ "
        lines.append(f"  {mark}{report.number:>3}. {report.event}{format_params(report.params)}")
        if isinstance(e, Refused):
            lines.append('         expected {"ok": false} (an invalid request; the configuration unchanged)')
        else:
            lines.append(f"         expected {format_observed(e.accepted, e.state, e.actions, e.vars)}")
        if report.actual is not None and report.problems:
            a = report.actual
            lines.append(f"         actual   {format_observed(a.accepted, a.state, a.actions, a.vars)}")
        lines.extend(f"         {problem}" for problem in report.problems)
    if result.failure:
        lines.extend("  " + line for line in result.failure.splitlines())
    elif result.message and (not result.steps or not result.steps[-1].problems):
        lines.append("  " + result.message)
    return "\n".join(lines)


def format_report(report: Report, listed: int = 20) -> str:
    passed, failed = report.count("pass"), report.count("fail")
    unimpl, not_run = report.count("not-implemented"), report.count("not-run")
    lines = []
    shortest = report.shortest_failure()
    if shortest is not None:
        lines.append("shortest failing vector:")
        lines.append(format_trace(shortest))
        lines.append("")
    bad = [r for r in report.not_passed() if r.status in ("fail", "not-implemented")]
    if bad:
        lines.append(f"{len(bad)} vectors did not pass" + (f" (first {listed}):" if len(bad) > listed else ":"))
        lines.extend(f"  {r.status:<15} {r.vector.id}: {r.message.splitlines()[0] if r.message else ''}"
                     for r in bad[:listed])
        lines.append("")
    if report.stopped:
        lines.append(f"{report.stopped}; {not_run} vectors not run")
    summary = (f"conform {report.machine}: {report.total} vectors: {passed} passed, {failed} failed, "
               f"{unimpl} not implemented")
    if not_run:
        summary += f", {not_run} not run"
    lines.append(f"{summary} ({report.seconds:.2f} s)")
    return "\n".join(lines)


def report_json(report: Report) -> dict[str, Any]:
    """``conform --json``: the counts, the shortest failing vector with its readable trace, and
    every vector that did not pass (passing ones only counted)."""
    def brief(result: VectorResult) -> dict[str, Any]:
        return {"id": result.vector.id, "status": result.status, "failed_step": result.failed_step,
                "message": result.message, "covers": list(result.vector.covers)}
    shortest = report.shortest_failure()
    return {"format": 1, "command": "conform", "machine": report.machine, "ok": report.ok,
            "stopped": report.stopped or None, "seconds": round(report.seconds, 3), "vectors": report.total,
            "counts": {status: report.count(status) for status in ("pass", "fail", "not-implemented", "not-run")},
            "shortest_failure": None if shortest is None else {**brief(shortest), "trace": format_trace(shortest)},
            "not_passed": [brief(r) for r in report.not_passed()]}


def junit_suite(report: Report) -> Suite:
    """One testcase per vector; not-implemented and not-run vectors are ``skipped``. Vectors an
    early stop left unmade (made lazily, so only counted) are one more skipped case that says
    how many, so the report's skipped count is every vector that did not run. The cases are
    made as the writer reads them (``JunitCases``)."""
    return Suite(report.machine, JunitCases(report), report.seconds)


class JunitCases(Sequence[Case]):
    """A report's JUnit cases, each made from its result when read: none is kept."""

    def __init__(self, report: Report) -> None:
        self.report = report

    def __len__(self) -> int:
        return len(self.report.results) + bool(self.report.unlisted)

    def __getitem__(self, index: int) -> Case:   # type: ignore[override]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        return self._case(self.report.results[index]) if index < len(self.report.results) else self._unlisted()

    def __iter__(self) -> Iterator[Case]:
        yield from map(self._case, self.report.results)
        if self.report.unlisted:
            yield self._unlisted()

    @staticmethod
    def _case(result: VectorResult) -> Case:
        if result.status == "fail":
            return Case(result.vector.id, "failure", result.message or "failed", format_trace(result),
                        seconds=result.seconds)
        if result.status != "pass":
            return Case(result.vector.id, "skipped", f"{result.status}: {result.message}", seconds=result.seconds)
        return Case(result.vector.id, seconds=result.seconds)

    def _unlisted(self) -> Case:
        report = self.report
        return Case(f"({report.unlisted} more vectors)", "skipped",
                    f"not-run: {report.stopped}; {report.unlisted} more vectors were not run")
