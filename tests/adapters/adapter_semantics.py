"""A test-only Python adapter on the reference semantics, with optional planted faults.

Usage: adapter_semantics.py TABLE [--fault NAME] [--no-vars] [--hang-on EVENT]. Each fault
is a bug a real implementation could have; the conformance tests check the harness names
a vector that exposes it. ``--hang-on`` makes the adapter hang whenever it is sent EVENT.
Invalid requests (unknown event, bad parameters) are refused with ``{"ok": false}``.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import replace
from typing import Any

from agentfsm.spec import Table, load_table
from agentfsm.spec.expr import Value
from agentfsm.spec.semantics import StepResult, step

FAULTS = ("retry-bound", "silent-text", "accept-everything", "retry-kept", "retry-early", "stream-history")
# The history behind the "stream-history" fault: state the table does not model.
HISTORY = ("TextDelta", "ToolCallDelta", "TextDelta")


def planted(fault: str | None, table: Table, state: int, values: tuple[Value, ...], event: str,
            result: StepResult, history: tuple[str, ...] = ()) -> StepResult:
    """The reference outcome, bent by the planted fault where it applies."""
    name = table.states[state].name
    if fault == "stream-history" and history[-3:] == HISTORY and event == "LlmCompleted" and result.accepted:
        # A stream assembler that loses the response's tool calls when text, a tool-call
        # fragment and text again arrived in a row: the response is taken for a plain answer.
        return step(table, state, values, event, (0,))
    retries = table.vars_dict(values).get("retries", 0)
    if fault == "retry-bound" and name == "CallingLlm" and event == "LlmError" \
            and retries == table.constants["max_retries"]:
        # The retry bound compared with > instead of >=: one retry too many.
        more = tuple(v + 1 if var.name == "retries" else v for var, v in zip(table.variables, values, strict=True))
        return replace(result, state=table.state_index["Error"], vars=more, actions=("WaitForInput",))
    if fault == "retry-kept" and name == "CallingLlm" and event == "LlmCompleted":
        # The retry counter is not reset by a successful response: it only shows in a later
        # failure, which gives up too early (invisible in the step itself without vars).
        return replace(result, vars=_with(table, result.vars, retries=retries))
    if fault == "retry-early" and event == "UserInput" and result.accepted:
        # The counter starts at 1: the retry bound is off by one.
        return replace(result, vars=_with(table, result.vars, retries=1))
    if fault == "silent-text" and event == "TextDelta" and result.accepted:
        return replace(result, actions=())
    if fault == "accept-everything" and result.status == "rejected":
        return replace(result, accepted=True)
    return result


def _with(table: Table, values: tuple[Value, ...], **changed: Value) -> tuple[Value, ...]:
    return tuple(changed.get(var.name, v) for var, v in zip(table.variables, values, strict=True))


def main(argv: list[str]) -> int:
    table = load_table(argv[0])
    fault = argv[argv.index("--fault") + 1] if "--fault" in argv else None
    if fault is not None and fault not in FAULTS:
        print(f"unknown fault {fault!r}", file=sys.stderr)
        return 2
    report_vars = "--no-vars" not in argv
    hang_on = argv[argv.index("--hang-on") + 1] if "--hang-on" in argv else None
    state, values = table.initial.index, table.initial_vars()
    history: tuple[str, ...] = ()
    for line in sys.stdin:
        request = json.loads(line)
        reply: dict[str, Any]
        if request["op"] == "quit":
            return 0
        if request["op"] == "reset":
            state, values, history = table.initial.index, table.initial_vars(), ()
            reply = {"ok": True, "state": table.states[state].name}
        else:
            event = request["event"]
            if event == hang_on:
                time.sleep(3600)
            try:
                params = table.event(event).param_values(request["params"])
            except (KeyError, ValueError) as exc:
                print(json.dumps({"ok": False, "error": str(exc)}), flush=True)
                continue
            result = planted(fault, table, state, values, event, step(table, state, values, event, params), history)
            state, values, history = result.state, result.vars, (*history, event)[-3:]
            reply = {"ok": True, "accepted": result.accepted, "state": table.states[state].name,
                     "actions": list(result.actions)}
        if report_vars:
            reply["vars"] = table.vars_dict(values)
        print(json.dumps(reply), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
