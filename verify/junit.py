"""The one JUnit XML writer: ``verify`` and ``conform`` both describe their results as
suites of cases and let this module lay them out, so CI sees one layout and one naming
scheme (suite ``COMMAND.MACHINE``, class name ``agentfsm.COMMAND.MACHINE``).

A table that could not be loaded or explored is a suite with one ``error`` case carrying
the diagnostics, so a CI report shows it next to the tables that were checked.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import BinaryIO, Literal

Status = Literal["pass", "failure", "error", "skipped"]


@dataclass(frozen=True)
class Case:
    """One testcase: a check of a table, or one conformance vector."""

    name: str
    status: Status = "pass"
    message: str = ""
    detail: str = ""
    kind: str = ""
    seconds: float | None = None


@dataclass(frozen=True)
class Suite:
    """The cases of one table (``machine`` is its file when it never loaded). ``cases`` may be
    made as read (a run of millions of vectors): the writer reads them twice, never keeps them."""

    machine: str
    cases: Sequence[Case]
    seconds: float = 0.0
    file: str | None = None


def junit_xml(command: str, suites: Sequence[Suite]) -> bytes:
    return b"".join(junit_chunks(command, suites))


def write_junit(out: BinaryIO, command: str, suites: Sequence[Suite]) -> None:
    """The report written as it is made: a suite of millions of cases is never held whole."""
    for chunk in junit_chunks(command, suites):
        out.write(chunk)


def junit_chunks(command: str, suites: Sequence[Suite]) -> Iterator[bytes]:
    """The XML, indented two spaces a level, a case at a time; each element laid out by ElementTree."""
    counts = [Counter(c.status for c in s.cases) for s in suites]
    total = sum(counts, Counter())
    root = _element("testsuites", name=f"agentfsm {command}", tests=str(sum(len(s.cases) for s in suites)),
                    failures=str(total["failure"]), errors=str(total["error"]), skipped=str(total["skipped"]),
                    time=f"{sum(s.seconds for s in suites):.3f}")
    yield b"<?xml version='1.0' encoding='utf-8'?>\n"
    if not suites:
        yield _text(root) + b"\n"
        return
    yield _opening(root)
    for suite, count in zip(suites, counts, strict=True):
        attrs = {"name": f"{command}.{suite.machine}", "tests": str(len(suite.cases)),
                 "failures": str(count["failure"]), "errors": str(count["error"]), "skipped": str(count["skipped"]),
                 "time": f"{suite.seconds:.3f}"}
        if suite.file is not None:
            attrs["file"] = suite.file
        element = _element("testsuite", **attrs)
        if not suite.cases:
            yield b"\n  " + _text(element)
            continue
        yield b"\n  " + _opening(element)
        for case in suite.cases:
            yield b"\n    " + _text(_case(command, suite.machine, case))
        yield b"\n  </testsuite>"
    yield b"\n</testsuites>\n"


def _case(command: str, machine: str, case: Case) -> ET.Element:
    attrs = {"classname": f"agentfsm.{command}.{machine}", "name": case.name}
    if case.seconds is not None:
        attrs["time"] = f"{case.seconds:.3f}"
    item = _element("testcase", **attrs)
    if case.status != "pass":
        detail = ET.SubElement(item, case.status, message=case.message.splitlines()[0] if case.message else case.status)
        if case.kind:
            detail.set("type", case.kind)
        if case.detail:
            detail.text = case.detail
        ET.indent(item, level=2)
    return item


def _element(tag: str, **attrs: str) -> ET.Element:
    return ET.Element(tag, attrs)


def _text(element: ET.Element) -> bytes:
    return ET.tostring(element, encoding="unicode").encode()


def _opening(element: ET.Element) -> bytes:
    """An element's start tag (its children follow)."""
    empty = _text(element)
    assert empty.endswith(b" />")
    return empty[:-3] + b">"
