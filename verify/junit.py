"""The one JUnit XML writer: ``verify`` and ``conform`` both describe their results as
suites of cases and let this module lay them out, so CI sees one layout and one naming
scheme (suite ``COMMAND.MACHINE``, class name ``agentfsm.COMMAND.MACHINE``).

A table that could not be loaded or explored is a suite with one ``error`` case carrying
the diagnostics, so a CI report shows it next to the tables that were checked.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

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
    """The cases of one table (``machine`` is its file when it never loaded)."""

    machine: str
    cases: tuple[Case, ...]
    seconds: float = 0.0
    file: str | None = None


def junit_xml(command: str, suites: Sequence[Suite]) -> bytes:
    root = ET.Element("testsuites", name=f"agentfsm {command}", tests=str(sum(len(s.cases) for s in suites)),
                      failures=str(_count(suites, "failure")), errors=str(_count(suites, "error")),
                      skipped=str(_count(suites, "skipped")), time=f"{sum(s.seconds for s in suites):.3f}")
    for suite in suites:
        attrs = {"name": f"{command}.{suite.machine}", "tests": str(len(suite.cases)),
                 "failures": str(_count([suite], "failure")), "errors": str(_count([suite], "error")),
                 "skipped": str(_count([suite], "skipped")), "time": f"{suite.seconds:.3f}"}
        if suite.file is not None:
            attrs["file"] = suite.file
        element = ET.SubElement(root, "testsuite", attrs)
        for case in suite.cases:
            case_attrs = {"classname": f"agentfsm.{command}.{suite.machine}", "name": case.name}
            if case.seconds is not None:
                case_attrs["time"] = f"{case.seconds:.3f}"
            item = ET.SubElement(element, "testcase", case_attrs)
            if case.status == "pass":
                continue
            tag = {"failure": "failure", "error": "error", "skipped": "skipped"}[case.status]
            detail = ET.SubElement(item, tag, message=case.message.splitlines()[0] if case.message else case.status)
            if case.kind:
                detail.set("type", case.kind)
            if case.detail:
                detail.text = case.detail
    ET.indent(root)
    data: bytes = ET.tostring(root, encoding="utf-8", xml_declaration=True)
    return data + b"\n"


def _count(suites: Sequence[Suite], status: Status) -> int:
    return sum(c.status == status for s in suites for c in s.cases)
