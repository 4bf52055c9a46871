"""What ``verify``, ``replay`` and ``export`` print for a system file."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from agentfsm.cli.exits import BadInput
from agentfsm.cli.util import load_systems, print_violations
from agentfsm.spec.errors import TableError
from agentfsm.spec.files import Parsed, parsed_document
from agentfsm.spec.system_load import load_system
from agentfsm.spec.system_model import System
from agentfsm.spec.system_trace import SystemTrace, SystemTraceError, load_system_trace
from agentfsm.verify.junit import Case, Suite
from agentfsm.verify.report import Unverified, check_title
from agentfsm.verify.system.checks import SysCheck, SysVerdict
from agentfsm.verify.system.paths import format_steps, replay
from agentfsm.verify.system.replay import system_violations


def load_or_unverified(path: str, parsed: Parsed) -> System | Unverified:
    """The system (from its document in ``parsed``, the file already parsed), or (its diagnostics
    printed) why it is not verified."""
    try:
        return load_system(path, parsed_document(parsed, path))
    except TableError as exc:
        for diagnostic in exc.diagnostics:
            print(diagnostic, file=sys.stderr)
        return Unverified(path, None, "load", "\n".join(map(str, exc.diagnostics)))


def unverified_json(item: Unverified) -> dict[str, Any]:
    return {"file": item.file, "system": item.machine, "ok": False,
            "error": {"kind": item.kind, "message": item.message}}


def unverified_suite(item: Unverified, seconds: float) -> Suite:
    """A system that was not verified: one error case, as a table's."""
    name = f"system.{item.machine}" if item.machine else item.file
    what = "load" if item.kind == "load" else "explore"
    return Suite(name, (Case(what, "error", item.message, item.message, item.kind),), seconds, item.file)


def text_report(verdict: SysVerdict) -> list[str]:
    ex, system = verdict.exploration, verdict.system
    rate = f", {len(ex.configs) / ex.seconds:,.0f}/s" if ex.seconds > 0.05 else ""
    symmetric = "symmetry reduction on" if ex.symmetry else "symmetry reduction off"
    symmetric += "; partial-order reduction on" if ex.reduction else ""
    lines = [f"{system.file}: system {system.name}: {len(ex.configs):,} configurations, {len(ex.edges_src):,} "
             f"steps ({ex.seconds:.2f}s{rate}; {symmetric})"]
    for check in verdict.checks:
        title = check_title(check)
        lines.append(f"  {'ok  ' if check.ok else 'FAIL'} {title}: {check.message}")
        if check.trace is not None:
            lines.append("       counterexample:")
            lines.extend("     " + line for line in format_steps(system, replay(system, check.trace.steps),
                                                                  check.trace.loop_start))
    if verdict.longer is not None:
        lines.append(f"  note: {verdict.longer}")
    failed = sum(not c.ok for c in verdict.checks)
    lines.append("  all checks hold" if not failed else f"  {failed} check(s) FAILED")
    return lines


def check_json(system: System, check: SysCheck) -> dict[str, Any]:
    return {"kind": check.kind, "name": check.name, "ok": check.ok, "message": check.message,
            "counterexample": check.trace.to_json(system) if check.trace is not None else None}


def junit_suite(verdict: SysVerdict) -> Suite:
    """A system's checks as a JUnit suite named ``system.NAME`` (a table's is its machine), a
    failed check's counterexample as the failure's text."""
    system = verdict.system
    cases = []
    for check in verdict.checks:
        title = check_title(check)
        if check.ok:
            cases.append(Case(title))
            continue
        steps = [] if check.trace is None else format_steps(system, replay(system, check.trace.steps),
                                                            check.trace.loop_start)
        cases.append(Case(title, "failure", check.message, "\n".join(steps), check.kind))
    return Suite(f"system.{system.name}", tuple(cases), verdict.exploration.seconds, system.file)


def verdict_json(verdict: SysVerdict) -> dict[str, Any]:
    ex = verdict.exploration
    return {"file": verdict.system.file, "system": verdict.system.name, "configurations": len(ex.configs),
            "steps": len(ex.edges_src), "symmetry": ex.symmetry, "partial_order_reduction": ex.reduction,
            "shortest_counterexamples": verdict.longer is None, "ok": verdict.ok,
            "checks": [check_json(verdict.system, c) for c in verdict.checks]}


def read_text(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"cannot read {path}: {exc}") from None


def load_trace_file(system: System, path: str) -> SystemTrace:
    try:
        return load_system_trace(system, read_text(path))
    except SystemTraceError as exc:
        raise BadInput(f"{path}: {exc}") from None


def run_replay_system(system_path: str, trace_path: str, parsed: Parsed) -> int:
    [system] = load_systems([system_path], parsed)
    trace = load_trace_file(system, trace_path)
    title = f"{trace.kind} {trace.check}" if trace.check else (trace.kind or "trace")
    try:
        steps = replay(system, trace.steps)
    except SystemTraceError as exc:
        raise BadInput(f"{trace_path}: {exc}") from None
    print(f"{system.name}: replaying {title} ({len(trace.steps)} steps)")
    print("\n".join(format_steps(system, steps, trace.loop_start)))
    return print_violations(system_violations(system, trace, steps))


def trace_json_text(system: System, trace: SystemTrace) -> bytes:
    return (json.dumps(trace.to_json(system), indent=2) + "\n").encode()
