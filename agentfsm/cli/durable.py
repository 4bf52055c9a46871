"""``agentfsm journal`` (a run's records, step by step, and where it stands) and the durable
mode of ``agentfsm run`` (``--store PATH [--resume]``)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import resource
import signal
import sys
from collections.abc import Callable, Coroutine, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from agentfsm.cli.exits import EXIT_BAD_INPUT, EXIT_FAILED, EXIT_OK, BadInput
from agentfsm.cli.util import deprecated, json_envelope, load_tables
from agentfsm.impl.driver import StateChange
from agentfsm.impl.durable import ownership as claims
from agentfsm.impl.durable.beat import Beats
from agentfsm.impl.durable.children import child_runs, lease_run, parent_effect
from agentfsm.impl.durable.protocol_log import LoggedStore, ProtocolLog, protocol_path
from agentfsm.impl.durable.run import DecisionError, DurableRun, EffectCall, StatusReply, Tool, repair
from agentfsm.impl.durable.state import ReplayError
from agentfsm.impl.llm.client import LlmClient
from agentfsm.impl.play import Durability, Reporter, held_runs, in_store, play_agent, report_decisions
from agentfsm.impl.script import AgentScript, EventScript
from agentfsm.impl.stores.journal import (
    INTERRUPT,
    JSON,
    Boundary,
    Conflict,
    CorruptJournal,
    Entry,
    JournalError,
    Loaded,
    OtherMachine,
    Record,
    RunExists,
    Store,
    StoreFailed,
    UnknownRun,
)
from agentfsm.impl.stores.leases import Heartbeat, Lease, LeaseLost, OwnedStore, RunHeld, owner_name
from agentfsm.impl.stores.sqlite import SqliteStore
from agentfsm.impl.stores.urls import StoreURLError, is_postgres, open_store, sqlite_path
from agentfsm.impl.stores.wal import FRAME_HEADER, WAL_HEADER, committed_end
from agentfsm.impl.workers.worker import check_events
from agentfsm.spec import Table, bundled_tables, load_table


def add_run_options(run: argparse.ArgumentParser) -> None:
    run.add_argument("--store", metavar="URL", help="journal every step and effect in this store (a durable run): "
                                                    "a SQLite file path, sqlite:///PATH or postgresql://...")
    run.add_argument("--resume", action="store_true", help="with --store: recover the run after a crash and "
                                                           "continue the script where the journal ends")
    run.add_argument("--run-id", metavar="ID", help="with --store: the run's id in the store (default: run)")
    run.add_argument("--decide", action="append", default=[], metavar="ID=DECISION",
                     help="with --resume: settle a pending decision first: an unknown effect's key with "
                          "completed, failed or rerun; an anomaly with continue (repeatable)")
    run.add_argument("--lease", type=float, metavar="SECONDS",
                     help="with --store: this process owns the run through a lease it renews every "
                          "third of SECONDS; a second process is refused while the owner lives (default 15)")
    run.add_argument("--kill-at", type=int, default=None, help=argparse.SUPPRESS)
    run.add_argument("--full-disk-at", type=full_disk_at, default=None, help=argparse.SUPPRESS)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser("journal", help="show a durable run's journal and current state",
                            description="Print every record of each run in a journal store (a time-travel view of "
                                        "every step: previous and next configuration, event, reason, effects) and "
                                        "the run's current state, pending decisions and approvals. Exit 0; 2 on bad "
                                        "input or a damaged journal (the store and what is wrong are named); "
                                        "--repair cuts a damaged tail back to the last good record, journaling "
                                        "that it did.")
    parser.add_argument("--store", metavar="URL", help="the store: a SQLite file path, sqlite:///PATH or postgresql://...")
    parser.add_argument("path", nargs="?", metavar="URL", help="deprecated spelling of --store URL")
    parser.add_argument("--run", dest="run_id", metavar="ID", help="only this run (and its sub-agents' child runs)")
    parser.add_argument("--table", metavar="TABLE", help="the run's table (default: the bundled one of its machine)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--repair", action="store_true",
                        help="discard a damaged tail (a torn or flipped last record, records missing at the "
                             "end) and journal a 'repaired' record; damage before the tail is only reported")
    parser.set_defaults(func=run_journal)


class ReceiptTool:
    """An event script's external action: performing it is journaling a receipt (no status query)."""

    def __init__(self, reporter: Reporter) -> None:
        self.reporter = reporter

    def run(self, call: EffectCall) -> JSON:
        self.reporter.note("effect", f"{call.action} key={call.key} attempt={call.attempt}")
        return {"receipt": call.key}

    def status(self, call: EffectCall) -> StatusReply | None:
        return None


