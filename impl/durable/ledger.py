"""The outside world for crash injection: tools whose every real execution lands in a ledger.

The ledger lives outside the journal store (in memory for simulated crashes, in a file
that is fsynced per entry for real SIGKILLs), so it sees what the store may have lost:
an effect that ran although its ``completed`` never became durable. A tool declared
idempotent behaves as such a service would: a call with a key it has already served
returns the earlier result without acting again. A status query, when the tool has one,
answers from the ledger.
"""

from __future__ import annotations

import fcntl
import os
from collections import Counter
from pathlib import Path
from typing import Protocol

from agentfsm.impl.durable.run import EffectCall, StatusReply, TokenRefused, Tool
from agentfsm.impl.stores.journal import JSON
from agentfsm.spec.model import Table


class Fenced(TokenRefused):
    """A call refused by the service: a newer owner's status query fenced its key."""


class Ledger(Protocol):
    def executions(self) -> Counter[str]:
        """How many times each idempotency key really ran."""
        ...

    def execute(self, key: str, token: int = 0) -> None:
        """Run once more, unless a status query fenced ``key`` at a token above ``token`` (``Fenced``)."""
        ...

    def fence(self, key: str, token: int) -> None:
        """A status query at ``token``: calls for ``key`` with an older token are refused from now on."""
        ...


class MemoryLedger:
    def __init__(self) -> None:
        self._counts: Counter[str] = Counter()
        self._fences: dict[str, int] = {}

    def executions(self) -> Counter[str]:
        return Counter(self._counts)

    def execute(self, key: str, token: int = 0) -> None:
        if self._fences.get(key, 0) > token:
            raise Fenced(f"{key}: fenced at token {self._fences[key]}, the call has {token}")
        self._counts[key] += 1

    def fence(self, key: str, token: int) -> None:
        self._fences[key] = max(token, self._fences.get(key, 0))

    def clone(self) -> MemoryLedger:
        other = MemoryLedger()
        other._counts = Counter(self._counts)
        other._fences = dict(self._fences)
        return other


FENCE = "fence "


class FileLedger:
    """One line per execution (``fence KEY TOKEN`` lines for fences), flushed and fsynced before
    the tool returns; a lock on the file makes the fence check and the execution one step."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _lines(self) -> list[str]:
        if not self.path.exists():
            return []
        return [line for line in self.path.read_text().splitlines() if line]

    def executions(self) -> Counter[str]:
        return Counter(line for line in self._lines() if not line.startswith(FENCE))

    def _fenced_at(self, key: str) -> int:
        tokens = [int(t) for _, k, t in (line.split(" ") for line in self._lines() if line.startswith(FENCE))
                  if k == key]
        return max(tokens, default=0)

    def _write(self, line: str, check: tuple[str, int] | None = None) -> None:
        with self.path.open("a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            if check is not None and self._fenced_at(check[0]) > check[1]:
                raise Fenced(f"{check[0]}: fenced at token {self._fenced_at(check[0])}, the call has {check[1]}")
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())

    def execute(self, key: str, token: int = 0) -> None:
        self._write(key, (key, token))

    def fence(self, key: str, token: int) -> None:
        self._write(f"{FENCE}{key} {token}")


def receipt(call: EffectCall) -> JSON:
    """The result a ledger tool returns: the same for every call with one key."""
    return {"action": call.action, "receipt": call.key}


class LedgerTool:
    """A tool over a ledger; ``has_status`` gives it a status query, which fences the key at
    the caller's token (a service that checks fencing tokens)."""

    fences = True

    def __init__(self, ledger: Ledger, idempotent: bool, has_status: bool) -> None:
        self.ledger = ledger
        self.idempotent = idempotent
        self.has_status = has_status

    def run(self, call: EffectCall) -> JSON:
        if not (self.idempotent and self.ledger.executions()[call.key]):
            self.ledger.execute(call.key, call.token)
        return receipt(call)

    def status(self, call: EffectCall) -> StatusReply | None:
        if not self.has_status:
            return None
        self.ledger.fence(call.key, call.token)
        if self.ledger.executions()[call.key]:
            return ("done", receipt(call))
        return ("not-run", None)


def ledger_tools(table: Table, ledger: Ledger, has_status: bool) -> dict[str, Tool]:
    """A ledger tool for every external action of the table, idempotent as the table declares."""
    return {a.name: LedgerTool(ledger, a.idempotent, has_status) for a in table.actions if a.effect == "external"}


