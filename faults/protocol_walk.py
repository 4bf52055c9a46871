"""Model-based testing of the durable protocol: a deterministic scheduler walks the system
``spec/systems/durable-run-fixed.yaml`` and performs each step of its store and its tool on the
real code — an owned store's ``acquire`` and fenced ``append`` (SQLite, or PostgreSQL) and a
ledger tool's fenced execution and status query — checking that the real answer is the message
the model's step sends (like ``conform`` for one table, for the protocol).

The walk takes the system's steps (``agentfsm.verify.system.step``, the verifier's own
successor function), chosen by a seeded random generator, so a walk is reproducible from its
seed. What the model abstracts is mapped, never guessed:

- a worker's fencing token is the token in the message it sends; the scheduler writes with a
  lease of that token, as the worker would;
- time is the scheduler's: now and then a third of a lease passes (the owner's heartbeat
  renewing first, where the model says it holds the lease and acts: awake, not idle or done);
  the model's ``Expire`` is time passing until the real lease ran out (its owner renews no
  more); the completing write's owner releases the run, as a process does at its end;
- the walk takes no claim the model would grant after the run finished or block past
  ``max_claims``: the code blocks on started attempts (``Options.max_attempts``), not on
  claims, and past the completion a worker stops without writing;
- the tool's execution is the ledger's line, written when it takes ``Run``; the model's
  ``Busy`` window (between ``Run`` and ``Finish``) has no counterpart in a ledger, so the walk
  takes no status query there.
"""

from __future__ import annotations

import contextlib
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from agentfsm.impl.durable.ledger import Fenced, Ledger
from agentfsm.impl.durable.protocol_log import LoggedStore, ProtocolLog
from agentfsm.impl.stores.journal import COMPLETED, CREATED, JSON, STARTED, Entry
from agentfsm.impl.stores.leases import Heartbeat, Lease, LeaseLost, OwnedStore, RunHeld
from agentfsm.spec.expr import Value
from agentfsm.spec.system_model import System
from agentfsm.spec.system_trace import Label, label_text, param_names
from agentfsm.verify.system.step import Config, Effect, Stepper, initial_config

KEY = "run/2/0"
Answer = tuple[str, tuple[Value, ...]]   # the message the step sends back: (event, params)


