"""Logs of a system's processes as steps to explain (docs/systems.md, "Auditing logs against a
system"): JSON Lines files, one per process or one interleaved, each record translated by the
system's audit mapping (``agentfsm.spec.audit_mapping``) into the instance steps it stands for.

A record the system cannot hold (a parameter past its bounds, more processes than members)
stays a step that nothing explains, with why; a record that is not one at all (not JSON, an
unknown instance or event, no rule of the mapping matches) is bad input, ``FILE:LINE``."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentfsm.spec.audit_mapping import AuditMapping, MappingError, Numbering, translate
from agentfsm.spec.expr import Value
from agentfsm.spec.system_model import System

STEP_KINDS = ("env", "deliver", "crash", "stall", "wake", "lose", "duplicate")


class LogError(ValueError):
    """A log that is not one; the message starts with ``FILE:LINE: error:`` (or ``FILE: error:``)."""


@dataclass(frozen=True)
class LoggedStep:
    """One instance step a log holds: ``params`` pins values by position, ``kind`` None is env or deliver."""

    file: str
    line: int
    instance: int
    event: str
    kind: str | None = None
    params: tuple[tuple[int, Value], ...] = ()
    state: int | None = None
    problem: str = ""            # why no step of the system can be this one
    sends: tuple[str, tuple[tuple[str, Value], ...]] | None = None   # the message it sends ("": none)

    def where(self) -> str:
        return f"{self.file}:{self.line}"


def text(system: System, step: LoggedStep) -> str:
    inst = system.instances[step.instance]
    decl = inst.table.event_index.get(step.event)
    names = [p.name for p in decl.params] if decl is not None else []
    shown = ", ".join(f"{names[k]}={str(v).lower() if isinstance(v, bool) else v}" for k, v in step.params)
    what = step.kind if step.kind not in (None, "env", "deliver") else ""
    event = f"{step.event}({shown})" if shown else step.event
    after = f" -> {inst.table.states[step.state].name}" if step.state is not None else ""
    sent = ""
    if step.sends is not None:
        message, values = step.sends
        named = ", ".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in values)
        sent = f", sending {message}({named})" if named else f", sending {message or 'nothing'}"
    return f"{inst.name} {what or 'takes'} {event}".rstrip() + after + sent


def split_arg(arg: str) -> tuple[str | None, str]:
    """``INSTANCE=FILE`` (a process's own log) or ``FILE`` (records name their instance)."""
    head, sep, tail = arg.partition("=")
    if sep and "[" not in tail and not Path(arg).exists():
        return head, tail
    return None, arg


def read_logs(system: System, mapping: AuditMapping, args: Sequence[str]) -> list[list[LoggedStep]]:
    """Each log's steps in its order; raise LogError on a log that is not one."""
    numbering = Numbering(system, mapping)
    return [_read(system, mapping, numbering, *split_arg(arg)) for arg in args]


def _read(system: System, mapping: AuditMapping, numbering: Numbering, owner: str | None,
          path: str) -> list[LoggedStep]:
    if owner is not None and owner not in {inst.name for inst in system.instances}:
        raise LogError(f"{path}: error: no instance {owner!r} in system {system.name}")
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise LogError(f"{path}: error: cannot read the log: {exc.strerror}") from None
    steps: list[LoggedStep] = []
    records = 0
    for number, line in enumerate(raw.splitlines(), start=1):
        where = f"{path}:{number}"
        try:
            decoded = line.decode("utf-8")
        except UnicodeDecodeError:
            raise LogError(f"{where}: error: not UTF-8") from None
        if not decoded.strip():
            continue
        try:
            record = json.loads(decoded)
        except json.JSONDecodeError as exc:
            raise LogError(f"{where}: error: not JSON: {exc.msg}") from None
        if not isinstance(record, dict):
            raise LogError(f"{where}: error: a record must be a JSON object")
        if owner is not None:
            record.setdefault("instance", owner)
        records += 1
        try:
            translated = translate(mapping, numbering, record)
        except MappingError as exc:
            steps.append(LoggedStep(path, number, _any_instance(system, owner), "", problem=str(exc)))
            continue
        if translated is None:
            raise LogError(f"{where}: error: no rule of {mapping.file} matches this record")
        steps.extend(_step(system, path, number, item) for item in translated)
    if not records:
        raise LogError(f"{path}: error: the log holds no records")
    return steps


def _any_instance(system: System, owner: str | None) -> int:
    return system.instance(owner).index if owner is not None else 0


def _step(system: System, path: str, number: int, item: Mapping[str, Any]) -> LoggedStep:
    where = f"{path}:{number}"
    name, event, kind = item.get("instance"), item.get("event", ""), item.get("step")
    if not isinstance(name, str):
        raise LogError(f"{where}: error: a step needs its 'instance' (a name of system {system.name})")
    try:
        inst = system.instance(name)
    except KeyError:
        if "[" in name and name.split("[")[0] in system.groups:
            return LoggedStep(path, number, system.groups[name.split("[")[0]].members[0], str(event),
                              problem=f"{name} is not an instance of system {system.name} (past its bounds)")
        raise LogError(f"{where}: error: no instance {name!r} in system {system.name}") from None
    if kind is not None and kind not in STEP_KINDS:
        raise LogError(f"{where}: error: unknown step kind {kind!r} (one of {', '.join(STEP_KINDS)})")
    if not isinstance(event, str) or (not event and kind in (None, "env", "deliver")):
        raise LogError(f"{where}: error: a step needs its 'event'")
    table = inst.table
    state = item.get("state")
    if state is not None and state not in table.state_index:
        raise LogError(f"{where}: error: {table.machine} has no state {state!r}")
    state_index = table.state_index[state] if state is not None else None
    sends = _sends(where, item.get("sends"))
    if not event:
        return LoggedStep(path, number, inst.index, "", kind, (), state_index, sends=sends)
    decl = table.event_index.get(event)
    if decl is None:
        raise LogError(f"{where}: error: {inst.name} ({table.machine}) has no event {event!r}")
    given = item.get("params") or {}
    if not isinstance(given, dict):
        raise LogError(f"{where}: error: 'params' must be an object")
    positions = {p.name: k for k, p in enumerate(decl.params)}
    pinned: list[tuple[int, Value]] = []
    for key, value in given.items():
        if key not in positions:
            raise LogError(f"{where}: error: event {event} of {inst.name} has no parameter {key!r}")
        param = decl.params[positions[key]]
        if isinstance(value, bool) != (param.type == "bool") or not isinstance(value, int):
            raise LogError(f"{where}: error: parameter {key!r} of {event} must be "
                           f"{'true or false' if param.type == 'bool' else 'an integer'}, got {value!r}")
        if not param.admits(value):
            return LoggedStep(path, number, inst.index, event, kind, tuple(pinned), state_index,
                              f"{key}={value} is past the system's bounds ({param.lo}..{param.hi})", sends)
        pinned.append((positions[key], value))
    return LoggedStep(path, number, inst.index, event, kind, tuple(sorted(pinned)), state_index, sends=sends)


def _sends(where: str, given: object) -> tuple[str, tuple[tuple[str, Value], ...]] | None:
    """``sends``: the message the step sends, ``{"event", "params"}`` (named as its receiver's
    event names them), or ``{}`` for none."""
    if given is None:
        return None
    if not isinstance(given, dict):
        raise LogError(f"{where}: error: 'sends' must be an object")
    event, params = given.get("event", ""), given.get("params") or {}
    if not isinstance(event, str) or not isinstance(params, dict) or \
            not all(isinstance(v, int) for v in params.values()):
        raise LogError(f"{where}: error: 'sends' must be {{\"event\": NAME, \"params\": {{NAME: VALUE}}}}")
    return event, tuple(sorted(params.items()))
