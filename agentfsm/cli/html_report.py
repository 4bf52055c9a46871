"""``--html FILE`` and ``--summary-md FILE``, shared by ``verify``, ``conform`` and ``crash``: the
run's results as one self-contained page, and as Markdown for a CI job's summary.

The diagrams' modules are imported only when a report is written: most runs write none, and
they are a fifth of ``agentfsm verify``'s start-up."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from agentfsm.cli.exits import BadInput

if TYPE_CHECKING:
    from agentfsm.diagrams.report_data import Entry
    from agentfsm.spec.model import Table


def add_report_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--html", metavar="FILE",
                        help="also write one self-contained HTML page: every check, each counterexample stepped "
                             "over the table's diagram (no network access; opens from file://)")
    parser.add_argument("--summary-md", metavar="FILE",
                        help="append a Markdown summary linking the --html page to FILE (e.g. $GITHUB_STEP_SUMMARY)")


def wanted(args: argparse.Namespace) -> bool:
    return bool(args.html or args.summary_md)


def write_report(args: argparse.Namespace, command: str, entries: Sequence[Entry], tables: Sequence[Table]) -> None:
    """Write what ``--html`` and ``--summary-md`` ask for; the pictures of ``tables`` drawn once each."""
    if not wanted(args):
        return
    from agentfsm.diagrams.render import RenderError
    from agentfsm.diagrams.report_data import page_data
    from agentfsm.diagrams.report_markdown import summary_markdown
    from agentfsm.diagrams.report_page import html_page, table_picture

    pictures: dict[str, str] = {}
    if args.html:
        try:
            for table in tables:
                if table.machine not in pictures:
                    pictures[table.machine] = table_picture(table)
        except RenderError as exc:
            raise BadInput(f"--html: cannot draw the diagrams: {exc}") from None
    data = page_data(command, entries, pictures)
    if args.html:
        _write(Path(args.html), html_page(data), "wb")
    if args.summary_md:
        link = os.path.basename(args.html) if args.html else None
        _write(Path(args.summary_md), summary_markdown(data, link).encode(), "ab")


def _write(path: Path, data: bytes, mode: str) -> None:
    try:
        with path.open(mode) as out:
            out.write(data)
    except OSError as exc:
        raise BadInput(f"cannot write {path}: {exc.strerror}") from None
