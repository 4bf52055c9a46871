"""The loader never crashes: whatever the bytes, the answer is a Table or a TableError.

Example counts stay moderate so this file runs in a few seconds; hostile shapes that
hypothesis would rarely find (alias bombs, deep nesting) are in the malformed corpus.
"""

from __future__ import annotations

import copy
from typing import Any

import yaml
from agentfsm.spec import Table, TableError, load_table_bytes
from agentfsm.spec.expr import ExprError, Scope, Symbol, parse
from agentfsm.spec.yamlio import load_document
from conftest import SPEC
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

LOOM_BYTES = (SPEC / "loom-agent.yaml").read_bytes()
LOOM_DATA: Any = load_document(LOOM_BYTES, "loom-agent.yaml").data

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
WHOLE_TABLES = settings(FUZZ, max_examples=60)  # each example loads the full Loom table


def loads_or_reports(raw: bytes) -> None:
    try:
        table = load_table_bytes(raw, "fuzz.yaml")
    except TableError as exc:
        assert exc.diagnostics
        for diagnostic in exc.diagnostics:
            assert str(diagnostic).startswith("fuzz.yaml:")
            assert "\n" not in diagnostic.message and len(diagnostic.message) < 400
        return
    assert isinstance(table, Table)


scalars = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), st.text(max_size=12),
                    st.sampled_from(["on", "yes", "format", "1", "*", "A", "x > 0", "state in (A)"]))
keys = st.one_of(st.sampled_from(["format", "machine", "states", "events", "transitions", "from", "to",
                                  "on", "when", "set", "emit", "type", "min", "max", "init", "initial"]),
                 st.text(max_size=8))
documents = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner,
                                                                                                  max_size=5),
                         max_leaves=25)


@FUZZ
@given(st.binary(max_size=300))
def test_arbitrary_bytes(raw: bytes) -> None:
    loads_or_reports(raw)


@FUZZ
@given(documents)
def test_arbitrary_yaml_documents(document: object) -> None:
    loads_or_reports(yaml.safe_dump(document).encode())


@FUZZ
@given(st.fixed_dictionaries({"format": st.just(1), "machine": st.just("m")}, optional={
    "states": documents, "events": documents, "transitions": documents, "variables": documents}))
def test_documents_shaped_like_tables(document: dict[str, Any]) -> None:
    loads_or_reports(yaml.safe_dump(document).encode())


def paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into a nested dict/list document, the root excluded."""
    found = []
    items = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else []
    for key, child in items:
        found.append((*prefix, key))
        found.extend(paths(child, (*prefix, key)))
    return found


LOOM_PATHS = paths(LOOM_DATA)


def at(node: Any, path: tuple[Any, ...]) -> Any:
    for key in path:
        node = node[key]
    return node


@WHOLE_TABLES
@given(st.lists(st.tuples(st.sampled_from(["delete", "swap", "replace"]), st.sampled_from(LOOM_PATHS),
                          st.sampled_from(LOOM_PATHS), scalars), min_size=1, max_size=3))
def test_mutations_of_the_loom_table(mutations: list[tuple[str, tuple[Any, ...], tuple[Any, ...], Any]]) -> None:
    doc = copy.deepcopy(LOOM_DATA)
    for kind, path, other, scalar in mutations:
        try:
            parent, target = at(doc, path[:-1]), path[-1]
            if kind == "delete":
                del parent[target]
            elif kind == "swap":
                parent[target] = copy.deepcopy(at(doc, other))
            else:
                parent[target] = scalar
        except (KeyError, IndexError, TypeError):
            continue  # an earlier mutation removed the path
    loads_or_reports(yaml.safe_dump(doc, sort_keys=False).encode())


@WHOLE_TABLES
@given(st.integers(0, len(LOOM_BYTES) - 1), st.binary(min_size=1, max_size=8), st.integers(0, 8))
def test_byte_edits_of_the_loom_table(position: int, inserted: bytes, deleted: int) -> None:
    loads_or_reports(LOOM_BYTES[:position] + inserted + LOOM_BYTES[position + deleted:])


SCOPE = Scope({"n": Symbol("var", "int", slot=1), "b": Symbol("var", "bool", slot=2),
               "k": Symbol("const", "int", value=3)}, {"A": 0, "B": 1})
TOKENS = ["n", "b", "k", "A", "state", "in", "not", "and", "or", "true", "True", "None", "0", "7", "-", "+",
          "*", "**", "/", "==", "<", ">=", "(", ")", "[", "]", ",", ".", ":", ":=", "lambda", "if", "else",
          "for", "x", "f'", "'", '"', "\\", "#", "{", "}", "@", "~", "!", " ", "\t", "\n", "é", "\x00"]


def parses_or_reports(text: str) -> None:
    try:
        parse(text, SCOPE)
    except ExprError as exc:
        assert 0 <= exc.col <= max(len(text), 1) and exc.message


@FUZZ
@given(st.text(max_size=60))
def test_arbitrary_expression_text(text: str) -> None:
    parses_or_reports(text)


@FUZZ
@given(st.lists(st.sampled_from(TOKENS), max_size=30))
def test_python_ish_expressions(tokens: list[str]) -> None:
    parses_or_reports(" ".join(tokens))
