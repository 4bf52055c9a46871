"""Tools for `agentfsm worker --tools kill_tools:tools` in tests: ledger tools (a file named by
$AGENTFSM_TEST_LEDGER) that linger $AGENTFSM_TEST_TOOL_DELAY seconds after acting, so a test
can SIGKILL the worker in the middle of a tool call."""

from __future__ import annotations

import os
import time
from pathlib import Path

from agentfsm.impl.durable.journal import JSON
from agentfsm.impl.durable.ledger import FileLedger, LedgerTool
from agentfsm.impl.durable.run import EffectCall, StatusReply, Tool
from agentfsm.spec.model import Table


class LingeringTool:
    def __init__(self, inner: LedgerTool, delay: float) -> None:
        self.inner = inner
        self.delay = delay
        self.fences = inner.fences

    def run(self, call: EffectCall) -> JSON:
        result = self.inner.run(call)
        time.sleep(self.delay)
        return result

    def status(self, call: EffectCall) -> StatusReply | None:
        return self.inner.status(call)


def tools(table: Table) -> dict[str, Tool]:
    ledger = FileLedger(Path(os.environ["AGENTFSM_TEST_LEDGER"]))
    delay = float(os.environ.get("AGENTFSM_TEST_TOOL_DELAY", "0"))
    return {a.name: LingeringTool(LedgerTool(ledger, a.idempotent, True), delay)
            for a in table.actions if a.effect == "external"}
