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
  has none);
- an ``unknown`` written after the effect's acknowledged completion: the journal lost it (a
  repair of a damaged store); a ``rerun`` decision begins another window of the effect, from the decider's
  write, as if it had claimed the run with the effect not started (the user allowed one
  execution more), so a second application of the decision shows there as a ``started`` the
  system rejects after the completion;
- a retry's second ``started`` (an idempotent retry after ``unknown``: the system's worker
  calls the tool again after a status query without journaling ``started`` again).

The tool's records (``returned``, ``status``) are the worker's steps; where the system's worker
makes no record the runtime's is left out (the second ``started`` after a status query's
``not-run``: the worker calls at once; the fenced-out completion after a refused call: the
worker stops). A ``returned`` or a ``status`` stands just before its owner's next record: the
runtime logs it as the answer arrives, while the system's worker takes the answer and sends its
next message in one step, so other processes' records may come between the two. The lease's
expiry is placed, not searched for: before a claim granted over an earlier grant, unless the
log shows that lease still held (``held``). What the runtime does not
log (the workers' other steps, the tool's taking and finishing a call, faults) is searched for
by the audit, within its bound. A ``started`` that a killed process acknowledged but never
logged is put back where its successor's ``unknown`` proves it (``restore_lost_lines``). A log
that is not one (a line that is not JSON, a record without its fields) is a verdict too, never
a traceback.
"""

from __future__ import annotations

import bisect
import json
import re
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentfsm.spec.audit_mapping import AuditMapping, load_mapping
from agentfsm.spec.system_load import load_system
from agentfsm.spec.system_log import LogError, read_logs, text
from agentfsm.spec.system_model import System
from agentfsm.verify.system.audit import DEFAULT_LIMIT, DEFAULT_MAX_SILENT, SystemAudit, audit_system
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
    lines: list[int] = field(default_factory=list)   # each record's line in the log (0: placed or restored)
    restored: int = 0   # records a crash lost that the audit put back (``restore_lost_lines``)

    def add(self, record: dict[str, Any], source: Mapping[str, Any] | None) -> None:
        self.records.append(record)
        self.lines.append(int(source.get(LINE, 0)) if source is not None else 0)


@dataclass
class Verdict:
    """What the audit of a protocol log found: windows explained, cut, and the unexplained ones."""

    windows: int = 0
    explained: int = 0
    cut: int = 0
    records: int = 0
    restored: int = 0
    unexplained: list[str] = field(default_factory=list)
    failed: list[Window] = field(default_factory=list)   # the unexplained windows, in the log's order

    @property
    def ok(self) -> bool:
        return not self.unexplained

    def add(self, other: Verdict) -> None:
        self.windows += other.windows
        self.explained += other.explained
        self.cut += other.cut
        self.records += other.records
        self.restored += other.restored
        self.unexplained += other.unexplained
        self.failed += other.failed


def read_protocol(path: Path, notes: list[str] | None = None) -> list[dict[str, Any]]:
    """The log's records; LogError (``FILE:LINE: error: ...``) on one that is not a record. A
    last line cut short (no line end: a crash while it was written) is left out, said in ``notes``."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise LogError(f"{path}: error: cannot read the log: {exc.strerror}") from None
    found = []
    lines = raw.splitlines()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (UnicodeDecodeError, json.JSONDecodeError):
            if number == len(lines) and not raw.endswith(b"\n"):
                (notes if notes is not None else []).append(
                    f"{path}:{number}: the last line is cut short (a crash while it was written): left out")
                break
            raise LogError(f"{path}:{number}: error: not a JSON record") from None
        problem = _malformed(record)
        if problem:
            raise LogError(f"{path}:{number}: error: {problem}")
        found.append({**record, LINE: number})
    return found


LINE = "_line"   # the line a record was read from (read_protocol's, for the verdict)


