"""The outside world for crash injection: tools whose every real execution lands in a ledger.

The ledger lives outside the journal store (in memory for simulated crashes, in a file
that is fsynced per entry for real SIGKILLs), so it sees what the store may have lost:
an effect that ran although its ``completed`` never became durable. A tool declared
idempotent behaves as such a service would: a call with a key it has already served
returns the earlier result without acting again. A status query, when the tool has one,
answers from the ledger.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Protocol

from agentfsm.impl.durable.journal import JSON
from agentfsm.impl.durable.run import EffectCall, StatusReply, Tool
from agentfsm.spec.model import Table


class Ledger(Protocol):
    def executions(self) -> Counter[str]:
        """How many times each idempotency key really ran."""
        ...

    def execute(self, key: str) -> None:
        ...


class MemoryLedger:
    def __init__(self) -> None:
        self._counts: Counter[str] = Counter()

    def executions(self) -> Counter[str]:
        return Counter(self._counts)

    def execute(self, key: str) -> None:
        self._counts[key] += 1

    def clone(self) -> MemoryLedger:
        other = MemoryLedger()
        other._counts = Counter(self._counts)
        return other


class FileLedger:
    """One line per execution, flushed and fsynced before the tool returns."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def executions(self) -> Counter[str]:
        if not self.path.exists():
            return Counter()
        return Counter(line for line in self.path.read_text().splitlines() if line)

    def execute(self, key: str) -> None:
        with self.path.open("a") as f:
            f.write(key + "\n")
            f.flush()
            os.fsync(f.fileno())


def receipt(call: EffectCall) -> JSON:
    """The result a ledger tool returns: the same for every call with one key."""
    return {"action": call.action, "receipt": call.key}


class LedgerTool:
    """A tool over a ledger; ``has_status`` gives it a status query."""

    def __init__(self, ledger: Ledger, idempotent: bool, has_status: bool) -> None:
        self.ledger = ledger
        self.idempotent = idempotent
        self.has_status = has_status

    def run(self, call: EffectCall) -> JSON:
        if not (self.idempotent and self.ledger.executions()[call.key]):
            self.ledger.execute(call.key)
        return receipt(call)

    def status(self, call: EffectCall) -> StatusReply | None:
        if not self.has_status:
            return None
        if self.ledger.executions()[call.key]:
            return ("done", receipt(call))
        return ("not-run", None)


def ledger_tools(table: Table, ledger: Ledger, has_status: bool) -> dict[str, Tool]:
    """A ledger tool for every external action of the table, idempotent as the table declares."""
    return {a.name: LedgerTool(ledger, a.idempotent, has_status) for a in table.actions if a.effect == "external"}