class RealProtocol:
    """One run on a real store and a real ledger, as the model's store and tool instances."""

    claims_after_finish = False
    """Whether the walk takes the claims the model's store grants on a finished run (a process
    that claims releases the run at its end: only the runtime's processes do)."""
    drives_workers = False
    """Whether real code takes the workers' steps (the runtime's processes) or the scheduler does."""

    def __init__(self, store: OwnedStore, ledger: Ledger, run_id: str, lease_seconds: float = 600.0,
                 log: ProtocolLog | None = None, create: bool = True) -> None:
        """``log``: the runtime's protocol log, written by the real code as a process writes it
        (claims, fenced writes through ``LoggedStore``, releases)."""
        self.store = store
        self.ledger = ledger
        self.run_id = run_id
        self.seconds = lease_seconds
        self.log = log or ProtocolLog(None, "")
        self.elapsed = 0.0   # the walk's time, ahead of the wall clock: a lease's lapse shows in the log
        self.holder: tuple[int, int] | None = None   # the model's lease in the step taken: (worker, token)
        self.log.clock = self.now
        self.key = KEY
        if create:
            store.create(run_id, "run-worker", Entry(CREATED, {"machine": "run-worker"}, time.time()))

    def _lease(self, who: int, token: int) -> Lease:
        return Lease(self.run_id, "", token, f"worker-{who}", self.seconds, owned=True)

    def journal(self) -> int:
        kinds = [r.kind for r in self.store.records(self.run_id) if r.body.get("key") == self.key]
        return 2 if COMPLETED in kinds else 1 if STARTED in kinds else 0

    def claim(self, who: int) -> Answer:
        try:
            lease = self.store.acquire(self.run_id, f"worker-{who}", self.seconds)
        except RunHeld:
            self.log.note(self.run_id, "claim", result="refused", owner=f"worker-{who}")
            return "Refused", ()
        self.log.claimed(lease)
        return "Granted", (lease.token, self.journal())

    def now(self) -> float:
        """The walk's clock: the wall clock plus the lease time the walk let pass."""
        return time.time() + self.elapsed

    def _shift(self, set_to: str) -> None:
        with self.store._transaction():  # type: ignore[attr-defined]
            self.store._execute(f"UPDATE owners SET expires_at = {set_to} WHERE run_id = ?",  # type: ignore[attr-defined]
                                (self.run_id,))

    def tick(self, live: list[tuple[int, int]], running: frozenset[int] = frozenset()) -> None:
        """A third of a lease passes: the live owners renew first (``live``: each worker's number
        and token): one whose tool runs (``running``) by one beat of the real ``Heartbeat`` that
        guards a tool call, the others as a worker renews between its steps."""
        for who, token in live:
            if who in running:
                Heartbeat(self._lease(who, token), self.store.renew).beat()
                continue
            with contextlib.suppress(LeaseLost):
                self.store.renew(self._lease(who, token))
        third = self.seconds / 3
        self.elapsed += third
        postgres = type(self.store).__module__.endswith("postgres")
        self._shift(f"expires_at - make_interval(secs => {third})" if postgres else f"expires_at - {third}")

    def lapse(self) -> None:
        """Time passes until the lease ran out: its owner renews no more."""
        for _ in range(4):
            self.tick([])

    def release(self, who: int, token: int) -> None:
        """The owner that completed the effect gives the run back, as ``Ownership.close`` does."""
        self.store.release(self._lease(who, token))
        self.log.note(self.run_id, "release", token=token, owner=f"worker-{who}")

    def write(self, kind: str, who: int, token: int) -> Answer:
        body = {"key": self.key, "attempt": 1, "retry": False} if kind == STARTED else \
            {"key": self.key, "outcome": "completed", "result": None, "via": "run"}
        try:
            LoggedStore(self.store, self._lease(who, token), self.log).append(
                self.run_id, self.store.version(self.run_id), [Entry(kind, body, time.time())])
        except LeaseLost:
            return "Rejected", ()
        return "Ack", ()

    def run(self, token: int, who: int = 0) -> Answer | None:
        try:
            self.ledger.execute(self.key, token)
        except Fenced:
            return "ToolRefused", ()
        return None

    def status(self, token: int, who: int = 0) -> Answer:
        self.ledger.fence(self.key, token)
        return ("StatusDone", ()) if self.ledger.executions()[self.key] else ("StatusNotRun", ())

    def worker(self, who: int, event: str, sent: Answer | None, idle: bool) -> str:
        """A worker's own step: the scheduler plays the worker here, so it agrees ('')."""
        return ""

    def crash(self, who: int) -> None:
        """A worker crashes: the scheduler played it, nothing real stops."""

    def outside(self, kind: str, who: int) -> str:
        """Why the real code cannot take this fault of worker ``who`` now ('': it can)."""
        return ""

    def finish(self, who: int) -> None:
        """The tool's call returns: the ledger's line was written at ``Run``."""

    def close(self) -> None:
        """The walk ended: nothing of the scheduler's own is left running."""


@dataclass(frozen=True)
class Divergence:
    """The first step where the real code answered otherwise than the model."""

    seed: int
    step: int
    label: str
    model: str
    real: str
    steps: tuple[tuple[Label, Config, Effect], ...]

    def __str__(self) -> str:
        return (f"walk {self.seed}, step {self.step}: {self.label}: the model sends {self.model}, "
                f"the real code {self.real}")


@dataclass
class Walked:
    """What the walks covered: steps taken, real calls checked, steps avoided (and why)."""

    walks: int = 0
    steps: int = 0
    checked: int = 0
    avoided: dict[str, int] = field(default_factory=dict)


def _sent(effect: Effect) -> Answer | None:
    if not effect.sent:
        return None
    sent = effect.sent[0]
    return sent.event, sent.params


def _shown(answer: Answer | None) -> str:
    if answer is None:
        return "nothing"
    event, params = answer
    return event + ("(" + ", ".join(map(str, params)) + ")" if params else "")


