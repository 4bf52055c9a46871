"""The one entry point: ``agentfsm SUBCOMMAND``. Each architectural part registers its own."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from agentfsm import __version__
from agentfsm.cliutil import EXIT_BAD_INPUT, BadInput
from agentfsm.diagrams import commands as diagram_commands
from agentfsm.impl import commands as impl_commands
from agentfsm.impl.durable import commands as durable_commands
from agentfsm.impl.workers import commands as worker_commands
from agentfsm.spec import commands as spec_commands
from agentfsm.verify import chaos, conformance_commands, crash_commands
from agentfsm.verify import commands as verify_commands

PARTS = [spec_commands, verify_commands, impl_commands, durable_commands, worker_commands, crash_commands, chaos,
         conformance_commands, diagram_commands]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="agentfsm", description="Model-checked transition tables for "
                                     "LLM-agent state machines.")
    parser.add_argument("--version", action="version", version=f"agentfsm {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for part in PARTS:
        part.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
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
