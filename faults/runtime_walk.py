"""The model-based walks on the real durable runtime: each of the system's workers is a real
``agentfsm run --resume --decide KEY=rerun`` process — the claim it takes (``claim_run``), the
recovery ``DurableRun.open`` makes (journaling ``started``, running the tool through its fenced
call, querying an unknown effect's status and acting on the answer, journaling ``completed``),
then the user's decision (``DurableRun.decide``) and the release — run in a thread of its own
that the scheduler hands the baton to: one thread runs at a time, and it stops (parks) before
each call the model's worker sends to the store or the tool. So the scheduler decides when each
claim, write, tool call, status query and tool return happens, and checks at each worker step
that the call the real code makes next is the message the model's worker sends (or that the
real process stopped where the model's worker went idle or done).

What the model's worker does not send, the real process does at once, in the step it follows:
the journal's reads, an ``unknown`` record (the recovery's, right after its claim), a ``decided``
record, and the ``completed`` (failed) record a call the tool refused leaves (the store refuses it:
the tool's fence is newer than the caller's lease). A crash kills a process where it is
parked, while none of its calls is out (see ``RuntimeProtocol.outside``).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Mapping, Sequence
from typing import Protocol, cast

from agentfsm.faults.chaos import COUNTER_TABLE
from agentfsm.faults.protocol_walk import Answer, RealProtocol
from agentfsm.impl.durable import ownership
from agentfsm.impl.durable.ledger import Fenced, Ledger, LedgerTool
from agentfsm.impl.durable.protocol_log import LoggedStore, ProtocolLog
from agentfsm.impl.durable.run import DecisionError, DurableRun, EffectCall, Options, StatusReply
from agentfsm.impl.stores.journal import COMPLETED, JSON, STARTED, Conflict, Entry, JournalError, Loaded, Record
from agentfsm.impl.stores.leases import Job, Lease, LeaseLost, LeasingStore, OwnedStore, RunHeld
from agentfsm.impl.workers.worker import Worker, submit
from agentfsm.spec.build import load_table_bytes
from agentfsm.spec.expr import Value

TABLE = load_table_bytes(COUNTER_TABLE.encode(), "counter.yaml")
STUCK = 120.0   # seconds a process may run between two calls before the walk calls it stuck
Request = tuple[str, int]   # the call a parked process makes next: (the model's event, the token; 0 for a claim)


class Killed(BaseException):
    """The scheduler crashes a process where it is parked (a BaseException, as a crash: nothing
    in the runtime handles it)."""


class Process:
    """One real process on the run, in a thread that runs only while the scheduler waits for it."""

    def __init__(self, real: RuntimeProtocol, who: int) -> None:
        self.real = real
        self.who = who
        self.owner = f"worker-{who}"
        self.request: Request | None = None
        self.answer: Answer | None = None
        self.stopped = ""          # why the process ended ('' while it runs)
        self.sent = False          # the model's worker sent the parked request
        self._kill = False
        self._go = threading.Semaphore(0)
        self._parked = threading.Semaphore(0)
        self.store = real.store.reopen()
        self._thread = threading.Thread(target=self._main, name=f"walk {self.owner}", daemon=True)
        self._thread.start()
        if not self._parked.acquire(timeout=STUCK):
            raise RuntimeError(f"{self.owner}'s process neither made a call nor ended within {STUCK:g} s")

    @property
    def ended(self) -> bool:
        return bool(self.stopped)

    def park(self, request: Request) -> None:
        """In the process's thread: wait for the scheduler to let ``request`` happen."""
        self.request, self.sent = request, False
        self._parked.release()
        self._go.acquire()
        self.request = None
        if self._kill:
            raise Killed()

    def resume(self) -> Answer | None:
        """The scheduler: let the parked call happen; the process runs to its next call, or ends."""
        self.answer = None
        self._go.release()
        if not self._parked.acquire(timeout=STUCK):
            raise RuntimeError(f"{self.owner}'s process neither made a call nor ended within {STUCK:g} s")
        return self.answer

    def kill(self) -> None:
        if not self.ended:
            self._kill = True
            self.resume()

    def _main(self) -> None:
        gate = self.real.gate(self)
        # the runtime's protocol log, as the process writes it, stamped by the walk's clock
        log = ProtocolLog(self.real.log.path, self.owner, self.real.now)
        try:
            self.stopped = self.real.body(self, gate, log)
        except RunHeld:
            self.stopped = "refused"
        except LeaseLost as exc:
            self.stopped = f"lease lost ({exc})"
        except Killed:
            self.stopped = "crashed"
        except Exception as exc:   # the walk reports it as the real code's answer
            self.stopped = f"{type(exc).__name__}: {exc}"
        finally:
            try:
                self.stopped = self.stopped or "stopped"
                log.close()
                self.store.close()
            finally:
                self._parked.release()