def walk(system: System, real: RealProtocol, seed: int, length: int, walked: Walked,
         seen: set[Config] | None = None, log: list[dict[str, JSON]] | None = None) -> Divergence | None:
    """One seeded walk of up to ``length`` steps; the first divergence, or None. ``log`` gets the
    walk's records as a program logs them (the real answers; ``spec/systems/audit/`` maps them)."""
    rng = random.Random(seed)
    stepper = Stepper(system)
    config = initial_config(system)
    done: list[tuple[Label, Config, Effect]] = []
    walked.walks += 1
    try:
        for n in range(1, length + 1):
            choices = []
            for label, after, effect in stepper.successors(config):
                if after is config:
                    continue   # a step that failed: no successor
                why = _outside(system, config, after, label, real.claims_after_finish) or \
                    _real_outside(system, real, label)
                if why:
                    walked.avoided[why] = walked.avoided.get(why, 0) + 1
                else:
                    choices.append((label, after, effect))
            if not choices:
                return None
            label, after, effect = rng.choices(choices, [_WEIGHTS.get(c[0][0], 1.0) for c in choices])[0]
            done.append((label, after, effect))
            walked.steps += 1
            if seen is not None:
                seen.add(after)
            real.holder = _holder(system, after)
            found = _perform(system, real, label, config, after, effect, walked, log)
            if found is not None:
                model, actual = found
                return Divergence(seed, n, label_text(system, label), model, actual, tuple(done))
            _time_passes(system, real, label, config, after, rng)
            config = after
        return None
    finally:
        real.close()


def _perform(system: System, real: RealProtocol, label: Label, config: Config, after: Config, effect: Effect,
             walked: Walked, log: list[dict[str, JSON]] | None) -> tuple[str, str] | None:
    """One model step done on the real code; (the model's message, the real one) where they differ."""
    kind, i, event, params, _ = label
    store, tool = system.instance("store").index, system.instance("tool").index
    inst = system.instances[i]
    model = actual = _sent(effect)
    if kind == "crash" and inst.group == "worker":
        real.crash(inst.member)
    elif kind in ("deliver", "env") and i in (store, tool):
        real_call = _CALLS.get(event)
        actual = real_call(real, params) if real_call is not None else model
        walked.checked += real_call is not None
        if event == "Finish":
            real.finish(int(params[0]))
    elif kind in ("deliver", "env") and inst.group == "worker" and effect.status == "fired":
        state = inst.table.states[after[0][i][0]].name
        differs = real.worker(inst.member, event, model, state in ("Idle", "Done"))
        walked.checked += real.drives_workers
        if differs:
            return _shown(model) if model is not None else f"nothing ({state})", differs
    if log is not None and kind in ("deliver", "env") and effect.status == "fired":
        log.append(_record(system, label, actual))
    if actual != model:
        return _shown(model), _shown(actual)
    return None


def _time_passes(system: System, real: RealProtocol, label: Label, before: Config, after: Config,
                 rng: random.Random) -> None:
    """After a step: the lease runs out (``Expire``), is given back (the completing write), or, now
    and then, a third of it passes with its live owner renewing."""
    kind, i, event, params, _ = label
    live = _live(system, after)
    if kind == "env" and event == "Expire":
        real.lapse()
    elif i == system.instance("store").index and _lease_ended(system, before, after):
        real.release(int(params[0]), int(params[1]))   # the completing write's owner, at its end
    elif live is not None and rng.random() < _TICKS:
        real.tick(live, _running(system, after))


_ANSWERS = {"Granted": "granted", "Refused": "refused", "Ack": "ack", "Rejected": "rejected",
            "ToolRefused": "refused", "StatusNotRun": "not-run", "StatusDone": "done"}


def _record(system: System, label: Label, answer: Answer | None) -> dict[str, JSON]:
    """A step as the program logs it: a worker's own step, or the store's or tool's real answer."""
    _, i, event, params, _ = label
    inst = system.instances[i]
    if inst.group == "worker":
        named = {k: v for k, v in param_names(system, i, event, params).items()}
        return {"op": "worker", "owner": f"worker-{inst.member}", "event": event, **named}
    given = param_names(system, i, event, params)
    owner = {"owner": f"worker-{given['who']}"} if "who" in given else {}
    token = {"token": given["token"]} if "token" in given else {}
    reply = _ANSWERS.get(answer[0], "") if answer is not None else "ran"
    if event == "Claim":
        granted = {"token": answer[1][0], "journal": answer[1][1]} if answer is not None and answer[1] else {}
        return {"op": "claim", **owner, "result": reply, **granted}
    if event in ("WriteStarted", "WriteCompleted"):
        return {"op": "write", "what": event.removeprefix("Write").lower(), **owner, **token, "result": reply}
    if event == "Status":
        return {"op": "status", **owner, **token, "answer": reply}
    return {"op": event.lower(), **owner, **token, **({"result": reply} if event == "Run" else {})}


