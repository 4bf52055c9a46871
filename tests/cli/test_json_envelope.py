"""Every command's ``--json`` object is one envelope: ``format`` 1, a ``kind``, then the payload.

docs/json-envelope.schema.json. The cheap commands run here; the others are checked where
their own tests already run them (conform, mutants, crash with kills, jobs, chaos; the lines
of run --json, a system's run included): ``enveloped`` and ``run_line`` in tests/json_envelope.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from agentfsm.spec import Table
from conformance_helpers import log_of, write
from conftest import SPEC, run_cli
from json_envelope import ENVELOPE, VALIDATOR, VERIFY, enveloped, run_line
from verify_tables import HEADER

from agentfsm.cli.util import json_envelope

LOOM = str(SPEC / "loom-agent.yaml")
QUIET = HEADER.format(machine="quiet") + """
states: {A: {initial: true}, Done: {final: true}}
events: {stop: {}}
transitions:
  - {from: A, on: stop, to: Done}
"""


def test_the_schemas_are_valid_json_schemas() -> None:
    jsonschema.Draft202012Validator.check_schema(ENVELOPE)
    jsonschema.Draft202012Validator.check_schema(VERIFY)


def test_check_verify_audit_and_a_skipped_crash_print_the_envelope(
        loom: Table, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    quiet = tmp_path / "quiet.yaml"
    quiet.write_text(QUIET)
    log = write(tmp_path / "log.jsonl", log_of(loom, walks=1))
    for kind, argv, status in [("check", ["check", "--json", LOOM], 0),
                               ("verify", ["verify", "--json", str(quiet)], 0),
                               ("audit", ["audit", LOOM, str(log), "--json"], 0),
                               ("crash", ["crash", str(quiet), "--json"], 0)]:
        code, out, err = run_cli(argv, capsys)
        assert code == status, (argv, err)
        enveloped(json.loads(out), kind)


def test_a_payload_that_breaks_its_kinds_schema_is_refused() -> None:
    with pytest.raises(jsonschema.ValidationError):
        VALIDATOR.validate({"format": 1, "kind": "verify", "ok": True})   # verify's payload has "tables"
    with pytest.raises(jsonschema.ValidationError):
        VALIDATOR.validate({"format": 1, "kind": "audit", "machine": "m"})
    with pytest.raises(jsonschema.ValidationError):
        VALIDATOR.validate({"format": 1, "ok": True, "tables": []})       # no kind
    with pytest.raises(jsonschema.ValidationError):
        VALIDATOR.validate({"format": 2, "kind": "check", "command": "check", "ok": True, "files": []})
    VALIDATOR.validate({"format": 1, "kind": "a-kind-added-later", "anything": 1})   # unknown kinds: ignored


def test_the_envelope_keeps_every_key_of_the_payload_and_refuses_a_clash() -> None:
    payload = {"format": 1, "command": "check", "ok": True, "files": []}
    assert json_envelope("check", payload) == {"format": 1, "kind": "check", "command": "check", "ok": True,
                                               "files": []}
    assert list(json_envelope("check", payload))[:2] == ["format", "kind"]
    with pytest.raises(ValueError, match="cannot carry its own format or kind"):
        json_envelope("crash", {"kind": "step"})
    with pytest.raises(ValueError, match="cannot carry its own format or kind"):
        json_envelope("check", {"format": 2})


def test_a_line_of_run_json_follows_its_schema() -> None:
    run_line({"kind": "done", "text": "final state Done, 0 anomalies"})
    run_line({"kind": "configuration", "system": "s", "configuration": [[], []]})
    with pytest.raises(jsonschema.ValidationError):
        run_line({"kind": "step", "event": "Go"})          # a step names its states, actions and vars
    with pytest.raises(jsonschema.ValidationError):
        run_line({"kind": "done"})                          # a message has its text
    with pytest.raises(jsonschema.ValidationError):
        run_line({"text": "no kind"})
