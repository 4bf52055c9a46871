"""The reference engine behind the conformance adapter protocol (docs/conformance.md, JSON Lines on stdio).

One reply per request line; a request it cannot serve (garbage, unknown op or event, bad
parameters, a table that breaks its rules) is answered ``{"ok": false, "error": ...}`` and
the adapter carries on. It stops at ``quit`` or end of input, never on a bad line.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import IO, Any

from agentfsm.impl.engine import Engine, UnknownEvent
from agentfsm.spec import Table
from agentfsm.spec.semantics import SemanticError

MAX_LINE = 1 << 20


class Adapter:
    def __init__(self, table: Table) -> None:
        self.table = table
        self.engine = Engine(table)

    def handle(self, line: str) -> tuple[dict[str, Any], bool]:
        """The reply to one request line, and whether to stop after it."""
        if len(line) > MAX_LINE:
            return self._error(f"request longer than {MAX_LINE} bytes"), False
        try:
            request = json.loads(line)
        except (json.JSONDecodeError, RecursionError) as exc:
            return self._error(f"not JSON: {exc}"), False
        if not isinstance(request, dict):
            return self._error("a request is a JSON object with 'op'"), False
        op = request.get("op")
        if op == "quit":
            return {"ok": True}, True
        if op == "reset":
            machine = request.get("machine")
            if machine is not None and machine != self.table.machine:
                return self._error(f"this adapter serves {self.table.machine!r}, not {machine!r}"), False
            self.engine.reset()
            return {"ok": True, "state": self.engine.state, "vars": self.engine.vars}, False
        if op == "event":
            return self._event(request), False
        return self._error(f"unknown op {op!r} (expected reset, event, quit)"), False

    def _event(self, request: dict[str, Any]) -> dict[str, Any]:
        event, params = request.get("event"), request.get("params", {})
        if not isinstance(event, str):
            return self._error("'event' must be a string")
        if not isinstance(params, dict):
            return self._error("'params' must be an object")
        try:
            outcome = self.engine.step(event, **params)
        except (UnknownEvent, ValueError, TypeError) as exc:
            return self._error(str(exc))
        except SemanticError as exc:
            return self._error(f"{exc.kind}: {exc.message}")
        return {"ok": True, "accepted": outcome.accepted, "state": outcome.state,
                "actions": list(outcome.actions), "vars": dict(outcome.vars)}

    @staticmethod
    def _error(message: str) -> dict[str, Any]:
        return {"ok": False, "error": message}


def serve(table: Table, lines: Iterable[bytes], out: IO[str]) -> None:
    """Answer request lines (bytes, so that invalid UTF-8 is a reply, not a crash) until quit or EOF."""
    adapter = Adapter(table)
    for raw in lines:
        if not raw.strip():
            continue
        try:
            reply, stop = adapter.handle(raw.decode("utf-8"))
        except UnicodeDecodeError:
            reply, stop = Adapter._error("request is not valid UTF-8"), False
        out.write(json.dumps(reply) + "\n")
        out.flush()
        if stop:
            return
