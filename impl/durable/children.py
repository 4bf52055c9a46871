"""Child runs: an effect whose own work is a durable run in the same store (a sub-agent).

A child run's id is its parent effect's key with ``/sub-agent`` appended (the key already
names the parent run: ``RUN/SEQ/CALL``), so the child of the effect ``run/14/0`` is
``run/14/0/sub-agent`` and its own child ``run/14/0/sub-agent/5/0/sub-agent``. Nothing else
links them: the parent's effect completes when the child run reaches its end, and a
resumed parent finds the child by that id. A run's lease covers its children (their ids
extend its own), so one owner resumes the whole tree.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping

SUFFIX = "/sub-agent"
UNIT = re.compile(r"(call|task)-[0-9]+")   # a script's unit journaled as its own run (``DurableTask``)


def child_run_id(key: str) -> str:
    """The child run of the effect ``key``."""
    return key + SUFFIX


def parent_effect(run_id: str) -> str | None:
    """The effect key whose child ``run_id`` is, or None for a run that is nobody's child."""
    return run_id[: -len(SUFFIX)] if run_id.endswith(SUFFIX) else None


def lease_run(run_id: str) -> str:
    """The run whose lease covers ``run_id`` and fences its writes: a sub-agent's child run's
    parent's, and a unit's that an agent journals as a run of its own (the tool-call runner's
    ``RUN/call-N``, the explorer's ``RUN/task-N``: ``agentfsm.impl.agents.play.DurableTask``) the
    run it plays under, up to the run a process claims. Another process that writes it (a repair)
    claims that run, or it would not exclude the live owner."""
    while True:
        effect = parent_effect(run_id)
        head, _, tail = run_id.rpartition("/")
        if effect is not None:
            run_id = effect.rsplit("/", 2)[0]   # the effect's key is RUN/SEQ/CALL
        elif head and UNIT.fullmatch(tail):
            run_id = head
        else:
            return run_id


def child_runs(run_id: str, runs: Collection[str]) -> list[str]:
    """The child runs under ``run_id`` (its children, theirs, ...), in the order of ``runs``."""
    return [r for r in runs if r.startswith(run_id + "/") and parent_effect(r) is not None]


def owner(decision_id: str, runs: Collection[str]) -> str | None:
    """The child run a decision's effect key belongs to (the deepest one whose id prefixes it),
    or None for the top run's own (its effects, and an anomaly's version number)."""
    found = [r for r in runs if parent_effect(r) is not None and decision_id.startswith(r + "/")]
    return max(found, key=len) if found else None


def decisions_of(run_id: str | None, decisions: Mapping[str, str], runs: Collection[str]) -> dict[str, str]:
    """The user's ``decisions`` that the child run ``run_id`` takes (None: the top run)."""
    return {id: d for id, d in decisions.items() if owner(id, runs) == run_id}
