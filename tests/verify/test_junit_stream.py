"""The JUnit writer lays out a case at a time: byte for byte what one ElementTree of the whole report gives."""

from __future__ import annotations

import io
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Sequence

from agentfsm.verify.junit import Case, Suite, junit_xml, write_junit
from hypothesis import given
from hypothesis import strategies as st

TEXT = st.text(st.characters(blacklist_categories=("Cs", "Cc")) | st.sampled_from("\n\t<>&\"'"), max_size=12)
CASES = st.builds(Case, name=TEXT, status=st.sampled_from(["pass", "failure", "error", "skipped"]), message=TEXT,
                  detail=TEXT, kind=TEXT, seconds=st.none() | st.floats(0, 1e4))
SUITES = st.lists(st.builds(Suite, machine=TEXT, cases=st.lists(CASES, max_size=4).map(tuple),
                            seconds=st.floats(0, 1e4), file=st.none() | TEXT), max_size=3)


def whole_tree(command: str, suites: Sequence[Suite]) -> bytes:
    """The report as one ElementTree, indented and written at once (the writer before it streamed)."""
    def count(of: Sequence[Suite], status: str) -> int:
        return sum(c.status == status for s in of for c in s.cases)
    root = ET.Element("testsuites", name=f"agentfsm {command}", tests=str(sum(len(s.cases) for s in suites)),
                      failures=str(count(suites, "failure")), errors=str(count(suites, "error")),
                      skipped=str(count(suites, "skipped")), time=f"{sum(s.seconds for s in suites):.3f}")
    for suite in suites:
        attrs = {"name": f"{command}.{suite.machine}", "tests": str(len(suite.cases)),
                 "failures": str(count([suite], "failure")), "errors": str(count([suite], "error")),
                 "skipped": str(count([suite], "skipped")), "time": f"{suite.seconds:.3f}"}
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
            detail = ET.SubElement(item, case.status, message=case.message.splitlines()[0] if case.message
                                   else case.status)
            if case.kind:
                detail.set("type", case.kind)
            if case.detail:
                detail.text = case.detail
    ET.indent(root)
    data: bytes = ET.tostring(root, encoding="utf-8", xml_declaration=True)
    return data + b"\n"


@given(command=st.sampled_from(["verify", "conform"]), suites=SUITES)
def test_the_streamed_report_is_the_whole_trees(command: str, suites: list[Suite]) -> None:
    out = io.BytesIO()
    write_junit(out, command, suites)
    assert out.getvalue() == junit_xml(command, suites) == whole_tree(command, suites)


class Made(Sequence[Case]):
    """Cases made as they are read, none kept: what a run of millions of vectors hands the writer."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.made = 0

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: object) -> Case:   # type: ignore[override]
        raise AssertionError("the writer reads the cases in order")

    def __iter__(self) -> Iterator[Case]:
        for n in range(self.size):
            self.made += 1
            yield Case(f"v-{n}", "failure" if n % 7 == 0 else "pass", message="wrong", seconds=0.001)


def test_cases_made_as_read_are_read_in_order() -> None:
    cases = Made(50)
    data = junit_xml("conform", [Suite("m", cases)])
    assert data == whole_tree("conform", [Suite("m", tuple(Made(50)))])
    assert cases.made <= 2 * 50
