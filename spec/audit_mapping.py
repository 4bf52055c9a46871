"""The mapping from a program's log records to a system's instance steps (docs/systems.md,
"Auditing logs against a system"): a data file beside the system, so that the auditor holds
no knowledge of any program's records.

    format: 1
    system: NAME
    silent: [INSTANCE, ...]            # instances whose steps no log holds (searched for)
    unlogged: {INSTANCE: [EVENT, ...]} # events of logged instances their logs leave out
    number: {FIELD: GROUP}             # FIELD's distinct values are GROUP's members 0, 1, ...
    records:                           # first rule whose `when` fields all equal the record's
      - when: {FIELD: VALUE, ...}
        steps: [{instance: "worker[$who]", event: Granted, params: {token: $token}}, ...]
        # a step may say what it sends: sends: {event: Ack} (the receiver's event), {} for nothing

``$FIELD`` in a step's instance or parameter stands for the record's field (a numbered
field: the member number of its value). A rule with no steps drops the record (a line the
program writes for people). Without a mapping file a record is a step as it is:
``{"instance": ..., "event": ..., "params": {...}}`` (``step``: a fault's kind, ``state``:
the state after, both optional).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from agentfsm.spec.system_model import System

_FIELD = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")


class MappingError(ValueError):
    """A mapping file that cannot be used, or a record it cannot translate; the message says where."""


@dataclass(frozen=True)
class Rule:
    when: Mapping[str, Any]
    steps: tuple[Mapping[str, Any], ...]


@dataclass(frozen=True)
class AuditMapping:
    """Which steps logs hold, and how a record becomes steps (no rules: records are steps)."""

    silent: frozenset[int]
    unlogged: Mapping[int, frozenset[str]]
    number: Mapping[str, str]
    rules: tuple[Rule, ...]
    file: str = ""

    def logged(self, instance: int, event: str) -> bool:
        """Whether a log holds every fired step of ``instance`` taking ``event``."""
        return instance not in self.silent and event not in self.unlogged.get(instance, frozenset())


def plain_mapping(system: System, silent: Sequence[int] = ()) -> AuditMapping:
    """No mapping file: records are steps, and ``silent`` instances are logged nowhere."""
    return AuditMapping(frozenset(silent), {}, {}, ())


def _instances(system: System, pattern: str, where: str) -> list[int]:
    """``worker[*]`` (the group), ``worker`` (the group or the single instance), or ``worker[1]``."""
    name = pattern.removesuffix("[*]")
    group = system.groups.get(name)
    if group is not None:
        return list(group.members)
    try:
        return [system.instance(pattern).index]
    except KeyError:
        raise MappingError(f"{where}: no instance or group {pattern!r} in system {system.name}") from None


def load_mapping(system: System, path: str | Path) -> AuditMapping:
    """Read and check a mapping file against ``system``; raise MappingError naming the file."""
    name = str(path)
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise MappingError(f"{name}: cannot read the mapping: {exc}") from None
    except yaml.YAMLError as exc:
        raise MappingError(f"{name}: not YAML: {exc}") from None
    if not isinstance(data, dict):
        raise MappingError(f"{name}: expected a mapping with 'system' and 'records'")
    if data.get("system") != system.name:
        raise MappingError(f"{name}: the mapping is for system {data.get('system')!r}, not {system.name!r}")
    unknown = set(data) - {"format", "system", "description", "silent", "unlogged", "number", "records"}
    if unknown:
        raise MappingError(f"{name}: unknown key {sorted(unknown)[0]!r}")
    silent = [i for item in _strings(data.get("silent", []), f"{name}: silent")
              for i in _instances(system, item, f"{name}: silent")]
    unlogged: dict[int, frozenset[str]] = {}
    for key, events in _dict(data.get("unlogged", {}), f"{name}: unlogged").items():
        listed = frozenset(_strings(events, f"{name}: unlogged: {key}"))
        for i in _instances(system, str(key), f"{name}: unlogged"):
            missing = listed - set(system.instances[i].table.event_index)
            if missing:
                raise MappingError(f"{name}: unlogged: {system.instances[i].name} has no event {sorted(missing)[0]!r}")
            unlogged[i] = unlogged.get(i, frozenset()) | listed
    number = {str(k): str(v) for k, v in _dict(data.get("number", {}), f"{name}: number").items()}
    for field, group in number.items():
        if group not in system.groups:
            raise MappingError(f"{name}: number: {field}: no group {group!r} in system {system.name}")
    rules = []
    for n, item in enumerate(data.get("records") or [], start=1):
        where = f"{name}: records: rule {n}"
        rule = _dict(item, where)
        steps = rule.get("steps") or []
        if not isinstance(steps, list) or not all(isinstance(s, dict) and "instance" in s and "event" in s
                                                  for s in steps):
            raise MappingError(f"{where}: 'steps' must be a list of {{instance, event[, params]}}")
        rules.append(Rule(_dict(rule.get("when", {}), where), tuple(steps)))
    return AuditMapping(frozenset(silent), unlogged, number, tuple(rules), name)


def _dict(value: object, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise MappingError(f"{where}: expected a mapping")
    return value


def _strings(value: object, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise MappingError(f"{where}: expected a list of names")
    return value


class Numbering:
    """The member numbers of numbered fields' values, in order of first appearance over all logs."""

    def __init__(self, system: System, mapping: AuditMapping) -> None:
        self.system = system
        self.mapping = mapping
        self.numbers: dict[str, dict[Any, int]] = {field: {} for field in mapping.number}

    def value(self, field: str, record: Mapping[str, Any]) -> Any:
        if field not in record:
            raise MappingError(f"the record has no field {field!r}")
        raw = record[field]
        if field not in self.numbers:
            return raw
        seen = self.numbers[field]
        if raw not in seen:
            group = self.system.groups[self.mapping.number[field]]
            if len(seen) >= len(group.members):
                raise MappingError(f"{field} {raw!r} is a member more than group {group.name}'s "
                                   f"{len(group.members)}")
            seen[raw] = len(seen)
        return seen[raw]


def translate(mapping: AuditMapping, numbering: Numbering, record: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """The steps a record stands for (as plain step records); None when no rule matches it."""
    if not mapping.rules:
        return [dict(record)]
    for rule in mapping.rules:
        if all(record.get(k) == v for k, v in rule.when.items()):
            return [_fill(step, numbering, record) for step in rule.steps]
    return None


def _fill(step: Mapping[str, Any], numbering: Numbering, record: Mapping[str, Any]) -> dict[str, Any]:
    def sub(template: Any) -> Any:
        if isinstance(template, dict):
            return {k: sub(v) for k, v in template.items()}
        if not isinstance(template, str):
            return template
        whole = _FIELD.fullmatch(template)
        if whole:
            return numbering.value(whole.group(1), record)
        return _FIELD.sub(lambda m: str(numbering.value(m.group(1), record)), template)
    filled: dict[str, Any] = sub(dict(step))
    filled.setdefault("params", {})
    return filled
