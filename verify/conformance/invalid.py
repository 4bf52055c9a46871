"""The ``invalid`` coverage set: requests an implementation must refuse, leaving its configuration as it was.

The protocol requires an adapter to validate what it is sent: an unknown event, a
missing or extra parameter, a value of the wrong type or outside the declared range
is answered ``{"ok": false}``, and the implementation carries on from the same
configuration. Only what every JSON parser tells apart is sent: ``1.0`` for an integer,
``params: null`` or no ``params`` key are left to the implementation (docs/conformance.md).
Each vector reaches a configuration where the event is accepted (the shortest way),
sends one bad variant of it, expects the refusal, then sends a valid event whose
expectation is computed from the unchanged configuration: an implementation that
applied the bad request (with a default, a clamp, a truthy ``1``) answers it differently.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from agentfsm.spec.model import Event, Table
from agentfsm.spec.semantics import SemanticError, step
from agentfsm.spec.vectorfile import (
    REFUSED,
    Label,
    Step,
    Vector,
    describe_config,
    describe_label,
    expected_run,
)
from agentfsm.spec.vectorfile import invalid_request as why_invalid
from agentfsm.verify.table.explore import Exploration

UNKNOWN_EVENT = "NoSuchEvent"


def bad_params(event: Event, good: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Every invalid variant of a valid parameter object, each named by what is wrong."""
    for p in event.params:
        without = {k: v for k, v in good.items() if k != p.name}
        yield f"missing {p.name}", without
        if p.type == "bool":
            yield f"{p.name} not a boolean (1)", {**good, p.name: 1}
            yield f"{p.name} not a boolean (\"true\")", {**good, p.name: "true"}
        else:
            yield f"{p.name} not an integer (true)", {**good, p.name: True}
            yield f"{p.name} not an integer (\"{p.lo}\")", {**good, p.name: str(p.lo)}
            yield f"{p.name} not an integer ({p.lo}.5)", {**good, p.name: p.lo + 0.5}
            yield f"{p.name} below its range ({p.lo - 1})", {**good, p.name: p.lo - 1}
            yield f"{p.name} above its range ({p.hi + 1})", {**good, p.name: p.hi + 1}
            # Parsed into 64 bits without a check it wraps round into the range.
            yield (f"{p.name} a 65-bit integer (2^64 + {p.lo}, {p.lo} in 64-bit arithmetic)",
                   {**good, p.name: 2**64 + p.lo})
    extra = "extra"
    while any(p.name == extra for p in event.params):
        extra += "_"
    yield f"extra parameter {extra}", {**good, extra: 0}


def _accepting(table: Table, ex: Exploration, event: str) -> tuple[int, Label]:
    """The first configuration (breadth-first) where some label of ``event`` fires a row."""
    labels = [label for label in ex.labels if label[0] == event]
    for i in range(ex.count):
        state, values = ex.config(i)
        for label in labels:
            try:
                result = step(table, state, values, *label)
            except SemanticError:
                continue
            if result.accepted and result.rows:
                return i, label
    return 0, labels[0]


def _check_label(table: Table, ex: Exploration, i: int) -> Label | None:
    """A valid event to send after a refused one: the first accepted there, else the first
    that keeps the table's rules; None where every event breaks them (no check step then)."""
    state, values = ex.config(i)
    fallback: Label | None = None
    for label in ex.labels:
        try:
            accepted = step(table, state, values, *label).accepted
        except SemanticError:
            continue
        if accepted:
            return label
        fallback = fallback or label
    return fallback


def _keeping_rules(table: Table, ex: Exploration, i: int) -> list[Label]:
    """The labels whose step from configuration ``i`` keeps the table's rules."""
    state, values = ex.config(i)
    kept = []
    for label in ex.labels:
        try:
            step(table, state, values, *label)
        except SemanticError:
            continue
        kept.append(label)
    return kept


def invalid_vectors(table: Table, ex: Exploration) -> list[Vector]:
    """The set's vectors: bad variants of every event with parameters, and an unknown event in every state."""
    found: list[tuple[str, int, str, dict[str, Any], Label | None]] = []
    for event in table.events:
        i, label = _accepting(table, ex, event.name)
        good = event.param_dict(label[1])
        check = label if label in _keeping_rules(table, ex, i) else _check_label(table, ex, i)
        for what, params in bad_params(event, good):
            assert why_invalid(table, event.name, params) is not None
            found.append((f"{describe_label(table, label)}: {what}", i, event.name, params, check))
    unknown = UNKNOWN_EVENT
    while unknown in table.event_index:
        unknown += "_"
    seen_states: set[int] = set()
    for i in range(ex.count):
        state, _ = ex.config(i)
        if state not in seen_states:
            seen_states.add(state)
            found.append((f"{unknown}: unknown event", i, unknown, {}, _check_label(table, ex, i)))
    pad = len(str(len(found)))
    vectors = []
    for number, (what, i, name, params, check) in enumerate(found, start=1):
        prefix = list(ex.path(i))
        steps = [s for s, _ in expected_run(table, prefix if check is None else [*prefix, check])]
        before, after = (steps, []) if check is None else (steps[:-1], steps[-1:])
        state, values = ex.config(i)
        cover = f"invalid:{describe_config(table, state, values)}/{what}"
        vectors.append(Vector(f"{table.machine}/invalid-{number:0{pad}d}", table.machine, (cover,),
                              (*before, Step(name, params, REFUSED), *after)))
    return vectors
