"""What a system counterexample's chart says at its end: the check it violates and the values
that check reads in the last configuration (``tool.runs = 2``), so the picture shows the bug
without the text report beside it.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence

from agentfsm.spec.system_model import System
from agentfsm.spec.system_trace import Label, SystemTrace
from agentfsm.verify.system.checks import live
from agentfsm.verify.system.step import Config, Effect

_AGGREGATES = ("count", "all", "any")


def verdict(system: System, trace: SystemTrace, steps: Sequence[tuple[Label, Config, Effect]]) -> str | None:
    """One line: the violated check, why, and the values it reads at the end (None: the trace names no check)."""
    if trace.kind is None or not steps:
        return None
    last = steps[-1][1]
    if trace.kind == "invariant":
        found = next(((text, own) for name, text, own in _invariants(system) if name == trace.check), None)
        if found is None:
            return None
        text, own = found
        return f"invariant {trace.check} broken: {text} is false{_shown(system, last, text, own)}"
    prop = next((p for p in system.properties if p.name == trace.check and p.kind == trace.kind), None)
    if prop is not None and prop.kind == "no-cycle-within":
        return f"no-cycle-within {prop.name} broken: the loop repeats forever using only {prop.text}"
    if prop is not None:
        return (f"always-reachable {prop.name} broken: {prop.text} can no longer become true"
                f"{_shown(system, last, prop.text, None)}")
    if trace.kind == "deadlock":
        names = ", ".join(system.instances[i].name for i in live(system, last))
        return f"deadlock: no step is possible while {names} not final"
    findings = [f for f in steps[-1][2].findings if f.kind == trace.kind]
    return f"{trace.kind} broken: {findings[0].message}" if findings else None


def _invariants(system: System) -> list[tuple[str, str, int | None]]:
    """(name, text, instance whose table declares it) of every invariant, named as the checker names them."""
    found: list[tuple[str, str, int | None]] = [(inv.name, inv.text, None) for inv in system.invariants]
    for inst in system.instances:
        found += [(f"{inst.name}: {inv.name}", inv.text, inst.index) for inv in inst.table.invariants]
    return found


def _shown(system: System, config: Config, text: str, own: int | None) -> str:
    values = read_values(system, config, text, own)
    return f" ({', '.join(values)})" if values else ""


def read_values(system: System, config: Config, text: str, own: int | None = None) -> list[str]:
    """``instance.field = value`` for every field ``text`` reads, in the order it reads them.

    ``own`` is the instance whose table an invariant comes from: there a bare name is its own
    variable or state. An aggregate (``count(call[*], state == Running)``) reads each member.
    """
    try:
        tree = ast.parse(text.replace("[*]", "[_]").strip(), mode="eval")
    except SyntaxError:
        return []
    reads: list[tuple[int, str]] = []

    def instance(node: ast.expr) -> int | None:
        if isinstance(node, ast.Name) and node.id in system.groups and not system.groups[node.id].counted:
            return system.groups[node.id].members[0]
        if (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in system.groups
                and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, int)):
            members = system.groups[node.value.id].members
            return members[node.slice.value] if 0 <= node.slice.value < len(members) else None
        return None

    def walk(node: ast.AST, ctx: int | None) -> None:
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _AGGREGATES
                and len(node.args) == 2 and isinstance(node.args[0], ast.Subscript)
                and isinstance(node.args[0].value, ast.Name) and node.args[0].value.id in system.groups):
            for member in system.groups[node.args[0].value.id].members:
                walk(node.args[1], member)
            return
        if isinstance(node, ast.Attribute):
            i = instance(node.value)
            if i is not None:
                reads.append((i, node.attr))
                return
        if isinstance(node, ast.Name) and ctx is not None:
            reads.append((ctx, node.id))
        for child in ast.iter_child_nodes(node):
            walk(child, ctx)

    walk(tree.body, own)
    shown: list[str] = []
    for i, name in reads:
        value = _value(system, config, i, name)
        line = f"{system.instances[i].name}.{name} = {value}" if own is None else f"{name} = {value}"
        if value is not None and line not in shown:
            shown.append(line)
    return shown


def _value(system: System, config: Config, i: int, name: str) -> str | None:
    """The value of one field of instance ``i`` in ``config``; None for a name that is no field (a state's)."""
    table = system.instances[i].table
    state, values = config[0][i]
    value: object
    if name == "state":
        value = table.states[state].name
    elif name == "stalled":
        value = config[2][i]
    elif name == "mailbox":
        value = len(config[1][i])
    else:
        slot = next((k for k, var in enumerate(table.variables) if var.name == name), None)
        if slot is None:
            return None
        value = values[slot]
    return str(value).lower() if isinstance(value, bool) else str(value)
