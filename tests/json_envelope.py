"""Checking a command's ``--json`` object against the published envelope (docs/json-envelope.schema.json)."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
from conftest import ROOT
from referencing import Registry, Resource

DOCS = ROOT / "docs"
ENVELOPE = json.loads((DOCS / "json-envelope.schema.json").read_text())
VERIFY = json.loads((DOCS / "verify-json.schema.json").read_text())
REGISTRY: Registry[Any] = Registry().with_resources(
    (schema["$id"], Resource.from_contents(schema)) for schema in (ENVELOPE, VERIFY))
VALIDATOR = jsonschema.Draft202012Validator(ENVELOPE, registry=REGISTRY)


def enveloped(data: Any, kind: str) -> Any:
    """``data`` when it is a format-1 envelope of ``kind`` whose payload follows that kind's schema."""
    VALIDATOR.validate(data)
    assert data["format"] == 1 and data["kind"] == kind, (data.get("format"), data.get("kind"))
    return data


LINE = jsonschema.Draft202012Validator({"$ref": ENVELOPE["$id"] + "#/$defs/run_line"}, registry=REGISTRY)


def run_line(data: Any) -> Any:
    """``data`` when it is a line of ``run --json`` as the envelope's schema describes it."""
    LINE.validate(data)
    return data
