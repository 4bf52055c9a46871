"""The system loader: a system file becomes a compiled, checked ``System``.

Same three phases as a table (YAML reader, JSON Schema ``system-schema.json``, builder),
every problem reported as ``FILE:LINE:COL: error: MESSAGE``; the tables it names are
loaded by the table loader (their own errors carry their own file's marks).
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Mapping
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from agentfsm.spec import expr as ex
from agentfsm.spec.build import load_table, validate_schema
from agentfsm.spec.errors import Collector, Mark, TableError, shown
from agentfsm.spec.files import read_document
from agentfsm.spec.model import Event, Table
from agentfsm.spec.system_expr import Compiled, Member, parse_system_expr
from agentfsm.spec.system_model import (
    FAULT_KINDS,
    EnvEvent,
    Fault,
    Group,
    Instance,
    Link,
    StepPattern,
    SysInvariant,
    SysProperty,
    System,
)
from agentfsm.spec.yamlio import Document
from agentfsm.spec.yamlio import Path as NodePath

_REF = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(?:\[([^\]]*)\])?\Z")
_MEMBER = re.compile(r"\b([A-Za-z_][A-Za-z0-9_]*)\[\s*[0-9]+\s*\]")
DEFAULT_CAPACITY = 2
SENDER = "sender"


@cache
def system_schema() -> dict[str, Any]:
    text = resources.files("agentfsm.spec").joinpath("system-schema.json").read_text(encoding="utf-8")
    result: dict[str, Any] = json.loads(text)
    return result


def is_system_document(doc: Document) -> bool:
    """A system file is told apart from a table by its top-level ``system:`` key."""
    return isinstance(doc.data, dict) and "system" in doc.data


def system_document(path: str | Path) -> Document | None:
    """The file parsed, when it is a system file; None for a table or a file that does not parse
    (its loader reports why). Loading it then takes this document, so it is parsed once."""
    try:
        doc = read_document(path)
    except TableError:
        return None
    return doc if is_system_document(doc) else None


def is_system_file(path: str | Path) -> bool:
    return system_document(path) is not None


def load_system(path: str | Path, doc: Document | None = None) -> System:
    """Read (unless ``doc``, the file already parsed), validate and compile a system file."""
    doc = read_document(path) if doc is None else doc
    validate_schema(doc, system_schema())
    return _Builder(doc, str(path), Path(path).parent).build()


class _Builder:
    def __init__(self, doc: Document, file: str, base: Path) -> None:
        self.doc = doc
        self.data: dict[str, Any] = doc.data
        self.file = file
        self.base = base
        self.errors = Collector()
        self.instances: list[Instance] = []
        self.groups: dict[str, list[int]] = {}
        self.counted: set[str] = set()
        self.asymmetric: dict[str, str] = {}
        self.tables: dict[tuple[str, tuple[tuple[str, ex.Value], ...]], Table] = {}

    def mark(self, *path: str | int) -> Mark:
        return self.doc.mark(path)

    def build(self) -> System:
        self.load_instances()
        self.errors.raise_if_any()
        links = self.links()
        environment = self.environment()
        faults = self.faults()
        invariants = self.invariants()
        properties = self.properties()
        self.errors.raise_if_any()
        by_source: dict[tuple[int, str], list[Link]] = {}
        for link in links:
            for source in sorted(link.sources):
                by_source.setdefault((source, link.action), []).append(link)
        groups = {name: Group(name, tuple(members), name in self.counted,
                              name not in self.asymmetric, self.asymmetric.get(name, ""))
                  for name, members in self.groups.items()}
        return System(self.file, self.data["system"], self.data.get("title", ""), self.data.get("description", ""),
                      tuple(self.instances), groups, tuple(links),
                      {k: tuple(v) for k, v in by_source.items()}, tuple(environment), tuple(faults),
                      tuple(invariants), tuple(properties))

    # -- instances -----------------------------------------------------------------------

    def table(self, name: str, spec: dict[str, Any]) -> Table | None:
        path = (self.base / spec["table"]).resolve()
        overrides: dict[str, ex.Value] = dict(spec.get("set") or {})
        key = (str(path), tuple(sorted(overrides.items())))
        if key in self.tables:
            return self.tables[key]
        if not path.is_file():
            self.errors.error(self.mark("instances", name, "table"), f"instance {name}: no table file "
                              f"{shown(spec['table'])}")
            return None
        try:
            table = load_table(path, overrides)
        except TableError as exc:
            own = [d for d in exc.diagnostics if not d.message.startswith("--set ")]
            for diagnostic in exc.diagnostics:
                if diagnostic.message.startswith("--set "):
                    self.errors.error(self.mark("instances", name, "set"),
                                      f"instance {name}: {diagnostic.message.removeprefix('--set ')}")
            self.errors.diagnostics.extend(own)
            if own:
                self.errors.error(self.mark("instances", name, "table"),
                                  f"instance {name}: table {spec['table']} does not load (errors above)")
            return None
        self.tables[key] = table
        return table

    def load_instances(self) -> None:
        capacity = (self.data.get("mailbox") or {}).get("capacity", DEFAULT_CAPACITY)
        for name, spec in self.data["instances"].items():
            table = self.table(name, spec)
            if table is None:
                continue
            durable_state = False
            durable_vars = set()
            var_slots = {v.name: i for i, v in enumerate(table.variables)}
            for j, item in enumerate(spec.get("durable") or []):
                if item == "state":
                    durable_state = True
                elif item in var_slots:
                    durable_vars.add(var_slots[item])
                else:
                    self.errors.error(self.mark("instances", name, "durable", j),
                                      f"{table.machine} has no variable {shown(item)} (durable lists 'state' "
                                      "and variables)")
            count = spec.get("count")
            names = [name] if count is None else [f"{name}[{i}]" for i in range(count)]
            if count is not None:
                self.counted.add(name)
            for member, full in enumerate(names):
                index = len(self.instances)
                self.groups.setdefault(name, []).append(index)
                self.instances.append(Instance(index, full, name, member, table, spec.get("mailbox", capacity),
                                               durable_state, frozenset(durable_vars), spec.get("passive", False)))

    # -- references ----------------------------------------------------------------------

    def resolve(self, text: str, path: NodePath, extra: tuple[str, ...] = ()) -> tuple[str, str | None] | None:
        """``agent`` / ``call[0]`` / ``call[*]`` -> (group, index text); reports a bad one."""
        match = _REF.match(text)
        if match is None or match.group(1) not in self.groups:
            self.errors.error(self.doc.mark(path), f"unknown instance {shown(text)} (instances: "
                              f"{', '.join(self.groups)})")
            return None
        group, key = match.group(1), match.group(2)
        if key is None:
            if group in self.counted:
                self.errors.error(self.doc.mark(path), f"{group} is a group of {len(self.groups[group])}: write "
                                  f"{group}[*] (every member), {group}[0], ..." + (
                                      f" or {group}[any]" if "any" in extra else ""))
                return None
            return group, None
        if group not in self.counted:
            self.errors.error(self.doc.mark(path), f"{group} is a single instance (no 'count'): write {group}")
            return None
        if key.isdigit():
            if int(key) >= len(self.groups[group]):
                self.errors.error(self.doc.mark(path), f"{group} has members 0..{len(self.groups[group]) - 1}")
                return None
            self.asymmetric.setdefault(group, f"{text} is named at {self.doc.mark(path)}")
        elif key != "*" and key not in extra:
            self.errors.error(self.doc.mark(path), f"{shown(text)}: a member is a number or *")
            return None
        return group, key

    def members(self, text: str, path: NodePath) -> list[int]:
        resolved = self.resolve(text, path)
        if resolved is None:
            return []
        group, key = resolved
        members = self.groups[group]
        return members if key in (None, "*") else [members[int(str(key))]]

    def expression(self, value: object, path: NodePath, want: ex.Type | None = "bool") -> Compiled | None:
        text = "true" if value is True else "false" if value is False else str(value)
        singles = {g: self.member(ms[0]) for g, ms in self.groups.items() if g not in self.counted}
        groups = {g: [self.member(i) for i in ms] for g, ms in self.groups.items() if g in self.counted}
        try:
            compiled = parse_system_expr(text, singles, groups, want)
        except ex.ExprError as err:
            mark, note = self.doc.text_mark(path, err.col)
            self.errors.error(mark, err.message + note)
            return None
        for match in _MEMBER.finditer(text):
            if match.group(1) in self.counted:
                self.asymmetric.setdefault(match.group(1), f"{match.group(0)} is named at {self.doc.mark(path)}")
        return compiled

    def member(self, index: int) -> Member:
        inst = self.instances[index]
        return Member(index, inst.name, inst.table)

    # -- links ---------------------------------------------------------------------------

    def links(self) -> list[Link]:
        result = []
        for i, spec in enumerate(self.data.get("links") or []):
            link = self.link(("links", i), spec)
            if link is not None:
                result.append(link)
        return result

    def link(self, path: NodePath, spec: dict[str, Any]) -> Link | None:
        sources = self.members(spec["from"], path + ("from",))
        if not sources:
            return None
        source_table = self.instances[sources[0]].table
        action = source_table.action_index.get(spec["action"])
        if action is None:
            self.errors.error(self.doc.mark(path + ("action",)),
                              f"{source_table.machine} has no action {shown(spec['action'])}")
            return None
        arg_names = [p.name for p in action.params]
        resolved = self.resolve(spec["to"], path + ("to",), extra=("any", *arg_names))
        if resolved is None:
            return None
        group, key = resolved
        members = tuple(self.groups[group])
        route_arg = -1
        if key is None:
            mode, targets = "one", members
        elif key == "*":
            mode, targets = "all", members
        elif key == "any":
            mode, targets = "any", members
        elif key.isdigit():
            mode, targets = "one", (members[int(key)],)
        elif key in arg_names:
            mode, targets, route_arg = "arg", members, arg_names.index(key)
            self.asymmetric.setdefault(group, f"{spec['to']} routes by number at {self.doc.mark(path + ('to',))}")
        else:
            self.errors.error(self.doc.mark(path + ("to",)), f"{shown(spec['to'])}: {key} is not a member number, "
                              f"*, any, or an arg of {action.name}")
            return None
        target_table = self.instances[targets[0]].table
        event = target_table.event_index.get(spec["event"])
        if event is None:
            self.errors.error(self.doc.mark(path + ("event",)),
                              f"{target_table.machine} has no event {shown(spec['event'])}")
            return None
        params = self.link_params(path, spec, action.name, action.params, event, sources)
        if params is None:
            return None
        text = f"{spec['from']}.{action.name} -> {spec['to']}.{event.name}"
        return Link(self.doc.mark(path), frozenset(sources), action.name, mode, targets,  # type: ignore[arg-type]
                    route_arg, event.name, params, text, spec.get("rejectable", False))

    def link_params(self, path: NodePath, spec: dict[str, Any], action: str, action_params: tuple[Any, ...],
                    event: Event, sources: list[int]) -> tuple[int, ...] | None:
        given: dict[str, str] = dict(spec.get("params") or {})
        positions = []
        ok = True
        names = [p.name for p in action_params]
        for param in event.params:
            source = given.pop(param.name, param.name)
            where = self.doc.mark(path + ("params", param.name)) if "params" in spec else self.doc.mark(path)
            if source == SENDER:
                group = self.instances[sources[0]].group
                top = len(self.groups[group]) - 1
                if param.type != "int" or param.lo > 0 or param.hi < top:
                    self.errors.error(where, f"{event.name}.{param.name} cannot hold a member number 0..{top}")
                    ok = False
                self.asymmetric.setdefault(group, f"the sender's number is sent at {self.doc.mark(path)}")
                positions.append(-1)
                continue
            if source not in names:
                self.errors.error(where, f"nothing gives {event.name}.{param.name}: {action} has no arg "
                                  f"{shown(source)} (map it in 'params', or 'sender')")
                ok = False
                continue
            arg = action_params[names.index(source)]
            if arg.type != param.type or (param.type == "int" and not param.lo <= arg.lo <= arg.hi <= param.hi):
                self.errors.error(where, f"{action}.{arg.name} ({arg.type} {arg.lo}..{arg.hi}) does not fit "
                                  f"{event.name}.{param.name} ({param.type} {param.lo}..{param.hi})")
                ok = False
            positions.append(names.index(source))
        for extra in given:
            self.errors.error(self.doc.key_mark(path + ("params", extra)),
                              f"{event.name} has no parameter {shown(extra)}")
            ok = False
        return tuple(positions) if ok else None

    # -- environment, faults, checks -----------------------------------------------------

    def environment(self) -> list[EnvEvent]:
        result = []
        for ref, items in (self.data.get("environment") or {}).items():
            path: NodePath = ("environment", ref)
            targets = self.members(ref, path)
            if not targets:
                continue
            table = self.instances[targets[0]].table
            for j, item in enumerate(items):
                spec: dict[str, Any] = {"event": item} if isinstance(item, str) else item
                here = path + (j,)
                event = table.event_index.get(spec["event"])
                if event is None:
                    self.errors.error(self.doc.mark(here), f"{table.machine} has no event {shown(spec['event'])}")
                    continue
                choices = self.choices(here, event, spec.get("params") or {})
                guard = self.expression(spec["when"], here + ("when",)) if "when" in spec else None
                result.append(EnvEvent(tuple(targets), event.name, choices, guard.fn if guard else None,
                                       str(spec["when"]) if guard else None, guard.promela if guard else None))
        return result

    def choices(self, path: NodePath, event: Event, given: Mapping[str, list[Any]]) -> tuple[tuple[ex.Value, ...], ...]:
        domains = []
        for param in event.params:
            values = given.get(param.name)
            if values is None:
                domains.append(param.domain)
                continue
            for k, value in enumerate(values):
                if not param.admits(value):
                    self.errors.error(self.doc.mark(path + ("params", param.name, k)),
                                      f"{shown(value)} is not a value of {event.name}.{param.name}")
            domains.append(tuple(values))
        for extra in set(given) - {p.name for p in event.params}:
            self.errors.error(self.doc.key_mark(path + ("params", extra)),
                              f"{event.name} has no parameter {shown(extra)}")
        return tuple(itertools.product(*domains))

    def faults(self) -> list[Fault]:
        result = []
        for kind in FAULT_KINDS:
            spec = (self.data.get("faults") or {}).get(kind)
            if spec is None or spec["max"] == 0:
                continue
            refs = spec.get("instances")
            if refs is None:
                members = set(range(len(self.instances)))
            else:
                members = {m for j, ref in enumerate(refs) for m in self.members(ref, ("faults", kind, "instances", j))}
            result.append(Fault(kind, frozenset(members), spec["max"]))
        return result

    def invariants(self) -> list[SysInvariant]:
        result = []
        names: set[str] = set()
        for i, spec in enumerate(self.data.get("invariants") or []):
            path: NodePath = ("invariants", i)
            if spec["name"] in names:
                self.errors.error(self.doc.mark(path + ("name",)), f"duplicate invariant name {shown(spec['name'])}")
            names.add(spec["name"])
            compiled = self.expression(spec["expr"], path + ("expr",))
            if compiled is not None:
                result.append(SysInvariant(spec["name"], str(spec["expr"]), self.doc.mark(path), compiled.fn,
                                           compiled.promela))
        return result

    def properties(self) -> list[SysProperty]:
        result = []
        for i, spec in enumerate(self.data.get("properties") or []):
            path: NodePath = ("properties", i)
            kinds = [k for k in ("always-reachable", "no-cycle-within") if k in spec]
            if len(kinds) != 1:
                self.errors.error(self.doc.mark(path), "a property needs a name and exactly one of "
                                  "'always-reachable', 'no-cycle-within'")
                continue
            if kinds[0] == "always-reachable":
                compiled = self.expression(spec["always-reachable"], path + ("always-reachable",))
                if compiled is not None:
                    result.append(SysProperty(spec["name"], "always-reachable", self.doc.mark(path),
                                              str(spec["always-reachable"]), goal=compiled.fn))
                continue
            patterns = []
            steps = spec["no-cycle-within"]["steps"]
            for j, text in enumerate(steps):
                here = path + ("no-cycle-within", "steps", j)
                ref, _, name = text.rpartition(".")
                members = self.members(ref, here)
                if not members:
                    continue
                table = self.instances[members[0]].table
                if name not in table.event_index and name not in (*FAULT_KINDS, "wake"):
                    self.errors.error(self.doc.mark(here), f"{shown(name)} is neither an event of {table.machine} "
                                      "nor a fault (crash, lose, duplicate, stall, wake)")
                    continue
                patterns.append(StepPattern(frozenset(members), name))
            result.append(SysProperty(spec["name"], "no-cycle-within", self.doc.mark(path), ", ".join(steps),
                                      steps=tuple(patterns)))
        return result