class _ViewOnly:
    """Stands in for tools when only reading a journal: attaching never runs a tool."""

    def run(self, call: EffectCall) -> JSON:
        raise RuntimeError("a journal view runs no tools")

    def status(self, call: EffectCall) -> StatusReply | None:
        return None


def _tools(table: Table, tool: Tool) -> dict[str, Tool]:
    return {a.name: tool for a in table.actions if a.effect == "external"}


def _open_store(url: str, must_exist: bool, on_boundary: Boundary | None = None) -> Store:
    """The store a path or URL names (``sqlite:///...``, ``postgresql://...``, or a plain path)."""
    try:
        if must_exist and not is_postgres(url) and not Path(sqlite_path(url)).is_file():
            raise BadInput(f"{url}: no such store")
        return open_store(url, on_boundary)
    except JournalError as exc:
        raise BadInput(str(exc)) from None


class KillAt:
    """``--kill-at N`` (tests, ``agentfsm crash --agent-script``): SIGKILL this process at its Nth
    write boundary; ``count`` is how many it passed (reported when the run ends alive). On SQLite,
    ``frames`` counts the frames each write added to the write-ahead log (``agentfsm chaos`` fills
    the disk at each of them)."""

    def __init__(self, at: int, wal: Path | None = None) -> None:
        self.at, self.count = at, 0
        self.wal = wal
        self.frames: list[int] = []
        self._before = 0  # the log's size when the write began
        self.interrupts: list[int] = []  # the boundaries right after an interrupt became durable
        self.children: list[int] = []    # the boundaries of writes to a child run (a sub-agent's)
        self.run_id = ""                 # the run the store writes to now (told by ``_Watched``)

    def __call__(self, phase: str, label: str) -> None:
        self.count += 1
        if self.wal is not None:
            self._measure(phase)
        if phase == "after" and INTERRUPT in label.replace(" ", "").split("+"):
            self.interrupts.append(self.count)
        if parent_effect(self.run_id) is not None:
            self.children.append(self.count)
        if self.count == self.at:
            self.fault()

    def _measure(self, phase: str) -> None:
        """A write's frames: the log's growth from its ``before`` boundary (inside the write's
        transaction, which holds the write lock) to its ``after`` one."""
        assert self.wal is not None
        try:
            size = self.wal.stat().st_size
            if phase == "after":
                with self.wal.open("rb") as log:  # the log carries no lock of SQLite's: closing it drops none
                    page = int.from_bytes(log.read(WAL_HEADER)[8:12], "big")
        except OSError:  # no log (yet)
            size = page = 0
        if phase == "before":
            self._before = size
        else:
            self.frames.append((size - self._before) // (FRAME_HEADER + page) if page else 0)

    def fault(self) -> None:
        os.kill(os.getpid(), signal.SIGKILL)


class FullDiskAt(KillAt):
    """``--full-disk-at N:ROOM[:die]`` (``agentfsm chaos``'s full-disk sweep): the disk fills at
    this process's Nth write boundary (N = 0: before the store opens), ROOM bytes past where the
    next transaction's frames go (the end of the write-ahead log's last commit): no file may grow
    beyond that (``RLIMIT_FSIZE``), so a commit there writes part of its frames, or none. ROOM
    of K frames and some bytes cuts a write's K+1st frame: its first K are written whole and
    none marks a commit. The write past it fails with EFBIG, which SQLite reports as a full disk
    or an I/O error; with ``die`` the process is killed by it instead (SIGXFSZ), leaving what it
    wrote."""

    def __init__(self, at: int, room: int, wal: Path, die: bool = False) -> None:
        super().__init__(at, wal)
        self.room, self.die = room, die

    def fault(self) -> None:
        assert self.wal is not None
        limit = (committed_end(self.wal.read_bytes()) if self.wal.exists() else WAL_HEADER) + self.room
        signal.signal(signal.SIGXFSZ, signal.SIG_DFL if self.die else signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.getrlimit(resource.RLIMIT_FSIZE)[1]))


