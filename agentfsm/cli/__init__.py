"""The command line, the only top layer: ``main``, the registry of subcommands, and one module per
group of them. It may import every package below; nothing below imports it (docs/layout.md)."""

from agentfsm.cli.main import main

__all__ = ["main"]
