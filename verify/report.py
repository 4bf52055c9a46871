"""Rendering verdicts: the readable summary, the ``--json`` object and JUnit XML.

The ``--json`` object is versioned (``"format": 1``); docs/verifier.md states what stays
stable and docs/verify-json.schema.json is its JSON Schema.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from agentfsm.spec.trace import format_trace
from agentfsm.verify.junit import Case, Suite
from agentfsm.verify.table.checks import CheckResult, Verdict

JSON_FORMAT = 1


@dataclass(frozen=True)
class Unverified:
    """A table that was not verified: it did not load, or its exploration stopped early."""

    file: str
    machine: str | None
    kind: Literal["load", "limit"]
    message: str

UNHANDLED_SHOWN = 12


class Named(Protocol):
    """A check of a table or of a system, as far as its title goes."""

    @property
    def kind(self) -> str: ...

    @property
    def name(self) -> str | None: ...


def check_title(check: Named) -> str:
    return f"{check.kind} {check.name}" if check.name else check.kind


def text_report(verdict: Verdict, seconds: float, verbose: bool = False) -> list[str]:
    ex, table = verdict.exploration, verdict.table
    rate = f", {ex.count / seconds:,.0f}/s" if seconds > 0.05 else ""
    lines = [f"{table.file}: {table.machine}: {ex.count:,} configurations, {ex.transitions:,} transitions "
             f"({seconds:.2f}s{rate})"]
    for check in verdict.checks:
        mark = "ok  " if check.ok else "FAIL"
        lines.append(f"  {mark} {check_title(check)}: {check.message}")
        if check.trace is not None:
            lines.append("       counterexample:")
            lines.extend(format_trace(table, check.trace, indent="       "))
    pairs = verdict.unhandled()
    if pairs:
        total = sum(p.pairs for p in pairs)
        lines.append(f"  info unhandled (configuration, event) pairs: {total:,} over {len(pairs)} (state, event) "
                     f"combinations, policy {table.unhandled.policy}")
        shown = pairs if verbose else pairs[:UNHANDLED_SHOWN]
        for p in shown:
            lines.append(f"       {p.state} x {p.event}: {p.pairs:,}")
        if len(shown) < len(pairs):
            lines.append(f"       ... {len(pairs) - len(shown)} more (--verbose lists all)")
    fires = ", ".join(f"{row}: {n:,}" for row, n in ex.row_fires.items())
    lines.append(f"  info row fire counts: {fires}")
    verdict_word = "all checks hold" if verdict.ok else f"{sum(not c.ok for c in verdict.checks)} check(s) FAILED"
    lines.append(f"  {verdict_word}")
    return lines


def summary_line(verdict: Verdict, seconds: float) -> str:
    """The whole verdict on one line (``verify --summary``, what ``make verify`` prints)."""
    ex, table = verdict.exploration, verdict.table
    failed = sum(not c.ok for c in verdict.checks)
    word = f"{len(verdict.checks)} checks hold" if not failed else f"{failed} of {len(verdict.checks)} checks FAILED"
    return (f"{table.file}: {table.machine}: {ex.count:,} configurations, {ex.transitions:,} transitions, "
            f"{word} ({seconds:.2f}s)")


def check_json(check: CheckResult) -> dict[str, Any]:
    out: dict[str, Any] = {"kind": check.kind, "name": check.name, "ok": check.ok, "message": check.message,
                           "counterexample": check.trace.step_dicts() if check.trace is not None else None}
    if check.trace is not None and check.trace.loop_start is not None:
        out["loop_start"] = check.trace.loop_start
    return out


def table_json(verdict: Verdict) -> dict[str, Any]:
    ex = verdict.exploration
    return {
        "file": verdict.table.file, "machine": verdict.table.machine,
        "configurations": ex.count, "transitions": ex.transitions,
        "checks": [check_json(c) for c in verdict.checks],
        "unhandled": [{"state": p.state, "event": p.event, "pairs": p.pairs} for p in verdict.unhandled()],
        "row_fires": [{"row": row, "fires": n} for row, n in ex.row_fires.items()],
    }


def unverified_json(item: Unverified) -> dict[str, Any]:
    return {"file": item.file, "machine": item.machine, "ok": False,
            "error": {"kind": item.kind, "message": item.message}}


def json_report(results: Sequence[Verdict | Unverified]) -> dict[str, Any]:
    tables = [unverified_json(r) if isinstance(r, Unverified) else {**table_json(r), "ok": r.ok} for r in results]
    return {"format": JSON_FORMAT, "ok": all(t["ok"] for t in tables), "tables": tables}


def junit_suites(results: Sequence[Verdict | Unverified], seconds: Sequence[float]) -> list[Suite]:
    """One suite per table, one case per check; an unverified table is one error case."""
    suites = []
    for result, elapsed in zip(results, seconds, strict=True):
        if isinstance(result, Unverified):
            what = "load" if result.kind == "load" else "explore"
            suites.append(Suite(result.machine or result.file, (Case(what, "error", result.message, result.message,
                                                                     result.kind),), elapsed, result.file))
            continue
        cases = []
        for check, took in zip(result.checks, result.seconds, strict=True):
            if check.ok:
                cases.append(Case(check_title(check), seconds=took))
                continue
            detail = "\n".join(format_trace(result.table, check.trace)) if check.trace is not None else ""
            cases.append(Case(check_title(check), "failure", check.message, detail, check.kind, took))
        suites.append(Suite(result.table.machine, tuple(cases), elapsed, result.table.file))
    return suites