def full_disk_at(text: str) -> tuple[int, int, bool]:
    at, _, rest = text.partition(":")
    room, _, die = rest.partition(":")
    try:
        if die not in ("", "die"):
            raise ValueError(die)
        return int(at), int(room or "0"), die == "die"
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected N, N:BYTES or N:BYTES:die") from None


def check_run_options(args: argparse.Namespace) -> None:
    """The durable options need ``--store``: without it they would be silently ignored (exit 2);
    with it, the defaults apply (run id ``run``, a 15 s lease)."""
    if args.store is None:
        given = [name for name, value in (("--resume", args.resume), ("--decide", args.decide),
                                          ("--run-id", args.run_id), ("--lease", args.lease),
                                          ("--kill-at", args.kill_at), ("--full-disk-at", args.full_disk_at))
                 if value]
        if given:
            raise BadInput(f"{' and '.join(given)} need{'s' if len(given) == 1 else ''} --store")
    args.run_id = "run" if args.run_id is None else args.run_id
    if parent_effect(args.run_id) is not None:  # its parent owns (and leases) it
        raise BadInput(f"--run-id {args.run_id}: a sub-agent's child run; resume the run whose effect "
                       f"{parent_effect(args.run_id)} it is, which resumes it")
    args.lease = 15.0 if args.lease is None else args.lease
    if not 0 < args.lease < math.inf:   # NaN too
        raise BadInput(f"--lease must be positive and finite, not {args.lease}")


def _open_run_store(args: argparse.Namespace) -> Store:
    """The run's store, with the ``--kill-at`` hook (kept as ``args.kill_hook``)."""
    if args.decide and not args.resume:
        raise BadInput("--decide needs --resume")
    try:
        wal = None if is_postgres(args.store) else Path(f"{sqlite_path(args.store)}-wal")
    except StoreURLError as exc:
        raise BadInput(str(exc)) from None
    args.kill_hook = None if args.kill_at is None else KillAt(args.kill_at, wal)
    if args.full_disk_at is not None:
        if wal is None:
            raise BadInput("--full-disk-at fills the disk of a SQLite store")
        at, room, die = args.full_disk_at
        args.kill_hook = FullDiskAt(at, room, wal, die)
        if at == 0:
            args.kill_hook.fault()
    return _open_store(args.store, args.resume, args.kill_hook)


def parse_decisions(items: list[str]) -> dict[str, str]:
    decisions: dict[str, str] = {}
    for item in items:
        id, sep, decision = item.rpartition("=")
        if not sep or not id or decision not in ("completed", "failed", "rerun", "continue"):
            raise BadInput(f"--decide {item!r}: expected ID=completed, ID=failed, ID=rerun or ID=continue")
        decisions[id] = decision
    return decisions


DAMAGE = (CorruptJournal, ReplayError, StoreFailed)
"""A store or journal that cannot be trusted as it is: exit 2, naming the store and what is wrong."""


def damage_message(url: str, exc: JournalError) -> str:
    text = str(exc)
    hint = ("; `agentfsm journal --repair` cuts it back to the last good record"
            if isinstance(exc, CorruptJournal) and exc.tail else "")
    return (text if text.startswith(url) else f"{url}: {text}") + hint


