"""Which module implements each subcommand, and its one-line help: the command line imports only
the module of the subcommand it runs, so ``agentfsm --version`` or ``check`` loads no verifier,
runtime or renderer. A test holds every entry to what its module registers."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType


@dataclass(frozen=True)
class Command:
    module: str  # the module whose ``register(sub)`` adds this subcommand (and the rest of its group)
    help: str


COMMANDS: dict[str, Command] = {
    "check": Command("agentfsm.cli.check", "load and statically check tables"),
    "tables": Command("agentfsm.cli.check", "print the paths of the bundled tables and systems"),
    "verify": Command("agentfsm.cli.verify", "explore every reachable configuration and run the named checks"),
    "replay": Command("agentfsm.cli.verify", "step through a counterexample trace"),
    "export": Command("agentfsm.cli.verify", "export a table to another model checker's language"),
    "run": Command("agentfsm.cli.run", "run a scripted conversation end to end"),
    "adapter": Command("agentfsm.cli.run", "serve the reference engine over the adapter protocol (JSON Lines on "
                                           "stdio)"),
    "journal": Command("agentfsm.cli.durable", "show a durable run's journal and current state"),
    "submit": Command("agentfsm.cli.workers", "queue runs of a table, each with a script of events, for workers"),
    "worker": Command("agentfsm.cli.workers", "serve queued runs from a shared store, under leases"),
    "jobs": Command("agentfsm.cli.workers", "list the runs queued in a shared store and their status"),
    "temporal": Command("agentfsm.cli.temporal", "run tables on Temporal: a worker, start, send, list, trace, "
                                                 "decide, interrupt"),
    "crash": Command("agentfsm.cli.crash", "crash the durable runtime at every write boundary and check recovery"),
    "chaos": Command("agentfsm.cli.chaos", "fault campaigns against real durable runs: count duplicated "
                                            "effects, lost steps, stuck runs"),
    "vectors": Command("agentfsm.cli.conformance", "generate conformance test vectors from a table"),
    "conform": Command("agentfsm.cli.conformance", "run conformance vectors against an implementation's adapter"),
    "mutants": Command("agentfsm.cli.conformance", "measure the vectors: run mutants of the table as "
                                                   "implementations"),
    "audit": Command("agentfsm.cli.conformance", "check a recorded JSON Lines log of steps against a table"),
    "diagram": Command("agentfsm.cli.diagram", "draw a table (Graphviz SVG/PNG/DOT or Mermaid)"),
}
"""In the order ``agentfsm --help`` lists them; a module's subcommands are adjacent."""


def load(name: str) -> ModuleType:
    """The module that implements subcommand ``name``; the only place a command's code is imported."""
    return importlib.import_module(COMMANDS[name].module)
