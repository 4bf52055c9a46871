"""Random small systems of random tables, and an independent interleaving closure.

``closure`` is written for the tests from docs/systems.md alone: a depth-first search
over concrete configurations that steps instances with ``agentfsm.spec.semantics.step``
and keeps mailboxes, faults and stalls its own way. The explorer must reach exactly its
set (its quotient, with symmetry on).
"""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

from agentfsm.spec.errors import TableError
from agentfsm.spec.expr import Value
from agentfsm.spec.semantics import SemanticError, StepResult, step
from agentfsm.spec.system_load import load_system
from agentfsm.spec.system_model import System
from hypothesis import assume
from hypothesis import strategies as st
from strategies_tables import table_data

Conf = tuple[Any, ...]


@st.composite
def system_files(draw: st.DrawFn, directory: Path) -> Path:
    """Two or three random tables as instances (one maybe a group of two), random links,
    environment, capacity and faults, written to ``directory``; the system file's path."""
    tables = [draw(table_data(max_states=3, max_rows=5)) for _ in range(draw(st.integers(1, 2)))]
    for k, data in enumerate(tables):
        (directory / f"t{k}.yaml").write_text(json.dumps(data))
    names = ["a", "b", "c"][: draw(st.integers(2, 3))]
    instances: dict[str, Any] = {}
    table_of: dict[str, dict[str, Any]] = {}
    for name in names:
        k = draw(st.integers(0, len(tables) - 1))
        spec: dict[str, Any] = {"table": f"t{k}.yaml"}
        if name == "b" and draw(st.booleans()):
            spec["count"] = 2
        if draw(st.booleans()):
            spec["durable"] = ["state"]
        instances[name] = spec
        table_of[name] = tables[k]
    refs = {n: f"{n}[*]" if "count" in instances[n] else n for n in names}

    def plain_events(name: str) -> list[str]:
        return [e for e, spec in table_of[name]["events"].items() if not spec.get("params")]

    links = []
    for _ in range(draw(st.integers(1, 4))):
        source, target = draw(st.sampled_from(names)), draw(st.sampled_from(names))
        events = plain_events(target)
        if not events:
            continue
        mode = refs[target]
        if "count" in instances[target]:
            mode = draw(st.sampled_from([f"{target}[*]", f"{target}[any]"]))
        links.append({"from": refs[source], "action": draw(st.sampled_from(list(table_of[source]["actions"]))),
                      "to": mode, "event": draw(st.sampled_from(events))})
    environment = {refs[n]: draw(st.lists(st.sampled_from(list(table_of[n]["events"])), min_size=int(n == "a"),
                                          max_size=3, unique=True)) for n in names}
    faults = {kind: {"max": 1} for kind in ("crash", "lose", "duplicate", "stall") if draw(st.booleans())}
    system = {"format": 1, "system": "random", "instances": instances,
              "mailbox": {"capacity": draw(st.integers(1, 2))}, "links": links,
              "environment": {k: v for k, v in environment.items() if v}, "faults": faults}
    path = directory / "system.yaml"
    path.write_text(json.dumps(system))
    return path


def random_system(path: Path) -> System:
    return load_system(path)


def drawn_system(data: st.DataObject, directory: Path) -> System:
    """A random system drawn into ``directory`` and loaded (a drawing the loader rejects is skipped)."""
    path = data.draw(system_files(directory))
    try:
        return random_system(path)
    except TableError:
        assume(False)
        raise


