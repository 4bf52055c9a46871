"""The interleaved trace format of a system (docs/systems.md, "Traces"): read and written here,
so that the verifier and the runtime share one reader.

    {"system": str, "check": str | null, "kind": str | null, "loop_start": int | null,
     "steps": [{"step": "env" | "deliver" | "crash" | "lose" | "duplicate" | "stall" | "wake",
                "instance": "call[0]", "event": str, "params": {name: value},
                "choose": ["call[1]", ...]}]}
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agentfsm.spec.expr import Value
from agentfsm.spec.system_model import System

# (kind, instance, event, params, chosen targets of 'any' links)
Label = tuple[str, int, str, tuple[Value, ...], tuple[int, ...]]


class SystemTraceError(ValueError):
    """A trace file that does not fit its system."""


@dataclass(frozen=True)
class SystemTrace:
    system: str
    check: str | None
    kind: str | None
    steps: tuple[Label, ...]
    loop_start: int | None = None

    def to_json(self, system: System) -> dict[str, Any]:
        return {"system": self.system, "check": self.check, "kind": self.kind, "loop_start": self.loop_start,
                "steps": [label_json(system, label) for label in self.steps]}


def label_json(system: System, label: Label) -> dict[str, Any]:
    kind, i, event, params, chosen = label
    inst = system.instances[i]
    item: dict[str, Any] = {"step": kind, "instance": inst.name}
    if event:
        item["event"] = event
        item["params"] = param_names(system, i, event, params)
    if chosen:
        item["choose"] = [system.instances[c].name for c in chosen]
    return item


def param_names(system: System, i: int, event: str, params: Sequence[Value]) -> dict[str, Value]:
    decl = system.instances[i].table.event_index.get(event)
    if decl is None:
        return {}
    return decl.param_dict(params)


def label_text(system: System, label: Label) -> str:
    kind, i, event, params, chosen = label
    name = system.instances[i].name
    shown = ", ".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}"
                      for k, v in param_names(system, i, event, params).items())
    message = f"{event}({shown})" if shown else event
    pick = f" (picks {', '.join(system.instances[c].name for c in chosen)})" if chosen else ""
    if kind == "env":
        return f"environment -> {name}: {message}{pick}"
    if kind == "deliver":
        return f"{name} takes {message}{pick}"
    if kind in ("lose", "duplicate"):
        return f"fault: {message} to {name} is {'lost' if kind == 'lose' else 'duplicated'}"
    if kind == "wake":
        return f"{name} wakes"
    return f"fault: {name} {'crashes and restarts' if kind == 'crash' else 'stalls'}"


def load_system_trace(system: System, text: str) -> SystemTrace:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SystemTraceError(f"not JSON: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("steps"), list):
        raise SystemTraceError("expected an object with a 'steps' list")
    if data.get("system") not in (None, system.name):
        raise SystemTraceError(f"trace is for system {data.get('system')!r}, not {system.name!r}")
    names = {inst.name: inst.index for inst in system.instances}
    labels = []
    for n, item in enumerate(data["steps"], start=1):
        if not isinstance(item, dict):
            raise SystemTraceError(f"step {n}: expected an object")
        kind = item.get("step")
        if kind not in ("env", "deliver", "crash", "lose", "duplicate", "stall", "wake"):
            raise SystemTraceError(f"step {n}: unknown step kind {kind!r}")
        i = names.get(item.get("instance"))  # type: ignore[arg-type]
        if i is None:
            raise SystemTraceError(f"step {n}: unknown instance {item.get('instance')!r}")
        event = item.get("event", "")
        params: tuple[Value, ...] = ()
        if event:
            decl = system.instances[i].table.event_index.get(event)
            if decl is None:
                raise SystemTraceError(f"step {n}: {system.instances[i].name} has no event {event!r}")
            try:
                params = decl.param_values(item.get("params") or {})
            except ValueError as exc:
                raise SystemTraceError(f"step {n}: {exc}") from None
        chosen = []
        for name in item.get("choose") or []:
            if name not in names:
                raise SystemTraceError(f"step {n}: unknown instance {name!r} in 'choose'")
            chosen.append(names[name])
        labels.append((str(kind), i, str(event), params, tuple(chosen)))
    loop = data.get("loop_start")
    return SystemTrace(system.name, data.get("check"), data.get("kind"), tuple(labels),
                       loop if isinstance(loop, int) else None)


def describe_config(system: System, config: Any) -> list[str]:
    """A system configuration (insts, mailboxes, stalled, spent), one line per instance."""
    insts, boxes, stalled, spent = config
    lines = []
    for inst, (state, values), box, flag in zip(system.instances, insts, boxes, stalled, strict=True):
        table = inst.table
        shown = " ".join(f"{v.name}={str(x).lower() if isinstance(x, bool) else x}"
                         for v, x in zip(table.variables, values, strict=True))
        queue = ", ".join(f"{e}{shown_params(p)}" for e, p in box)
        lines.append(f"    {inst.name}: {table.states[state].name}" + (f" {{{shown}}}" if shown else "")
                     + (f"  mailbox [{queue}]" if box else "") + ("  (stalled)" if flag else ""))
    if spent:
        lines.append("    faults spent: " + ", ".join(f"{f.kind} {k}/{f.max}" for f, k in zip(system.faults, spent,
                                                                                               strict=True)))
    return lines


def shown_params(params: Sequence[Value]) -> str:
    return "(" + ", ".join(str(v).lower() if isinstance(v, bool) else str(v) for v in params) + ")" if params else ""