def _malformed(record: object) -> str:
    """What a record lacks ('' when it is one)."""
    if not isinstance(record, dict) or not all(isinstance(record.get(k), str) for k in ("run", "op", "owner")):
        return "a record needs its 'run', 'op' and 'owner'"
    op = record["op"]
    if op in RESULTS and not isinstance(record.get(RESULTS[op]), str):
        return f"a {op} record needs its '{RESULTS[op]}'"
    if op in KEYED and not (isinstance(record.get("key"), str) and "token" in record):
        return f"a {op} record needs its 'key' and 'token'"
    if any(k in record and not _number(record[k], (int,)) for k in ("token", "attempt")):
        return "a record's 'token' and 'attempt' are integers"
    if any(k in record and not _number(record[k], (int, float)) for k in ("at", "until")):
        return "a record's 'at' and 'until' are numbers"
    return ""


def _number(value: object, kinds: tuple[type, ...]) -> bool:
    return isinstance(value, kinds) and not isinstance(value, bool)


RESULTS = {"claim": "result", "write": "result", "renew": "result", "returned": "result", "status": "answer"}
KEYED = ("write", "call", "returned", "status")


def windows(records: Sequence[Mapping[str, Any]]) -> list[Window]:
    """Each effect's windows, in the order the effects were first started (a ``rerun`` decision
    begins another window of its effect)."""
    by_run: dict[str, list[Mapping[str, Any]]] = {}
    for record in records:
        by_run.setdefault(record["run"], []).append(record)
    found = []
    for run, logged in by_run.items():
        own = place_late_acks(restore_lost_lines(logged))
        keys = dict.fromkeys(r["key"] for r in own if r["op"] == "write" and r.get("what") == "started")
        for key in keys:
            found.append(_window(run, key, own, _first_claim(own, key)))
            found += [_window(run, key, own, i) for i, r in enumerate(own) if _rerun(r, key)]
    return found


