"""An independent checker of systems of machines, the oracle the system explorer is held to.

Written from docs/systems.md ("The file", "Semantics", "Checks") alone, on top of the naive
table interpreter (``naive_semantics``): it does not import ``agentfsm``. It reads the system
file and its tables as plain data, steps instances with ``NaiveTable.step``, keeps mailboxes,
faults and stalls its own way, explores breadth-first over concrete configurations (no
symmetry, no reduction) and decides what the explorer's checks decide: the step findings,
``invariant``, ``deadlock`` and ``no-cycle-within``, each with its shortest counterexample's
length. Configurations have the explorer's shape (per instance its state's position in the
table and its variables in declaration order; FIFO mailboxes of (event, parameter values);
stalled flags; faults spent, in the order crash, lose, duplicate, stall), so the two can be
compared set for set.

It covers what the tests draw: instances (``count``, ``durable``, ``mailbox``, ``passive``),
links to an instance, ``group[*]`` and ``group[any]`` carrying no parameters, environment
entries that are event names, faults, invariants of the forms ``NAME.state != STATE`` and
``count(GROUP[*], state == STATE) <= N``, and ``no-cycle-within`` properties.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field
from itertools import product
from pathlib import Path
from typing import Any

import networkx as nx
from naive_semantics import NaiveTable, Value, read_yaml

InstConf = tuple[int, tuple[Value, ...]]
Message = tuple[str, tuple[Value, ...]]
Config = tuple[tuple[InstConf, ...], tuple[tuple[Message, ...], ...], tuple[bool, ...], tuple[int, ...]]
Step = tuple[str, int, str]            # (env | deliver | a fault | wake, instance, event or "")
FAULTS = ("crash", "lose", "duplicate", "stall")
FINDINGS = ("determinism", "bounds", "transient", "unhandled-message", "mailbox-overflow")


@dataclass
class Instance:
    name: str
    group: str
    table: NaiveTable
    capacity: int
    durable_state: bool
    durable_vars: set[str]
    passive: bool


@dataclass
class Link:
    sources: list[int]
    action: str
    targets: list[int]
    mode: str          # one, all, any
    event: str


@dataclass
class Outcome:
    """One step: where it leads (None: it raised) and what it reports."""

    step: Step
    target: Config | None
    findings: list[str] = field(default_factory=list)


class SystemChecker:
    """A system file read as plain data, and its breadth-first exploration."""

    def __init__(self, path: str | Path) -> None:
        path = Path(path)
        data = read_yaml(path)
        default = (data.get("mailbox") or {}).get("capacity", 2)
        self.instances: list[Instance] = []
        self.groups: dict[str, list[int]] = {}
        tables: dict[str, NaiveTable] = {}
        for name, spec in data["instances"].items():
            file = str(path.parent / spec["table"])
            table = tables.setdefault(file, NaiveTable.from_file(file))
            durable = list(spec.get("durable") or [])
            members = [f"{name}[{k}]" for k in range(spec["count"])] if "count" in spec else [name]
            for member in members:
                self.groups.setdefault(name, []).append(len(self.instances))
                self.instances.append(Instance(member, name, table, spec.get("mailbox", default), "state" in durable,
                                               set(durable) - {"state"}, bool(spec.get("passive"))))
        self.links = [Link(self.refer(link["from"]), link["action"], self.refer(link["to"]),
                           "any" if link["to"].endswith("[any]") else "all" if link["to"].endswith("[*]") else "one",
                           link["event"]) for link in data.get("links") or []]
        self.environment: list[tuple[int, str, tuple[Value, ...]]] = []
        for ref, events in (data.get("environment") or {}).items():
            for event in events:
                for i in self.refer(ref):
                    table = self.instances[i].table
                    self.environment.extend((i, e, params) for e, params in table.labels() if e == event)
        self.faults: list[tuple[str, list[int], int]] = []
        for kind in FAULTS:
            spec = (data.get("faults") or {}).get(kind)
            if spec is not None and spec["max"] > 0:
                refs = spec.get("instances")
                covered = (sorted({m for ref in refs for m in self.refer(ref)}) if refs is not None
                           else list(range(len(self.instances))))
                self.faults.append((kind, covered, spec["max"]))
        self.invariants = {spec["name"]: spec["expr"] for spec in data.get("invariants") or []}
        self.cycles: dict[str, list[tuple[list[int], str]]] = {}
        for prop in data.get("properties") or []:
            steps = prop["no-cycle-within"]["steps"]
            self.cycles[prop["name"]] = [(self.refer(s.rsplit(".", 1)[0]), s.rsplit(".", 1)[1]) for s in steps]
        text = repr({k: data.get(k) for k in ("links", "environment", "faults", "invariants", "properties")})
        self.symmetric = [members for name, members in self.groups.items()
                          if len(members) > 1 and not re.search(rf"\b{re.escape(name)}\[(?!\*\]|any\])", text)]

    def refer(self, ref: str) -> list[int]:
        """The instances a reference names: NAME, NAME[*], NAME[any], NAME[k]."""
        match = re.fullmatch(r"([A-Za-z_][\w-]*)(?:\[(\*|any|\d+)\])?", ref)
        assert match is not None, ref
        members = self.groups[match.group(1)]
        which = match.group(2)
        return [members[int(which)]] if which is not None and which.isdigit() else list(members)

    # --- configurations and steps ---

    def initial(self) -> Config:
        insts = []
        for inst in self.instances:
            state, values = inst.table.initial()
            insts.append((inst.table.state_names.index(state), tuple(values[v] for v in inst.table.variables)))
        n = len(self.instances)
        return tuple(insts), tuple(() for _ in range(n)), (False,) * n, (0,) * len(self.faults)

    def final(self, config: Config, i: int) -> bool:
        table = self.instances[i].table
        return table.is_final(table.state_names[config[0][i][0]])

    def steps(self, config: Config) -> list[Outcome]:
        """Every system step from ``config`` (docs/systems.md, "Semantics")."""
        insts, boxes, stalled, spent = config
        out: list[Outcome] = []
        for i, event, params in self.environment:
            if not stalled[i]:
                out.extend(self.take(config, ("env", i, event), params, boxes))
        for i, box in enumerate(boxes):
            if box and not stalled[i]:
                out.extend(self.take(config, ("deliver", i, box[0][0]), box[0][1], _put(boxes, i, box[1:])))
        for f, (kind, members, most) in enumerate(self.faults):
            if spent[f] >= most:
                continue
            used = _put(spent, f, spent[f] + 1)
            for i in members:
                inst, box = self.instances[i], boxes[i]
                if kind == "crash":
                    table = inst.table
                    start, values = table.initial()
                    state = insts[i][0] if inst.durable_state else table.state_names.index(start)
                    kept = tuple(insts[i][1][k] if v in inst.durable_vars else values[v]
                                 for k, v in enumerate(table.variables))
                    out.append(Outcome((kind, i, ""), (_put(insts, i, (state, kept)), _put(boxes, i, ()),
                                                       _put(stalled, i, False), used)))
                elif kind == "lose" and box:
                    out.append(Outcome((kind, i, box[0][0]), (insts, _put(boxes, i, box[1:]), stalled, used)))
                elif kind == "duplicate" and box and len(box) < inst.capacity:
                    out.append(Outcome((kind, i, box[0][0]), (insts, _put(boxes, i, (box[0], *box)), stalled, used)))
                elif kind == "stall" and not stalled[i] and not self.final(config, i):
                    out.append(Outcome((kind, i, ""), (insts, boxes, _put(stalled, i, True), used)))
        for i, flag in enumerate(stalled):
            if flag:
                out.append(Outcome(("wake", i, ""), (insts, boxes, _put(stalled, i, False), spent)))
        return out

    def take(self, config: Config, step: Step, params: tuple[Value, ...],
             boxes: tuple[tuple[Message, ...], ...]) -> list[Outcome]:
        """Instance ``i`` takes an environment event or its mailbox's head (already popped from ``boxes``)."""
        kind, i, event = step
        inst = self.instances[i]
        table = inst.table
        state, values = config[0][i]
        result = table.step(table.state_names[state], dict(zip(table.variables, values, strict=True)), event, params)
        if result.error:
            return [Outcome(step, None, [result.status])]
        messages = [(link, target) for action in result.actions for link in self.links
                    if link.action == action and i in link.sources
                    for target in ([link.targets] if link.mode == "any" else [[t] for t in link.targets])]
        if kind == "env" and result.status != "fired" and not messages:
            return []     # an offer the instance does not take and that sends nothing: no step
        findings = []
        if kind == "deliver" and result.status == "rejected":
            findings.append("unhandled-message")
        after = (table.state_names.index(result.state), tuple(result.vars[v] for v in table.variables))
        insts = _put(config[0], i, after)
        out = []
        for choice in product(*(targets for _, targets in messages)):
            now = list(boxes)
            notes = list(findings)
            for (link, _), target in zip(messages, choice, strict=True):
                if len(now[target]) < self.instances[target].capacity:
                    now[target] = (*now[target], (link.event, ()))
                else:
                    notes.append("mailbox-overflow")
            out.append(Outcome(step, (insts, tuple(now), config[2], config[3]), notes))
        return out

    # --- the checks ---

    def holds(self, name: str, config: Config) -> bool:
        text = self.invariants[name]
        if match := re.fullmatch(r"(\S+)\.state != (\w+)", text):
            [i] = self.refer(match.group(1))
            table = self.instances[i].table
            return table.state_names[config[0][i][0]] != match.group(2)
        match = re.fullmatch(r"count\((\S+), state == (\w+)\) <= (\d+)", text)
        assert match is not None, text
        members = self.refer(match.group(1))
        count = sum(self.instances[m].table.state_names[config[0][m][0]] == match.group(2) for m in members)
        return count <= int(match.group(3))

    def live(self, config: Config) -> bool:
        return any(not inst.passive and not self.final(config, i) for i, inst in enumerate(self.instances))

    def representative(self, config: Config) -> Config:
        """The configuration with each interchangeable group's members sorted."""
        insts, boxes, stalled = list(config[0]), list(config[1]), list(config[2])
        for members in self.symmetric:
            lo, hi = members[0], members[-1] + 1
            ordered = sorted(zip(insts[lo:hi], boxes[lo:hi], stalled[lo:hi], strict=True))
            insts[lo:hi] = [m[0] for m in ordered]
            boxes[lo:hi] = [m[1] for m in ordered]
            stalled[lo:hi] = [m[2] for m in ordered]
        return tuple(insts), tuple(boxes), tuple(stalled), config[3]

    def explore(self) -> Verdicts:
        start = self.initial()
        depth = {start: 0}
        queue = deque([start])
        graph: nx.MultiDiGraph[Config] = nx.MultiDiGraph()
        graph.add_node(start)
        verdicts = Verdicts(self, depth, graph)
        while queue:
            config = queue.popleft()
            moves = 0
            for outcome in self.steps(config):
                for kind in outcome.findings:
                    verdicts.found(kind, depth[config] + 1)
                if outcome.target is None:
                    continue
                moves += 1
                if outcome.target not in depth:
                    depth[outcome.target] = depth[config] + 1
                    queue.append(outcome.target)
                graph.add_edge(config, outcome.target, step=outcome.step)
            if moves == 0 and self.live(config):
                verdicts.found("deadlock", depth[config])
            for name in self.invariants:
                if not self.holds(name, config):
                    verdicts.found(name, depth[config])
        return verdicts


