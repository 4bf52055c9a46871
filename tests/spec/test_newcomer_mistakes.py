"""The newcomer's mistakes (tests/newcomer_mistakes.yaml): each gives its exact message,
a "did you mean", the fix of an expression or "quote it" where the mistake calls for one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from agentfsm.spec import TableError, load_table_bytes
from conftest import ROOT, run_cli

MISTAKES: dict[str, Any] = yaml.safe_load((Path(__file__).parent.parent / "newcomer_mistakes.yaml").read_text())
BASE = (ROOT / "examples" / "support-agent.yaml").read_text()


def test_there_are_sixty_mistakes_and_the_base_table_loads() -> None:
    assert len(MISTAKES["table_mistakes"]) + len(MISTAKES["cli_mistakes"]) >= 60
    assert load_table_bytes(BASE.encode(), "support-agent.yaml").machine == "support-agent"


@pytest.mark.parametrize("case", MISTAKES["table_mistakes"], ids=lambda c: c["id"])
def test_table_mistake(case: dict[str, Any]) -> None:
    assert case["replace"] in BASE, "the mistake no longer applies to the base table"
    text = BASE.replace(case["replace"], case["with"], 1)
    with pytest.raises(TableError) as caught:
        load_table_bytes(text.encode(), "support-agent.yaml")
    assert [str(d).removeprefix("support-agent.yaml:") for d in caught.value.diagnostics] == case["errors"]


@pytest.mark.parametrize("case", MISTAKES["cli_mistakes"], ids=lambda c: c["id"])
def test_cli_mistake(case: dict[str, Any], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    code, _, err = run_cli(case["argv"], capsys)
    assert code == case["status"]
    last = err.strip().splitlines()[-1]
    if "error_ends_with" in case:
        assert last.endswith(case["error_ends_with"])
    else:
        assert last == case["error"]


SUGGESTING = ("did you mean", "write ", "quote it", "indent with spaces")


def test_most_messages_name_the_fix() -> None:
    """Not a count to game: the mistakes with no suggestion are the ones with nothing close."""
    plain = [c["id"] for c in MISTAKES["table_mistakes"] if not any(s in " ".join(c["errors"]) for s in SUGGESTING)]
    assert len(plain) < len(MISTAKES["table_mistakes"]) // 2, plain
