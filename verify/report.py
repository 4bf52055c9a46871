"""Rendering verdicts: the readable summary, the ``--json`` object and JUnit XML."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from typing import Any

from agentfsm.verify.checks import CheckResult, Verdict
from agentfsm.verify.trace import format_trace

UNHANDLED_SHOWN = 12


def check_title(check: CheckResult) -> str:
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


def json_report(verdicts: Sequence[Verdict]) -> dict[str, Any]:
    return {"ok": all(v.ok for v in verdicts), "tables": [table_json(v) for v in verdicts]}


def junit_report(verdicts: Sequence[Verdict], seconds: Sequence[float]) -> bytes:
    suites = ET.Element("testsuites", name="agentfsm verify")
    for verdict, elapsed in zip(verdicts, seconds, strict=True):
        failures = sum(not c.ok for c in verdict.checks)
        suite = ET.SubElement(suites, "testsuite", name=verdict.table.machine, tests=str(len(verdict.checks)),
                              failures=str(failures), errors="0", time=f"{elapsed:.3f}",
                              file=verdict.table.file)
        for check in verdict.checks:
            case = ET.SubElement(suite, "testcase", classname=f"agentfsm.verify.{verdict.table.machine}",
                                 name=check_title(check))
            if not check.ok:
                failure = ET.SubElement(case, "failure", type=check.kind, message=check.message)
                if check.trace is not None:
                    failure.text = "\n".join(format_trace(verdict.table, check.trace))
    ET.indent(suites)
    data: bytes = ET.tostring(suites, encoding="utf-8", xml_declaration=True)
    return data + b"\n"
