"""Workers: processes that serve many scripted runs from one shared store, under leases.

A submitted run carries a **script**, the events its event source will deliver, in order
(an event script of ``agentfsm.impl.script``).
A worker claims a run, recovers it (``DurableRun.open``: the durable runtime's rules settle
whatever a previous owner left, ``unknown`` effects included), delivers the script with
stable event ids (``script-1``, ``script-2``, ...; ones already journaled come back as
duplicates) and marks the job done, or blocked when a decision is left to the user. Every
write carries the lease's fencing token; a worker that loses its lease stops at once and
leaves the run to the next claimant. Tools run only right after the lease was renewed, so
a tool never starts on a lease about to lapse.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from agentfsm.impl.durable.beat import Beats
from agentfsm.impl.durable.protocol_log import LoggedStore, ProtocolLog, protocol_path
from agentfsm.impl.durable.run import DurableRun, EffectCall, Options, StatusReply, Tool
from agentfsm.impl.durable.state import config_json
from agentfsm.impl.stores.journal import CREATED, JSON, Entry
from agentfsm.impl.stores.leases import Heartbeat, Lease, LeaseLost, LeasingStore
from agentfsm.spec.expr import Value
from agentfsm.spec.model import Table

ToolFactory = Callable[[Table], Mapping[str, Tool]]
Events = Sequence[tuple[str, Mapping[str, Value]]]
EVENT_ID = "script-{}"


def check_events(table: Table, events: Events) -> list[dict[str, JSON]]:
    """An event script's events as the queue keeps them; ValueError if one does not fit the table."""
    checked: list[dict[str, JSON]] = []
    for n, (name, params) in enumerate(events, 1):
        if name not in table.event_index:
            raise ValueError(f"event {n}: {table.machine} has no event {name!r}")
        try:
            table.event(name).param_values(params)
        except ValueError as exc:
            raise ValueError(f"event {n}: {exc}") from None
        checked.append({"event": name, "params": dict(params)})
    return checked


def submit(store: LeasingStore, table: Table, run_id: str, events: Events, now: float | None = None) -> None:
    """Create the run in its initial configuration and queue it with its events."""
    script = check_events(table, events)
    start = config_json(table, table.initial.index, table.initial_vars())
    entry = Entry(CREATED, {"machine": table.machine, "config": start}, time.time() if now is None else now)
    store.submit(run_id, table.machine, entry, script)


class GuardedTool:
    """A tool that renews the lease before it runs: it never starts on a lapsed lease. When the
    renewal cannot be made at all (the store is unreachable), the worker gives the run up as
    if it had crashed here, rather than let the runtime record a failure of a tool that never ran.
    While the tool runs, a heartbeat keeps renewing the lease, so a tool longer than the lease is
    not taken over from a live worker; one that stalls (or dies) stops renewing, and its
    result is then refused (the ``completed`` write is fenced)."""

    def __init__(self, tool: Tool, lease: Lease, renew: Callable[[Lease], None], heartbeat: bool = True,
                 noted: Callable[[Lease, float, bool], None] | None = None) -> None:
        self.tool = tool
        self.lease = lease
        self.renew = renew
        self.heartbeat = heartbeat
        self.noted = noted

    def run(self, call: EffectCall) -> JSON:
        try:
            self.renew(self.lease)
        except Exception as exc:
            raise LeaseLost(self.lease.run_id, self.lease.token, f"could not renew it: {exc}") from exc
        if not self.heartbeat:
            return self.tool.run(call)
        with Heartbeat(self.lease, self.renew, self.noted):
            return self.tool.run(call)

    def status(self, call: EffectCall) -> StatusReply | None:
        return self.tool.status(call)

    @property
    def fences(self) -> bool:
        return bool(getattr(self.tool, "fences", False))


@dataclass
class Tally:
    """What a worker did; summed over its threads."""

    claimed: int = 0
    done: int = 0
    blocked: int = 0
    failed: int = 0
    lost: int = 0
    abandoned: int = 0
    events: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, **counts: int) -> None:
        with self.lock:
            for name, n in counts.items():
                setattr(self, name, getattr(self, name) + n)

    def summary(self) -> str:
        return (f"{self.claimed} claimed, {self.done} done, {self.blocked} blocked, {self.failed} failed, "
                f"{self.lost} leases lost, {self.abandoned} abandoned, {self.events} events delivered")


