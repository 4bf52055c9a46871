"""``agentfsm chaos``: bounded fault campaigns against real ``agentfsm`` processes.

Where ``agentfsm crash`` kills the runtime at every write boundary of one process, a chaos
campaign does what users and machines do: a second terminal resumes a run that is still
going, a process is SIGKILLed or frozen (SIGSTOP) past its lease and thawed, the disk fills
up, a bit flips in the journal or its write-ahead log, workers are killed or frozen, the
PostgreSQL server is killed and restarted. Each trial plays one bundled agent (they take
turns; ``agentfsm.faults.chaos_agents``), whose every tool execution appends a line to a
ledger outside the store. The full disk is a sweep: it fills inside each write of a run in turn,
at each frame the write adds to SQLite's write-ahead log. After each trial the run is finished the
way a user would (``--resume``, deciding every unknown effect ``failed`` — never ``rerun``, so
any repeat is the runtime's — and ``journal --repair`` when the store names a damaged tail;
the scenarios that test a ``rerun`` answer it instead, and each ``rerun`` allows that effect
one more execution), and the trial is judged:

- **duplicated effect**: a ledger line (one effect) appears twice;
- **lost step**: an effect ran (ledger) that the journal does not know was started, or
  the journal reads back fewer records than it held before the fault without saying so;
- **stuck run**: a process had to be killed after the time bound, or the run did not end;
- **unclean error**: a traceback, an exit status other than 0, 1 or 2, or an exit 2 that
  does not name the store;
- **damage reported / repaired**: the journal was reported damaged (exit 2, the store
  named), and repaired by ``journal --repair`` or left reported.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from agentfsm.faults.chaos_agents import AGENTS, ChaosAgent, ledger_line
from agentfsm.faults.protocol_audit import Auditor
from agentfsm.impl.durable.protocol_log import protocol_path
from agentfsm.impl.stores.wal import FRAME_HEADER, committed_end

if TYPE_CHECKING:
    from agentfsm.impl.stores.postgres import PostgresStore

AGENTFSM = str(Path(sys.executable).parent / "agentfsm")
ROOT = Path(__file__).resolve().parent.parent
COUNTER_TABLE = """format: 1
machine: counter
title: A counter whose every tick is one external effect
source: agentfsm chaos
constants: {max: 200}
variables:
  n: {type: int, min: 0, max: max, init: 0}
states:
  Counting: {initial: true}
  Stopped: {final: true}
events:
  Tick: {}
  Stop: {}
actions:
  Note: {effect: external, idempotent: false}
transitions:
  - {from: Counting, on: Tick, when: n < max, to: Counting, set: {n: n + 1}, emit: [Note]}
  - {from: Counting, on: Stop, to: Stopped}
unhandled: {policy: reject}
"""
BOUND = 60.0  # seconds any one process may take before it counts as stuck
SCENARIOS = ("two-resumers", "sigkill", "sigstop", "full-disk", "bit-flip", "repair-resume", "mistyped-id")
PG_SCENARIOS = ("pg-two-resumers",)
WORKER_SCENARIOS = ("workers", "server-kill", "slow-tools")
TYPO = "rnu"  # the run id a user mistypes for ``run`` (mistyped-id)
PAD = 3 * 4096  # full-disk: characters more in each call, so the writes journaling them span several frames
FRAME_SIZE = FRAME_HEADER + 4096  # a write-ahead log frame of the stores' page size


_AUDITOR: list[Auditor] = []


def auditor() -> Auditor:
    """The system and its runtime mapping, loaded once a campaign."""
    if not _AUDITOR:
        _AUDITOR.append(Auditor())
    return _AUDITOR[0]


def pg_protocol_log(url: str, schema: str) -> Path | None:
    """Where the processes on a PostgreSQL schema write their protocol log (as the store says)."""
    from types import SimpleNamespace

    from agentfsm.impl.stores.urls import postgres_args
    return protocol_path(SimpleNamespace(url=postgres_args(url)[0], schema=schema))


def agent_script(tools: int, sleep: float = 0.2) -> str:
    """The Loom agent's chaos script (``ChaosAgent.script``)."""
    return AGENTS[0].script(tools, sleep)


