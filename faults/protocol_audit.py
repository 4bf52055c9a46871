"""Auditing the durable runtime's own protocol logs (``agentfsm.impl.durable.protocol_log``)
against ``spec/systems/durable-run-fixed.yaml``: does some interleaving of the system's steps
explain what the real processes did?

The system is one effect, two workers and a store; a real run has many effects and as many
processes as were started on it. So each effect of each run is audited on its own, on its
**window**: from the granted claim under which its first ``started`` was written (or an older
one whose owner writes the effect later), every claim
on the run until the effect's ``completed`` is acknowledged, and every write of that effect
(a late one after the completion too: the system rejects it).
In a window the processes are the system's workers in order of first appearance, a fencing
token counts from the window's first claim (token 1), and a claim's journal value is what
the effect's acknowledged writes before it made it (0 none, 1 started, 2 completed). Past
what the system describes, a window ends early and the prefix before is audited (a prefix of
a behaviour the system explains is explained too); such windows are counted as **cut**:

- a third process on the run (the system has two workers);
- the user's decision on the effect before its completion (a ``decided`` record: the system
  has none); a ``rerun`` decision begins another window of the effect, from the decider's
  write, as if it had claimed the run with the effect not started (the user allowed one
  execution more), so a second application of the decision shows there as a ``started`` the
  system rejects after the completion;
- a retry's second ``started`` (an idempotent retry after ``unknown``: the system's worker
  calls the tool again after a status query without journaling ``started`` again).

Records the runtime does not log (the workers' own steps, the lease running out, the tool's
execution and status answers) are searched for by the audit, within its bound. A log that is
not one (a line that is not JSON, a record without its fields) is a verdict too, never a
traceback.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentfsm.spec.audit_mapping import AuditMapping, load_mapping
from agentfsm.spec.system_load import load_system
from agentfsm.spec.system_log import LogError, read_logs, text
from agentfsm.spec.system_model import System
from agentfsm.verify.system.audit import audit_system
from agentfsm.verify.table.explore import ExplorationLimit

ROOT = Path(__file__).resolve().parent.parent
SYSTEM_FILE = ROOT / "spec" / "systems" / "durable-run-fixed.yaml"
MAPPING_FILE = ROOT / "spec" / "systems" / "audit" / "durable-run-fixed-runtime.yaml"
WORKERS = 2


@dataclass
class Window:
    """One effect's records, as the runtime mapping reads them, and why it was cut (if it was)."""

    run: str
    key: str
    records: list[dict[str, Any]] = field(default_factory=list)
    cut: str = ""


@dataclass
class Verdict:
    """What the audit of a protocol log found: windows explained, cut, and the unexplained ones."""

    windows: int = 0
    explained: int = 0
    cut: int = 0
    records: int = 0
    unexplained: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.unexplained

    def add(self, other: Verdict) -> None:
        self.windows += other.windows
        self.explained += other.explained
        self.cut += other.cut
        self.records += other.records
        self.unexplained += other.unexplained


