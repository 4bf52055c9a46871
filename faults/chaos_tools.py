"""Ledger tools that linger after acting, longer than a lease: the ``slow-tools`` chaos
scenario's (``agentfsm worker --tools agentfsm.faults.chaos_tools:tools``) and the tests'.
Each execution appends its key to a ledger file, then lingers: asleep, or in one C call that
keeps the GIL (as a CPU-bound extension does), so no other thread of the worker runs
meanwhile. The chaos scenario's have no status query: an execution whose outcome a worker
could not journal becomes a decision."""

from __future__ import annotations

import ctypes
import os
import time
from pathlib import Path

from agentfsm.impl.durable.ledger import FileLedger, LedgerTool
from agentfsm.impl.durable.run import EffectCall, StatusReply, Tool
from agentfsm.impl.stores.journal import JSON
from agentfsm.spec.model import Table


class SlowTool:
    def __init__(self, inner: LedgerTool, seconds: float, hold_gil: bool) -> None:
        self.inner = inner
        self.seconds = seconds
        self.hold_gil = hold_gil
        self.fences = inner.fences

    def run(self, call: EffectCall) -> JSON:
        result = self.inner.run(call)
        if self.hold_gil:
            ctypes.PyDLL(None).sleep(max(1, round(self.seconds)))  # a PyDLL call keeps the GIL throughout
        else:
            time.sleep(self.seconds)
        return result

    def status(self, call: EffectCall) -> StatusReply | None:
        return self.inner.status(call)


def slow_tools(table: Table, ledger: Path, seconds: float, hold_gil: bool, has_status: bool) -> dict[str, Tool]:
    """A slow ledger tool for every external action of the table."""
    return {a.name: SlowTool(LedgerTool(FileLedger(ledger), a.idempotent, has_status), seconds, hold_gil)
            for a in table.actions if a.effect == "external"}


def tools(table: Table) -> dict[str, Tool]:
    """The chaos scenario's, from $AGENTFSM_CHAOS_LEDGER, $AGENTFSM_CHAOS_LINGER, $AGENTFSM_CHAOS_GIL."""
    return slow_tools(table, Path(os.environ["AGENTFSM_CHAOS_LEDGER"]), float(os.environ.get("AGENTFSM_CHAOS_LINGER",
                      "0")), bool(os.environ.get("AGENTFSM_CHAOS_GIL")), has_status=False)