def _holder(system: System, config: Config) -> tuple[int, int] | None:
    """The worker whose lease the model's store holds, and its token (None: no lease runs)."""
    store = system.instance("store").index
    if not _var(system, config, store, "leased"):
        return None
    return int(_var(system, config, store, "owner")), int(_var(system, config, store, "epoch"))


def _live(system: System, config: Config) -> list[tuple[int, int]] | None:
    """The workers whose heartbeat renews the lease the model says they hold: the owner, awake,
    acting on the run under it. None when the lease's owner renews no more (stalled, idle or
    finished, or restarted since the grant): time passing then is the model's ``Expire``, a step
    of its own (the system's environment says when it may happen)."""
    store = system.instance("store").index
    if not _var(system, config, store, "leased"):
        return []
    owner = int(_var(system, config, store, "owner"))
    member = system.groups["worker"].members[owner]
    state = system.instances[member].table.states[config[0][member][0]].name
    held = int(_var(system, config, member, "held"))
    if config[2][member] or state in ("Idle", "Done") or held != _var(system, config, store, "epoch"):
        return None
    return [(owner, held)]


# Time passes a third of a lease after this share of the steps (each live owner renewing first).
_TICKS = 0.3

# A guided walk: a worker stalls late (the one stall the system allows is not spent at once) and,
# stalled, wakes seldom, so that its lease lapses under it and the other worker claims.
_WEIGHTS = {"wake": 0.1, "stall": 0.3}

# The real call of each store and tool event ("Expire" and "Finish" are time passing: no call).
_CALLS: dict[str, Callable[[RealProtocol, tuple[Value, ...]], Answer | None]] = {
    "Claim": lambda real, params: real.claim(int(params[0])),
    "WriteStarted": lambda real, params: real.write(STARTED, int(params[0]), int(params[1])),
    "WriteCompleted": lambda real, params: real.write(COMPLETED, int(params[0]), int(params[1])),
    "Run": lambda real, params: real.run(int(params[1]), int(params[0])),
    "Status": lambda real, params: real.status(int(params[1]), int(params[0])),
}


def _real_outside(system: System, real: RealProtocol, label: Label) -> str:
    inst = system.instances[label[1]]
    return real.outside(label[0], inst.member) if inst.group == "worker" else ""


def _running(system: System, config: Config) -> frozenset[int]:
    """The workers whose tool call runs (the model's ``Running``): the heartbeat renews for them."""
    members = system.groups["worker"].members
    return frozenset(k for k, m in enumerate(members)
                     if system.instances[m].table.states[config[0][m][0]].name == "Running")


def _var(system: System, config: Config, instance: int, name: str) -> Value:
    table = system.instances[instance].table
    names = [v.name for v in table.variables]
    return config[0][instance][1][names.index(name)]


def _lease_ended(system: System, before: Config, after: Config) -> bool:
    store = system.instance("store").index
    return bool(_var(system, before, store, "leased")) and not _var(system, after, store, "leased")


def _outside(system: System, before: Config, after: Config, label: Label, after_finish: bool) -> str:
    """Why this step is past what the code and the model share ('' when it is not): the walk
    takes another."""
    kind, i, event, _, _ = label
    store = system.instance("store").index
    is_store = i == store
    if kind not in ("deliver", "env") or i not in (store, system.instance("tool").index):
        return ""
    states = system.instances[store].table.states
    finished = states[before[0][store][0]].name
    if is_store and event == "Claim" and finished != "Open" and not (after_finish and finished == "Finished"):
        return "claim after the run finished or blocked"
    if is_store and states[after[0][store][0]].name == "Blocked":
        return "claims past max_claims"
    tool = system.instance("tool").index
    busy = _var(system, before, tool, "busy0") or _var(system, before, tool, "busy1")
    if not is_store and event == "Status" and busy:
        return "status query while the model's tool is busy"
    return ""