def restore_lost_lines(records: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """A run's records with each ``started`` a crash kept out of the log put back.

    A process logs a write after the store acknowledges it, so a process killed in between loses
    that line while the journal keeps the write. Its successor's acknowledged ``unknown`` for an
    effect no logged ``started`` precedes proves the ``started`` durable; it was written by the
    process that held the run before the successor's claim, if that process never logged again
    (it died) and had not released the run. The ``started`` is put back after that process's
    last line, marked ``restored``; any other ``unknown`` is left as logged, for the audit to judge."""
    after: dict[int, list[Mapping[str, Any]]] = {}
    started = set()
    for u, record in enumerate(records):
        if record["op"] != "write" or record["result"] != "ack":
            continue
        if record.get("what") == "started":
            started.add(record["key"])
        if record.get("what") != "unknown" or record["key"] in started:
            continue
        claims = [i for i, r in enumerate(records[:u]) if r["op"] == "claim" and r["result"] == "granted"]
        mine = next((i for i in reversed(claims) if records[i].get("token") == record["token"]), None)
        holder = next((records[i] for i in reversed(claims) if mine is not None and i < mine
                       and int(records[i]["token"]) < int(record["token"])), None)
        if mine is None or holder is None:
            continue
        lines = [i for i, r in enumerate(records)
                 if r["owner"] == holder["owner"] and r.get("token") == holder["token"]]
        if max(lines) > mine or any(records[i]["op"] == "release" for i in lines):
            continue
        after.setdefault(max(lines), []).append(
            {"run": record["run"], "owner": holder["owner"], "op": "write", "what": "started", "key": record["key"],
             "token": holder["token"], "result": "ack", "attempt": 1, "restored": True})
        started.add(record["key"])
    return [r for i, record in enumerate(records) for r in (record, *after.get(i, ()))]


def place_late_acks(records: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """A run's records with each acknowledged write placed where the store can have taken it,
    and the ``sent`` lines left out.

    A process logs ``sent`` before it asks the store for a write and the answer after. A process
    stopped in between (SIGSTOP, a long pause) logs an acknowledgement late, after another
    process's claim that the store granted after the write's commit: such an acknowledgement,
    under a token older than that claim's, moves to just before the first claim granted since
    its ``sent`` with a newer token (a fenced store takes no write under an older token after
    it). A write sent after that claim is not moved: the store took it under a superseded token."""
    sent: dict[tuple[Any, ...], int] = {}   # (owner, what, key, token): where its last ``sent`` is
    claims: list[tuple[int, int]] = []   # (where, token) of each granted claim, in order
    before: dict[int, list[Mapping[str, Any]]] = {}   # a claim's place: the acknowledgements moved before it
    moved: set[int] = set()
    for i, record in enumerate(records):
        op, result = record["op"], record.get("result")
        if op == "claim" and result == "granted":
            claims.append((i, int(record["token"])))
        if op != "write" or result not in ("sent", "ack"):
            continue
        write = tuple(record.get(k) for k in ("owner", "what", "key", "token"))
        if result == "sent":
            sent[write] = i
            continue
        if write not in sent:
            continue
        since = bisect.bisect(claims, (sent.pop(write), 1 << 62))
        newer = next((at for at, token in claims[since:] if token > int(record["token"])), None)
        if newer is not None:
            before.setdefault(newer, []).append(record)
            moved.add(i)
    placed: list[Mapping[str, Any]] = []
    for i, record in enumerate(records):
        placed += before.get(i, ())
        if i not in moved and not (record["op"] == "write" and record.get("result") == "sent"):
            placed.append(record)
    return placed


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


def held(records: Sequence[Mapping[str, Any]], holder: Mapping[str, Any], at: int) -> bool:
    """Whether the log shows the lease ``holder`` (its granted claim) still running when the claim
    ``records[at]`` was granted: its owner's heartbeat renewed it less than a lease before,
    counted from before the renewal was sent, and went on acting afterwards (a process that died
    may be taken over at once); it did not release it first. The store's own clock reads the same
    times or later, so such a grant is one the store made while the lease held."""
    owner, token, when = holder["owner"], holder.get("token"), records[at].get("at")
    if not isinstance(when, (int, float)):
        return False
    mine = [(i, r) for i, r in enumerate(records) if r["owner"] == owner and r.get("token") == token]
    if any(r["op"] == "release" for i, r in mine if i < at):
        return False
    if not any(i > at and r["op"] != "release" for i, r in mine):
        return False
    lasts = [r["until"] for r in (r for _, r in mine) if r["op"] == "renew" and r["result"] == "ack"
             and isinstance(r.get("until"), (int, float)) and r.get("at", when) <= when]
    return bool(lasts) and max(lasts) > when


def _window(run: str, key: str, records: Sequence[Mapping[str, Any]], start: int) -> Window:
    """The window from ``start``: a granted claim, or a ``rerun`` decision (its decider then
    stands as a process that claimed the run with the effect not started), or the first write.
    Before each claim granted while an earlier grant stands in the model (no completion since),
    the lease's expiry is a record of the window unless the log shows that lease still held."""
    window = Window(run, key)
    base = int(records[start].get("token", 0))
    owners: list[str] = []
    journal = started = 0
    holder: Mapping[str, Any] | None = None
    skip: set[tuple[str, str]] = set()   # (owner, what): a record the system's worker does not make
    answers: dict[str, tuple[dict[str, Any], Mapping[str, Any]]] = {}   # owner: its call's or query's answer
    for n, record in enumerate(records[start:]):
        op, what = record["op"], record.get("what")
        mine = op in ("claim", "write", "returned", "status")
        if not mine or (op != "claim" and record["key"] != key) or (op == "claim" and journal == 2):
            continue
        if record["owner"] in answers:
            window.add(*answers.pop(record["owner"]))
        if record["owner"] not in owners:
            if len(owners) == WORKERS:
                window.cut = "a third process"
                break
            owners.append(record["owner"])
        shown = {"op": op, "owner": record["owner"]}
        shown.update({k: record[k] for k in ("result", "answer") if k in record})
        if "token" in record:
            shown["token"] = max(0, int(record["token"]) - base + 1)
        if n == 0 and what == "decided":   # a rerun: the effect is to be performed again
            window.add({**shown, "op": "claim", "result": "granted", "journal": 0}, record)
            holder = record
            continue
        if what == "decided" and journal < 2:
            window.cut = "the user's decision"
            break
        if what == "unknown" and journal == 2 and record["result"] == "ack":   # the system's store never loses one
            window.cut = "a repair: the journal lost the completion"
            break
        if (record["owner"], str(what)) in skip and op == "write":
            skip.discard((record["owner"], str(what)))
            if what == "started" or record["result"] == "rejected":
                continue
        if what == "started" and started and int(record.get("attempt", 1)) > 1 and journal < 2:
            window.cut = "a retry's second started"
            break
        if op == "claim":
            if record["result"] == "granted":
                if holder is not None and not held(records, holder, start + n):
                    window.add({"op": "expire", "owner": holder["owner"]}, None)
                elif holder is not None:   # for the reader: why no expiry came before it
                    shown["held_by"] = holder["owner"]
                holder = record
            window.add({**shown, "journal": journal} if record["result"] == "granted" else shown, record)
        elif op == "status":
            answers[record["owner"]] = (shown, record)
            if record["answer"] == "not-run":   # the system's worker calls the tool at once: no second started
                skip.add((record["owner"], "started"))
        elif op == "returned":
            answers[record["owner"]] = (shown, record)
            if record["result"] == "refused":   # the system's worker stops: the runtime's completion is fenced out
                skip.add((record["owner"], "completed"))
        elif what in ("started", "completed"):   # after the completion, one the system rejects
            window.add({**shown, "what": what}, record)
            window.restored += bool(record.get("restored"))
            if record["result"] == "ack":
                journal = 1 if what == "started" else 2
                started += what == "started"
                holder = None if what == "completed" else holder
    for taken in answers.values():
        window.add(*taken)
    return window


class Auditor:
    """The system and its runtime mapping, loaded once for many logs."""

    def __init__(self, system: System | None = None, mapping: AuditMapping | None = None,
                 max_silent: int = DEFAULT_MAX_SILENT, limit: int = DEFAULT_LIMIT,
                 cut: Callable[[Sequence[Mapping[str, Any]]], list[Window]] | None = None) -> None:
        """``cut``: how a log is cut into windows (the durable runtime's ``windows`` by default;
        ``agentfsm.faults.temporal_audit.windows`` for a Temporal log)."""
        self.system = system or load_system(str(SYSTEM_FILE))
        self.mapping = mapping or load_mapping(self.system, MAPPING_FILE)
        self.max_silent = max_silent
        self.limit = limit
        self.cut = cut or windows
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
        for window in self.cut(records):
            verdict.windows += 1
            verdict.cut += bool(window.cut)
            verdict.records += len(window.records)
            verdict.restored += window.restored
            if not window.records:
                continue
            lines = _lines(window)
            if lines not in self._seen:
                self._seen[lines] = self._why(window)
            why = self._seen[lines]
            if why:
                verdict.unexplained.append(f"run {window.run}, effect {window.key}: {why}")
                verdict.failed.append(window)
            else:
                verdict.explained += 1
        return verdict

    def explain(self, window: Window) -> SystemAudit:
        """The system's audit of one window (LogError: a record the mapping cannot translate;
        ExplorationLimit: the search went past its bound)."""
        with tempfile.TemporaryDirectory(prefix="agentfsm-protocol-") as folder:
            path = Path(folder) / "window.jsonl"
            path.write_text(_lines(window))
            try:
                steps = read_logs(self.system, self.mapping, [str(path)])
            except LogError as exc:   # named by the record's line in the log, not the window's file
                raise LogError(re.sub(rf"^{re.escape(str(path))}:(\d+):", lambda m: _where(window, int(m[1])),
                                      str(exc))) from None
        return audit_system(self.system, self.mapping, steps, self.max_silent, self.limit)

    def _why(self, window: Window) -> str:
        """Why no interleaving of the system explains the window ('' when one does)."""
        try:
            result = self.explain(window)
        except LogError as exc:
            return str(exc)
        except ExplorationLimit as exc:
            return f"the audit's search went past its bound: {exc}"
        if result.ok:
            return ""
        first = result.unexplained[0]
        problem = f" ({first.problem})" if first.problem else ""
        return (f"record {first.line} of its window, {text(self.system, first)}{problem}, is explained by no "
                f"interleaving of {self.system.name}: {json.dumps(window.records[first.line - 1])}")


def _where(window: Window, n: int) -> str:
    line = window.lines[n - 1] if 0 < n <= len(window.lines) else 0
    return f"record {n} of its window" + (f" (line {line} of the log):" if line else ":")


def _lines(window: Window) -> str:
    return "".join(json.dumps(r, sort_keys=True) + "\n" for r in window.records)
