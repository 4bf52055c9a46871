"""An exploration stopped early (``ExplorationLimit``) as bad input: what was explored and how to
narrow the bounds. Only the subcommands that explore wrap themselves in it, so the entry point
imports no verifier."""

from __future__ import annotations

import argparse
import functools

from agentfsm.cli.exits import BadInput
from agentfsm.cli.util import Command
from agentfsm.verify.table.explore import DEFAULT_NOTE, ExplorationLimit


def reporting_limits(command: Command) -> Command:
    """``command``, with an exploration that stopped early reported as bad input (exit 2)."""
    @functools.wraps(command)
    def run(args: argparse.Namespace) -> int:
        try:
            return command(args)
        except ExplorationLimit as exc:
            raise BadInput(stopped(exc, args)) from None
    return run


def stopped(exc: ExplorationLimit, args: argparse.Namespace) -> str:
    reason = exc.reason if "max_configurations" in args else exc.reason.replace(DEFAULT_NOTE, "the default limit")
    return (f"exploration stopped, {reason}: {exc.configurations:,} configurations and {exc.transitions:,} "
            f"transitions explored, to breadth-first depth {exc.depth}; narrow the bounds with --set NAME=VALUE")
