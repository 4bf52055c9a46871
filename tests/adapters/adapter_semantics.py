"""A test-only Python adapter on the naive interpreter (tests/naive_semantics.py), with optional
planted faults.

Usage: adapter_semantics.py TABLE [--fault NAME] [--no-vars] [--hang-on EVENT]. Each fault
is a bug a real implementation could have; the conformance tests check the harness names
a vector that exposes it. ``--hang-on`` makes the adapter hang whenever it is sent EVENT.
Invalid requests (unknown event, bad parameters) are refused with ``{"ok": false}``. The
interpreter shares no code with the reference semantics the vectors come from, so a passing
run is an independent agreement.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from naive_semantics import NaiveTable, Outcome, Vars

FAULTS = ("retry-bound", "silent-text", "accept-everything", "retry-kept", "retry-early", "stream-history")
# The history behind the "stream-history" fault: state the table does not model.
HISTORY = ("TextDelta", "ToolCallDelta", "TextDelta")


def planted(fault: str | None, table: NaiveTable, state: str, values: Vars, event: str, result: Outcome,
            history: tuple[str, ...] = ()) -> Outcome:
    """The faithful outcome, bent by the planted fault where it applies."""
    if fault == "stream-history" and history[-3:] == HISTORY and event == "LlmCompleted" and result.accepted:
        # A stream assembler that loses the response's tool calls when text, a tool-call
        # fragment and text again arrived in a row: the response is taken for a plain answer.
        return table.step(state, values, event, (0,))
    retries = values.get("retries", 0)
    if fault == "retry-bound" and state == "CallingLlm" and event == "LlmError" \
            and retries == table.constants["max_retries"]:
        # The retry bound compared with > instead of >=: one retry too many.
        return replace(result, state="Error", vars={**values, "retries": retries + 1}, actions=["WaitForInput"])
    if fault == "retry-kept" and state == "CallingLlm" and event == "LlmCompleted":
        # The retry counter is not reset by a successful response: it only shows in a later
        # failure, which gives up too early (invisible in the step itself without vars).
        return replace(result, vars={**result.vars, "retries": retries})
    if fault == "retry-early" and event == "UserInput" and result.accepted:
        # The counter starts at 1: the retry bound is off by one.
        return replace(result, vars={**result.vars, "retries": 1})
    if fault == "silent-text" and event == "TextDelta" and result.accepted:
        return replace(result, actions=[])
    if fault == "accept-everything" and result.status == "rejected":
        return replace(result, accepted=True)
    return result


def main(argv: list[str]) -> int:
    table = NaiveTable.from_file(argv[0])
    fault = argv[argv.index("--fault") + 1] if "--fault" in argv else None
    if fault is not None and fault not in FAULTS:
        print(f"unknown fault {fault!r}", file=sys.stderr)
        return 2
    report_vars = "--no-vars" not in argv
    hang_on = argv[argv.index("--hang-on") + 1] if "--hang-on" in argv else None
    state, values = table.initial()
    history: tuple[str, ...] = ()
    for line in sys.stdin:
        request = json.loads(line)
        reply: dict[str, Any]
        if request["op"] == "quit":
            return 0
        if request["op"] == "reset":
            state, values = table.initial()
            history = ()
            reply = {"ok": True, "state": state}
        else:
            event = request["event"]
            if event == hang_on:
                time.sleep(3600)
            params = table.parse_params(event, request.get("params"))
            if isinstance(params, str):
                print(json.dumps({"ok": False, "error": params}), flush=True)
                continue
            result = planted(fault, table, state, values, event, table.step(state, values, event, params), history)
            if result.error:
                reply = {"ok": False, "error": f"the table breaks its own rules here: {result.status}"}
            else:
                state, values, history = result.state, result.vars, (*history, event)[-3:]
                reply = {"ok": True, "accepted": result.accepted, "state": state, "actions": result.actions}
        if report_vars:
            reply["vars"] = values
        print(json.dumps(reply), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
