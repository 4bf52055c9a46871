"""Auditing the Temporal runtime's protocol log (``agentfsm.impl.temporal.activities``) against
``spec/systems/temporal-run.yaml``: does some interleaving of the system's steps explain what the
real workers did?

The system is one effect; a real log holds every effect of every run on a server. So each
effect of each run (its ``run`` and ``key``) is one **window**: its records in the log's order,
each given its worker slot (``slot``: the system hands attempt N to slot (N - 1) mod 2) and
translated by ``spec/systems/audit/temporal-run-runtime.yaml``. Past what the system describes,
a window ends early and the prefix before is audited (a prefix of a behaviour the system
explains is explained too); such windows are counted as **cut**:

- a third attempt (one stopped worker makes at most two in the system);
- Temporal's own retry of an attempt (``try`` above 1: an idempotent effect's retry policy;
  the system's effect is never retried by Temporal);
- an attempt that returned neither ``done``, ``failed`` nor ``refused`` (an agent's effect that
  goes on past its task: a sub-agent's child run, an interrupt).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from agentfsm.faults.protocol_audit import ROOT, Auditor, Verdict, Window, read_protocol
from agentfsm.spec.audit_mapping import load_mapping
from agentfsm.spec.system_load import load_system
from agentfsm.spec.system_log import LogError
from agentfsm.verify.system.audit import DEFAULT_LIMIT, DEFAULT_MAX_SILENT

SYSTEM = "temporal-run"
SYSTEM_FILE = ROOT / "spec" / "systems" / f"{SYSTEM}.yaml"
MAPPING_FILE = ROOT / "spec" / "systems" / "audit" / f"{SYSTEM}-runtime.yaml"
OPS = ("attempt", "check", "call", "returned", "status")
SLOTS = 2
RETURNED = ("done", "failed", "refused")


def windows(records: Sequence[Mapping[str, Any]]) -> list[Window]:
    """Each effect's window, in the order the effects first appear."""
    found: dict[tuple[str, str], Window] = {}
    attempts: dict[tuple[str, str], set[int]] = {}
    for record in records:
        if record["op"] not in OPS or not isinstance(record.get("key"), str):
            continue
        where = (record["run"], record["key"])
        window = found.setdefault(where, Window(*where))
        if window.cut:
            continue
        attempt = int(record.get("attempt", 0))
        seen = attempts.setdefault(where, set())
        if record["op"] != "status":
            seen.add(attempt)
        if len(seen) > SLOTS:
            window.cut = "a third attempt"
        elif int(record.get("try", 1)) > 1:
            window.cut = "Temporal's own retry of an attempt"
        elif record["op"] == "returned" and record.get("result") not in RETURNED:
            window.cut = f"an attempt that returned {record.get('result')!r}: the effect goes on past its task"
        if window.cut:
            continue
        shown = {k: record[k] for k in ("op", "result", "answer", "attempt") if k in record}
        window.add({**shown, "slot": (attempt - 1) % SLOTS}, record)
    return list(found.values())


def auditor(max_silent: int = DEFAULT_MAX_SILENT, limit: int = DEFAULT_LIMIT,
            system_file: Path = SYSTEM_FILE, mapping_file: Path = MAPPING_FILE) -> Auditor:
    """The system and its runtime mapping, loaded once for many logs."""
    system = load_system(str(system_file))
    return Auditor(system, load_mapping(system, mapping_file), max_silent, limit, cut=windows)


def audit_runs(log: Path, kinds: Mapping[str, Callable[[str], bool]],
               audit: Auditor | None = None) -> dict[str, Verdict]:
    """A campaign's protocol log audited per kind of run (``kinds``: which run ids are of each kind);
    a log that cannot be read is an unexplained window of every kind, with the reason."""
    audit = audit or auditor()
    try:
        records = read_protocol(log) if log.exists() else []
    except LogError as exc:
        return {kind: Verdict(windows=1, unexplained=[str(exc)]) for kind in kinds}
    return {kind: audit.audit_records([r for r in records if mine(r["run"])]) for kind, mine in kinds.items()}
