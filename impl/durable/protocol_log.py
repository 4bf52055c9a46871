"""The protocol log: what each process did to own and write a run, as it happened, so that a
run can be audited against the system it claims to follow (``spec/systems/durable-run-fixed.yaml``,
through ``spec/systems/audit/durable-run-fixed-runtime.yaml``; docs/durability.md, "The
protocol log").

The journal says what was written; this log says who wrote it under which lease, and what the
store and the tools refused: a claim granted (its fencing token, its lease's ``seconds``) or
refused; each heartbeat's renewal (``renew``: ``ack`` with ``until``, the wall-clock time the
lease holds to at least, counted from before the renewal was sent; or ``lost``: the owner
learns its lease expired or was taken over); each fenced write of an effect's ``started``, ``completed``,
``unknown`` or a decision, acknowledged or rejected (a lost lease); each tool call (``call``, as
the tool is called) and what it returned (``returned``: ``done``, ``failed``, or ``refused``: the
tool fenced the caller's token out); each status query with its answer (``status``); and the
release at the end. One JSON Lines file per store, shared by its processes,
each record one ``write`` of one line to a file opened for appending (so processes' records do
not interleave within a line), never synced: a crash may lose the last records, never
reorder them. Writing it never fails a run: an error stops the log (``failed`` says why).
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from agentfsm.impl.stores.journal import COMPLETED, DECIDED, JSON, STARTED, UNKNOWN, Entry, Record
from agentfsm.impl.stores.leases import FencedStore, FencingStore, Lease, LeaseLost

ENV = "AGENTFSM_PROTOCOL_LOG"
"""A file to write the protocol log to instead of the store's own (``off``: none)."""
SUFFIX = ".protocol.jsonl"
LOGGED = (STARTED, COMPLETED, UNKNOWN, DECIDED)


def protocol_path(store: object) -> Path | None:
    """Where a store's protocol log is: ``$AGENTFSM_PROTOCOL_LOG``; beside a SQLite file
    (``FILE.protocol.jsonl``); for PostgreSQL, one file per database and schema under
    ``$XDG_STATE_HOME/agentfsm/`` (``~/.local/state``). None for a store with neither (memory)."""
    chosen = os.environ.get(ENV)
    if chosen:
        return None if chosen == "off" else Path(chosen)
    path = getattr(store, "path", None)
    if isinstance(path, Path):
        return Path(f"{path}{SUFFIX}")
    url = getattr(store, "url", None)
    if not isinstance(url, str):
        return None
    schema = getattr(store, "schema", None) or "public"
    return state_log(f"protocol-{schema}", url, schema)


def state_log(name: str, *where: str) -> Path | None:
    """A protocol log in the state folder (``$XDG_STATE_HOME/agentfsm/``, ``~/.local/state``), one per
    place ``where`` names (a database and schema, a Temporal server and namespace), or
    ``$AGENTFSM_PROTOCOL_LOG`` (``off``: none)."""
    chosen = os.environ.get(ENV)
    if chosen:
        return None if chosen == "off" else Path(chosen)
    state = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state")
    digest = hashlib.sha256("\0".join(where).encode()).hexdigest()[:16]
    return state / "agentfsm" / f"{name}-{digest}{SUFFIX}"


class ProtocolLog:
    """One process's writer of a store's protocol log (``owner``: the process, as its leases name it)."""

    def __init__(self, path: Path | None, owner: str, clock: Callable[[], float] = time.time) -> None:
        """``clock`` stamps the records (the audit reads leases' lapses from it): the wall clock,
        or a model-based walk's own time."""
        self.path = path
        self.owner = owner
        self.clock = clock
        self.failed: str | None = None
        self._fd: int | None = None
        self._lock = threading.Lock()   # the heartbeat's thread notes its beats too

    def note(self, run_id: str, op: str, **fields: JSON) -> None:
        """One record (``owner`` among ``fields``: a record for another owner of this log's writer)."""
        if self.path is None or self.failed is not None:
            return
        line = json.dumps({"at": round(self.clock(), 6), "owner": self.owner, "run": run_id, "op": op, **fields},
                          separators=(",", ":")) + "\n"
        try:
            with self._lock:
                if self._fd is None:
                    self.path.parent.mkdir(parents=True, exist_ok=True)
                    self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                os.write(self._fd, line.encode())
        except OSError as exc:
            self.failed = f"{self.path}: {exc.strerror}"

    def claimed(self, lease: Lease) -> None:
        self.note(lease.run_id, "claim", result="granted", token=lease.token, owner=lease.owner, seconds=lease.seconds)

    def renewed(self, lease: Lease, before: float, ok: bool) -> None:
        """A heartbeat's beat (``Heartbeat``'s ``noted``): the lease renewed from ``before`` on, or lost."""
        fields: dict[str, JSON] = {"until": round(before + lease.seconds, 6)} if ok else {}
        self.note(lease.run_id, "renew", result="ack" if ok else "lost", token=lease.token, owner=lease.owner,
                  **fields)

    def refused(self, run_id: str) -> None:
        self.note(run_id, "claim", result="refused")

    def released(self, lease: Lease) -> None:
        self.note(lease.run_id, "release", token=lease.token, owner=lease.owner)

    def wrote(self, lease: Lease, entries: Sequence[Entry], result: str) -> None:
        """Each effect record among ``entries`` written under ``lease``: ``sent`` (before the store is
        asked), then ``ack`` or ``rejected``."""
        for entry in entries:
            if entry.kind in LOGGED and "key" in entry.body:
                extra: dict[str, JSON] = {"attempt": entry.body["attempt"]} if entry.kind == STARTED else {}
                if entry.kind == DECIDED:
                    extra = {"decision": entry.body.get("decision")}
                self.note(lease.run_id, "write", what=entry.kind, key=entry.body["key"], token=lease.token,
                          result=result, owner=lease.owner, **extra)

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None


class LoggedStore(FencedStore):
    """A fenced store whose effect records are noted in the protocol log, with the write's answer
    (a sub-run's under the lease's run: its owner row is the one that fences them)."""

    def __init__(self, store: FencingStore, lease: Lease, log: ProtocolLog) -> None:
        super().__init__(store, lease)
        self.log = log

    def append(self, run_id: str, expect: int, entries: Sequence[Entry],
               snapshot: Mapping[str, JSON] | None = None) -> list[Record]:
        self.log.wrote(self.lease, entries, "sent")   # before the store is asked: a late answer is placed by it
        try:
            records = super().append(run_id, expect, entries, snapshot)
        except LeaseLost:
            if self._covers(run_id):
                self.log.wrote(self.lease, entries, "rejected")
            raise
        self.log.wrote(self.lease, entries, "ack")
        return records

    def noted(self, run_id: str, op: str, key: str, **fields: JSON) -> None:
        """An effect's tool call, its return or its status query, made under the lease
        (``DurableRun`` notes them through its store; a sub-run's under the lease's run, as its writes)."""
        self.log.note(self.lease.run_id, op, key=key, token=self.lease.token, owner=self.lease.owner, **fields)