@dataclass
class Row:
    """One scenario's counts over its trials (of one agent: a worker scenario's is ``counter``)."""

    scenario: str
    agent: str = "counter"
    trials: int = 0
    runs: int = 0
    faults: int = 0
    duplicated: int = 0
    lost: int = 0
    stuck: int = 0
    unclean: int = 0
    damaged: int = 0
    repaired: int = 0
    audited: int = 0       # effects whose protocol log was audited against durable-run-fixed.yaml
    unexplained: int = 0   # ... that no interleaving of the system explains
    cut: int = 0           # ... whose window went past what the system describes (a prefix audited)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.duplicated or self.lost or self.stuck or self.unclean or self.unexplained)

    def audit(self, log: Path | None, folder: str) -> None:
        """Audit a trial's protocol log (``agentfsm.faults.protocol_audit``): an effect the
        system does not explain fails the campaign."""
        if log is None:
            return
        verdict = auditor().audit_log(log)
        self.audited += verdict.windows
        self.cut += verdict.cut
        self.unexplained += len(verdict.unexplained)
        self.notes += [f"{folder}: {why}" for why in verdict.unexplained]


@dataclass
class Proc:
    argv: list[str]
    code: int
    out: str
    err: str
    timed_out: bool = False

    @property
    def gist(self) -> str:
        """Its stderr's end for a note, or, when it printed a traceback, the traceback's last lines:
        the error that is the verdict, not the lines logged after it."""
        err = self.err.strip()
        if "Traceback" not in err:
            return err[-300:]
        lines = err[err.rindex("Traceback"):].splitlines()
        return "\n".join(line for line in lines if not line.startswith((" ", "\t")))[:300]