class GatedStore:
    """A process's own connection to the store, parked before each call the model's store takes
    (claim, the fenced writes of ``started`` and ``completed``); the rest passes through."""

    def __init__(self, process: Process) -> None:
        self.process = process
        self.store: OwnedStore = process.store

    def acquire(self, run_id: str, owner: str, seconds: float) -> Lease:
        self.process.park(("Claim", 0))
        try:
            lease = self.store.acquire(run_id, owner, seconds)
        except RunHeld:
            self.process.answer = ("Refused", ())
            raise
        self.process.answer = ("Granted", (lease.token, journal(self.store.records(run_id))))
        return lease

    def append(self, run_id: str, expect: int, entries: Sequence[Entry],
               snapshot: Mapping[str, JSON] | None = None, fence: Lease | None = None) -> list[Record]:
        event = _modelled(entries)
        if event is not None:
            self.process.park((event, fence.token if fence is not None else 0))
        try:
            records = self.store.append(run_id, expect, entries, snapshot, fence)
        except (LeaseLost, Conflict):   # refused by its token or by its version: the model's Rejected
            if event is not None:
                self.process.answer = ("Rejected", ())
            raise
        if event is not None:
            self.process.answer = ("Ack", ())
        return records

    def renew(self, lease: Lease) -> None:
        self.store.renew(lease)

    def release(self, lease: Lease) -> None:
        self.store.release(lease)

    def reopen(self) -> OwnedStore:
        return self.store.reopen()

    def create(self, run_id: str, machine: str, entry: Entry) -> Record:
        return self.store.create(run_id, machine, entry)

    def version(self, run_id: str) -> int:
        return self.store.version(run_id)

    def machine(self, run_id: str) -> str:
        return self.store.machine(run_id)

    def runs(self) -> list[str]:
        return self.store.runs()

    def load(self, run_id: str) -> Loaded:
        return self.store.load(run_id)

    def records(self, run_id: str, after: int = 0) -> list[Record]:
        return self.store.records(run_id, after)

    def discard_tail(self, run_id: str, seq: int) -> None:
        self.store.discard_tail(run_id, seq)

    def close(self) -> None:
        """The process closes its connection at its end."""


def _modelled(entries: Sequence[Entry]) -> str | None:
    """The model's store event a write is, or None for one the model's worker does not send: a
    ``started`` after a status query (the runtime journals it again before it acts on `not run`)
    and a failure recorded for a call the tool refused."""
    kinds = [e.kind for e in entries]
    if kinds == [STARTED] and entries[0].body.get("attempt") == 1:
        return "WriteStarted"
    if kinds == [COMPLETED] and entries[0].body.get("via") in ("run", "status") and not _refused(entries[0]):
        return "WriteCompleted"
    return None


def _refused(entry: Entry) -> bool:
    result = entry.body.get("result")
    return entry.body.get("outcome") == "failed" and isinstance(result, dict) and \
        str(result.get("error", "")).startswith(Fenced.__name__)


