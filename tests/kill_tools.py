"""Tools for `agentfsm worker --tools kill_tools:tools` in tests: ledger tools with a status
query (a file named by $AGENTFSM_TEST_LEDGER) that linger $AGENTFSM_TEST_TOOL_DELAY seconds
after acting, so a test can SIGKILL the worker in the middle of a tool call. With
$AGENTFSM_TEST_TOOL_GIL set they linger in one C call that holds the interpreter's lock (a
CPU-bound extension does that): no other thread of the worker runs meanwhile."""

from __future__ import annotations

import os
from pathlib import Path

from agentfsm.faults.chaos_tools import slow_tools
from agentfsm.impl.durable.run import Tool
from agentfsm.spec.model import Table


def tools(table: Table) -> dict[str, Tool]:
    return slow_tools(table, Path(os.environ["AGENTFSM_TEST_LEDGER"]), float(os.environ.get("AGENTFSM_TEST_TOOL_DELAY",
                      "0")), bool(os.environ.get("AGENTFSM_TEST_TOOL_GIL")), has_status=True)