@dataclass
class Verdicts:
    """What the checker found: per check the shortest counterexample's length (None: it holds)."""

    checker: SystemChecker
    depth: dict[Config, int]
    graph: nx.MultiDiGraph[Config]
    shortest: dict[str, int] = field(default_factory=dict)

    def found(self, check: str, length: int) -> None:
        self.shortest[check] = min(length, self.shortest.get(check, length))

    def lengths(self) -> dict[str, int | None]:
        """Each safety check's shortest counterexample length (None where it holds)."""
        names = [*FINDINGS, *self.checker.invariants, "deadlock"]
        return {name: self.shortest.get(name) for name in names}

    def cycles(self) -> dict[str, bool]:
        """Per no-cycle-within property, whether a cycle uses only its steps."""
        result = {}
        for name, allowed in self.checker.cycles.items():
            sub: nx.DiGraph[Config] = nx.DiGraph()
            for src, dst, step in self.graph.edges(data="step"):
                kind, i, event = step
                if any(i in members and (event if kind in ("env", "deliver") else kind) == what
                       for members, what in allowed):
                    sub.add_edge(src, dst)
            result[name] = not nx.is_directed_acyclic_graph(sub)
        return result


def _put(items: tuple[Any, ...], i: int, value: Any) -> tuple[Any, ...]:
    return (*items[:i], value, *items[i + 1:])