class GatedTool:
    """The ledger tool as a process calls it, parked before the call and before it returns."""

    fences = True

    def __init__(self, process: Process, tool: LedgerTool) -> None:
        self.process = process
        self.tool = tool

    def run(self, call: EffectCall) -> JSON:
        self.process.park(("Run", call.token))
        try:
            result = self.tool.run(call)
        except Fenced:
            self.process.answer = ("ToolRefused", ())
            raise
        self.process.park(("Finish", call.token))
        return result

    def status(self, call: EffectCall) -> StatusReply | None:
        self.process.park(("Status", call.token))
        reply = self.tool.status(call)
        self.process.answer = ("StatusDone", ()) if reply is not None and reply[0] == "done" else ("StatusNotRun", ())
        return reply


def journal(records: Sequence[Record]) -> int:
    """The effect's journal state as the model's store counts it: 0 none, 1 started, 2 completed."""
    kinds = {r.kind for r in records if r.kind in (STARTED, COMPLETED)}
    return 2 if COMPLETED in kinds else 1 if STARTED in kinds else 0


# The worker's actions as the calls the real process makes: the model's event at the store or tool.
_REQUESTS = {"Claim": "Claim", "WriteStarted": "WriteStarted", "WriteCompleted": "WriteCompleted",
             "Run": "Run", "Status": "Status"}


