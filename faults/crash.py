"""Crash injection: kill the durable runtime at every write boundary, recover, and judge it.

For each reachable configuration (reached by its shortest event prefix) and each event,
the step is first run crash-free (the reference). Then, for every boundary of that step
(just before and just after each durable write), a fresh copy crashes there, a new
"process" recovers from what was durable and finishes the scenario (the event source
redelivers every event; ones already journaled come back as duplicates); then the same
again with a second crash at every boundary of that recovery. Each tool run lands in a
ledger outside the store. The verdict per recovered run:

- ``effect-twice``: an idempotency key really ran more than once (ledger);
- ``outcome``: final state, variables, journaled events or an effect's outcome differ from
  the crash-free run, unless the effect is an explicit ``unknown`` decision for the user;
- ``approval-skipped``: a pending approval of the crash-free run is not pending;
- ``approval-lifetime``: restarted after a pending approval's lifetime, the approval is not
  surfaced as expired (its lifetime was not re-validated);
- ``sequence``: the journal does not verify, or does not extend what was durable at the crash;
- ``terminal-reexecuted``: recovery of a finished run wrote or ran anything;
- ``recovery-error``: recovery raised;
- ``lost-update``: two writers racing one event each (one of them stale) did not end as
  the two events applied in turn.

Tools run in two worlds: ``plain`` (no status query: unknown effects are retried when
idempotent, else left to the user) and ``status`` (the tool can say whether a key ran).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from agentfsm.impl.durable.ledger import MemoryLedger, ledger_tools
from agentfsm.impl.durable.run import DurableRun, EngineStepper, Options
from agentfsm.impl.stores.journal import ANOMALY, JSON, STALE, STEP, CorruptJournal, JournalError
from agentfsm.impl.stores.memory import Crash, MemoryStore
from agentfsm.spec.expr import Value
from agentfsm.spec.model import Table
from agentfsm.spec.semantics import StepResult
from agentfsm.verify.table.explore import Exploration, Label, explore

RUN = "run"
MODES = ("plain", "status")
EVENT_KINDS = (STEP, ANOMALY, STALE)


@dataclass(frozen=True)
class Violation:
    kind: str
    scenario: str
    message: str

    def to_json(self) -> dict[str, str]:
        return {"kind": self.kind, "scenario": self.scenario, "message": self.message}


@dataclass
class CrashReport:
    machine: str
    configurations: int = 0
    scenarios: int = 0
    boundaries: int = 0
    crashes: int = 0
    double_crashes: int = 0
    kills: int = 0
    recovery_kills: int = 0  # real SIGKILLs during the recovery of a killed run
    races: int = 0
    approvals: int = 0  # scenarios that end with an approval pending (checked across restarts)
    violations: list[Violation] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations

    def to_json(self) -> dict[str, JSON]:
        return {"ok": self.ok, "machine": self.machine, "configurations": self.configurations,
                "scenarios": self.scenarios, "boundaries": self.boundaries, "crashes": self.crashes,
                "double_crashes": self.double_crashes, "kills": self.kills,
                "recovery_kills": self.recovery_kills, "races": self.races,
                "approvals": self.approvals,
                "violations": [v.to_json() for v in self.violations]}


@dataclass(frozen=True)
class Observed:
    """What a finished run looks like from outside: compared between crash-free and recovered."""

    state: str
    vars: Mapping[str, Any]
    halted: str | None
    events: tuple[str, ...]
    effects: Mapping[str, tuple[str, JSON]]
    approvals: tuple[str, ...]
    unknown: frozenset[str]


def observe(run: DurableRun) -> Observed:
    records = run.store.records(run.run_id)
    return Observed(run.state, run.vars, run.st.halted,
                    tuple(str(r.body.get("event_id")) for r in records if r.kind in EVENT_KINDS),
                    {k: (e.status, e.result) for k, e in run.st.effects.items()},
                    tuple(sorted(a.id for a in run.pending_approvals)),
                    frozenset(d.id for d in run.decisions() if d.kind == "unknown-effect"))


def describe_label(table: Table, label: Label) -> str:
    name, values = label
    params = table.event(name).param_dict(values)
    inner = ", ".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in params.items())
    return f"{name}({inner})" if inner else name


def describe_scenario(table: Table, prefix: Sequence[Label], label: Label | None = None) -> str:
    text = f"prefix [{', '.join(describe_label(table, p) for p in prefix)}]"
    return text if label is None else f"{text} then {describe_label(table, label)}"


def compare(ref: Observed, got: Observed, executions: Mapping[str, int]) -> list[tuple[str, str]]:
    """The violations of one recovered run against the crash-free one, as (kind, message)."""
    found: list[tuple[str, str]] = []
    found += [("effect-twice", f"effect {key} ran {n} times") for key, n in sorted(executions.items()) if n > 1]
    if (got.state, dict(got.vars), got.halted) != (ref.state, dict(ref.vars), ref.halted):
        found.append(("outcome", f"ended in {got.state} {dict(got.vars)} (halted: {got.halted}), the crash-free run "
                                 f"in {ref.state} {dict(ref.vars)} (halted: {ref.halted})"))
    if got.events != ref.events:
        found.append(("outcome", f"journaled events {list(got.events)}, crash-free {list(ref.events)}"))
    for key in sorted(set(ref.effects) | set(got.effects)):
        want, have = ref.effects.get(key), got.effects.get(key)
        if have == want:
            continue
        if have is not None and have[0] == "unknown" and key in got.unknown:
            continue
        found.append(("outcome", f"effect {key} is {have}, in the crash-free run {want}"))
    if got.approvals != ref.approvals:
        missing = sorted(set(ref.approvals) - set(got.approvals))
        found.append(("approval-skipped", f"pending approvals {list(got.approvals)}, crash-free "
                                          f"{list(ref.approvals)} (lost: {missing})"))
    return found


Runtime = type[DurableRun]


class MemoStepper:
    """The table's step, each (configuration, event) derived once by the engine: the checker
    replays the same journal prefixes hundreds of thousands of times, and replay re-derives
    every step record to check it against the table. The step is a pure function of its
    arguments, so the check is the same; only the repeated engine runs go."""

    def __init__(self, table: Table) -> None:
        self.engine = EngineStepper(table)
        self.known: dict[tuple[int, tuple[Value, ...], str, tuple[Value, ...]], StepResult] = {}

    def step(self, state: int, values: tuple[Value, ...], event: str, params: tuple[Value, ...]) -> StepResult:
        key = (state, values, event, params)
        result = self.known.get(key)
        if result is None:
            result = self.known[key] = self.engine.step(state, values, event, params)
        return result


class CrashChecker:
    """Crash a durable runtime (the real one, or a planted fault in tests) everywhere."""

    def __init__(self, table: Table, runtime: Runtime = DurableRun,
                 approvals: Mapping[str, float | None] | None = None, depth: int | None = None,
                 modes: Sequence[str] = MODES, races: bool = True, exploration: Exploration | None = None) -> None:
        self.table = table
        self._exploration = exploration
        self.runtime = runtime
        self.options = Options(approvals=dict(approvals or {}), clock=lambda: 0.0)
        self.depth = depth
        self.modes = tuple(modes)
        self.races = races
        self.report = CrashReport(table.machine)
        self.stepper = MemoStepper(table)

    @property
    def exploration(self) -> Exploration:
        """The table's configurations, explored once (and before any fork, when given)."""
        if self._exploration is None:
            self._exploration = explore(self.table)
        return self._exploration

    # -- running -------------------------------------------------------------------------

    def _run(self, store: MemoryStore, ledger: MemoryLedger, mode: str, recover: bool) -> DurableRun:
        tools = ledger_tools(self.table, ledger, mode == "status")
        opener = self.runtime.open if recover else self.runtime.attach
        return opener(store, self.table, RUN, tools, stepper=self.stepper, options=self.options)

    def deliver(self, run: DurableRun, events: Sequence[Label], first: int = 0) -> None:
        for k, (name, values) in enumerate(events[first:], start=first):
            run.deliver(name, self.table.event(name).param_dict(values), event_id=f"e{k + 1}")

    def _finish(self, store: MemoryStore, ledger: MemoryLedger, mode: str, events: Sequence[Label]) -> DurableRun:
        """A new process: recover the run, then the event source redelivers everything."""
        run = self._run(store, ledger, mode, recover=True)
        self.deliver(run, events)
        return run

    def prefix(self, events: Sequence[Label], mode: str) -> tuple[MemoryStore, MemoryLedger]:
        store, ledger = MemoryStore(), MemoryLedger()
        run = self.runtime.create(store, self.table, RUN, ledger_tools(self.table, ledger, mode == "status"),
                                  stepper=self.stepper, options=self.options)
        self.deliver(run, events)
        return store, ledger

    # -- judging -------------------------------------------------------------------------

    def violate(self, kind: str, scenario: str, message: str) -> None:
        self.report.violations.append(Violation(kind, scenario, message))

    def _judge(self, scenario: str, ref: Observed, store: MemoryStore, ledger: MemoryLedger, mode: str,
               events: Sequence[Label], durable: Sequence[str], terminal: bool) -> int:
        """Recover and finish on ``store``; record violations; return the boundaries it passed."""
        version, before = store.version(RUN), ledger.executions()
        try:
            run = self._run(store, ledger, mode, recover=True)
            if terminal and (store.version(RUN) != version or ledger.executions() != before):
                self.violate("terminal-reexecuted", scenario, "recovery of a finished run wrote or ran something")
            self.deliver(run, events)
            got = observe(run)
            checksums = [r.checksum for r in store.records(RUN)]
        except CorruptJournal as exc:
            self.violate("sequence", scenario, str(exc))
            return store.points
        except Exception as exc:
            self.violate("recovery-error", scenario, f"{type(exc).__name__}: {exc}")
            return store.points
        for kind, message in compare(ref, got, ledger.executions()):
            self.violate(kind, scenario, message)
        if checksums[:len(durable)] != list(durable):
            self.violate("sequence", scenario, "the journal after recovery does not extend the durable records")
        if run.version != store.version(RUN):
            self.violate("sequence", scenario, f"the run is at version {run.version}, the store at "
                                                f"{store.version(RUN)}")
        return store.points

    def _durable_view(self, store: MemoryStore) -> tuple[list[str], bool]:
        """Checksums of what survived the crash, and whether the run was already finished."""
        try:
            view = DurableRun.attach(store, self.table, RUN, ledger_tools(self.table, MemoryLedger(), False),
                                     stepper=self.stepper)
            return [r.checksum for r in store.records(RUN)], view.terminal
        except JournalError:
            return [], False

    def scenario(self, base: MemoryStore, ledger: MemoryLedger, prefix: Sequence[Label], label: Label,
                 mode: str) -> None:
        table = self.table
        events = [*prefix, label]
        name = f"{describe_scenario(table, prefix, label)}; tools: {mode}"
        self.report.scenarios += 1
        ref_store, ref_ledger = base.clone(), ledger.clone()
        try:
            run = self._run(ref_store, ref_ledger, mode, recover=False)
            self.deliver(run, events, first=len(prefix))
            ref = observe(run)
        except Exception as exc:
            self.violate("recovery-error", name, f"the crash-free run failed: {exc}")
            return
        boundaries = len(ref_store.trace)
        self.report.boundaries += boundaries
        if ref.approvals:
            self.report.approvals += 1
            self._lifetimes(name, ref_store.clone(), ref_ledger.clone(), mode)
        for point in range(1, boundaries + 1):
            phase, what = ref_store.trace[point - 1][1:]
            where = f"{name}; crash {phase} write '{what}' (boundary {point})"
            crashed, crashed_ledger = base.clone(), ledger.clone()
            crashed.arm(point)
            try:
                self.deliver(self._run(crashed, crashed_ledger, mode, recover=False), events, first=len(prefix))
                self.violate("outcome", where, "the step did not reach this boundary again (not deterministic)")
                continue
            except Crash:
                pass
            self.report.crashes += 1
            durable, terminal = self._durable_view(crashed)
            once, once_ledger = crashed.clone(), crashed_ledger.clone()
            passed = self._judge(where, ref, once, once_ledger, mode, events, durable, terminal)
            for again in range(1, passed + 1):
                self._double(where, again, ref, crashed, crashed_ledger, mode, events, durable, terminal)

    def _lifetimes(self, where: str, store: MemoryStore, ledger: MemoryLedger, mode: str) -> None:
        """Restart once every pending approval's lifetime has passed: each must come back as an
        ``approval-expired`` decision, neither answered nor dropped."""
        pending = DurableRun.attach(store.clone(), self.table, RUN, ledger_tools(self.table, MemoryLedger(), False),
                                    stepper=self.stepper, options=self.options).pending_approvals
        timed = {a.id: a.expires_at for a in pending if a.expires_at is not None and not a.expired}
        if not timed:
            return
        later = max(t for t in timed.values() if t is not None) + 1.0
        where = f"{where}; restart after the approvals' lifetime"
        try:
            run = self.runtime.open(store, self.table, RUN, ledger_tools(self.table, ledger, mode == "status"),
                                    stepper=self.stepper, options=replace(self.options, clock=lambda: later))
        except Exception as exc:
            self.violate("recovery-error", where, f"{type(exc).__name__}: {exc}")
            return
        expired = {d.id for d in run.decisions() if d.kind == "approval-expired"}
        missing = sorted(set(timed) - expired)
        if missing:
            self.violate("approval-lifetime", where, f"approvals {missing} outlived their lifetime across the "
                                                     "restart without being surfaced as expired")

    def _double(self, where: str, again: int, ref: Observed, crashed: MemoryStore, ledger: MemoryLedger,
                mode: str, events: Sequence[Label], durable: Sequence[str], terminal: bool) -> None:
        store, world = crashed.clone(), ledger.clone()
        store.arm(again)
        try:
            self._finish(store, world, mode, events)
            return
        except Crash as crash:
            label = f"{where}; recovery crash {crash.phase} write '{crash.label}' (boundary {again})"
        except Exception:
            return  # the single-crash judgement already reported this recovery's failure
        self.report.double_crashes += 1
        store.arm(None)
        durable_now, _ = self._durable_view(store)
        if durable_now[:len(durable)] != list(durable):
            self.violate("sequence", label, "the interrupted recovery rewrote records that were durable")
        self._judge(label, ref, store, world, mode, events, durable_now, terminal)

    def race(self, base: MemoryStore, ledger: MemoryLedger, prefix: Sequence[Label], label: Label) -> None:
        """Two writers loaded at the same version each deliver the event: no lost update."""
        table = self.table
        name_, values = label
        params = table.event(name_).param_dict(values)
        n = len(prefix) + 1
        where = f"{describe_scenario(table, prefix, label)} from two writers at once"
        self.report.races += 1
        try:
            seq_store, seq_ledger = base.clone(), ledger.clone()
            sequential = self._run(seq_store, seq_ledger, "status", recover=False)
            sequential.deliver(name_, params, event_id=f"e{n}a")
            sequential.deliver(name_, params, event_id=f"e{n}b")
            ref = observe(sequential)
            store, world = base.clone(), ledger.clone()
            first = self._run(store, world, "status", recover=False)
            second = self._run(store, world, "status", recover=False)
            first.deliver(name_, params, event_id=f"e{n}a")
            second.deliver(name_, params, event_id=f"e{n}b")
            got = observe(DurableRun.attach(store, table, RUN, ledger_tools(table, world, True), stepper=self.stepper))
        except Exception as exc:
            self.violate("lost-update", where, str(exc))
            return
        for kind, message in compare(ref, got, world.executions()):
            self.violate("lost-update" if kind == "outcome" else kind, where, message)

    def check(self, progress: Callable[[int, int], None] | None = None,
              shard: tuple[int, int] = (0, 1)) -> CrashReport:
        """Every scenario of every configuration; ``shard`` (K, N) takes only every Nth
        configuration from the Kth, so that N processes share the work."""
        ex = self.exploration
        configs = [i for i in range(ex.count) if self.depth is None or len(ex.path(i)) <= self.depth]
        self.report.configurations = len(configs)
        k, n = shard
        for done, i in enumerate(configs[k::n]):
            prefix = ex.path(i)
            for mode in self.modes:
                try:
                    base, ledger = self.prefix(prefix, mode)
                except Exception as exc:
                    where = f"{describe_scenario(self.table, prefix)}; tools: {mode}"
                    self.violate("recovery-error", where, f"the crash-free prefix failed: {exc}")
                    continue
                for label in ex.labels:
                    self.scenario(base, ledger, prefix, label, mode)
                    if self.races and mode == self.modes[-1]:
                        self.race(base, ledger, prefix, label)
            if progress is not None:
                progress(done + 1, len(configs[k::n]))
        return self.report