@contextlib.contextmanager
def _journal_errors(args: argparse.Namespace) -> Iterator[None]:
    """A run that exists (or not), another live owner, a damaged journal or a failing store:
    bad input, exit 2, naming the store; a lost lease or endless conflicts: a failure, exit 1."""
    try:
        yield
    except RunExists:
        raise BadInput(f"{args.store}: run {args.run_id!r} exists; continue it with --resume") from None
    except UnknownRun:
        raise BadInput(f"{args.store}: no run {args.run_id!r} to resume") from None
    except (RunHeld, OtherMachine) as exc:
        raise BadInput(f"{args.store}: {exc}") from None
    except DAMAGE as exc:
        raise BadInput(damage_message(args.store, exc)) from None
    except LeaseLost as exc:
        raise RunFailed(f"{exc}: this process stops; the run continues with its new owner") from None
    except JournalError as exc:
        raise RunFailed(str(exc)) from None


class RunFailed(Exception):
    """The run could not go on (its lease was lost, writes kept conflicting): reported, exit 1."""


def owning(store: Store) -> OwnedStore | None:
    """The store as one that leases a run to one process at a time (SQLite, PostgreSQL), if it is."""
    return cast(OwnedStore, store) if callable(getattr(store, "acquire", None)) else None


class Ownership:
    """This process's ownership of one run (SQLite and PostgreSQL alike): a lease taken before
    the run is opened, renewed by a heartbeat thread and a heartbeat process (``Beats``), each
    on its own connection, carried by every append (a process that lost it writes nothing
    more), and released at the end."""

    def __init__(self, store: Store, url: str, run_id: str, seconds: float) -> None:
        self.lease: Lease | None = None
        self.heartbeat: Heartbeat | None = None
        self._beat_store: OwnedStore | None = None
        self.raw = store
        self.store: Store = store
        self.beats: Beats | None = None
        self.log = ProtocolLog(protocol_path(store), owner_name())
        owned = owning(store)
        if owned is not None:
            try:
                self.lease = claims.claim_run(owned, run_id, owner_name(), seconds, self.log)
            except RunHeld:
                self.log.close()
                raise
            self.store = LoggedStore(owned, self.lease, self.log)
            try:
                beat_store = self._beat_store = owned.reopen()
                self.heartbeat = Heartbeat(self.lease, beat_store.renew, self.log.renewed).__enter__()
                self.beats = Beats(url)  # renews even while a tool keeps this interpreter's lock
            except JournalError:  # no one would renew the claim: give it back now, not at its expiry
                self._give_back()
                raise
            self.beats.hold(self.lease)

    def close(self) -> None:
        self._give_back()
        self.raw.close()

    def _give_back(self) -> None:
        """Stop renewing the lease and release it (the store stays open: whoever opened it closes it)."""
        if self.beats is not None and self.lease is not None:
            self.beats.drop(self.lease)
            self.beats.close()
        if self.heartbeat is not None:
            self.heartbeat.__exit__()
        if self._beat_store is not None:
            self._beat_store.close()
        owned = owning(self.raw)
        if self.lease is not None and owned is not None:
            with contextlib.suppress(JournalError):
                owned.release(self.lease)
                self.log.released(self.lease)
        self.log.close()


class Detached(JournalError):
    """The process is stopping (--timeout, Ctrl-C, SIGTERM): the journal takes no more writes."""


