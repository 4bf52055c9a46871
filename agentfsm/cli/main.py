"""The one entry point: ``agentfsm SUBCOMMAND``. It imports the module of that subcommand alone
(agentfsm/cli/registry.py) and turns what it raises into the exit status."""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Sequence
from typing import NoReturn

from agentfsm import __version__
from agentfsm.cli.exits import EXIT_BAD_INPUT, BadInput
from agentfsm.cli.registry import COMMANDS, load

RESERVE_BYTES = 16 << 20   # memory held back for saying "out of memory" once it runs out
# numpy asks the kernel for transparent huge pages for every array of 4 MB or more; where the
# kernel compacts memory to find them (the common "madvise" setting), each fresh array of an
# explored graph costs more in the kernel than the pass over it (a third of `verify`'s checks
# on the narrow series in docs/verifier.md). A user's own setting wins.
HUGE_PAGES = ("NUMPY_MADVISE_HUGEPAGE", "0")


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
        from agentfsm.spec.suggest import closest, did_you_mean  # the table loader's, needed only on an error
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


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """Every subcommand in full; or, given the arguments, only the subcommand they name (with the
    others of its module), the rest by name and help alone, so that only that module is imported."""
    parser = SuggestingParser(prog="agentfsm", description="Model-checked transition tables for "
                                     "LLM-agent state machines.")
    parser.add_argument("--version", action="version", version=f"agentfsm {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    named = None if argv is None else next((word for word in argv if not word.startswith("-")), "")
    wanted = None if named is None else COMMANDS[named].module if named in COMMANDS else ""
    registered: set[str] = set()
    for name, command in COMMANDS.items():
        if wanted is not None and command.module != wanted:
            sub.add_parser(name, help=command.help)
        elif command.module not in registered:
            registered.add(command.module)
            load(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    os.environ.setdefault(*HUGE_PAGES)   # read when numpy is imported: by the subcommand's module, below
    words = list(sys.argv[1:] if argv is None else argv)
    args = build_parser(words).parse_args(words)
    code = guarded(args)
    if argv is None:   # the console script; a caller of main(argv) in its own process gets the status back
        from agentfsm.impl.temporal.process_end import exit_before_finalizing, used_temporal
        if used_temporal():
            exit_before_finalizing(code)
    return code


def guarded(args: argparse.Namespace) -> int:
    reserve = [bytearray(RESERVE_BYTES)]
    try:
        return run(args, reserve)
    except MemoryError:
        pass
    # Past exploration (which stops itself with ExplorationLimit, agentfsm/cli/limits.py), the work that follows it
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
