"""The seed ledger (docs/seeds.md) stays true: every reference resolves, every encoded rule
(and every reading or departure) has an encoding and a test.

A reference is a backticked item of a rule's "where" column: a table row, invariant,
property or field, a function or class of the code, or a test. Removing a row the ledger
names, renaming a test or a function, or changing a field it quotes fails this test.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache

import pytest
from agentfsm.spec import Table, load_table
from conftest import ROOT

LEDGER = ROOT / "docs" / "seeds.md"
STATUSES = {"encoded", "partial", "open", "descriptive", "reading", "departure"}
CHECKED = {"encoded", "reading", "departure"}   # a test fails when the rule, reading or departure stops holding
ROW = re.compile(r"^(?P<machine>[\w.-]+): (?P<source>\*|\w+) --(?P<event>\w*)--> (?P<target>\w+)$")
NAMED = re.compile(r"^(?P<machine>[\w.-]+) (?P<kind>invariant|property) (?P<name>[\w-]+)$")
FIELD = re.compile(r"^(?P<machine>[\w.-]+) field (?P<path>[\w.]+)=(?P<value>\S+)$")
CODE = re.compile(r"^(?P<file>(?:impl|spec|verify|faults|diagrams|agentfsm)/[\w/]+\.py)::(?P<name>[\w.]+)$")
TEST = re.compile(r"^(?P<file>tests/(?:\w+/)?\w+\.py)::(?P<name>\w+)$")


@dataclass(frozen=True)
class Rule:
    number: str
    text: str
    status: str
    where: str

    @property
    def refs(self) -> list[str]:
        return re.findall(r"`([^`]+)`", self.where)


def parse(text: str) -> list[Rule]:
    rules = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 4 and re.fullmatch(r"\d{3}\.\d{2}", cells[0]):
            rules.append(Rule(*cells))
    return rules


@cache
def bundled() -> dict[str, Table]:
    tables = (load_table(path) for path in sorted((ROOT / "spec").glob("*.yaml")))
    return {table.machine: table for table in tables}


@cache
def definitions(file: str) -> frozenset[str]:
    """``name`` and ``Class.method`` for every top-level function and class of a module."""
    tree = ast.parse((ROOT / file).read_text())
    found: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(node.name)
        if isinstance(node, ast.ClassDef):
            found.update(f"{node.name}.{item.name}" for item in node.body
                         if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)))
    return frozenset(found)


def field_value(table: Table, path: str) -> object:
    head, _, rest = path.partition(".")
    if head == "unhandled":
        return getattr(table.unhandled, rest)
    if head == "runtime":
        return table.runtime.get(rest)
    if head == "constants":
        return table.constants.get(rest)
    if head == "action":
        name, _, attribute = rest.rpartition(".")
        action = table.action_index.get(name)
        return None if action is None else getattr(action, attribute)
    raise KeyError(path)


def shown(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def resolve(ref: str, tables: Mapping[str, Table]) -> tuple[str, str | None]:
    """(kind, problem): kind is ``test`` or ``encoding``; problem None when the reference holds."""
    if m := TEST.match(ref):
        path = ROOT / m["file"]
        ok = path.is_file() and m["name"] in definitions(m["file"])
        return "test", None if ok else f"no test {ref}"
    if m := CODE.match(ref):
        ok = (ROOT / m["file"]).is_file() and m["name"] in definitions(m["file"])
        return "encoding", None if ok else f"no {m['name']} in {m['file']}"
    for pattern in (ROW, NAMED, FIELD):
        if (m := pattern.match(ref)) is None:
            continue
        table = tables.get(m["machine"])
        if table is None:
            return "encoding", f"no bundled table {m['machine']!r}"
        if pattern is ROW:
            wildcard = m["source"] == "*"
            ok = any((r.wildcard if wildcard else r.source == m["source"]) and (r.event or "") == m["event"]
                     and r.target == m["target"] for r in table.rows)
            return "encoding", None if ok else f"{m['machine']} has no row {ref.split(': ', 1)[1]}"
        if pattern is NAMED:
            names = [i.name for i in table.invariants] if m["kind"] == "invariant" else \
                [p.name for p in table.properties]
            return "encoding", None if m["name"] in names else f"{m['machine']} has no {m['kind']} {m['name']}"
        try:
            value = shown(field_value(table, m["path"]))
        except (KeyError, AttributeError):
            return "encoding", f"{ref}: no such field"
        return "encoding", None if value == m["value"] else f"{ref}: the table says {value}"
    return "unknown", f"{ref!r} is not a reference (row, invariant, property, field, code or test)"


def problems(text: str, tables: Mapping[str, Table]) -> list[str]:
    found = []
    rules = parse(text)
    for rule in rules:
        if rule.status not in STATUSES:
            found.append(f"{rule.number}: status {rule.status!r}")
        kinds = set()
        for ref in rule.refs:
            kind, problem = resolve(ref, tables)
            kinds.add(kind)
            if problem is not None:
                found.append(f"{rule.number}: {problem}")
        if rule.status in CHECKED and not {"test", "encoding"} <= kinds:
            found.append(f"{rule.number}: a rule marked {rule.status} needs an encoding and a test")
    return found


def test_every_reference_of_the_ledger_resolves() -> None:
    assert problems(LEDGER.read_text(), bundled()) == []


def test_every_seed_is_numbered_in_order_and_counted() -> None:
    text = LEDGER.read_text()
    rules = parse(text)
    stated = re.search(r"Counts \(kept by the ledger test\): seed 000 (\d+) rules, 001 (\d+), 002 (\d+), 003 (\d+)",
                       text)
    assert stated is not None
    for seed, count in zip(("000", "001", "002", "003"), stated.groups(), strict=True):
        numbers = [r.number for r in rules if r.number.startswith(seed + ".")]
        assert numbers == [f"{seed}.{k:02d}" for k in range(1, int(count) + 1)], seed


def test_a_lost_row_or_test_is_caught() -> None:
    text = LEDGER.read_text()
    loom = bundled()["loom-agent"]
    without_progress = dataclasses.replace(loom, rows=tuple(r for r in loom.rows if r.event != "ToolProgress"))
    found = problems(text, {**bundled(), "loom-agent": without_progress})
    assert "000.23: loom-agent has no row ExecutingTools --ToolProgress--> ExecutingTools" in found
    renamed = text.replace("tests/spec/test_loom_table.py::test_retries_are_bounded",
                           "tests/spec/test_loom_table.py::test_gone")
    assert "000.11: no test tests/spec/test_loom_table.py::test_gone" in problems(renamed, bundled())
    stripped = re.sub(r"(\| 002\.33 \|.*\| encoded \|)(.*)", lambda m: m[1] + " `vibework-agent field "
                      "unhandled.feed=InternalError` |", text)
    assert "002.33: a rule marked encoded needs an encoding and a test" in problems(stripped, bundled())
    untested = re.sub(r"(\| 002\.43 \|.*\| departure \|)(.*)", lambda m: m[1] + " `impl/durable/driver.py::"
                      "DurableLink.step` |", text)
    assert "002.43: a rule marked departure needs an encoding and a test" in problems(untested, bundled())
    changed = dataclasses.replace(loom, unhandled=dataclasses.replace(loom.unhandled, anomaly="halt"))
    assert "000.32: loom-agent field unhandled.anomaly=log: the table says halt" in \
        problems(text, {**bundled(), "loom-agent": changed})


@pytest.mark.parametrize("ref", ["loom-agent: Nowhere --UserInput--> CallingLlm", "loom-agent invariant nope",
                                 "impl/agents/loom.py::LoomAgent.nothing", "vibework-agent field runtime.max_tools=3",
                                 "whatever this is"])
def test_bad_references_are_reported(ref: str) -> None:
    _, problem = resolve(ref, bundled())
    assert problem is not None