class _Watched:
    """The store as the durable agent sees it, remembering the first damage or lost lease it
    raised: the agent's driver records failures and stops; the command reports this one."""

    def __init__(self, store: Store, kill_hook: KillAt | None = None) -> None:
        self.store = store
        self.kill_hook = kill_hook  # told which run each write goes to
        self.failure: JournalError | LeaseLost | None = None
        self.detached: str | None = None  # the process is stopping: nothing more is written

    def _writing(self, run_id: str) -> None:
        if self.kill_hook is not None:
            self.kill_hook.run_id = run_id

    def _note(self, exc: JournalError | LeaseLost) -> None:
        if self.failure is None and not isinstance(exc, Conflict | Detached):
            self.failure = exc

    def create(self, run_id: str, machine: str, entry: Entry) -> Record:
        self._writing(run_id)
        return self.store.create(run_id, machine, entry)

    def noted(self, run_id: str, op: str, key: str, **fields: JSON) -> None:
        """The protocol log's record of a tool call, return or status query (``LoggedStore.noted``)."""
        noted = getattr(self.store, "noted", None)
        if noted is not None:
            noted(run_id, op, key, **fields)

    def runs(self) -> list[str]:
        return self.store.runs()

    def version(self, run_id: str) -> int:
        return self.store.version(run_id)

    def machine(self, run_id: str) -> str:
        return self.store.machine(run_id)

    def append(self, run_id: str, expect: int, entries: Sequence[Entry],
               snapshot: Mapping[str, JSON] | None = None) -> list[Record]:
        if self.detached is not None:
            raise Detached(f"stopped by {self.detached}")
        self._writing(run_id)
        try:
            return self.store.append(run_id, expect, entries, snapshot)
        except (JournalError, LeaseLost) as exc:
            self._note(exc)
            raise

    def load(self, run_id: str) -> Loaded:
        return self.store.load(run_id)

    def records(self, run_id: str, after: int = 0) -> list[Record]:
        try:
            return self.store.records(run_id, after)
        except JournalError as exc:
            self._note(exc)
            raise

    def discard_tail(self, run_id: str, seq: int) -> None:
        self.store.discard_tail(run_id, seq)

    def close(self) -> None:
        self.store.close()


@contextlib.contextmanager
def _owned(args: argparse.Namespace) -> Iterator[Ownership]:
    """The run's store, owned by this process for the command's length (SQLite), and the
    command's journal errors reported by ``_journal_errors``."""
    store = _open_run_store(args)
    try:
        with _journal_errors(args):
            runs = store.runs()
            if not args.resume and args.run_id in runs:
                raise RunExists(args.run_id)
            if args.resume and not in_store(args.run_id, runs):  # never started by a resume (a mistyped id)
                nothing = ", so it has nothing to decide" if args.decide else ""
                raise BadInput(f"{args.store}: no run {args.run_id!r} to resume{nothing}: {held_runs(runs)}")
            refuse_worker_run(store, args)
            ownership = Ownership(store, args.store, args.run_id, args.lease)
    except BaseException:
        store.close()
        raise
    try:
        yield ownership
    finally:
        ownership.close()


def refuse_worker_run(store: Store, args: argparse.Namespace) -> None:
    """A run queued for workers is theirs: deciding it here would perform its effects with this
    command's stand-in tools while `jobs` still shows it blocked."""
    jobs = getattr(store, "jobs", None)
    if args.resume and callable(jobs) and any(j.run_id == args.run_id for j in jobs()):
        raise BadInput(f"{args.store}: run {args.run_id!r} is served by workers (see `agentfsm jobs`): this "
                       "command would run its effects with stand-in tools; settle its decisions with `agentfsm jobs "
                       f"--store URL --run {args.run_id} --decide ID=DECISION`, which queues it again for a worker")


def check_script(table: Table, script: EventScript, path: str) -> None:
    """Every event of a script checked against the table before the first one is delivered (and
    before any effect runs): a bad one is bad input, exit 2, as for ``submit``."""
    try:
        check_events(table, script.events)
    except ValueError as exc:
        raise BadInput(f"{path}: {exc}") from None


