"""``journal --repair`` of a run an agent journals under another run's lease (the tool-call
runner's ``RUN/call-N``), as the chaos campaign's ``repair-resume`` does it (issue 26).

The process that plays ``--run-id run`` leases ``run`` and writes its calls' runs
``run/call-N`` under that lease. The repair claimed ``run/call-N`` itself: a lease no other
process takes, so it did not exclude a live owner of ``run``, and its protocol log records
(the claim and the ``unknown`` it writes) stood under ``run/call-N``, where the audit's windows
(one per effect of the lease's run) never saw them; the user's ``rerun`` after the repair then
showed as a second execution past the system's bounds (a token 4).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import hypothesis.strategies as st
from agentfsm.faults.chaos import Row, Trial, lose_last_started
from agentfsm.faults.chaos_agents import AGENTS
from agentfsm.impl.durable.children import lease_run
from agentfsm.impl.stores.leases import owner_name
from agentfsm.impl.stores.sqlite import SqliteStore
from hypothesis import given

AGENTFSM = str(Path(sys.executable).parent / "agentfsm")
TOOL_CALL = next(a for a in AGENTS if a.name == "tool-call")


def ended_then_cut_back(folder: Path) -> Trial:
    """A tool-call run played to its end (every call completed, each in the protocol log), whose
    journal then lost its last call's ``started`` and ``completed``."""
    trial = Trial(folder, Row("repair-resume", TOOL_CALL.name), TOOL_CALL, tools=3)
    assert trial.wait(trial.start()).code == 0, trial.procs[-1].err
    lose_last_started(folder / "j.db")
    return trial


def test_a_repaired_calls_lost_completion_and_the_users_rerun_are_explained(tmp_path: Path) -> None:
    """The campaign's repair-resume trial whose killed run had completed its last call: the
    repair's ``unknown`` after the logged completion cuts that window (the store lost a record),
    and the ``rerun`` begins a window of its own."""
    trial = ended_then_cut_back(tmp_path / "t")
    trial.finish("rerun")
    trial.judge()
    row = trial.row
    row.audit(trial.dir / "j.db.protocol.jsonl", trial.dir.name)
    assert (row.duplicated, row.lost, row.stuck, row.unclean, row.repaired) == (0, 0, 0, 0, 1), row.notes
    assert (row.unexplained, row.cut) == (0, 1), row.notes


def repair(folder: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([AGENTFSM, "journal", "--store", "j.db", "--repair"], cwd=folder, capture_output=True,
                          text=True, timeout=120)


def test_the_repair_of_a_calls_run_is_refused_while_its_lease_run_has_a_live_owner(tmp_path: Path) -> None:
    trial = ended_then_cut_back(tmp_path / "t")
    store = SqliteStore(str(trial.dir / "j.db"))
    try:
        lease = store.acquire("run", owner_name(), 60.0)   # this process, alive: `run` is owned
        refused = repair(trial.dir)
        assert refused.returncode == 2 and "'run' is owned by" in refused.stderr, refused.stdout + refused.stderr
        assert "repaired" not in refused.stdout
        store.release(lease)
        # A run the user named like a unit (no agent's unit: its own process owns it) is excluded too.
        lease = store.acquire("run/call-3", owner_name(), 60.0)
        refused = repair(trial.dir)
        assert refused.returncode == 2 and "'run/call-3' is owned by" in refused.stderr, refused.stdout + refused.stderr
        store.release(lease)
    finally:
        store.close()
    repaired = repair(trial.dir)
    assert repaired.returncode == 0 and "run run/call-3: repaired" in repaired.stdout, repaired.stdout + repaired.stderr


NAMES = st.from_regex(r"[a-z][a-z0-9-]{0,8}", fullmatch=True)


@given(top=NAMES, unit=st.sampled_from(["call", "task"]), number=st.integers(1, 999),
       effects=st.lists(st.tuples(st.integers(1, 99), st.sampled_from(["0", "call_1", "c-2"])), max_size=3))
def test_the_lease_run_of_a_stored_run(top: str, unit: str, number: int, effects: list[tuple[int, str]]) -> None:
    """A unit's run and every sub-agent child run under it, however deep, are leased with the top run."""
    run = f"{top}/{unit}-{number}"
    assert (lease_run(top), lease_run(run)) == (top, top)
    for seq, call in effects:
        run = f"{run}/{seq}/{call}/sub-agent"
        assert lease_run(run) == top
    assert lease_run(f"{top}/notes") == f"{top}/notes"   # a run the user named so: its own lease
