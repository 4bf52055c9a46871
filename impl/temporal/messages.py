"""What travels between a client, the table workflow and its activities (Temporal's JSON
payloads): plain dataclasses, so that the history is readable and replays without this code's
classes changing shape."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

WORKFLOW = "agentfsm-table"
"""The one workflow type: it serves every table (the table's text travels with the start)."""
PERFORM = "agentfsm-perform-effect"
STATUS = "agentfsm-status-query"
SIGNAL_EVENT = "event"
SIGNAL_DECIDE = "decide"
SIGNAL_INTERRUPT = "interrupt"
QUERY_CONFIG = "config"
QUERY_PENDING = "pending"
QUERY_TRACE = "trace"
TOOL_FAILED = "ToolFailed"
"""The application error type of an effect whose tool raised: a known outcome (failed)."""
VERSION_REFUSED = "TableVersionRefused"


def table_hash(text: str) -> str:
    """A table's content hash: what a run pins (sha256 of its text, as started)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass
class EventMessage:
    """One event for the table: its name, parameters, and an id that makes redelivery harmless."""

    name: str
    params: dict[str, Any] = field(default_factory=dict)
    event_id: str | None = None


@dataclass
class Timeouts:
    """Seconds: how long one attempt of an effect may take, and how long a worker may go without
    a heartbeat while its tool runs (a dead or stopped worker's effect becomes unknown after it)."""

    start_to_close: float = 300.0
    heartbeat: float = 10.0
    status_query: float = 30.0


@dataclass
class StartRun:
    """A run's start: its table (text and the hash it must have), the events it begins with, and
    whether it ends once they are delivered and settled (``until_idle``) or only in a final state."""

    run_id: str
    table_text: str
    table_hash: str
    file: str = "table.yaml"
    overrides: dict[str, Any] = field(default_factory=dict)
    events: list[EventMessage] = field(default_factory=list)
    until_idle: bool = True
    timeouts: Timeouts = field(default_factory=Timeouts)
    max_attempts: int = 5
    approval_lifetimes: dict[str, float | None] = field(default_factory=dict)
    """Seconds each approval lives (None: forever), beside and over the table's ``approval:``."""


@dataclass
class DecisionMessage:
    """An operator's answer: an unknown effect's key with completed, failed or rerun; an anomaly's
    id with continue."""

    id: str
    decision: str


@dataclass
class EffectTask:
    """One attempt of an effect, as its activity receives it. ``token`` is the attempt's fencing
    token: a status query fences the key at a higher one, so a stalled older attempt is refused.
    ``table_text`` is empty: the table is named by ``table_hash`` and its text is the run's start's
    (histories recorded before carry the text in every task, and are served as they are)."""

    table_text: str
    table_hash: str
    file: str
    overrides: dict[str, Any]
    run_id: str
    action: str
    key: str
    attempt: int
    token: int
    tool: str = ""
    args: Any = None


@dataclass
class StatusAnswer:
    """A status query's reply (``agentfsm.impl.durable.run.StatusReply``); ``known`` False: the
    tool has no status query."""

    known: bool
    status: str = ""
    result: Any = None
    fences: bool = False
    """The tool fences keys at the query's token (only then is its ``not-run`` trusted)."""