def run_durable_agent(table: Table, script: AgentScript, args: argparse.Namespace, reporter: Reporter,
                      workdir: Path, model: LlmClient | None,
                      player: Callable[[Durability], Coroutine[Any, Any, int]] | None = None) -> int:
    """Play an agent script through a durable run of the async driver (the Loom agent's, or
    ``player``'s); ``--resume`` recovers it first."""
    with _owned(args) as ownership:
        watched = _Watched(ownership.store, args.kill_hook)
        durable = Durability(watched, args.run_id, args.resume, parse_decisions(args.decide))
        try:
            with _journal_errors(args):
                stopped: list[str] = []
                code = asyncio.run(_play_stoppable(table, script, workdir, reporter, args, model, durable, stopped,
                                                   player))
                if stopped:
                    reporter.note("stopped", f"{stopped[0]}: the run stays where its journal is (version "
                                             f"{ownership.store.version(args.run_id)}); continue it with --resume")
                    return STOP_CODES.get(stopped[0], EXIT_FAILED)
                if watched.failure is not None:
                    raise watched.failure
                return code
        except RunFailed as exc:
            reporter.note("error", str(exc))
            return EXIT_FAILED
        except DecisionError as exc:
            raise BadInput(str(exc)) from None
        finally:
            if args.kill_hook is not None:
                reporter.note("boundaries", str(args.kill_hook.count))
                if args.kill_hook.interrupts:
                    reporter.note("interrupt-boundaries", " ".join(map(str, args.kill_hook.interrupts)))
                if args.kill_hook.children:
                    reporter.note("child-boundaries", " ".join(map(str, args.kill_hook.children)))
                if args.kill_hook.frames:
                    reporter.note("frames", " ".join(map(str, args.kill_hook.frames)))


STOP_CODES = {"SIGINT": 130, "SIGTERM": 143}


