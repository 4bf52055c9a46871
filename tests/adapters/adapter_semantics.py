"""A test-only Python adapter on the reference semantics, with optional planted faults.

Usage: adapter_semantics.py TABLE [--fault NAME] [--no-vars]. Each fault is a bug a real
implementation could have; the conformance tests check the harness names a vector that
exposes it.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from typing import Any

from agentfsm.spec import Table, load_table
from agentfsm.spec.expr import Value
from agentfsm.spec.semantics import StepResult, step

FAULTS = ("retry-bound", "silent-text", "accept-everything")


def planted(fault: str | None, table: Table, state: int, values: tuple[Value, ...], event: str,
            result: StepResult) -> StepResult:
    """The reference outcome, bent by the planted fault where it applies."""
    name = table.states[state].name
    retries = table.vars_dict(values).get("retries", 0)
    if fault == "retry-bound" and name == "CallingLlm" and event == "LlmError" \
            and retries == table.constants["max_retries"]:
        # The retry bound compared with > instead of >=: one retry too many.
        more = tuple(v + 1 if var.name == "retries" else v for var, v in zip(table.variables, values, strict=True))
        return replace(result, state=table.state_index["Error"], vars=more, actions=("WaitForInput",))
    if fault == "silent-text" and event == "TextDelta" and result.accepted:
        return replace(result, actions=())
    if fault == "accept-everything" and result.status == "rejected":
        return replace(result, accepted=True)
    return result


def main(argv: list[str]) -> int:
    table = load_table(argv[0])
    fault = argv[argv.index("--fault") + 1] if "--fault" in argv else None
    if fault is not None and fault not in FAULTS:
        print(f"unknown fault {fault!r}", file=sys.stderr)
        return 2
    report_vars = "--no-vars" not in argv
    state, values = table.initial.index, table.initial_vars()
    for line in sys.stdin:
        request = json.loads(line)
        reply: dict[str, Any]
        if request["op"] == "quit":
            return 0
        if request["op"] == "reset":
            state, values = table.initial.index, table.initial_vars()
            reply = {"ok": True, "state": table.states[state].name}
        else:
            event = request["event"]
            if event not in table.event_index:
                reply = {"ok": False, "error": f"unknown event {event}"}
            else:
                params = table.event(event).param_values(request["params"])
                result = planted(fault, table, state, values, event, step(table, state, values, event, params))
                state, values = result.state, result.vars
                reply = {"ok": True, "accepted": result.accepted, "state": table.states[state].name,
                         "actions": list(result.actions)}
        if report_vars:
            reply["vars"] = table.vars_dict(values)
        print(json.dumps(reply), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
