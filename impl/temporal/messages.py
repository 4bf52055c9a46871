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
AGENT = "agentfsm-agent-act"
"""An agent run's activity: the agent's own driver, rebuilt from the journal, does one thing."""
SIGNAL_EVENT = "event"
SIGNAL_DECIDE = "decide"
SIGNAL_INTERRUPT = "interrupt"
QUERY_CONFIG = "config"
QUERY_PENDING = "pending"
QUERY_TRACE = "trace"
HISTORY_BOUND = 10_000
"""Events in one execution's history past which a run continues as new (Temporal warns at 10,240 and
ends a run at 51,200), unless the server suggests it earlier."""
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
class AgentInput:
    """One user input of an agent script; ``interrupt_after`` seconds later the user interrupts."""

    text: str
    interrupt_after: float | None = None


@dataclass
class AgentStart:
    """What makes a run an agent run (``agentfsm run --script`` with an agent script): the script
    (its replies are the scripted model's, unless ``openai`` names a real one), the folder its
    tools work in (on the workers' machine), and its inputs, which the workflow sends one by one,
    each once the agent has nothing left to do."""

    script_text: str
    script_file: str
    workdir: str
    inputs: list[AgentInput] = field(default_factory=list)
    openai: str = ""
    model: str = ""
    llm_timeout: float = 60.0
    child: bool = False
    """A sub-agent's run (a child workflow): its one input is its task; it ends once settled."""
    depth: int = 0
    units: int = 0
    """The agents that play each input as a run of its own (the explorer's tasks, the tool-call
    runner's calls): how many; the run plays them one by one as child workflows ``RUN/UNIT-N``."""
    unit_name: str = ""
    unit: int = 0
    """A unit's run: its number (its input, or its tool call among the script's)."""
    skip: dict[str, int] = field(default_factory=dict)
    """What the runs before it took of the shared script (replies, verdicts, answers): a sub-agent
    goes on where its parent stood."""


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
    agent: AgentStart | None = None
    """Set: the table's own agent runs it (its model and tools, in activities); else its events."""
    history_bound: int = HISTORY_BOUND
    """Events in one execution's history past which the run continues as new (at its next quiet point)."""
    carried: Carried | None = None
    """Set: the run continued as new, and goes on from there."""


@dataclass
class Carried:
    """What a run that continued as new carries into its next execution: its journal, and what it had
    received but not yet taken (events, decisions, interrupts), its notes and, an agent run, how many
    of its script's inputs it sent and which settled effects it fed back."""

    records: list[dict[str, Any]]
    inbox: list[EventMessage] = field(default_factory=list)
    decisions: list[DecisionMessage] = field(default_factory=list)
    interrupts: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    sent: int = 0
    fed: list[str] = field(default_factory=list)


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


@dataclass
class AgentTask:
    """One thing an agent run's activity does with the agent rebuilt from the journal so far:
    ``input`` (the user's ``text``), ``perform`` (the effect ``key``, already started), ``report``
    (feed back the settled effect ``key``), ``status`` (ask the tool about ``key``), ``interrupt``,
    ``shutdown``, ``outcome`` (how the agent settled).

    ``records`` are the journal's records from the ``base``-th on: those appended since the run's
    previous agent task (the journal only grows), so a run's history grows linearly in its steps;
    the journal is the previous tasks' records put together (a worker keeps it, or reads the tasks
    from the run's history). Histories recorded before carry the whole journal (``base`` 0)."""

    run_id: str
    op: str
    records: list[dict[str, Any]]
    key: str = ""
    retry: bool = False
    text: str = ""
    event_id: str | None = None
    ended: dict[str, Any] | None = None
    """``perform`` of a spawn whose child run ended: how it ended (``outcome`` of the child)."""
    base: int = 0


def journal_after(journal: list[dict[str, Any]], task: AgentTask) -> list[dict[str, Any]]:
    """The journal as ``task`` carries it on from ``journal`` (the one its run's earlier tasks carried)."""
    if len(journal) < task.base:
        raise ValueError(f"run {task.run_id}: an agent task goes on from record {task.base + 1}, but the "
                         f"journal known has {len(journal)} records")
    return journal[:task.base] + task.records


@dataclass
class AgentReply:
    """What the agent did: the events its driver fed, in order, each with what the journal keeps of
    it (payload, calls, the effect it reports), and the interrupts it journaled (``interrupt``
    set: the item is an interrupt, not an event); ``status`` answers a ``status`` task."""

    fed: list[dict[str, Any]] = field(default_factory=list)
    status: StatusAnswer | None = None
    child: str | None = None
    """A spawn's task: its sub-agent is to run as a child run (then ``perform`` again with ``ended``)."""
    used: dict[str, int] = field(default_factory=dict)
    """What this run took of its script so far (with ``child``: where the sub-agent goes on)."""
    outcome: dict[str, Any] | None = None
    """``outcome``: how the agent settled (a sub-agent's answer to its parent)."""
