"""``agentfsm audit SYSTEM LOG...``: what the audit of logs against a system prints: of step logs
(records that are instance steps, or translated by the system's mapping), or of the durable
runtime's own protocol logs (``FILE.protocol.jsonl``: records with ``run``, ``op`` and ``owner``),
audited one effect's window at a time through the mapping ``audit/NAME-runtime.yaml`` (the durable
runtime's windows, or the Temporal runtime's for ``temporal-run``)."""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path
from typing import Any

from agentfsm.cli.exits import EXIT_FAILED, EXIT_OK, BadInput
from agentfsm.cli.util import json_envelope, load_systems
from agentfsm.diagrams.sequence import sequence_mermaid, sequence_svg
from agentfsm.faults.protocol_audit import Auditor, Verdict, read_protocol
from agentfsm.faults.temporal_audit import SYSTEM as TEMPORAL
from agentfsm.faults.temporal_audit import windows as temporal_windows
from agentfsm.spec.audit_mapping import AuditMapping, MappingError, load_mapping, plain_mapping
from agentfsm.spec.files import Parsed
from agentfsm.spec.system_log import LogError, LoggedStep, read_logs, split_arg, text
from agentfsm.spec.system_model import System
from agentfsm.spec.system_trace import SystemTrace, describe_config
from agentfsm.verify.system.audit import SystemAudit, audit_system
from agentfsm.verify.system.paths import format_steps


def default_mapping(system_path: str) -> Path | None:
    """The mapping kept with the system: ``audit/NAME.yaml`` in the system's folder, when it exists."""
    path = Path(system_path)
    candidate = path.parent / "audit" / path.name
    return candidate if candidate.exists() else None


def mapping_for(system: System, system_path: str, given: str | None, logs: list[str]) -> AuditMapping:
    chosen = None if given == "none" else given or default_mapping(system_path)
    if chosen is None:
        return plain_mapping(system, _unnamed(system, logs))
    try:
        return load_mapping(system, chosen)
    except MappingError as exc:
        raise BadInput(str(exc)) from None


def _unnamed(system: System, logs: list[str]) -> list[int]:
    """Without a mapping, the instances no log names are the silent ones (read the logs once more)."""
    named: set[str] = set()
    for arg in logs:
        owner, path = split_arg(arg)
        if owner is not None:
            named.add(owner)
            continue
        try:
            lines = Path(path).read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError):
            continue   # read_logs reports it
        for line in lines:
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(record, dict) and isinstance(record.get("instance"), str):
                named.add(record["instance"])
    return [inst.index for inst in system.instances if inst.name not in named]


def protocol_logs(logs: list[str]) -> bool:
    """Whether the logs are the durable runtime's protocol logs: each one's first record has the
    protocol log's ``run``, ``op`` and ``owner`` and names no instance."""
    for arg in logs:
        owner, path = split_arg(arg)
        if owner is not None:
            return False
        try:
            with Path(path).open("rb") as f:
                first = next((line for line in f if line.strip()), b"")
            record = json.loads(first)
        except (OSError, ValueError):
            return False
        if not (isinstance(record, dict) and {"run", "op", "owner"} <= set(record) and "instance" not in record):
            return False
    return True


def run_system_audit(args: argparse.Namespace, path: str, parsed: Parsed) -> int:
    if args.overrides:
        raise BadInput("--set overrides a table's constants; a system sets its instances' own (its 'set:')")
    [system] = load_systems([path], parsed)
    if protocol_logs(args.log):
        return run_protocol_audit(args, system, path)
    mapping = mapping_for(system, path, args.mapping, args.log)
    try:
        logs = read_logs(system, mapping, args.log)
    except LogError as exc:
        raise BadInput(str(exc)) from None
    result = audit_system(system, mapping, logs, args.max_silent, args.max_configurations)
    if args.chart and not result.ok:
        _draw(system, result, args.chart)
    if args.json:
        print(json.dumps(json_envelope("audit", audit_json(system, result))))
    else:
        print("\n".join(format_system_audit(system, result)))
    return EXIT_OK if result.ok else EXIT_FAILED


def _draw(system: System, result: SystemAudit, out: str) -> None:
    trace = SystemTrace(system.name, None, "audit", tuple(label for label, _, _ in result.prefix))
    steps = list(result.prefix)
    data = (sequence_mermaid(system, steps, trace).encode() if out.endswith((".mmd", ".mermaid"))
            else sequence_svg(system, steps, trace))
    try:
        Path(out).write_bytes(data)
    except OSError as exc:
        raise BadInput(f"cannot write {out}: {exc.strerror}") from None


def compact(system: System, configs: tuple[Any, ...]) -> list[str]:
    """A set of configurations, one line per instance with its distinct states and mailboxes."""
    if len(configs) == 1:
        return describe_config(system, configs[0])
    per_instance: list[dict[str, None]] = [{} for _ in system.instances]
    for config in configs:
        for k, line in enumerate(describe_config(system, config)[:len(system.instances)]):
            per_instance[k].setdefault(line.strip().split(": ", 1)[1], None)
    return [f"    {inst.name}: " + " | ".join(seen) for inst, seen in zip(system.instances, per_instance, strict=True)]