class RuntimeProtocol(RealProtocol):
    """The run on a real store and ledger, its workers real processes of the durable runtime."""

    claims_after_finish = True
    drives_workers = True

    def __init__(self, store: OwnedStore, ledger: Ledger, run_id: str, lease_seconds: float = 600.0,
                 log: ProtocolLog | None = None) -> None:
        super().__init__(store, ledger, run_id, lease_seconds, log, create=False)
        emitted = self._created()
        emitted.performer = lambda effect, retry: None   # the process that emitted it stopped there
        emitted.deliver("Tick")
        self.key = next(iter(emitted.st.effects))
        self.processes: dict[int, Process] = {}
        self.completed_at: int | None = None   # the token the effect's completion was acknowledged under

    def _created(self) -> DurableRun:
        """The run, made by the process that emits its effect (``agentfsm run --store``)."""
        return DurableRun.create(self.store, TABLE, self.run_id, {"Note": LedgerTool(self.ledger, False, True)})

    def close(self) -> None:
        for process in self.processes.values():
            process.kill()

    def gate(self, process: Process) -> GatedStore:
        """The process's connection to the store, parked before each call the model's store takes."""
        return GatedStore(process)

    def body(self, process: Process, gate: GatedStore, log: ProtocolLog) -> str:
        """An ``agentfsm run --resume --decide KEY=rerun`` process: its claim (``claim_run``), the
        recovery ``DurableRun.open`` makes, the decision, the release; why it ended."""
        lease = ownership.claim_run(gate, self.run_id, process.owner, self.seconds, log)
        try:
            tools = {"Note": GatedTool(process, LedgerTool(self.ledger, idempotent=False, has_status=True))}
            run = DurableRun.open(LoggedStore(gate, lease, log), TABLE, self.run_id, tools, options=Options())
            for key in list(run.st.effects):
                with contextlib.suppress(DecisionError):   # the CLI reports it (exit 2): nothing to decide
                    run.decide(key, "rerun")
        except Killed:
            raise   # a crashed process releases nothing
        except BaseException:
            _release(gate, lease, log)
            raise
        _release(gate, lease, log)
        return "done"

    def release(self, who: int, token: int) -> None:
        """The completing process released the run itself, at its end."""

    # -- the store's and the tool's steps: the parked call happens --------------------------

    def _call(self, who: int, request: Request) -> Answer | None:
        process = self.processes.get(who)
        if process is None or process.request != request:
            return (f"nothing: worker-{who}'s process is at {_request_text(process)}", ())
        return process.resume()

    def claim(self, who: int) -> Answer:
        answer = self._call(who, ("Claim", 0))
        return self._finished_token(answer)

    def write(self, kind: str, who: int, token: int) -> Answer:
        event = "WriteStarted" if kind == STARTED else "WriteCompleted"
        answer = self._call(who, (event, token))
        if answer == ("Ack", ()) and kind == COMPLETED:
            self.completed_at = token
        return answer or ("nothing", ())

    def run(self, token: int, who: int = 0) -> Answer | None:
        return self._call(who, ("Run", token))

    def status(self, token: int, who: int = 0) -> Answer:
        return self._call(who, ("Status", token)) or ("nothing", ())

    def finish(self, who: int) -> None:
        """The tool's call returns to the process that made it (parked there since ``Run``)."""
        process = self.processes.get(who)
        if process is not None and process.request is not None and process.request[0] == "Finish":
            process.resume()

    # -- the workers' steps: the real process's next call is the model's message ---------------

    def crash(self, who: int) -> None:
        process = self.processes.get(who)
        if process is not None:
            process.kill()

    def outside(self, kind: str, who: int) -> str:
        """A crash of a process whose call is out (sent, or the tool running it): the model's
        answer would reach the worker's next process, which a real process never gets (an answer
        goes back on the connection that asked)."""
        process = self.processes.get(who)
        if kind != "crash" or process is None or process.ended or process.request is None:
            return ""
        return "a crash with the process's call out" if process.sent or process.request[0] == "Finish" else ""

    def worker(self, who: int, event: str, sent: tuple[str, tuple[Value, ...]] | None, idle: bool) -> str:
        """'' when the real process agrees with the model's worker step, else what it does."""
        if event == "Resume":
            self.processes[who] = Process(self, who)
        process = self.processes.get(who)
        if process is None:
            return ""
        if sent is not None:
            wanted = (_REQUESTS[sent[0]], int(sent[1][1]) if len(sent[1]) > 1 else 0)
            if process.request != wanted:
                return _request_text(process)
            process.sent = True
            return ""
        if idle and not process.ended:
            return _request_text(process)
        return ""

    def _finished_token(self, answer: Answer | None) -> Answer:
        """A claim on a finished run: the model's store grants it without a new epoch (the token of
        the completing claim); the real store counts every claim. The journal state is compared."""
        if answer is not None and answer[0] == "Granted" and answer[1][1] == 2 and self.completed_at is not None:
            return ("Granted", (self.completed_at, 2))
        return answer or ("nothing", ())


def _release(gate: GatedStore, lease: Lease, log: ProtocolLog) -> None:
    """As ``Ownership.close``: the run given back; a lost lease's release changes nothing."""
    with contextlib.suppress(JournalError):
        gate.release(lease)
        log.released(lease)


def _request_text(process: Process | None) -> str:
    if process is None:
        return "no process"
    if process.ended:
        return f"stops ({process.stopped})"
    assert process.request is not None
    event, token = process.request
    return f"{event}({token})" if event != "Claim" else "Claim"



class QueueStore(OwnedStore, LeasingStore, Protocol):
    """A store that is a work queue too (PostgreSQL's)."""


