"""Real crashes of a real agent: ``agentfsm run --store`` children SIGKILLed at write boundaries.

The table-level crash check delivers the table's events to the durable runtime; this one
plays an agent script (its model scripted, its tools real, in a fresh copy of the work
directory), so the agent's own effects, payloads and context rebuilding are under test.
The crash-free run counts the write boundaries; each scenario kills a child at one of
them (spread evenly, right after each interrupt of the script became durable, and at every
boundary of a sub-agent's work: its child run's writes, the parent's among them, and one
either side), resumes it with ``--resume`` (deciding ``rerun`` for an effect whose outcome
is unknown, as a user would after checking), and compares what the run ends with (results,
final states, warnings such as scripted replies left unused) with the crash-free run. It
checks that every journal verifies, that no run is left with an effect unsettled (a stuck
run), and that no effect ran twice unless it is idempotent, the user said ``rerun``, or it
is a sub-agent resumed on its child run.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import signal
import subprocess
import tempfile
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentfsm.faults.forking import Forked, ForkTimeout
from agentfsm.impl.durable.children import child_run_id
from agentfsm.impl.durable.run import EngineStepper
from agentfsm.impl.durable.state import apply, initial_state
from agentfsm.impl.script import AgentScript
from agentfsm.impl.stores.journal import DECIDED, JournalError, Record
from agentfsm.impl.stores.sqlite import SqliteStore
from agentfsm.spec import Table, load_table

CHILD_TIMEOUT = 120.0


@dataclass
class AgentCrashReport:
    machine: str
    boundaries: int = 0
    kills: int = 0
    decisions: int = 0
    violations: list[tuple[str, str]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.violations

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "machine": self.machine, "boundaries": self.boundaries, "kills": self.kills,
                "decisions": self.decisions,
                "violations": [{"scenario": s, "message": m} for s, m in self.violations]}


def _lines(out: str) -> list[dict[str, Any]]:
    found = []
    for line in out.splitlines():
        try:
            found.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return found


def outcome(out: str) -> list[str]:
    """What a run ends with, whatever path it took: results, warnings (a scripted reply left unused
    says a resumed run answered with the wrong one) and final states (seq numbers, journal
    versions and what a resumed run does not show again aside)."""
    return [f"{line['kind']}: {str(line['text']).split(', journal version')[0]}" for line in _lines(out)
            if line.get("kind") in ("result", "warning") or (line.get("kind") == "done"
                                                                 and "final state" in str(line.get("text")))]


def notes(out: str, kind: str) -> list[str]:
    return [str(line["text"]) for line in _lines(out) if line.get("kind") == kind]


class AgentCrash:
    """Plays ``script`` against ``table`` in children, in fresh copies of the script's work directory.
    ``command`` is the command line the children run ``agentfsm run`` with (``agentfsm.cli.main``):
    the command line sits above the checker, so it is handed in."""

    def __init__(self, table: str, script_path: str, script: AgentScript, machine: str,
                 command: Callable[[Sequence[str]], int]) -> None:
        self.command = command
        self.table, self.script_path, self.machine = str(Path(table).resolve()), str(Path(script_path).resolve()), \
            machine
        self.workdir = None if script.workdir is None else Path(script_path).parent / script.workdir
        self.tmp = Path(tempfile.mkdtemp(prefix="agentfsm-crash-agent-"))
        self.report = AgentCrashReport(machine)
        self.interrupts: list[int] = []  # boundaries of the crash-free run right after an interrupt
        self.children: list[int] = []    # boundaries of the crash-free run's writes to child runs
        loaded = load_table(self.table)
        self.served = load_table(self.table, loaded.runtime) if loaded.runtime else loaded  # as `run` serves it

    def close(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)

    def _fresh(self, name: str) -> Path:
        where = self.tmp / name
        if self.workdir is not None:
            shutil.copytree(self.workdir, where / "w")
        else:
            (where / "w").mkdir(parents=True)
        return where

    def play(self, where: Path, *argv: str) -> subprocess.CompletedProcess[str]:
        """``agentfsm run ARGV`` in ``where``, in a child forked from this warm process (a fresh
        interpreter would spend most of each child's time importing): the same command line, its
        own store connection, and with ``--kill-at`` the same real SIGKILL. A child that outlives
        ``CHILD_TIMEOUT`` (a hang) is killed and ends with exit 124, so the scenario reports it
        instead of the campaign falling over."""
        args = ["run", self.table, "--script", self.script_path, "--workdir", "w", "--json", "--store", "j.db", *argv]

        def child() -> str:
            os.chdir(where)
            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = self.command(args)
            return json.dumps([code, out.getvalue(), err.getvalue()])
        try:
            status, text = Forked(child).wait(CHILD_TIMEOUT)
        except ForkTimeout:
            return subprocess.CompletedProcess(args, 124, "", f"hung: no end within {CHILD_TIMEOUT:g}s")
        if status != 0:  # killed by a signal, or the child raised (its traceback)
            return subprocess.CompletedProcess(args, status, "", text)
        code, out, err = json.loads(text)
        return subprocess.CompletedProcess(args, int(code), str(out), str(err))

    def journal_problem(self, where: Path) -> str | None:
        """Whether every run's journal verifies (checksums, links, sequence), its run ended with
        every effect settled, and no effect ran twice without a reason (``effects_problem``)."""
        store = SqliteStore(where / "j.db")
        try:
            runs = store.runs()
            for run_id in runs:
                records = store.load(run_id).records
                if records and records[-1].seq != store.version(run_id):
                    return f"run {run_id}: the journal ends at {records[-1].seq}, the run at {store.version(run_id)}"
                problem = effects_problem(self.served, store.records(run_id), runs)
                if problem is not None:
                    return f"run {run_id}: {problem}"
        except JournalError as exc:
            return f"the journal does not verify: {exc}"
        finally:
            store.close()
        return None

    def reference(self) -> list[str] | None:
        where = self._fresh("reference")
        done = self.play(where, "--kill-at", str(10 ** 9))
        counted = notes(done.stdout, "boundaries")
        if done.returncode != 0 or not counted:
            self.report.violations.append(("crash-free run", f"exit {done.returncode}: {done.stderr[-500:]}"))
            return None
        self.report.boundaries = int(counted[-1])
        self.interrupts = [int(n) for text in notes(done.stdout, "interrupt-boundaries") for n in text.split()]
        self.children = [int(n) for text in notes(done.stdout, "child-boundaries") for n in text.split()]
        return outcome(done.stdout)

    def scenario(self, kill_at: int, expected: list[str]) -> None:
        name = f"killed at boundary {kill_at}"
        where = self._fresh(f"kill-{kill_at}")
        killed = self.play(where, "--kill-at", str(kill_at))
        if killed.returncode != -signal.SIGKILL:
            self.report.violations.append((name, f"the child did not die at its boundary (exit {killed.returncode})"))
            return
        self.report.kills += 1
        resumed = self.play(where, "--resume")
        if resumed.returncode == 2 and "no run 'run' to resume" in resumed.stderr:  # killed before its first
            resumed = self.play(where)                                                # write: started again
        decisions = [text.split(":")[0].split()[-1] for text in notes(resumed.stdout, "decision")]
        if decisions:
            self.report.decisions += len(decisions)
            resumed = self.play(where, "--resume", *[f"--decide={d}=rerun" for d in decisions])
        problem = self.journal_problem(where)
        if resumed.returncode != 0:
            problem = f"the resumed run failed (exit {resumed.returncode}): {resumed.stdout[-300:]}{resumed.stderr}"
        elif outcome(resumed.stdout) != expected:
            problem = f"it ended with {outcome(resumed.stdout)}, the crash-free run with {expected}"
        if problem is not None:
            self.report.violations.append((name, problem))

    def check(self, kills: int, progress: Callable[[int, int], None] | None = None,
              jobs: int | None = None) -> AgentCrashReport:
        """The crash-free run, then ``kills`` SIGKILL scenarios; ``progress(done, total)`` after the
        crash-free run and after each scenario. The scenarios run ``jobs`` at a time (by default one
        per CPU), each in a process forked from this one (``forked_scenario``); their findings are
        added in boundary order, as if they had run one after the other."""
        expected = self.reference()
        if expected is not None:
            total = self.report.boundaries
            spread = {max(1, round(total * (k + 1) / (kills + 1))) for k in range(kills)}
            sub_agents = set(range(min(self.children) - 1, max(self.children) + 2)) if self.children else set()
            points = sorted(spread | set(self.interrupts) | {p for p in sub_agents if 1 <= p <= total})
            slots = jobs or os.cpu_count() or 1
            running: deque[tuple[int, Forked]] = deque()
            for done in range(len(points) + 1):
                if done:
                    self.merge(*running.popleft())
                while points and len(running) < slots:
                    point = points.pop(0)
                    running.append((point, self.forked_scenario(point, expected)))
                if progress is not None:
                    progress(done, done + len(running) + len(points))
        return self.report

    def forked_scenario(self, kill_at: int, expected: list[str]) -> Forked:
        """``scenario`` in a child forked from this process (its plays are that child's children);
        it sends back what it found."""
        def work() -> str:
            self.report = AgentCrashReport(self.machine)
            self.scenario(kill_at, expected)
            return json.dumps([self.report.kills, self.report.decisions, self.report.violations])
        return Forked(work)

    def merge(self, kill_at: int, running: Forked) -> None:
        """Add a forked scenario's findings to the report (a scenario that died is a violation)."""
        status, text = running.wait()
        if status != 0:
            self.report.violations.append((f"killed at boundary {kill_at}", f"the scenario failed: {text[-500:]}"))
            return
        kills, decisions, violations = json.loads(text)
        self.report.kills += int(kills)
        self.report.decisions += int(decisions)
        self.report.violations += [(str(name), str(message)) for name, message in violations]


def effects_problem(table: Table, records: list[Record], runs: list[str]) -> str | None:
    """A run's journal, folded: an effect left unsettled (the run is stuck), or one started more
    often than its first run, the user's ``rerun`` decisions and, for an idempotent effect or a
    sub-agent's spawn (resumed on its child run), its retries explain."""
    st = initial_state(table, records[0])
    stepper = EngineStepper(table)
    for record in records[1:]:
        apply(table, stepper, st, record)
    reruns = [str(r.body.get("key")) for r in records if r.kind == DECIDED and r.body.get("decision") == "rerun"]
    for effect in st.effects.values():
        resumable = effect.idempotent or child_run_id(effect.key) in runs
        if not resumable and effect.attempts > 1 + reruns.count(effect.key):
            return (f"effect {effect.key} ({effect.action}) started {effect.attempts} times with "
                    f"{reruns.count(effect.key)} rerun decision(s): it ran again silently")
        if effect.status in ("pending", "started", "unknown"):
            return f"effect {effect.key} ({effect.action}) is left {effect.status}: the run is stuck"
    return None
