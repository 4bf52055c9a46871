"""Concrete paths: the steps that reach a chain of representatives (configurations as explored under
symmetry), so that a counterexample shows the instances as they really moved."""

from __future__ import annotations

from agentfsm.spec.system_model import System
from agentfsm.spec.system_trace import Label
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
