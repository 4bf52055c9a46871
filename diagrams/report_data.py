"""What the HTML report shows, as plain JSON-able data built from the same results ``--json`` prints.

One entry per table, system, conformance run or crash campaign: its verdict, figures and
checks, and for each counterexample every step as the reference semantics takes it (the
state after it, the rows it fired, every variable), so the page's script only draws; it
never re-derives a step. Entries that fail come first, and so do failing checks within an
entry. Pure: the table pictures come in as SVG text, drawn by the caller.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from agentfsm.diagrams.model import line_of
from agentfsm.diagrams.sequence import Arrow, step_items
from agentfsm.diagrams.violation import verdict as system_verdict
from agentfsm.spec.expr import Value
from agentfsm.spec.model import Table
from agentfsm.spec.system_model import System
from agentfsm.spec.system_trace import SystemTrace, label_text, shown_params
from agentfsm.spec.trace import Trace, describe_label, walk
from agentfsm.spec.vectorfile import Expect, Refused, vector_labels
from agentfsm.verify.conformance.conform import row_coverage
from agentfsm.verify.conformance.harness import Observation
from agentfsm.verify.conformance.results import Report, VectorResult
from agentfsm.verify.report import Unverified, check_title
from agentfsm.verify.system.checks import SysVerdict
from agentfsm.verify.system.paths import replay
from agentfsm.verify.system.step import Config, initial_config
from agentfsm.verify.table.checks import Verdict

FORMAT = 1
Entry = dict[str, Any]


def page_data(command: str, entries: Sequence[Entry], pictures: Mapping[str, str]) -> dict[str, Any]:
    """The whole page: entries failing first (else in the run's order), and each table's picture once."""
    ordered = sorted(entries, key=lambda entry: bool(entry["ok"]))
    return {"format": FORMAT, "command": command, "ok": all(e["ok"] for e in entries), "entries": ordered,
            "pictures": dict(pictures)}


def _value(value: Value) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def _checks(checks: list[Entry]) -> list[Entry]:
    return sorted(checks, key=lambda check: bool(check["ok"]))


def table_rows(table: Table) -> list[Entry]:
    """Each row as the rows table of the page lists it."""
    rows = []
    for row in table.rows:
        line = line_of(row)
        rows.append({"row": row.index, "source": "*" if row.wildcard else row.source, "target": row.target,
                     "text": line.head, "updates": line.tail})
    return rows


def _table_base(table: Table, kind: str, ok: bool) -> Entry:
    return {"kind": kind, "name": table.machine, "title": table.title or table.machine, "file": table.file,
            "ok": ok, "picture": table.machine, "rows": table_rows(table),
            "variables": [v.name for v in table.variables]}


def table_trace(table: Table, trace: Trace) -> Entry:
    """Every step of ``trace`` replayed: label, status, rows fired, the configuration after it."""
    state, values = table.initial.name, [_value(v) for v in table.initial_vars()]
    steps = []
    for walked in walk(table, trace.steps):
        step: Entry = {"label": describe_label(table, walked.label)}
        if walked.error is not None:
            step.update(status=f"{walked.error.kind} error", error=walked.error.message,
                        rows=[row.index for row in walked.error.rows], state=state, vars=values, actions=[],
                        broken=[])
        else:
            result = walked.result
            assert result is not None
            state, values = table.states[result.state].name, [_value(v) for v in result.vars]
            broken = [inv.name for inv in table.invariants if not inv.fn((result.state, *result.vars))]
            step.update(status=result.status, rows=[row.index for row in result.rows], state=state, vars=values,
                        actions=list(result.actions), broken=broken)
        steps.append(step)
    return {"kind": "table", "initial": {"state": table.initial.name,
                                         "vars": [_value(v) for v in table.initial_vars()]},
            "steps": steps, "loop_start": trace.loop_start}


def table_entry(verdict: Verdict) -> Entry:
    """A verified table: figures, every check (failing first), coverage from the exploration's row fires."""
    ex, table = verdict.exploration, verdict.table
    entry = _table_base(table, "table", verdict.ok)
    entry["figures"] = [["configurations", ex.count], ["transitions", ex.transitions],
                        ["checks", len(verdict.checks)], ["failed", sum(not c.ok for c in verdict.checks)]]
    entry["coverage"] = {str(row): count for row, count in ex.row_fires.items()}
    entry["checks"] = _checks([{"title": check_title(c), "ok": c.ok, "message": c.message,
                                "trace": table_trace(table, c.trace) if c.trace is not None else None}
                               for c in verdict.checks])
    return entry


def unverified_entry(item: Unverified, kind: str = "table") -> Entry:
    """A table or system that was not verified: why, as one failed check without a trace."""
    name = item.machine or item.file
    what = "did not load" if item.kind == "load" else "exploration stopped"
    return {"kind": kind, "name": name, "title": name, "file": item.file, "ok": False, "figures": [],
            "checks": [{"title": what, "ok": False, "message": item.message, "trace": None}]}


def _instances(system: System, config: Config) -> list[Entry]:
    insts, boxes, stalled, _ = config
    shown = []
    for inst, (state, values), box, flag in zip(system.instances, insts, boxes, stalled, strict=True):
        table = inst.table
        shown.append({"state": table.states[state].name,
                      "vars": [_value(v) for v in values],
                      "mailbox": [f"{event}{shown_params(params)}" for event, params in box], "stalled": flag})
    return shown


def system_trace(system: System, trace: SystemTrace) -> Entry:
    """A system counterexample: per step its text, whether it is a fault, the chart's rows and every instance."""
    steps = replay(system, trace.steps)
    shown = []
    for n, (label, config, effect) in enumerate(steps, start=1):
        items = [{"arrow": True, "from": item.source, "to": item.target, "text": item.text, "alarm": item.dropped}
                 if isinstance(item, Arrow) else
                 {"arrow": False, "over": item.over, "text": item.text, "alarm": item.alarm}
                 for item in step_items(system, n, label, effect)]
        shown.append({"label": label_text(system, label), "fault": label[0] in ("crash", "lose", "duplicate", "stall"),
                      "instance": system.instances[label[1]].name, "items": items,
                      "instances": _instances(system, config)})
    return {"kind": "system", "lifelines": [inst.name for inst in system.instances],
            "variables": [[v.name for v in inst.table.variables] for inst in system.instances],
            "initial": _instances(system, initial_config(system)), "steps": shown, "loop_start": trace.loop_start,
            "verdict": system_verdict(system, trace, steps)}


def system_entry(verdict: SysVerdict) -> Entry:
    """A verified system: figures and every check, counterexamples as charts with instance columns."""
    ex, system = verdict.exploration, verdict.system
    checks = [{"title": check_title(c), "ok": c.ok, "message": c.message,
               "trace": system_trace(system, c.trace) if c.trace is not None else None}
              for c in verdict.checks]
    return {"kind": "system", "name": system.name, "title": system.name, "file": system.file, "ok": verdict.ok,
            "figures": [["configurations", len(ex.configs)], ["steps", len(ex.edges_src)],
                        ["checks", len(verdict.checks)], ["failed", sum(not c.ok for c in verdict.checks)]],
            "checks": _checks(checks)}


def _observed(actual: Observation | None) -> Entry | None:
    if actual is None:
        return None
    return {"accepted": actual.accepted, "state": actual.state, "actions": list(actual.actions),
            "vars": None if actual.vars is None else {k: _value(v) for k, v in actual.vars.items()}}


def _expected(expect: Expect | Refused) -> Entry:
    if isinstance(expect, Refused):
        return {"refused": True}
    return {"accepted": expect.accepted, "state": expect.state, "actions": list(expect.actions),
            "vars": {k: _value(v) for k, v in expect.vars.items()}}


def vector_trace(table: Table, result: VectorResult) -> Entry:
    """A failing vector up to the step that failed: the table's rows and configuration (what was
    expected) beside what the implementation reported."""
    labels = iter(walk(table, vector_labels(table, result.vector)))
    state, values = table.initial.name, [_value(v) for v in table.initial_vars()]
    steps = []
    for report in result.steps:
        rows: list[int] = []
        if report.number > 0 and not isinstance(report.expect, Refused):
            walked = next(labels)
            if walked.result is not None:
                rows = [row.index for row in walked.result.rows]
                state, values = table.states[walked.result.state].name, [_value(v) for v in walked.result.vars]
        steps.append({"label": "reset" if report.number == 0 else f"{report.event}"
                      + (f"({', '.join(f'{k}={v}' for k, v in report.params.items())})" if report.params else ""),
                      "status": "failed" if report.problems else "agreed", "rows": rows, "state": state,
                      "vars": values, "actions": [], "broken": [], "expected": _expected(report.expect),
                      "actual": _observed(report.actual), "problems": list(report.problems)})
    return {"kind": "vector", "initial": {"state": table.initial.name,
                                          "vars": [_value(v) for v in table.initial_vars()]},
            "steps": steps, "loop_start": None, "vector": result.vector.id, "failure": result.failure}


def conform_entry(table: Table, report: Report) -> Entry:
    """A conformance run: counts, the shortest failing vector stepped, the other failures listed,
    coverage from the steps the implementation got right."""
    entry = _table_base(table, "conform", report.ok)
    entry["figures"] = [[status, report.count(status)] for status in ("pass", "fail", "not-implemented", "not-run")]
    entry["coverage"] = row_coverage(table, report.results)
    shortest = report.shortest_failure()
    checks = [{"title": f"vector {r.vector.id}", "ok": False,
               "message": r.message or r.status,
               "trace": vector_trace(table, r) if r is shortest else None}
              for r in report.not_passed()]
    if report.stopped:
        checks.append({"title": "run stopped", "ok": False, "message": report.stopped, "trace": None})
    passed = report.count("pass")
    if passed:
        checks.append({"title": f"{passed} vector{'s' * (passed != 1)} passed", "ok": True, "message": "",
                       "trace": None})
    entry["checks"] = checks
    return entry


def crash_entry(data: Mapping[str, Any]) -> Entry:
    """A crash campaign from its ``--json`` object: its counts as figures, each violation a failed check."""
    figures = [[key, value] for key, value in data.items()
               if isinstance(value, int) and not isinstance(value, bool)]
    checks = [{"title": f"{v.get('kind', 'violation')}: {v['scenario']}", "ok": False, "message": v["message"],
               "trace": None} for v in data.get("violations", [])]
    if not checks:
        checks = [{"title": "recovery", "ok": True, "message": str(data.get("skipped", "every scenario recovered")),
                   "trace": None}]
    return {"kind": "crash", "name": str(data["machine"]), "title": str(data["machine"]), "file": "",
            "ok": bool(data["ok"]), "figures": figures, "checks": checks}