async def _play_stoppable(table: Table, script: AgentScript, workdir: Path, reporter: Reporter,
                          args: argparse.Namespace, model: LlmClient | None, durable: Durability,
                          stopped: list[str], player: Callable[[Durability], Coroutine[Any, Any, int]] | None) -> int:
    """One rule for --timeout, Ctrl-C and SIGTERM: the process stops and the run stays resumable.
    Nothing more is journaled (not the shutdown that would end the run for good); a tool that
    was running is stopped and its effect found ``unknown`` on resume, as after a crash."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None and isinstance(durable.store, _Watched)
    watched = durable.store

    def stop(why: str) -> None:
        if not stopped:
            stopped.append(why)
            watched.detached = why
            task.cancel()
    timer = loop.call_later(args.timeout, stop, f"--timeout {args.timeout:g}s")
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop, sig.name)
    try:
        if player is not None:
            return await player(durable)
        # (the play's own timeout only backs this one up)
        return await play_agent(table, script, workdir, reporter, args.timeout + 60, model, durable)
    except asyncio.CancelledError:
        if not stopped:
            raise
        return EXIT_FAILED
    finally:
        timer.cancel()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)


def run_durable(table: Table, script: EventScript, args: argparse.Namespace, reporter: Reporter) -> int:
    """Deliver an event script through a durable run; with ``--resume`` recover it first."""
    check_script(table, script, args.script)
    with _owned(args) as ownership:
        try:
            with _journal_errors(args):
                return _deliver_script(table, script, args, reporter, ownership.store)
        except RunFailed as exc:
            reporter.note("error", str(exc))
            return EXIT_FAILED
        except DecisionError as exc:
            raise BadInput(str(exc)) from None


def _deliver_script(table: Table, script: EventScript, args: argparse.Namespace, reporter: Reporter,
                    store: Store) -> int:
    tools = _tools(table, ReceiptTool(reporter))
    if args.resume:
        run = DurableRun.open(store, table, args.run_id, tools)
        reporter.note("resume", f"run {args.run_id} recovered at version {run.version} in {run.state}")
        for id, answer in parse_decisions(args.decide).items():
            run.decide(id, answer)
    else:
        run = DurableRun.create(store, table, args.run_id, tools)
    for seq, (event, params) in enumerate(script.events, 1):
        previous = run.state
        delivery = run.deliver(event, params, event_id=f"script-{seq}")
        if delivery.status == "duplicate":
            continue
        if delivery.status == "halted":
            reporter.note("halted", f"event {seq} not applied: an anomaly stopped automatic progress")
            break
        reporter.step(StateChange(delivery.seq, previous, delivery.state, event, dict(params), delivery.accepted,
                                  delivery.status, delivery.actions, run.vars))
    pending = report_decisions(run, reporter)
    # "blocked", as a worker calls the same run: it waits for a user decision, it is not done.
    final = table.states[table.state_index[run.state]].final
    reporter.note("blocked" if pending else "done", f"{'final state' if final else 'state'} {run.state}, "
                  f"version {run.version}, {len(run.decisions())} decision(s) pending")
    return EXIT_FAILED if pending else EXIT_OK


def table_for(machine: str, path: str | None) -> Table | None:
    if path is not None:
        [table] = load_tables([path])
        return table
    for candidate in bundled_tables():
        table = load_table(candidate)
        if table.machine == machine:
            return table
    return None


def describe(record: Record) -> str:
    b = record.body
    if record.kind == "step":
        prev, nxt = b["prev"], b["next"]
        params = f"({', '.join(f'{k}={json.dumps(v)}' for k, v in b['params'].items())})" if b["params"] else ""
        return (f"{prev['state']} {json.dumps(prev['vars'])} --{b['event']}{params}--> {nxt['state']} "
                f"{json.dumps(nxt['vars'])} [{' '.join(b['actions']) or '-'}] {b['reason']}")
    if record.kind == "created":
        return f"{b['machine']} in {b['config']['state']} {json.dumps(b['config']['vars'])}"
    if record.kind in ("anomaly", "stale"):
        return f"{b['event']} in {b['state']}: {b['reason']}"
    return " ".join(f"{k}={json.dumps(v)}" for k, v in sorted(b.items()))


def run_journal(args: argparse.Namespace) -> int:
    if args.path is not None:
        if args.store is not None:
            raise BadInput("give the store once: --store URL")
        deprecated("journal URL", "journal --store URL")
    url = args.store or args.path
    if url is None:
        raise BadInput("journal needs --store URL")
    args.path = url
    if args.repair and not is_postgres(args.path):
        path = sqlite_path(args.path)
        if not Path(path).is_file():
            raise BadInput(f"{args.path}: no such store")
        try:
            store: Store = SqliteStore(path, accept_damaged_log=True)
        except JournalError as exc:
            raise BadInput(str(exc)) from None
        if isinstance(store, SqliteStore) and store.log_damage is not None:
            print(f"repaired: {store.log_damage}; SQLite dropped those frames; the damaged log is kept in "
                  f"{path}-wal.damaged")
    else:
        store = _open_store(args.path, must_exist=True)
    try:
        return _journal(store, args)
    except StoreFailed as exc:
        raise BadInput(damage_message(args.path, exc)) from None
    finally:
        store.close()


def _journal(store: Store, args: argparse.Namespace) -> int:
    stored = store.runs()
    runs = stored if args.run_id is None else [args.run_id, *child_runs(args.run_id, stored)]
    damaged: list[str] = []
    out: list[dict[str, JSON]] = []
    for run_id in runs:
        try:
            machine = store.machine(run_id)
        except UnknownRun as exc:
            raise BadInput(str(exc)) from None
        entry: dict[str, JSON] = {"run_id": run_id, "machine": machine}
        if parent_effect(run_id) is not None:
            entry["parent_effect"] = parent_effect(run_id)  # a sub-agent's child run
        if args.repair:
            _repair(store, args, run_id, entry)
        try:
            records = store.records(run_id)
            entry["records"] = [r.to_json() for r in records]
            table = table_for(machine, args.table)
            if table is not None and table.machine != machine:
                raise BadInput(f"{args.path}: --table {args.table} runs machine {table.machine!r}; run {run_id!r} "
                               f"runs {machine!r}: give its own table, or leave --table out for a bundled one")
            if table is not None:
                run = DurableRun.attach(store, table, run_id, _tools(table, _ViewOnly()))
                entry["current"] = run.st.to_json(table)
                entry["decisions"] = [{"kind": d.kind, "id": d.id, "message": d.message} for d in run.decisions()]
        except (CorruptJournal, ReplayError) as exc:
            entry["error"] = damage_message(args.path, exc)
            damaged.append(str(entry["error"]))
            records = []
        out.append(entry)
        if not args.json:
            _print_run(entry, records)
    if args.json:
        print(json.dumps(json_envelope("journal", {"ok": not damaged, "runs": out}), indent=2))
    for message in damaged:
        print(f"agentfsm: error: {message}", file=sys.stderr)
    return EXIT_BAD_INPUT if damaged else EXIT_OK


def _repair(store: Store, args: argparse.Namespace, run_id: str, entry: dict[str, JSON]) -> None:
    """``--repair``: cut a damaged tail back, or accept a damaged write-ahead log's loss, as the
    owner of the run whose lease covers this one (``lease_run``: never under a live owner) and of
    the run itself (a run the user named like an agent's unit, ``x/call-3``, is its own process's);
    either way the effects the lost records may have started become ``unknown``, and are named."""
    leases: list[Lease] = []
    owned = owning(store)
    log = ProtocolLog(protocol_path(store), owner_name())
    try:
        if owned is not None:
            for name in dict.fromkeys((lease_run(run_id), run_id)):
                try:
                    leases.append(claims.claim_run(owned, name, owner_name(), 15.0, log))
                except RunHeld as exc:
                    raise BadInput(f"{args.path}: {exc}") from None
        lease = leases[0] if leases else None
        repaired = repair(store, run_id, store.log_damage if isinstance(store, SqliteStore) else None)
        if repaired is not None and lease is not None:   # the effects the repair made unknown, as its writes
            for key in repaired.unknown:   # under the lease's run, as the runtime logs a sub-run's writes
                log.note(lease.run_id, "write", what="unknown", key=key, token=lease.token, result="ack",
                         owner=lease.owner)
    except CorruptJournal:
        return  # damage before the tail: reported below, not repairable by cutting
    finally:
        for held in leases:
            cast(OwnedStore, owned).release(held)   # leases come from the owned store only
            log.released(held)
        log.close()
    if repaired is None:
        return
    entry["repaired"] = {"discarded_from": repaired.discarded_from, "unknown": list(repaired.unknown)}
    if not args.json:
        cut = (f"records from {repaired.discarded_from} on discarded" if repaired.discarded_from is not None
               else "the write-ahead log's lost records accepted")
        print(f"run {run_id}: repaired: {cut} (a 'repaired' record says so)")
        for key in repaired.unknown:
            print(f"run {run_id}: unknown: {key}: emitted and not completed before the loss, it may have run: "
                  "a decision on --resume (completed, failed or rerun)")


def _print_run(entry: dict[str, JSON], records: list[Record]) -> None:
    parent = f", the sub-agent of effect {entry['parent_effect']}" if "parent_effect" in entry else ""
    print(f"run {entry['run_id']} ({entry['machine']}{parent})")
    for record in records:
        print(f"  {record.seq:4d}  {record.kind:<16} {describe(record)}")
    if "error" in entry:
        print(f"  error: {entry['error']}")
        return
    current = entry.get("current")
    if isinstance(current, dict):
        print(f"  now: {current['state']} {json.dumps(current['vars'])} at version {current['version']}")
        for effect in current["effects"]:
            if effect["status"] not in ("completed",):
                print(f"  effect {effect['key']} ({effect['action']}): {effect['status']}")
        for approval in current["approvals"]:
            print(f"  pending approval {approval['id']} ({approval['action']})")
    for decision in entry.get("decisions") or []:
        print(f"  decision needed: {decision['message']}")
