"""Tools for `agentfsm worker --tools kill_tools:tools` in tests: ledger tools (a file named by
$AGENTFSM_TEST_LEDGER) that linger $AGENTFSM_TEST_TOOL_DELAY seconds after acting, so a test
can SIGKILL the worker in the middle of a tool call. With $AGENTFSM_TEST_TOOL_GIL set they
linger in one C call that holds the interpreter's lock (a CPU-bound extension does that):
no other thread of the worker runs meanwhile."""

from __future__ import annotations

import ctypes
import os
import time
from pathlib import Path

from agentfsm.impl.durable.journal import JSON
from agentfsm.impl.durable.ledger import FileLedger, LedgerTool
from agentfsm.impl.durable.run import EffectCall, StatusReply, Tool
from agentfsm.spec.model import Table


class LingeringTool:
    def __init__(self, inner: LedgerTool, delay: float, hold_gil: bool = False) -> None:
        self.inner = inner
        self.delay = delay
        self.hold_gil = hold_gil
        self.fences = inner.fences

    def run(self, call: EffectCall) -> JSON:
        result = self.inner.run(call)
        if self.hold_gil:
            ctypes.PyDLL(None).sleep(round(self.delay))  # a PyDLL call keeps the GIL throughout
        else:
            time.sleep(self.delay)
        return result

    def status(self, call: EffectCall) -> StatusReply | None:
        return self.inner.status(call)


def tools(table: Table) -> dict[str, Tool]:
    ledger = FileLedger(Path(os.environ["AGENTFSM_TEST_LEDGER"]))
    delay = float(os.environ.get("AGENTFSM_TEST_TOOL_DELAY", "0"))
    hold_gil = bool(os.environ.get("AGENTFSM_TEST_TOOL_GIL"))
    return {a.name: LingeringTool(LedgerTool(ledger, a.idempotent, True), delay, hold_gil)
            for a in table.actions if a.effect == "external"}
