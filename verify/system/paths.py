"""Concrete paths of a system: the steps that reach a chain of representatives (configurations as
explored under symmetry), and the steps of a trace replayed from the initial configuration, with
who did what and which message went where, so that a counterexample shows the instances as they
really moved. The trace format itself is ``agentfsm.spec.system_trace``."""

from __future__ import annotations

from collections.abc import Sequence

from agentfsm.spec.system_model import System
from agentfsm.spec.system_trace import (
    Label,
    SystemTraceError,
    describe_config,
    label_text,
    shown_params,
)
from agentfsm.verify.system.step import Config, Effect, Stepper, canonicalizer, initial_config


def concrete_path(system: System, symmetry: bool, targets: list[Config]) -> list[tuple[Label, Config, Effect]]:
    """Concrete steps from the initial configuration through representatives ``targets[1:]``."""
    stepper = Stepper(system)
    canonical = canonicalizer(system, symmetry)
    config = initial_config(system)
    steps: list[tuple[Label, Config, Effect]] = []
    for target in targets[1:]:
        for label, nxt, effect in stepper.successors(config):
            if nxt is not config and canonical(nxt) == target:
                steps.append((label, nxt, effect))
                config = nxt
                break
        else:
            raise AssertionError("no concrete step reaches the next representative")
    return steps


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