def closure(system: System) -> set[Conf]:
    """Every configuration reachable by interleaving, as (insts, mailboxes, stalled, spent)."""
    n = len(system.instances)
    start = (tuple((i.table.initial.index, i.table.initial_vars()) for i in system.instances),
             tuple(() for _ in range(n)), tuple(False for _ in range(n)), tuple(0 for _ in system.faults))
    seen = {start}
    todo = [start]
    while todo:
        config = todo.pop()
        for nxt in _successors(system, config):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def _successors(system: System, config: Conf) -> list[Conf]:
    insts, boxes, stalled, spent = config
    out: list[Conf] = []

    def take(i: int, event: str, params: tuple[Value, ...], boxes_now: tuple[Any, ...], from_env: bool) -> None:
        inst = system.instances[i]
        try:
            result = step(inst.table, insts[i][0], insts[i][1], event, params)
        except SemanticError:
            return
        if from_env and not result.accepted and not result.actions:
            return
        new_insts = list(insts)
        new_insts[i] = (result.state, result.vars)
        for boxes_after in _send(system, i, result, boxes_now):
            nxt = (tuple(new_insts), boxes_after, stalled, spent)
            if nxt != config:
                out.append(nxt)

    for env in system.environment:
        if env.guard is not None and not env.guard(config):
            continue
        for i in env.instances:
            if not stalled[i]:
                for params in env.choices:
                    take(i, env.event, params, boxes, True)
    for i in range(len(insts)):
        if boxes[i] and not stalled[i]:
            event, params = boxes[i][0]
            take(i, event, params, _put(boxes, i, boxes[i][1:]), False)
    for f, fault in enumerate(system.faults):
        if spent[f] >= fault.max:
            continue
        used = _put(spent, f, spent[f] + 1)
        for i in fault.instances:
            inst = system.instances[i]
            box = boxes[i]
            if fault.kind == "crash":
                state = insts[i][0] if inst.durable_state else inst.table.initial.index
                values = tuple(v if k in inst.durable_vars else inst.table.initial_vars()[k]
                               for k, v in enumerate(insts[i][1]))
                out.append((_put(insts, i, (state, values)), _put(boxes, i, ()), _put(stalled, i, False), used))
            elif fault.kind == "lose" and box:
                out.append((insts, _put(boxes, i, box[1:]), stalled, used))
            elif fault.kind == "duplicate" and box and len(box) < inst.capacity:
                out.append((insts, _put(boxes, i, (box[0], *box)), stalled, used))
            elif fault.kind == "stall" and not stalled[i] and not inst.table.states[insts[i][0]].final:
                out.append((insts, boxes, _put(stalled, i, True), used))
    for i in range(len(insts)):
        if stalled[i]:
            out.append((insts, boxes, _put(stalled, i, False), spent))
    return [c for c in out if c != config]


def _send(system: System, i: int, result: StepResult, boxes: tuple[Any, ...]) -> list[tuple[Any, ...]]:
    """Every way the step's linked messages can land (one per choice of 'any' targets)."""
    deliveries: list[tuple[tuple[str, tuple[Value, ...]], list[int]]] = []
    for action in result.actions:
        for link in system.links:
            if i not in link.sources or link.action != action:
                continue
            message: tuple[str, tuple[Value, ...]] = (link.event, ())
            if link.mode == "all":
                deliveries.extend((message, [t]) for t in link.targets)
            else:
                deliveries.append((message, list(link.targets)))
    results = []
    for choice in itertools.product(*(targets for _, targets in deliveries)):
        now = list(boxes)
        for (message, _), target in zip(deliveries, choice, strict=True):
            if len(now[target]) < system.instances[target].capacity:
                now[target] = (*now[target], message)
        results.append(tuple(now))
    return results


def _put(items: tuple[Any, ...], i: int, value: Any) -> tuple[Any, ...]:
    return (*items[:i], value, *items[i + 1:])


def sorted_groups(system: System, config: Conf) -> Conf:
    """The representative of a configuration: each symmetric group's members sorted."""
    insts, boxes, stalled, spent = list(config[0]), list(config[1]), list(config[2]), config[3]
    for group in system.groups.values():
        if not (group.counted and group.symmetric and len(group.members) > 1):
            continue
        lo, hi = group.members[0], group.members[-1] + 1
        members = sorted(zip(insts[lo:hi], boxes[lo:hi], stalled[lo:hi], strict=True))
        insts[lo:hi] = [m[0] for m in members]
        boxes[lo:hi] = [m[1] for m in members]
        stalled[lo:hi] = [m[2] for m in members]
    return tuple(insts), tuple(boxes), tuple(stalled), spent