def format_system_audit(system: System, result: SystemAudit) -> list[str]:
    if result.ok:
        return [f"audit {system.name}: {result.records} logged steps explained by an interleaving of the system "
                f"({result.configurations:,} configurations searched)"]
    lines = []
    for step in result.unexplained:
        why = f": {step.problem}" if step.problem else ""
        lines.append(f"{step.where()}: not explained: {text(system, step) if step.event else 'record'}{why}")
    lines.append(f"  just before it the system could be in {len(result.before)} configuration(s):")
    lines.extend(compact(system, result.before))
    lines.append(f"  one interleaving explaining the {result.explained} steps before it:")
    shown = format_steps(system, list(result.prefix)) if result.prefix else []
    lines.extend(shown[:shown.index("  reached:")] if shown else ["    (none: it is the first)"])
    first = result.unexplained[0]
    lines.append(f"audit {system.name}: {result.explained} of {result.records} logged steps explained; "
                 f"the logs part from the system at {first.where()} (first)")
    return lines


def audit_json(system: System, result: SystemAudit) -> dict[str, Any]:
    def record(step: LoggedStep) -> dict[str, Any]:
        return {"file": step.file, "line": step.line, "step": text(system, step) if step.event else "",
                "problem": step.problem}
    return {"system": system.name, "steps": result.records, "explained": result.explained, "ok": result.ok,
            "configurations": result.configurations,
            "unexplained": [record(s) for s in result.unexplained],
            "before": [describe_config(system, c) for c in result.before],
            "prefix": SystemTrace(system.name, None, "audit",
                                  tuple(label for label, _, _ in result.prefix)).to_json(system)["steps"]}


def runtime_mapping(system: System, system_path: str, given: str | None) -> AuditMapping:
    """The runtime's mapping: ``--mapping``, else ``audit/NAME-runtime.yaml`` beside the system."""
    path = Path(system_path)
    chosen = given or path.parent / "audit" / f"{path.stem}-runtime.yaml"
    if given == "none" or not Path(chosen).exists():
        raise BadInput(f"{system_path}: a runtime's protocol log is audited through a mapping: no "
                       f"{chosen} (give one with --mapping FILE)")
    try:
        return load_mapping(system, chosen)
    except MappingError as exc:
        raise BadInput(str(exc)) from None


def run_protocol_audit(args: argparse.Namespace, system: System, system_path: str) -> int:
    """The runtime's protocol logs: every effect's window explained, or the first that is not
    with the configurations just before its first unexplained record and the prefix drawn."""
    auditor = Auditor(system, runtime_mapping(system, system_path, args.mapping), args.max_silent,
                      args.max_configurations, cut=temporal_windows if system.name == TEMPORAL else None)
    verdict, notes = Verdict(), list[str]()
    first: tuple[str, SystemAudit, dict[str, Any]] | None = None
    for log in args.log:
        try:
            records = read_protocol(Path(log), notes)
        except LogError as exc:
            raise BadInput(str(exc)) from None
        found = auditor.audit_records(records)
        verdict.add(found)
        if first is None and found.failed:
            window = found.failed[0]
            try:
                result = auditor.explain(window)
            except LogError as exc:   # a record no rule of the mapping translates (an answer it does not know)
                raise BadInput(f"{log}: run {window.run}, effect {window.key}: {exc}") from None
            shown = window.records[result.unexplained[0].line - 1] if result.unexplained else {}
            first = log, _located(result, log, window.lines), shown
    if first is not None and args.chart:
        _draw(system, first[1], args.chart)
    summary = {"logs": len(args.log), "effects": verdict.windows, "explained": verdict.explained, "cut": verdict.cut,
               "records": verdict.records, "restored": verdict.restored, "unexplained_effects": verdict.unexplained,
               "notes": notes}
    if args.json:
        audit = audit_json(system, first[1]) if first is not None else {"system": system.name, "ok": True}
        print(json.dumps(json_envelope("audit", {**audit, "protocol": summary, "ok": verdict.ok})))
        return EXIT_OK if verdict.ok else EXIT_FAILED
    lines = [f"note: {note}" for note in notes]
    if verdict.restored:
        lines.append(f"note: {verdict.restored} started write(s) a killed process acknowledged but never logged, "
                     "put back from its successor's unknown")
    if first is not None:
        lines += format_system_audit(system, first[1])[:1]
        lines.append(f"  the record, as its effect's window reads it: {json.dumps(first[2])}")
        lines += format_system_audit(system, first[1])[1:-1]
        lines += [f"  ({why})" for why in verdict.unexplained[1:]]
    where = f"; the logs part from the system at {first[1].unexplained[0].where()} (first)" if first else ""
    lines.append(f"audit {system.name}: {verdict.explained} of {verdict.windows} effects' "
                 f"windows explained by an interleaving of the system ({verdict.cut} cut where the log goes "
                 f"past what the system describes, {verdict.records} records){where}")
    print("\n".join(lines))
    return EXIT_OK if verdict.ok else EXIT_FAILED


def _located(result: SystemAudit, log: str, lines: list[int]) -> SystemAudit:
    """The window's audit with its records named by their lines in the log (an expiry the
    audit placed: by the line of the record after it)."""
    def line(n: int) -> int:
        return next((k for k in lines[n - 1:] if k), lines[n - 1])
    return dataclasses.replace(result, unexplained=tuple(dataclasses.replace(step, file=log, line=line(step.line))
                                                         for step in result.unexplained))