def read_protocol(path: Path) -> list[dict[str, Any]]:
    """The log's records; LogError (``FILE:LINE: error: ...``) on one that is not a record."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise LogError(f"{path}: error: cannot read the log: {exc.strerror}") from None
    found = []
    for number, line in enumerate(raw.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise LogError(f"{path}:{number}: error: not a JSON record") from None
        if not isinstance(record, dict) or not all(isinstance(record.get(k), str) for k in ("run", "op", "owner")):
            raise LogError(f"{path}:{number}: error: a record needs its 'run', 'op' and 'owner'")
        if record["op"] in ("claim", "write") and not isinstance(record.get("result"), str):
            raise LogError(f"{path}:{number}: error: a {record['op']} record needs its 'result'")
        if record["op"] == "write" and not (isinstance(record.get("key"), str) and "token" in record):
            raise LogError(f"{path}:{number}: error: a write record needs its 'key' and 'token'")
        if any(k in record and (isinstance(record[k], bool) or not isinstance(record[k], int))
               for k in ("token", "attempt")):
            raise LogError(f"{path}:{number}: error: a record's 'token' and 'attempt' are integers")
        found.append(record)
    return found


def windows(records: Sequence[Mapping[str, Any]]) -> list[Window]:
    """Each effect's windows, in the order the effects were first started (a ``rerun`` decision
    begins another window of its effect)."""
    by_run: dict[str, list[Mapping[str, Any]]] = {}
    for record in records:
        by_run.setdefault(record["run"], []).append(record)
    found = []
    for run, own in by_run.items():
        keys = dict.fromkeys(r["key"] for r in own if r["op"] == "write" and r.get("what") == "started")
        for key in keys:
            found.append(_window(run, key, own, _first_claim(own, key)))
            found += [_window(run, key, own, i) for i, r in enumerate(own) if _rerun(r, key)]
    return found


def _rerun(record: Mapping[str, Any], key: str) -> bool:
    return record["op"] == "write" and record["key"] == key and record.get("what") == "decided" \
        and record.get("decision") == "rerun" and record["result"] == "ack"


def _first_claim(records: Sequence[Mapping[str, Any]], key: str) -> int:
    """The earliest granted claim under which a write of the effect was made: its first write's,
    or an older one still writing it (a stalled owner); the first write itself when the log
    holds no such claim (the audit then says so)."""
    first = next(i for i, r in enumerate(records) if r["op"] == "write" and r["key"] == key)
    tokens = {r["token"] for r in records if r["op"] == "write" and r["key"] == key}
    return next((i for i in range(first + 1) if records[i]["op"] == "claim"
                 and records[i]["result"] == "granted" and records[i].get("token") in tokens), first)


def _window(run: str, key: str, records: Sequence[Mapping[str, Any]], start: int) -> Window:
    """The window from ``start``: a granted claim, or a ``rerun`` decision (its decider then
    stands as a process that claimed the run with the effect not started), or the first write."""
    window = Window(run, key)
    base = int(records[start].get("token", 0))
    owners: list[str] = []
    journal = started = 0
    for n, record in enumerate(records[start:]):
        op, what = record["op"], record.get("what")
        if op not in ("claim", "write") or (op == "write" and record["key"] != key) or (op == "claim" and journal == 2):
            continue
        if record["owner"] not in owners:
            if len(owners) == WORKERS:
                window.cut = "a third process"
                break
            owners.append(record["owner"])
        shown = {"op": op, "owner": record["owner"], "result": record["result"]}
        if "token" in record:
            shown["token"] = max(0, int(record["token"]) - base + 1)
        if n == 0 and what == "decided":   # a rerun: the effect is to be performed again
            window.records.append({**shown, "op": "claim", "result": "granted", "journal": 0})
            continue
        if what == "decided" and journal < 2:
            window.cut = "the user's decision"
            break
        if what == "started" and started and int(record.get("attempt", 1)) > 1 and journal < 2:
            window.cut = "a retry's second started"
            break
        if op == "claim":
            window.records.append({**shown, "journal": journal} if record["result"] == "granted" else shown)
        elif what in ("started", "completed"):   # after the completion, one the system rejects
            window.records.append({**shown, "what": what})
            if record["result"] == "ack":
                journal = 1 if what == "started" else 2
                started += what == "started"
    return window


class Auditor:
    """The system and its runtime mapping, loaded once for many logs."""

    def __init__(self, system: System | None = None, mapping: AuditMapping | None = None) -> None:
        self.system = system or load_system(str(SYSTEM_FILE))
        self.mapping = mapping or load_mapping(self.system, MAPPING_FILE)
        self._seen: dict[str, str] = {}   # a window's records -> why unexplained ('' explained): most repeat

    def audit_log(self, path: Path) -> Verdict:
        """The verdict on one protocol log (a missing log: nothing to audit)."""
        if not path.exists():
            return Verdict()
        try:
            return self.audit_records(read_protocol(path))
        except LogError as exc:
            return Verdict(windows=1, unexplained=[str(exc)])

    def audit_records(self, records: Sequence[Mapping[str, Any]]) -> Verdict:
        verdict = Verdict()
        with tempfile.TemporaryDirectory(prefix="agentfsm-protocol-") as folder:
            for n, window in enumerate(windows(records)):
                verdict.windows += 1
                verdict.cut += bool(window.cut)
                verdict.records += len(window.records)
                if not window.records:
                    continue
                lines = "".join(json.dumps(r, sort_keys=True) + "\n" for r in window.records)
                if lines not in self._seen:
                    path = Path(folder) / f"{n}.jsonl"
                    path.write_text(lines)
                    self._seen[lines] = self._why(window, path)
                why = self._seen[lines]
                if why:
                    verdict.unexplained.append(f"run {window.run}, effect {window.key}: {why}")
                else:
                    verdict.explained += 1
        return verdict

    def _why(self, window: Window, path: Path) -> str:
        """Why no interleaving of the system explains the window ('' when one does)."""
        try:
            steps = read_logs(self.system, self.mapping, [str(path)])
        except LogError as exc:
            return str(exc)
        try:
            result = audit_system(self.system, self.mapping, steps)
        except ExplorationLimit as exc:
            return f"the audit's search went past its bound: {exc}"
        if result.ok:
            return ""
        first = result.unexplained[0]
        problem = f" ({first.problem})" if first.problem else ""
        return (f"record {first.line} of its window, {text(self.system, first)}{problem}, is explained by no "
                f"interleaving of {self.system.name}: {json.dumps(window.records[first.line - 1])}")
