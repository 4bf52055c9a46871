"""The tools of the ``slow-tools`` chaos scenario (``agentfsm worker --tools
agentfsm.verify.chaos_tools:tools``): each execution appends its key to the ledger file
named by $AGENTFSM_CHAOS_LEDGER, then lingers $AGENTFSM_CHAOS_LINGER seconds, longer than
the lease: asleep, or with $AGENTFSM_CHAOS_GIL set in one C call that keeps the GIL (as a
CPU-bound extension does), so no other thread of the worker runs meanwhile. No status query:
an execution whose outcome a worker could not journal becomes a decision or a retry."""

from __future__ import annotations

import ctypes
import os
import time
from pathlib import Path

from agentfsm.impl.durable.journal import JSON
from agentfsm.impl.durable.ledger import FileLedger, LedgerTool
from agentfsm.impl.durable.run import EffectCall, StatusReply, Tool
from agentfsm.spec.model import Table


class SlowTool:
    def __init__(self, inner: LedgerTool, seconds: float, hold_gil: bool) -> None:
        self.inner = inner
        self.seconds = seconds
        self.hold_gil = hold_gil

    def run(self, call: EffectCall) -> JSON:
        result = self.inner.run(call)
        if self.hold_gil:
            ctypes.PyDLL(None).sleep(max(1, round(self.seconds)))  # a PyDLL call keeps the GIL throughout
        else:
            time.sleep(self.seconds)
        return result

    def status(self, call: EffectCall) -> StatusReply | None:
        return None


def tools(table: Table) -> dict[str, Tool]:
    ledger = FileLedger(Path(os.environ["AGENTFSM_CHAOS_LEDGER"]))
    seconds = float(os.environ.get("AGENTFSM_CHAOS_LINGER", "0"))
    hold_gil = bool(os.environ.get("AGENTFSM_CHAOS_GIL"))
    return {a.name: SlowTool(LedgerTool(ledger, a.idempotent, False), seconds, hold_gil)
            for a in table.actions if a.effect == "external"}
