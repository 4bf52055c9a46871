"""The one entry point: ``agentfsm SUBCOMMAND``. Each architectural part registers its own."""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Sequence
from typing import NoReturn

from agentfsm import __version__
from agentfsm.cliutil import EXIT_BAD_INPUT, BadInput
from agentfsm.diagrams import commands as diagram_commands
from agentfsm.impl import commands as impl_commands
from agentfsm.impl.durable import commands as durable_commands
from agentfsm.impl.workers import commands as worker_commands
from agentfsm.spec import commands as spec_commands
from agentfsm.spec.suggest import closest, did_you_mean
from agentfsm.verify import chaos, conformance_commands, crash_commands
from agentfsm.verify import commands as verify_commands
from agentfsm.verify.explore import DEFAULT_NOTE, ExplorationLimit

RESERVE_BYTES = 16 << 20   # memory held back for saying "out of memory" once it runs out
PARTS = [spec_commands, verify_commands, impl_commands, durable_commands, worker_commands, crash_commands, chaos,
         conformance_commands, diagram_commands]


class SuggestingParser(argparse.ArgumentParser):
    """argparse with "did you mean" for a mistyped subcommand, option or choice (Python 3.11's
    argparse has none)."""

    argv: Sequence[str] = ()

    def parse_known_args(self, args: Sequence[str] | None = None,  # type: ignore[override]
                         namespace: argparse.Namespace | None = None) -> tuple[argparse.Namespace, list[str]]:
        self.argv = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(self.argv, namespace)

    def error(self, message: str) -> NoReturn:
        super().error(message + self.suggestion(message))

    def suggestion(self, message: str) -> str:
        choice = re.search(r"invalid choice: '(.*?)' \(choose from (.*)\)", message)
        if choice:
            return did_you_mean(choice.group(1), re.findall(r"'([^']*)'", choice.group(2)))
        if message.startswith("unrecognized arguments:"):
            options = self.options()
            for word in self.argv:
                name = word.partition("=")[0]
                if name.startswith("-") and name not in options:
                    best = closest(name, options)
                    if best is not None:
                        alone = message == f"unrecognized arguments: {word}"
                        return f"; did you mean {best!r}?" if alone else f"; {name}: did you mean {best!r}?"
        return ""

    def options(self) -> list[str]:
        """Option strings of this parser and of the subcommand named in the arguments."""
        found = list(self._option_string_actions)
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                for word in self.argv:
                    if word in action.choices:
                        found += list(action.choices[word]._option_string_actions)
                        break
        return found


def build_parser() -> argparse.ArgumentParser:
    parser = SuggestingParser(prog="agentfsm", description="Model-checked transition tables for "
                                     "LLM-agent state machines.")
    parser.add_argument("--version", action="version", version=f"agentfsm {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for part in PARTS:
        part.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    reserve = [bytearray(RESERVE_BYTES)]
    try:
        return run(args, reserve)
    except MemoryError:
        pass
    # Past exploration (which stops itself with ExplorationLimit), the work that follows it
    # (vectors, mutants, diagrams of the space) can still outgrow memory: say so, never a
    # traceback. Only here, outside the handler, are the failed frames and what they held gone.
    print(f"agentfsm: error: {args.command}: out of memory; narrow the bounds with --set NAME=VALUE "
          "(or give the process more memory)", file=sys.stderr)
    return EXIT_BAD_INPUT


def run(args: argparse.Namespace, reserve: list[bytearray]) -> int:
    """Run the subcommand; every failure but running out of memory becomes its exit status here.
    On MemoryError ``reserve`` is freed first, so that the unwinding (finalizers, the warnings
    they print) has memory to run in."""
    try:
        code: int = args.func(args)
    except MemoryError:
        reserve.clear()
        raise
    except BadInput as exc:
        print(f"agentfsm: error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except ExplorationLimit as exc:
        reason = exc.reason if "max_configurations" in args else exc.reason.replace(DEFAULT_NOTE, "the default limit")
        print(f"agentfsm: error: exploration stopped, {reason}: {exc.configurations:,} configurations and "
              f"{exc.transitions:,} transitions explored, to breadth-first depth {exc.depth}; narrow the bounds "
              f"with --set NAME=VALUE", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader stopped early (``agentfsm ... | head``): not an error of ours. Point
        # stdout at /dev/null so the interpreter's final flush stays quiet, and exit as a
        # process killed by SIGPIPE would.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    return code


if __name__ == "__main__":
    sys.exit(main())