def spawn(argv: Sequence[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """An ``agentfsm`` process in a session of its own. (A full disk is the process's own
    ``--full-disk-at``: Python ignores SIGXFSZ from its start, whatever its parent set.)"""
    return subprocess.Popen([AGENTFSM, *argv], cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, env=env)


def reap(child: subprocess.Popen[str], bound: float = BOUND) -> Proc:
    try:
        out, err = child.communicate(timeout=bound)
        return Proc(list(map(str, child.args)), child.returncode, out, err)  # type: ignore[arg-type]
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)
        out, err = child.communicate()
        return Proc(list(map(str, child.args)), child.returncode, out, err, True)  # type: ignore[arg-type]


class Trial:
    """One run in its own folder (its store ``j.db`` there, or a PostgreSQL URL), its
    processes, and the verdict. ``reruns`` counts the executions the user allowed again."""

    def __init__(self, folder: Path, row: Row, agent: ChaosAgent, tools: int, store: str = "j.db",
                 sleep: float = 0.2, pad: int = 0) -> None:
        self.dir = folder
        self.row = row
        self.agent = agent
        self.store = store
        self.procs: list[Proc] = []
        self.killed: set[int] = set()
        self.reruns: Counter[str] = Counter()
        self.false_damage = False  # whether a damage report can only be false (a full disk loses nothing)
        (folder / "work").mkdir(parents=True)
        (folder / "s.yaml").write_text(agent.script(tools, sleep, pad))
        self.env = agent.env(folder)
        row.runs += 1

    def run_args(self, *extra: str) -> list[str]:
        return ["run", str(self.agent.table), "--script", "s.yaml", "--store", self.store, "--lease", "1",
                "--timeout", "50", *extra]

    def named(self, err: str) -> bool:
        """Whether an error names the store (a SQLite file, or the PostgreSQL URL)."""
        return (self.store if self.store == "j.db" else self.store.split("?")[0]) in err

    def exists(self) -> bool:
        return self.store != "j.db" or (self.dir / "j.db").exists()

    def start(self, *extra: str) -> subprocess.Popen[str]:
        return spawn(self.run_args(*extra), self.dir, self.env)

    def wait(self, child: subprocess.Popen[str], killed: bool = False) -> Proc:
        proc = reap(child)
        self.procs.append(proc)
        if killed:
            self.killed.add(id(proc))
        return proc

    def cli(self, *argv: str) -> Proc:
        proc = reap(spawn(argv, self.dir, env=self.env))
        self.procs.append(proc)
        return proc

    def journal(self) -> tuple[int, dict[str, Any] | None]:
        proc = self.cli("journal", "--store", self.store, "--json")
        try:
            view = json.loads(proc.out) if proc.out.strip() else None
        except ValueError:
            view = None
        return proc.code, view if isinstance(view, dict) else None

    def effects(self) -> list[dict[str, Any]] | None:
        """The effects of every run in the store that run a script's tool (None: the journal is unreadable)."""
        code, view = self.journal()
        runs = view.get("runs") if code == 0 and isinstance(view, dict) else None
        if not isinstance(runs, list):
            return None
        return [e for run in runs for e in run.get("current", {}).get("effects", []) if ledger_line(e) is not None]

    def records(self) -> int:
        code, view = self.journal()
        if code != 0 or not isinstance(view, dict) or not view.get("runs"):
            return -1
        runs = view["runs"]
        assert isinstance(runs, list)
        return sum(len(run["records"]) for run in runs)

    def decisions(self) -> list[str]:
        _, view = self.journal()
        runs = [] if view is None else view.get("runs", [])
        return [d["id"] for run in runs for d in run.get("decisions", [])]

    def finish(self, answer: str = "failed") -> None:
        """Resume until the run ends, as a user would: unknown effects decided ``answer`` (a
        ``rerun`` allows that effect one more execution), a damaged store repaired once; a store
        still reported damaged ends the trial (reported)."""
        repaired = False
        for _ in range(8):
            proc = self.cli(*self.run_args("--resume") if self.exists() else self.run_args())
            if proc.code == 0:
                return
            if proc.code == 2 and ("no run 'run' to resume" in proc.err or "the store holds no run" in proc.err):
                # killed (or its disk full) before its first write
                proc = self.cli(*self.run_args())
                if proc.code == 0:
                    return
                continue
            if proc.code == 2 and self.named(proc.err) and "is owned by" not in proc.err \
                    and "exists; continue it" not in proc.err:  # the store reported damaged
                self.row.damaged += 1
                if self.false_damage and "disk is full" not in proc.err:
                    self.row.unclean += 1
                    self.row.notes.append(f"{self.dir.name}: a full disk reported as damage: "
                                          f"{proc.err.strip().rpartition('error: ')[2][-300:]}")
                if repaired or self.cli("journal", "--store", self.store, "--repair").code != 0:
                    return
                repaired = True
                self.row.repaired += 1
                continue
            if proc.code == 2 and "exists; continue it with --resume" in proc.err:
                continue
            decisions = self.decisions()
            if not decisions:
                if proc.code == 1 and "owned by" not in proc.err:
                    continue
                time.sleep(0.5)
                continue
            self.reruns.update(decisions if answer == "rerun" else [])
            decided = self.cli(*self.run_args("--resume", *[a for d in decisions
                                                            for a in ("--decide", f"{d}={answer}")]))
            if decided.code == 0:
                return
        self.row.stuck += 1
        self.row.notes.append(f"{self.dir.name}: the run did not end")

    def judge(self) -> None:
        for proc in self.procs:
            if proc.timed_out:
                self.row.stuck += 1
                self.row.notes.append(f"{self.dir.name}: {' '.join(proc.argv[1:3])} timed out")
            elif id(proc) in self.killed:
                continue
            elif "Traceback" in proc.err or proc.code not in (0, 1, 2) or (proc.code == 2 and not self.named(proc.err)
                                                                             and "s.yaml" not in proc.err):
                self.row.unclean += 1
                self.row.notes.append(f"{self.dir.name}: exit {proc.code}: {proc.gist}")
        ledger = self.dir / "ledger"
        lines = Counter(ledger.read_text().split()) if ledger.exists() else Counter()
        effects = self.effects()
        allowed: Counter[str | None] = Counter()
        for e in effects or []:
            allowed[ledger_line(e)] += self.reruns[e["key"]]
        duplicated = sum(max(0, n - 1 - allowed[line]) for line, n in lines.items())
        self.row.duplicated += duplicated
        if duplicated:
            self.row.notes.append(f"{self.dir.name}: ran more often than allowed: {dict(lines)}, reruns {allowed}")
        if effects is not None:
            started = {ledger_line(e) for e in effects if e["status"] != "pending"}
            lost = set(lines) - started
            if lost:
                self.row.lost += len(lost)
                self.row.notes.append(f"{self.dir.name}: ran but not journaled: {sorted(lost)}")


def sqlite_trial(scenario: str, folder: Path, row: Row, rng: random.Random, agent: ChaosAgent, tools: int) -> None:
    trial = Trial(folder, row, agent, tools)
    answer = "failed"
    if scenario == "sigkill":  # mid-run, not mid-start-up (a loaded machine starts slowly)
        killed_mid_tool(trial, rng)
        row.faults += 1
    elif scenario in ("repair-resume", "mistyped-id"):
        answer = lost_started(trial, rng) if scenario == "repair-resume" else mistyped(trial, rng)
    else:
        first = trial.start()
        deadline = time.monotonic() + BOUND
        while scenario == "bit-flip" and not (folder / "j.db").exists() and first.poll() is None \
                and time.monotonic() < deadline:  # a loaded machine starts slowly: something to flip
            time.sleep(0.02)
        time.sleep(rng.uniform(0.3, 2.5))
        if scenario == "two-resumers":
            second = trial.start("--resume")
            trial.wait(second)
            trial.wait(first)
        elif scenario == "sigstop":
            os.kill(first.pid, signal.SIGSTOP)
            time.sleep(1.6)  # past the 1 s lease
            second = trial.start("--resume")
            trial.wait(second)
            os.kill(first.pid, signal.SIGCONT)
            trial.wait(first)
        elif scenario == "bit-flip":
            if rng.random() < 0.5:
                os.killpg(first.pid, signal.SIGKILL)  # leave a write-ahead log behind
                trial.wait(first, killed=True)
            else:
                trial.wait(first)
            if not (folder / "j.db").exists():  # killed before the store existed: nothing to flip
                trial.finish()
                trial.judge()
                row.audit(folder / "j.db.protocol.jsonl", folder.name)
                return
            before = trial.records()
            flip(folder, rng)
            after = trial.records()
            if 0 <= after < before:
                row.lost += before - after
                row.notes.append(f"{folder.name}: a flipped bit silently dropped {before - after} record(s)")
        row.faults += 1
    trial.finish(answer)
    trial.judge()
    row.audit(folder / "j.db.protocol.jsonl", folder.name)


def count_writes(folder: Path, row: Row, agent: ChaosAgent) -> list[int]:
    """The writes of a fault-free one-tool run of ``agent``, each as the frames it added to the
    write-ahead log, at the write boundaries ``agentfsm crash`` counts to kill at (two a write,
    before its commit and after it). The run is judged too."""
    reference = Trial(folder, row, agent, 1, pad=PAD)
    counted = reference.cli(*reference.run_args("--kill-at", "0", "--json"))
    reference.judge()
    frames = [int(n) for text in notes(counted.out, "frames") for n in text.split()]
    if counted.code != 0 or not frames:
        row.unclean += 1
        row.notes.append(f"{folder.name}: the fault-free run counted no writes (exit {counted.code})")
        return []
    return frames


def full_disk(folder: Path, row: Row, rng: random.Random, agent: ChaosAgent, write: int, frame: int,
              die: bool) -> None:
    """full-disk: the disk fills at frame ``frame`` (from 0) of write ``write`` of a one-tool run
    (``run --full-disk-at``), a random number of bytes into it: the write's frames before it are
    whole and none marks a commit. The process fails on it (exit 2) or (``die``) is killed by it
    (SIGXFSZ) and the user resumes before space returns (``still_full``). Then space returns and
    the user resumes. Nothing committed is lost: a damage report is false (unclean)."""
    trial = Trial(folder, row, agent, 1, pad=PAD)
    trial.false_damage = True
    room = frame * FRAME_SIZE + rng.randrange(1 if die else 0, FRAME_SIZE)
    proc = trial.wait(trial.start("--full-disk-at", f"{2 * write - 1}:{room}{':die' if die else ''}"))
    if proc.code == -signal.SIGXFSZ:
        trial.killed.add(id(proc))
        still_full(trial, rng)
    if proc.code == -signal.SIGXFSZ or "disk is full" in proc.err:
        row.faults += 1
    trial.finish()
    trial.judge()
    row.audit(folder / "j.db.protocol.jsonl", folder.name)


def still_full(trial: Trial, rng: random.Random) -> None:
    """The user resumes the killed run before space returns, the disk fuller still: when the killed
    write left two whole frames or more after the log's last commit, the resume's first write (its
    lease) is cut inside the first of them and the resume killed too (an exit would close the log,
    and SQLite then drops what follows the last commit). The log then holds a frame failing its
    checksum followed by whole ones of the same generation, none marking a commit: a full disk's
    leftovers (nothing committed is lost), which a check must not call damage."""
    wal = trial.dir / "j.db-wal"
    data = wal.read_bytes() if wal.exists() else b""
    if (len(data) - committed_end(data)) // FRAME_SIZE >= 2:
        resumed = trial.wait(trial.start("--resume", "--full-disk-at", f"0:{rng.randrange(1, FRAME_SIZE)}:die"))
        if resumed.code == -signal.SIGXFSZ:
            trial.killed.add(id(resumed))


def full_disk_trial(folder: Path, row: Row, rng: random.Random, agent: ChaosAgent, turn: int, turns: int,
                    writes: dict[str, list[int]]) -> None:
    """The agent's ``turn``-th of its ``turns`` full-disk trials, over the frames each write of its
    run adds to the log (counted once: ``writes``): the even turns fill the disk at every frame in
    turn, the process failing on it; the odd ones at every frame past a write's second, killing the
    process with two whole frames of the write or more in the log, none marking a commit (what
    ``still_full`` needs). Each kind's turns spread evenly over its frames, at every one when
    there are as many (the turns past its last do nothing)."""
    if agent.name not in writes:
        writes[agent.name] = count_writes(folder / "reference", row, agent)
    die = turn % 2 == 1
    frames = [(write, k) for write, count in enumerate(writes[agent.name], 1) for k in range(count)
              if k >= 2 or not die]
    at = spread(turn // 2, (turns + (not die)) // 2, len(frames))
    if at is not None:
        row.trials += 1
        full_disk(folder / "fill", row, rng, agent, *frames[at], die)


def spread(i: int, n: int, total: int) -> int | None:
    """The ``i``-th of ``n`` picks spread evenly over ``range(total)`` (the middle of its share), or
    each in turn when ``n >= total`` (None past the last)."""
    if n < total:
        return (2 * i + 1) * total // (2 * n)
    return i if i < total else None


def notes(out: str, kind: str) -> list[str]:
    """The texts of a ``run --json`` output's lines of ``kind``."""
    found = []
    for line in out.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and entry.get("kind") == kind:
            found.append(str(entry.get("text")))
    return found


def killed_mid_tool(trial: Trial, rng: random.Random) -> None:
    """Start the run and SIGKILL it (with its tool) once a tool has started, or a little later."""
    first = trial.start()
    deadline = time.monotonic() + BOUND
    while not (trial.dir / "ledger").exists() and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(rng.uniform(0.0, 1.0))
    os.killpg(first.pid, signal.SIGKILL)
    trial.wait(first, killed=True)


def lost_started(trial: Trial, rng: random.Random) -> str:
    """repair-resume: killed mid-tool, the journal then loses its records from the last
    ``started`` on (a log cut back); the user repairs it and resumes, answering ``rerun``. A
    repair that left the effect ``pending`` would perform it again without being asked."""
    killed_mid_tool(trial, rng)
    db = trial.dir / "j.db"
    if db.exists():
        lose_last_started(db)
        trial.row.faults += 1
    return "rerun"


def lose_last_started(db: Path) -> None:
    """Cut the journal back as a lost log tail would: in the run that started an effect last, its
    records from that ``started`` on (its completion too, if it was journaled)."""
    with sqlite3.connect(db) as conn:
        conn.execute("DELETE FROM records WHERE run_id = (SELECT run_id FROM records WHERE kind = 'started' "
                     "ORDER BY time DESC LIMIT 1) AND seq >= (SELECT max(seq) FROM records AS r "
                     "WHERE r.run_id = records.run_id AND r.kind = 'started')")
    conn.close()


def mistyped(trial: Trial, rng: random.Random) -> str:
    """mistyped-id: killed mid-tool (or left to end), then resumed as ``--run-id rnu``: it must
    be refused (exit 2) and perform nothing; a run it started would repeat every effect."""
    if rng.random() < 0.5:
        killed_mid_tool(trial, rng)
    else:
        trial.wait(trial.start())
    typo = trial.cli(*trial.run_args("--resume", "--run-id", TYPO))
    trial.row.faults += 1
    if typo.code != 2 or "no run 'rnu' to resume" not in typo.err:
        trial.row.unclean += 1
        trial.row.notes.append(f"{trial.dir.name}: --resume --run-id {TYPO}: exit {typo.code}: {typo.err[-200:]}")
    return "rerun"


def pg_trial(folder: Path, row: Row, rng: random.Random, url: str, agent: ChaosAgent, tools: int) -> None:
    """pg-two-resumers: a run on PostgreSQL killed mid-tool, then two ``--resume --decide
    KEY=rerun`` at once (or, half the time, a second resumer while the first runs): the user
    allowed one more execution, and one process at a time may own the run."""
    schema = f"chaos_{os.getpid()}_{rng.randrange(1 << 30)}"
    trial = Trial(folder, row, agent, tools, store=f"{url}?schema={schema}", sleep=1.5)
    try:
        if rng.random() < 0.5:
            killed_mid_tool(trial, rng)
            keys = [e["key"] for e in trial.effects() or [] if e["status"] in ("started", "unknown")]
            decide = [a for key in keys for a in ("--decide", f"{key}=rerun")]
            trial.reruns.update(keys)  # the user allowed one rerun, whichever process performs it
            both = [trial.start("--resume", *decide) for _ in range(2)]
            for child in both:
                trial.wait(child)
        else:
            first = trial.start()
            time.sleep(rng.uniform(0.5, 3.0))
            trial.wait(trial.start("--resume"))
            trial.wait(first)
        row.faults += 1
        trial.finish("rerun")
        trial.judge()
        row.audit(pg_protocol_log(url, schema), folder.name)
    finally:
        drop_schema(url, schema)
        take_log(pg_protocol_log(url, schema), folder)


def take_log(log: Path | None, folder: Path) -> None:
    """Move a dropped schema's protocol log (it lives outside the trial's folder) into the trial's
    folder, which is removed, or kept with ``--keep``."""
    if log is not None and log.exists():
        shutil.move(log, folder / "protocol.jsonl")


def drop_schema(url: str, schema: str) -> None:
    store = connect(url, schema)
    try:
        with store._conn.transaction():
            store._conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        store.close()


def flip(folder: Path, rng: random.Random) -> None:
    """Flip one bit of the journal: in its write-ahead log when one is left, else in the database."""
    wal = folder / "j.db-wal"
    target = wal if wal.exists() and wal.stat().st_size > 32 else folder / "j.db"
    data = bytearray(target.read_bytes())
    if not data:
        return
    at = rng.randrange(len(data))
    data[at] ^= 1 << rng.randrange(8)
    target.write_bytes(bytes(data))


def worker_trial(scenario: str, folder: Path, row: Row, rng: random.Random, url: str, pg_dir: Path | None,
                 runs: int) -> None:
    """Runs of a counter served by three workers that are SIGKILLed and frozen (and, for
    ``server-kill``, the PostgreSQL server SIGKILLed and restarted on its port)."""
    from agentfsm.impl.durable.ledger import FileLedger
    from agentfsm.impl.stores.postgres import PostgresStore
    from agentfsm.impl.workers.worker import submit
    from agentfsm.spec import load_table

    table_path = folder / "counter.yaml"
    folder.mkdir(parents=True)
    table_path.write_text(COUNTER_TABLE)
    table = load_table(table_path)
    schema = f"chaos_{os.getpid()}_{rng.randrange(1 << 30)}"
    store = PostgresStore(url, schema)
    slow = scenario == "slow-tools"
    ticks = {f"run-{k}": rng.randint(1, 2 if slow else 5) for k in range(runs // 3 if slow else runs)}
    for run_id, n in ticks.items():
        submit(store, table, run_id, [("Tick", {})] * n + [("Stop", {})])
    store.close()
    row.runs += len(ticks)
    ledger = folder / "effects"
    argv = ["worker", str(table_path), "--store", f"{url}?schema={schema}", "--ledger", str(ledger), "--status-query",
            "--lease", "1", "--poll", "0.05", "--exit-when-idle"]
    env = None
    if slow:  # tools that outlive the 1 s lease, asleep or keeping the GIL; the tools are the only fault
        env = {**os.environ, "AGENTFSM_CHAOS_LEDGER": str(ledger), "AGENTFSM_CHAOS_LINGER": "2",
               "AGENTFSM_CHAOS_GIL": "1" if row.trials % 2 == 0 else ""}
        argv[4:7] = ["--tools", "agentfsm.faults.chaos_tools:tools"]
        row.faults += sum(ticks.values())
    fleet = [spawn(argv, folder, env=env) for _ in range(2 if slow else 3)]
    procs: list[tuple[subprocess.Popen[str], bool]] = []
    deadline = time.monotonic() + BOUND
    server_killed = False
    while not slow and any(p.poll() is None for p in fleet) and time.monotonic() < deadline:
        time.sleep(rng.uniform(0.2, 0.8))
        live = [p for p in fleet if p.poll() is None]
        if not live:
            break
        victim = rng.choice(live)
        fault = rng.choice(("kill", "stop"))
        if scenario == "server-kill" and not server_killed and pg_dir is not None:
            kill_server(pg_dir)
            server_killed = True
            row.faults += 1
            continue
        if fault == "kill":
            os.killpg(victim.pid, signal.SIGKILL)
            victim.wait()
            procs.append((victim, True))
            fleet.remove(victim)
            fleet.append(spawn(argv, folder, env=env))
        else:
            os.kill(victim.pid, signal.SIGSTOP)
            time.sleep(rng.uniform(1.2, 2.5))  # past the lease: another worker takes its run
            os.kill(victim.pid, signal.SIGCONT)
        row.faults += 1
    for child in fleet:
        procs.append((child, False))
    row.trials += 1
    verdicts = [(reap(child, max(1.0, deadline - time.monotonic() + 30)), killed) for child, killed in procs]
    for n, (proc, _) in enumerate(verdicts):  # kept with the trial's folder (--keep), to read a note in full
        (folder / f"worker-{n}.stderr").write_text(proc.err)
    for proc, killed in verdicts:
        if proc.timed_out:
            row.stuck += 1
            row.notes.append(f"{folder.name}: a worker did not finish")
        elif not killed and ("Traceback" in proc.err or proc.code != 0):
            row.unclean += 1
            row.notes.append(f"{folder.name}: worker exit {proc.code}: {proc.gist}")
    executions = FileLedger(ledger).executions()
    row.duplicated += sum(n - 1 for n in executions.values() if n > 1)
    store = connect(url, schema)
    try:
        jobs = {j.run_id: j for j in store.jobs()}
        for run_id, n in ticks.items():
            job = jobs[run_id]
            if job.status == "queued" or (slow and job.status != "done"):
                row.stuck += 1
                row.notes.append(f"{folder.name}: {run_id} {job.status}: {job.outcome}")
                continue
            records = store.records(run_id)
            steps = [r for r in records if r.kind == "step"]
            final = steps[-1].body["next"]["vars"]["n"] if steps else 0
            noted = {r.body["key"] for r in records if r.kind == "started"}
            if final != n or set(k for k in executions if k.startswith(f"{run_id}/")) - noted:
                row.lost += 1
                row.notes.append(f"{folder.name}: {run_id} counted {final} of {n} ticks or ran unjournaled effects")
    finally:
        with store._conn.transaction():
            store._conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        store.close()
    row.audit(pg_protocol_log(url, schema), folder.name)
    take_log(pg_protocol_log(url, schema), folder)


def connect(url: str, schema: str) -> PostgresStore:
    """The store, once the server answers again (it may be restarting)."""
    from agentfsm.impl.stores.journal import JournalError
    from agentfsm.impl.stores.postgres import PostgresStore

    for _ in range(60):
        try:
            return PostgresStore(url, schema)
        except JournalError:
            time.sleep(0.5)
    return PostgresStore(url, schema)


def kill_server(pg_dir: Path) -> None:
    """SIGKILL the PostgreSQL server of ``scripts/postgres.sh`` in ``pg_dir`` and start it again."""
    from agentfsm.impl.stores.leases import owner_gone

    pid = int((pg_dir / "data" / "postmaster.pid").read_text().split()[0])
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 30
    while not owner_gone(f"{socket.gethostname()}:{pid}") and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(1.0)  # its backends notice and exit
    # (in a session of its own: the server must outlive this process's group)
    subprocess.run([str(ROOT / "scripts" / "postgres.sh"), "start"], capture_output=True, text=True, timeout=120,
                   env={**os.environ, "AGENTFSM_PG_DIR": str(pg_dir)}, check=True, start_new_session=True)


def campaign(scenarios: Sequence[str], trials: int, seed: int, url: str | None = None, pg_dir: Path | None = None,
             tools: int = 3, runs: int = 12, log: Callable[[str], None] = lambda line: None,
             agents: Sequence[ChaosAgent] = AGENTS, keep: Path | None = None) -> list[Row]:
    """``trials`` of each scenario; an agent scenario's trial ``k`` plays ``agents[k % len(agents)]``,
    and its figures go to that agent's row. Each trial's folder (``SCENARIO-K``: its store, protocol
    log, ledger) is removed afterwards, unless ``keep`` names a folder (new or empty) to leave them
    in, to read a failing trial's log."""
    rng = random.Random(seed)
    rows: dict[tuple[str, str], Row] = {}
    writes: dict[str, list[int]] = {}  # full-disk: the frames of each write of each agent's fault-free run
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
    base = keep or Path(tempfile.mkdtemp(prefix="agentfsm-chaos-"))
    try:
        for scenario in scenarios:
            for k in range(trials):
                folder = base / f"{scenario}-{k}"
                if scenario in WORKER_SCENARIOS + PG_SCENARIOS and url is None:
                    skipped = rows.setdefault((scenario, "-"), Row(scenario, "-"))
                    skipped.notes.append("skipped: no PostgreSQL URL (--pg)")
                    break
                if scenario in WORKER_SCENARIOS and url is not None:
                    row = rows.setdefault((scenario, "counter"), Row(scenario))
                    worker_trial(scenario, folder, row, rng, url, pg_dir, runs)
                else:
                    agent = agents[k % len(agents)]
                    row = rows.setdefault((scenario, agent.name), Row(scenario, agent.name))
                    row.trials += scenario != "full-disk"
                    if scenario in PG_SCENARIOS and url is not None:
                        pg_trial(folder, row, rng, url, agent, tools)
                    elif scenario == "full-disk":
                        turns = len(range(k % len(agents), trials, len(agents)))
                        full_disk_trial(folder, row, rng, agent, k // len(agents), turns, writes)
                    else:
                        sqlite_trial(scenario, folder, row, rng, agent, tools)
                log(f"{scenario} {k + 1}/{trials}: {asdict(row) | {'notes': len(row.notes)}}")
    finally:
        if keep is None:
            shutil.rmtree(base, ignore_errors=True)
    return list(rows.values())


def table_text(rows: Sequence[Row]) -> str:
    head = ("| scenario | agent | trials | runs | faults | duplicated effects | lost steps | stuck runs | "
            "unclean errors | damage reported | repaired | effects audited | unexplained | cut |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
    return head + "".join(f"| {r.scenario} | {r.agent} | {r.trials} | {r.runs} | {r.faults} | {r.duplicated} | "
                          f"{r.lost} | {r.stuck} | {r.unclean} | {r.damaged} | {r.repaired} | {r.audited} | "
                          f"{r.unexplained} | {r.cut} |\n" for r in rows)
