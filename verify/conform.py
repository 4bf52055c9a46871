"""Running vectors against an implementation and judging what it reports.

Each vector starts with a reset. A step passes when the implementation reports the
expected ``accepted``, ``state`` and ``actions`` (in order), and the expected value for
every variable it chooses to report. The first step that differs ends the vector. A
transport failure (crash, hang, garbage) fails the vector with the adapter's stderr and
the next vector gets a fresh process; several such failures in a row end the run, so a
broken adapter costs a few timeouts, not one per vector.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from agentfsm.spec.expr import Value
from agentfsm.spec.model import Table
from agentfsm.verify.harness import AdapterFailure, Observation, Session, Transport, Unsupported
from agentfsm.verify.junit import Case, Suite
from agentfsm.verify.vectorfile import Expect, Vector, expected_run, vector_labels

Status = Literal["pass", "fail", "not-implemented", "not-run"]
MAX_BROKEN_IN_A_ROW = 3
STRAY_WAIT = 0.05
STRAY_CHECKS = 5


@dataclass(frozen=True)
class StepReport:
    """One step as run: ``actual`` is what came back (None if nothing usable did)."""

    number: int
    event: str
    params: Mapping[str, Value]
    expect: Expect
    actual: Observation | None
    problems: tuple[str, ...] = ()


@dataclass
class VectorResult:
    vector: Vector
    status: Status
    steps: list[StepReport] = field(default_factory=list)
    message: str = ""
    failure: str = ""
    seconds: float = 0.0

    @property
    def failed_step(self) -> int | None:
        """The 1-based step that failed (0: the reset), or None."""
        if self.status == "pass":
            return None
        return self.steps[-1].number if self.steps else 0


@dataclass
class Report:
    machine: str
    results: list[VectorResult]
    seconds: float
    stopped: str = ""

    def count(self, status: Status) -> int:
        return sum(1 for r in self.results if r.status == status)

    @property
    def ok(self) -> bool:
        return all(r.status == "pass" for r in self.results) and not self.stopped

    def shortest_failure(self) -> VectorResult | None:
        failing = [r for r in self.results if r.status == "fail"]
        return min(failing, key=lambda r: (len(r.vector.steps), r.vector.id), default=None)


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
    """Runs vectors over transports made by ``connect``, replacing a broken one."""

    def __init__(self, table: Table, connect: Callable[[], Transport]) -> None:
        self.table = table
        self.connect = connect
        self.session: Session | None = None
        self.stray_checks = STRAY_CHECKS
        self.initial = (table.initial.name, table.vars_dict(table.initial_vars()))

    def run(self, vectors: Iterable[Vector], stop_at_first_failure: bool = False,
            progress: Callable[[int], None] | None = None) -> Report:
        start = time.monotonic()
        results: list[VectorResult] = []
        broken = 0
        pending = list(vectors)
        stopped = ""
        try:
            for done, vector in enumerate(pending):
                result = self.run_vector(vector)
                results.append(result)
                broken = broken + 1 if self.session is None and result.status == "fail" else 0
                if progress is not None:
                    progress(done + 1)
                if broken >= MAX_BROKEN_IN_A_ROW:
                    stopped = f"stopped after the adapter failed {broken} vectors in a row"
                elif stop_at_first_failure and result.status != "pass":
                    stopped = "stopped at the first failure"
                if stopped:
                    results.extend(VectorResult(v, "not-run") for v in pending[done + 1:])
                    break
        finally:
            self.close()
        return Report(self.table.machine, results, time.monotonic() - start, stopped)

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
        start = time.monotonic()
        result = VectorResult(vector, "pass")
        try:
            self._run_steps(vector, result)
        except AdapterFailure as exc:
            result.status, result.message, result.failure = "fail", f"{exc.kind}: {exc.message}", exc.describe()
            self.close()
        result.seconds = time.monotonic() - start
        return result

    def _run_steps(self, vector: Vector, result: VectorResult) -> None:
        if self.session is None:
            self.session = Session(self.connect())
        reply = self.session.reset(self.table.machine)
        if isinstance(reply, Unsupported):
            result.status, result.message = "not-implemented", f"reset: {reply.error}"
            return
        problems = _compare_config(*self.initial, reply)
        if problems:
            result.status, result.message = "fail", "reset: " + "; ".join(problems)
            return
        for number, expected in enumerate(vector.steps, start=1):
            actual = self.session.event(expected.event, expected.params)
            if isinstance(actual, Unsupported):
                result.steps.append(StepReport(number, expected.event, expected.params, expected.expect, None,
                                               (f"not implemented: {actual.error}",)))
                result.status, result.message = "not-implemented", f"step {number}: {actual.error}"
                return
            found = compare(expected.expect, actual)
            result.steps.append(StepReport(number, expected.event, expected.params, expected.expect, actual,
                                           found))
            if found:
                result.status, result.message = "fail", f"step {number}: " + "; ".join(found)
                self._check_in_step(number)
                return


    def _check_in_step(self, number: int) -> None:
        """After a wrong reply, make sure it was not an earlier reply arriving late.

        The wait costs time, so only the first few wrong replies of a run get it: an
        adapter that answers out of order does so from the start.
        """
        assert self.session is not None
        if self.stray_checks <= 0:
            return
        self.stray_checks -= 1
        stray = self.session.transport.stray(STRAY_WAIT)
        if stray is not None:
            raise AdapterFailure("protocol", f"unsolicited output after the reply to step {number} "
                                 f"(replies out of order?): {stray}")


def row_coverage(table: Table, results: Sequence[VectorResult]) -> dict[str, int]:
    """How often each row fired in the steps the implementation got right (for the diagram overlay)."""
    counts: Counter[int] = Counter()
    for result in results:
        agreed = [s for s in result.steps if not s.problems and s.actual is not None]
        labels = vector_labels(table, result.vector)[:len(agreed)]
        for _, rows in expected_run(table, labels):
            counts.update(row.index for row in rows)
    return {str(row.index): counts[row.index] for row in table.rows}


def format_params(params: Mapping[str, Value]) -> str:
    if not params:
        return ""
    return "(" + ", ".join(f"{k}={_json(v)}" for k, v in params.items()) + ")"


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
    bad = [r for r in report.results if r.status in ("fail", "not-implemented")]
    if bad:
        lines.append(f"{len(bad)} vectors did not pass" + (f" (first {listed}):" if len(bad) > listed else ":"))
        lines.extend(f"  {r.status:<15} {r.vector.id}: {r.message.splitlines()[0] if r.message else ''}"
                     for r in bad[:listed])
        lines.append("")
    if report.stopped:
        lines.append(f"{report.stopped}; {not_run} vectors not run")
    summary = (f"conform {report.machine}: {len(report.results)} vectors: {passed} passed, {failed} failed, "
               f"{unimpl} not implemented")
    if not_run:
        summary += f", {not_run} not run"
    lines.append(f"{summary} ({report.seconds:.2f} s)")
    return "\n".join(lines)


def junit_suite(report: Report) -> Suite:
    """One testcase per vector; not-implemented and not-run vectors are ``skipped``."""
    cases = []
    for result in report.results:
        if result.status == "fail":
            case = Case(result.vector.id, "failure", result.message or "failed", format_trace(result),
                        seconds=result.seconds)
        elif result.status != "pass":
            case = Case(result.vector.id, "skipped", f"{result.status}: {result.message}", seconds=result.seconds)
        else:
            case = Case(result.vector.id, seconds=result.seconds)
        cases.append(case)
    return Suite(report.machine, tuple(cases), report.seconds)
