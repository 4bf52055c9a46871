"""Interleaved traces of a system: who did what, which message went where.

The JSON file ``verify SYSTEM --trace-out`` writes and ``replay SYSTEM TRACE``,
``diagram SYSTEM --trace`` and ``run SYSTEM --script`` read::

    {"system": str, "check": str | null, "kind": str | null, "loop_start": int | null,
     "steps": [{"step": "env" | "deliver" | "crash" | "lose" | "duplicate" | "stall" | "wake",
                "instance": "call[0]", "event": str, "params": {name: value},
                "choose": ["call[1]", ...]}]}

``event``/``params`` are the environment event, or the message taken, lost or
duplicated; ``choose`` names the member each ``group[any]`` link picked, in order.
"""

from __future__ import annotations

from collections.abc import Sequence

from agentfsm.spec.system_model import System
from agentfsm.spec.system_trace import (
    Label,
    SystemTrace,
    SystemTraceError,
    describe_config,
    label_json,
    label_text,
    load_system_trace,
    shown_params,
)
from agentfsm.verify.system.step import Config, Effect, Stepper, initial_config

__all__ = ["SystemTrace", "SystemTraceError", "describe_config", "format_steps", "label_json", "label_text",
           "load_system_trace", "replay"]


def replay(system: System, labels: Sequence[Label]) -> list[tuple[Label, Config, Effect]]:
    """Apply each step to the concrete configuration; raise SystemTraceError where one cannot happen."""
    stepper = Stepper(system)
    config = initial_config(system)
    done: list[tuple[Label, Config, Effect]] = []
    for n, label in enumerate(labels, start=1):
        for got, nxt, effect in stepper.successors(config):
            if got == label:
                done.append((label, nxt, effect))
                config = nxt
                break
        else:
            raise SystemTraceError(f"step {n} ({label_text(system, label)}) cannot happen here:\n"
                                   + "\n".join(describe_config(system, config)))
    return done


def format_steps(system: System, steps: Sequence[tuple[Label, Config, Effect]],
                 loop_start: int | None = None) -> list[str]:
    """One line per step, then one per message it sent and per finding; the final configuration
    (no steps: the initial configuration, said to be that)."""
    if not steps:
        return ["  in the initial configuration:", *describe_config(system, initial_config(system))]
    lines = []
    for n, (label, _, effect) in enumerate(steps, start=1):
        inst = system.instances[label[1]]
        change = ""
        if effect.before is not None and effect.after is not None and effect.before[0] != effect.after[0]:
            states = inst.table.states
            change = f"  [{states[effect.before[0]].name} -> {states[effect.after[0]].name}]"
        elif effect.status == "rejected":
            change = "  [rejected]"
        loop = "  <- loop starts" if loop_start is not None and n - 1 == loop_start else ""
        lines.append(f"  {n:3d}. {label_text(system, label)}{change}{loop}")
        for sent in effect.sent:
            target = system.instances[sent.target].name
            lines.append(f"         {inst.name}.{sent.action} -> {target}: {sent.event}{shown_params(sent.params)}"
                         + ("  DROPPED (mailbox full)" if sent.dropped else ""))
        for finding in effect.findings:
            lines.append(f"         !! {finding.kind}: {finding.message}")
    lines.append("  reached:")
    lines.extend(describe_config(system, steps[-1][1]))
    return lines
