"""Tables are YAML 1.2: a row's ``on:`` stays the string "on"; only true/false are booleans."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from agentfsm.spec import Table
from agentfsm.spec.yamlio import load_document


def data(text: str) -> object:
    return load_document(text.encode(), "t.yaml").data


def test_pyyaml_default_would_read_on_as_true() -> None:
    # The hazard this loader exists to avoid: YAML 1.1 turns the key into a boolean.
    assert yaml.safe_load("- {from: A, on: Go, to: B}") == [{"from": "A", True: "Go", "to": "B"}]
    assert yaml.safe_load("k: [yes, no, off]") == {"k": [True, False, False]}


def test_a_rows_on_key_stays_the_string_on() -> None:
    assert data("- {from: A, on: Go, to: B}") == [{"from": "A", "on": "Go", "to": "B"}]


@pytest.mark.parametrize("word", ["yes", "no", "on", "off", "y", "n", "Yes", "NO", "On", "OFF", "Y"])
def test_yaml11_booleans_stay_strings(word: str) -> None:
    assert data(f"k: {word}") == {"k": word}


@pytest.mark.parametrize(("text", "value"), [("true", True), ("false", False), ("True", True),
                                             ("FALSE", False)])
def test_only_true_and_false_are_booleans(text: str, value: bool) -> None:
    assert data(f"k: {text}") == {"k": value}


@pytest.mark.parametrize(("text", "value"), [("017", 17), ("0o17", 15), ("0x1f", 31), ("-3", -3),
                                             ("1_000", "1_000"), ("1:20", "1:20"), ("~", None),
                                             ("null", None), ("2001-12-14", "2001-12-14")])
def test_other_scalars_follow_the_core_schema(text: str, value: object) -> None:
    assert data(f"k: {text}") == {"k": value}


def test_the_bundled_table_keeps_every_rows_event(loom: Table) -> None:
    raw = load_document(Path(loom.file).read_bytes(), loom.file).data
    with_on = [row for row in raw["transitions"] if "on" in row]
    assert with_on and all(isinstance(row["on"], str) for row in with_on)
    assert [r.event for r in loom.rows if r.event is not None] == [row["on"] for row in with_on]