@dataclass
class Worker:
    """One thread's worker: one store connection, one run at a time. A run whose serving raises
    is marked failed (a bad journal, a table that does not replay it, a bug), unless the store
    says the error is its own transient trouble: then the run is left to the lease's expiry.
    With ``beat`` (a second connection to the store, used by nothing else) a heartbeat renews
    the lease for the whole time a run is served, so a slow recovery or a loaded machine does
    not let a live worker's lease lapse; without it, only tool calls are covered. ``beats`` (a
    heartbeat process) renews it too, so a tool that keeps the GIL does not starve renewal."""

    store: LeasingStore
    tables: Mapping[str, Table]
    tools: Mapping[str, Mapping[str, Tool]]
    name: str
    lease_seconds: float = 30.0
    options: Options = field(default_factory=Options)
    tally: Tally = field(default_factory=Tally)
    log: Callable[[str], None] = lambda message: None   # a line per run served (the listing)
    warn: Callable[[str], None] = lambda message: None  # what went wrong: a lost lease, a failed run
    beat: LeasingStore | None = None
    beats: Beats | None = None
    protocol: ProtocolLog = field(default_factory=lambda: ProtocolLog(None, ""))
    """The protocol log its claims and fenced writes go to (``serve`` gives each worker the store's)."""

    def serve_one(self) -> bool:
        """Claim one run and serve it; False when there was nothing to claim."""
        lease = self.store.claim(self.name, sorted(self.tables), self.lease_seconds)
        if lease is None:
            return False
        self.protocol.claimed(lease)
        self.tally.add(claimed=1)
        try:
            with contextlib.ExitStack() as beating:
                if self.beats is not None:  # a process: no tool holding the GIL can starve it
                    beating.enter_context(self.beats.holding(lease))
                if self.beat is not None:
                    beating.enter_context(Heartbeat(lease, self.beat.renew, self.protocol.renewed))
                status, outcome = self._serve(lease)
            self.store.finish(lease, status, outcome)
            self.protocol.released(lease)
        except LeaseLost as exc:
            self.tally.add(lost=1)
            self.warn(f"{self.name}: {exc}")
            return True
        except self.store.transient_errors:
            raise
        except Exception as exc:
            self._fail(lease, f"{type(exc).__name__}: {exc}")
            return True
        self.tally.add(**{status: 1})
        self.log(f"{self.name}: run {lease.run_id} {status}: {outcome}")
        return True

    def close(self, quietly: bool = False) -> None:
        """Close the worker's connections; ``quietly`` when one may be broken already."""
        self.protocol.close()
        for store in (self.store, self.beat, self.beats):
            try:
                if store is not None:
                    store.close()
            except Exception as exc:
                if not quietly:
                    raise
                print(f"closing a broken store connection: {exc}", file=sys.stderr)

    def _fail(self, lease: Lease, message: str) -> None:
        try:
            self.store.finish(lease, "failed", message)
            self.tally.add(failed=1)
            self.warn(f"{self.name}: run {lease.run_id} failed: {message}")
        except LeaseLost:
            self.tally.add(lost=1)

    def _keep(self, lease: Lease) -> None:
        if lease.remaining() < lease.seconds / 2:
            self.store.renew(lease)

    def _serve(self, lease: Lease) -> tuple[str, str]:
        table = self.tables[lease.machine]
        tools = {name: GuardedTool(tool, lease, self.store.renew, heartbeat=self.beat is None,
                                   noted=self.protocol.renewed)
                 for name, tool in self.tools[lease.machine].items()}
        store = LoggedStore(self.store, lease, self.protocol)
        run = DurableRun.open(store, table, lease.run_id, tools, options=self.options)
        delivered = 0
        for k, item in enumerate(lease.script, 1):
            self._keep(lease)
            params = item.get("params")
            delivery = run.deliver(str(item["event"]), params if isinstance(params, dict) else None,
                                   event_id=EVENT_ID.format(k))
            delivered += delivery.status != "duplicate"
        self.tally.add(events=delivered)
        decisions = run.decisions()
        if decisions:
            return "blocked", "; ".join(d.message for d in decisions)
        return "done", f"{run.state} {run.vars}"


def serve(open_store: Callable[[], LeasingStore], tables: Mapping[str, Table], tools: ToolFactory, name: str,
          concurrency: int = 1, lease_seconds: float = 30.0, options: Options | None = None,
          exit_when_idle: bool = False, poll: float = 0.2, stop: threading.Event | None = None,
          log: Callable[[str], None] = lambda message: None,
          warn: Callable[[str], None] = lambda message: None, beat_url: str | None = None) -> Tally:
    """Run ``concurrency`` worker threads until ``stop`` is set (or, with ``exit_when_idle``,
    until no run is left queued). A thread whose connection breaks abandons its run to the
    lease's expiry and reconnects. With ``beat_url`` (the store's URL) each thread's leases are
    renewed by a heartbeat process too (``agentfsm.impl.durable.beat``)."""
    stop = stop or threading.Event()
    tally = Tally()

    def thread(index: int) -> None:
        worker_name = f"{name}/{index}"
        worker: Worker | None = None
        while not stop.is_set():
            try:
                if worker is None:
                    worker = Worker(open_store(), tables, {m: tools(t) for m, t in tables.items()}, worker_name,
                                    lease_seconds, options or Options(), tally, log, warn)
                    worker.beat = open_store()
                    worker.protocol = ProtocolLog(protocol_path(worker.store), worker_name)
                    worker.beats = None if beat_url is None else Beats(beat_url)
                if worker.serve_one():
                    continue
                if exit_when_idle and worker.store.pending() == 0:
                    break
                stop.wait(poll)
            except Exception as exc:
                tally.add(abandoned=1)
                warn(f"{worker_name}: {type(exc).__name__}: {exc}; reconnecting")
                if worker is not None:
                    worker.close(quietly=True)
                worker = None
                stop.wait(max(poll, 1.0))
        if worker is not None:
            worker.close()

    threads = [threading.Thread(target=thread, args=(i,), name=f"{name}/{i}", daemon=True)
               for i in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return tally