class GatedQueue(GatedStore):
    """A pool worker's connection to the queue: its claim is the model's ``Claim`` (a run held by a
    live lease, or finished, is not claimed: the model's ``Refused``); the rest passes through."""

    def __init__(self, process: Process, queue: QueueStore) -> None:
        super().__init__(process)
        self.queue = queue
        self.transient_errors = queue.transient_errors

    def claim(self, owner: str, machines: Sequence[str], seconds: float) -> Lease | None:
        self.process.park(("Claim", 0))
        lease = self.queue.claim(owner, machines, seconds)
        if lease is None:
            self.process.answer = ("Refused", ())
        elif lease.run_id != self.process.real.run_id:
            self.process.answer = (f"Granted another run, {lease.run_id!r}", ())
        else:
            self.process.answer = ("Granted", (lease.token, journal(self.store.records(lease.run_id))))
        return lease

    def renew(self, lease: Lease) -> None:
        """The renewal a worker makes before each tool call (``GuardedTool``) is time, as the
        heartbeat's: the scheduler's. It is made while the model's lease is the worker's; once the
        model's lease ran out, it counts as made before (the model renews no lapsed lease)."""
        if self.process.real.holder == (self.process.who, lease.token):
            self.queue.renew(lease)

    def finish(self, lease: Lease, status: str, outcome: str) -> None:
        self.queue.finish(lease, status, outcome)

    def submit(self, run_id: str, machine: str, entry: Entry, script: Sequence[Mapping[str, JSON]]) -> None:
        self.queue.submit(run_id, machine, entry, script)

    def jobs(self) -> list[Job]:
        return self.queue.jobs()

    def requeue(self, run_id: str, expect: int, entries: Sequence[Entry]) -> None:
        self.queue.requeue(run_id, expect, entries)

    def pending(self) -> int:
        return self.queue.pending()


class PoolProtocol(RuntimeProtocol):
    """The run as a job of PostgreSQL's queue, its workers the pool's (``agentfsm worker``): each
    process is a ``Worker`` serving one job — the claim (``claim``: the job's lease), the recovery
    ``DurableRun.open`` makes through the lease-renewing tool (``GuardedTool``), the finish."""

    claims_after_finish = False   # a finished job is claimed by no worker: the walk takes no such claim

    def __init__(self, store: QueueStore, ledger: Ledger, run_id: str, lease_seconds: float = 600.0,
                 log: ProtocolLog | None = None) -> None:
        self.queue = store
        super().__init__(store, ledger, run_id, lease_seconds, log)

    def _created(self) -> DurableRun:
        """The run, submitted to the queue with no event left to deliver, then opened by the worker
        that emits its effect (and stopped there)."""
        submit(self.queue, TABLE, self.run_id, [])
        return DurableRun.open(self.store, TABLE, self.run_id, {"Note": LedgerTool(self.ledger, False, True)})

    def _lease(self, who: int, token: int) -> Lease:
        return Lease(self.run_id, TABLE.machine, token, f"worker-{who}", self.seconds)

    def _shift(self, set_to: str) -> None:
        with self.store._transaction():  # type: ignore[attr-defined]
            self.store._execute(f"UPDATE jobs SET expires_at = {set_to} WHERE run_id = ?",  # type: ignore[attr-defined]
                                (self.run_id,))

    def close(self) -> None:
        """The processes killed, the job retired: a later walk's worker claims its own run only."""
        super().close()
        self.store._execute("UPDATE jobs SET status = 'failed' WHERE run_id = ? AND status = 'queued'",  # type: ignore[attr-defined]
                            (self.run_id,))

    def gate(self, process: Process) -> GatedStore:
        return GatedQueue(process, cast(QueueStore, process.store))

    def body(self, process: Process, gate: GatedStore, log: ProtocolLog) -> str:
        """One ``Worker.serve_one``: why it ended (refused: nothing to claim; lease lost; failed; or
        the job's status, done or blocked)."""
        said: list[str] = []
        tools = {"Note": GatedTool(process, LedgerTool(self.ledger, idempotent=False, has_status=True))}
        worker = Worker(cast(GatedQueue, gate), {TABLE.machine: TABLE}, {TABLE.machine: tools}, process.owner,
                        self.seconds, warn=said.append, log=said.append, protocol=log)
        if not worker.serve_one():
            return "refused"
        tally = worker.tally
        ended = "lease lost" if tally.lost else "failed" if tally.failed else "done" if tally.done else "blocked"
        return f"{ended} ({'; '.join(said)})"
