"""After ``journal --repair`` nothing emitted and not completed reads ``pending`` (issue 25, defect 2).

A repaired journal is known to have lost records: one of them may have been the ``started``
of an effect that then ran. ``--resume`` read such an effect as "cannot have run" and
performed it again. Now the repair journals every effect emitted and not completed in what
survives as ``unknown`` (a decision, unless a status query or an idempotent retry settles it)
and names them.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
from pathlib import Path

import pytest
from agentfsm.impl.durable.ledger import MemoryLedger, ledger_tools
from agentfsm.impl.durable.run import DurableRun, open_effects, repair
from agentfsm.impl.stores.journal import COMPLETED, DECIDED, STARTED, STEP, UNKNOWN, Record
from agentfsm.impl.stores.memory import Crash, MemoryStore
from agentfsm.spec import Table
from test_durable_agent import LOOM
from test_durable_damage import run
from test_durable_owner import start


def killed_mid_tool(tmp_path: Path) -> str:
    """A Loom run SIGKILLed while its one ``run_command`` runs; the effect's key."""
    child = start(tmp_path, 30)
    os.killpg(child.pid, signal.SIGKILL)
    child.wait(10)
    with sqlite3.connect(tmp_path / "j.db") as conn:
        [(body,)] = conn.execute("SELECT body FROM records WHERE kind = 'started' ORDER BY seq DESC LIMIT 1")
    return str(json.loads(body)["key"])


def test_an_effect_whose_started_record_was_lost_is_unknown_after_the_repair(tmp_path: Path) -> None:
    key = killed_mid_tool(tmp_path)
    with sqlite3.connect(tmp_path / "j.db") as conn:  # the log lost its last records, `started` among them
        conn.execute("DELETE FROM records WHERE seq >= (SELECT max(seq) FROM records WHERE kind = 'started')")
    repaired = run("journal", "j.db", "--repair", cwd=tmp_path)
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    assert f"unknown: {key}" in repaired.stdout, repaired.stdout
    resumed = run("run", LOOM, "--script", "s.yaml", "--store", "j.db", "--resume", cwd=tmp_path)
    assert resumed.returncode == 1, resumed.stdout + resumed.stderr
    assert f"decision: unknown-effect {key}" in resumed.stdout
    assert (tmp_path / "ledger").read_text() == "ran\n", "the tool was not performed again"
    failed = run("run", LOOM, "--script", "s.yaml", "--store", "j.db", "--resume", "--decide", f"{key}=failed",
                 cwd=tmp_path)
    assert failed.returncode == 0, failed.stdout + failed.stderr
    assert (tmp_path / "ledger").read_text() == "ran\n"


def test_a_repair_of_a_lost_log_makes_an_emitted_effect_unknown(loom: Table) -> None:
    """A write-ahead log accepted as damaged may have lost any record after what survives: an
    effect emitted (its step survived) and not started there may still have started."""
    store, ledger = MemoryStore(), MemoryLedger()
    run = DurableRun.create(store, loom, "r", ledger_tools(loom, ledger, False))
    store.arm(2)  # after the step that emits SendLlmRequest committed, before its `started`
    with pytest.raises(Crash):
        run.deliver("UserInput", event_id="1")
    store.arm(None)
    [key] = [e.key for e in DurableRun.attach(store, loom, "r", ledger_tools(loom, ledger, False)).st.unresolved()]
    repaired = repair(store, "r", log_lost="j.db-wal: frame 3 fails its checksum")
    assert repaired is not None and repaired.unknown == [key] and repaired.discarded_from is None
    assert [r.kind for r in store.records("r")] == ["created", "step", "repaired", "unknown"]
    again = DurableRun.attach(store, loom, "r", ledger_tools(loom, ledger, False))
    assert again.st.effects[key].status == "unknown"
    assert repair(store, "r") is None, "a whole journal with no lost log needs no repair"


def _records(*entries: tuple[str, dict[str, object]]) -> list[Record]:
    return [Record("r", seq, kind, 0.0, body, "") for seq, (kind, body) in enumerate(entries, 1)]


def test_open_effects_are_the_emitted_ones_nothing_settled_with_their_attempts() -> None:
    """What a repair turns ``unknown``: emitted (attempts 0) or started (its attempt), not
    completed, not already unknown, not decided, unless decided ``rerun`` (open again with the
    attempts it had); a decision about no effect (an anomaly's ``continue``) changes nothing."""
    records = _records(
        (STEP, {"effects": [{"key": "a"}, {"key": "b"}, {"key": "c"}, {"key": "d"}, {"key": "e"}]}),
        (STARTED, {"key": "a", "attempt": 1}),
        (STARTED, {"key": "b", "attempt": 1}), (COMPLETED, {"key": "b"}),
        (STARTED, {"key": "c", "attempt": 2}), (UNKNOWN, {"key": "c"}), (DECIDED, {"key": "c", "decision": "rerun"}),
        (STARTED, {"key": "d", "attempt": 1}), (UNKNOWN, {"key": "d"}),
        (DECIDED, {"decision": "continue"}),
        (STARTED, {"key": "f", "attempt": 3}), (UNKNOWN, {"key": "f"}), (DECIDED, {"key": "f", "decision": "failed"}),
        (DECIDED, {"key": "g", "decision": "rerun"}))   # nothing of g survived but its decision: never started
    assert open_effects(records) == {"a": 1, "c": 2, "e": 0, "g": 0}
    assert list(open_effects(records)) == ["a", "c", "e", "g"]
