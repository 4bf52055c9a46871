"""Pictures of systems: the instances and their links, and a trace as a message sequence chart.

A chart has one lifeline per instance (and one for the environment). A message is drawn
when it is sent, from its sender to its target; the step where the target takes it is a
note on the target's lifeline with the state change; faults are notes too. Mermaid
``sequenceDiagram`` text, or SVG built here (no layout engine needed: rows and columns).
The structure picture (``diagram SYSTEM``) is DOT, rendered by Graphviz, or Mermaid.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

from agentfsm.spec.system_model import System
from agentfsm.spec.system_trace import Label
from agentfsm.verify.system_explore import Config, Effect
from agentfsm.verify.system_trace import label_text

ENV = "environment"
COLUMN = 170
ROW = 30
TOP = 60


@dataclass(frozen=True)
class Arrow:
    source: str
    target: str
    text: str
    dropped: bool = False


@dataclass(frozen=True)
class Note:
    over: str
    text: str
    alarm: bool = False


Item = Arrow | Note


def _params(values: Sequence[object]) -> str:
    return "(" + ", ".join(str(v).lower() if isinstance(v, bool) else str(v) for v in values) + ")" if values else ""


def chart_items(system: System, steps: Sequence[tuple[Label, Config, Effect]]) -> list[Item]:
    """The chart's rows, in order: what each step sent, took, changed or broke."""
    items: list[Item] = []
    for label, _, effect in steps:
        kind, i, event, params, _ = label
        inst = system.instances[i]
        states = inst.table.states
        change = ""
        if effect.before is not None and effect.after is not None and effect.before[0] != effect.after[0]:
            change = f"{states[effect.before[0]].name} → {states[effect.after[0]].name}"
        if kind == "env":
            items.append(Arrow(ENV, inst.name, f"{event}{_params(params)}"))
            if change:
                items.append(Note(inst.name, change))
        elif kind == "deliver":
            taken = f"takes {event}{_params(params)}" + (f": {change}" if change else "")
            items.append(Note(inst.name, taken + (" (rejected)" if effect.status == "rejected" else "")))
        else:
            items.append(Note(inst.name, label_text(system, label).removeprefix("fault: "), alarm=True))
        for sent in effect.sent:
            items.append(Arrow(system.instances[sent.source].name, system.instances[sent.target].name,
                               f"{sent.event}{_params(sent.params)}" + (" (dropped: mailbox full)" if sent.dropped
                                                                       else ""), sent.dropped))
        for finding in effect.findings:
            items.append(Note(inst.name, f"{finding.kind}: {finding.message}", alarm=True))
    return items


def _id(name: str) -> str:
    return name.replace("[", "_").replace("]", "")


def sequence_mermaid(system: System, steps: Sequence[tuple[Label, Config, Effect]], title: str = "") -> str:
    lines = ["sequenceDiagram"]
    if title:
        lines.append(f"    title {title}")
    lines.append(f"    participant {ENV}")
    for inst in system.instances:
        lines.append(f"    participant {_id(inst.name)} as {inst.name}")
    for item in chart_items(system, steps):
        if isinstance(item, Arrow):
            source = ENV if item.source == ENV else _id(item.source)
            arrow = "-x" if item.dropped else ("->>" if item.source == ENV else "-)")
            lines.append(f"    {source}{arrow}{_id(item.target)}: {_mermaid_text(item.text)}")
        else:
            lines.append(f"    Note over {_id(item.over)}: {'⚠ ' if item.alarm else ''}{_mermaid_text(item.text)}")
    return "\n".join(lines) + "\n"


def _mermaid_text(text: str) -> str:
    return text.replace(";", ",").replace("#", "no. ")


def sequence_svg(system: System, steps: Sequence[tuple[Label, Config, Effect]], title: str = "") -> bytes:
    names = [ENV, *(inst.name for inst in system.instances)]
    x = {name: COLUMN // 2 + k * COLUMN for k, name in enumerate(names)}
    items = chart_items(system, steps)
    width = COLUMN * len(names)
    height = TOP + ROW * (len(items) + 1) + 20
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="Helvetica,Arial,sans-serif" font-size="11">',
           '<defs><marker id="head" markerWidth="8" markerHeight="8" refX="7" refY="4" orient="auto">'
           '<path d="M0,0 L8,4 L0,8 z" fill="#333"/></marker></defs>',
           f'<rect width="{width}" height="{height}" fill="white"/>']
    if title:
        out.append(f'<text x="8" y="16" font-size="13" font-weight="bold">{escape(title)}</text>')
    for name in names:
        out.append(f'<rect x="{x[name] - 70}" y="24" width="140" height="22" rx="4" fill="#eef" stroke="#336"/>')
        out.append(f'<text x="{x[name]}" y="39" text-anchor="middle">{escape(name)}</text>')
        out.append(f'<line x1="{x[name]}" y1="46" x2="{x[name]}" y2="{height - 10}" stroke="#99a" '
                   'stroke-dasharray="4,3"/>')
    for row, item in enumerate(items, start=1):
        y = TOP + row * ROW
        if isinstance(item, Arrow):
            x1, x2 = x[item.source], x[item.target]
            if x1 == x2:
                x2 = x1 + 30
            colour = "#b00" if item.dropped else "#333"
            out.append(f'<line x1="{x1}" y1="{y}" x2="{x2}" y2="{y}" stroke="{colour}" marker-end="url(#head)"/>')
            out.append(f'<text x="{(x1 + x2) // 2}" y="{y - 4}" text-anchor="middle" fill="{colour}">'
                       f'{escape(item.text)}</text>')
        else:
            fill, stroke = ("#fdd", "#b00") if item.alarm else ("#ffd", "#aa6")
            text = item.text if len(item.text) <= 60 else item.text[:57] + "..."
            w = max(60, 6 * len(text) + 12)
            out.append(f'<rect x="{x[item.over] - w // 2}" y="{y - 13}" width="{w}" height="18" fill="{fill}" '
                       f'stroke="{stroke}"/>')
            out.append(f'<text x="{x[item.over]}" y="{y}" text-anchor="middle">{escape(text)}</text>')
    out.append("</svg>")
    return ("\n".join(out) + "\n").encode()


def _group_ref(system: System, index: int) -> str:
    inst = system.instances[index]
    group = system.groups[inst.group]
    return inst.group if not group.counted else f"{inst.group} ×{len(group.members)}"


def _edges(system: System) -> list[tuple[str, str, str]]:
    """One edge per (source group, target group, action → event), how the target is picked."""
    edges: list[tuple[str, str, str]] = []
    for link in system.links:
        how = {"one": "", "all": " (each)", "any": " (any one)", "arg": " (by arg)"}[link.mode]
        edge = (system.instances[min(link.sources)].group, system.instances[link.targets[0]].group,
                f"{link.action} → {link.event}{how}")
        if edge not in edges:
            edges.append(edge)
    return edges


def _inputs(system: System) -> list[tuple[str, str]]:
    return [(system.instances[env.instances[0]].group, env.event) for env in system.environment]


def structure_dot(system: System) -> str:
    """Instances (a group as one box) and links, the environment's events as edges from outside."""
    lines = [f'digraph "{system.name}" {{', "  rankdir=LR;", '  node [shape=box, style="rounded,filled", '
             'fillcolor="#eeeeff", fontname="Helvetica"];', '  edge [fontname="Helvetica", fontsize=10];',
             f'  label="{system.name}"; labelloc=t;', '  environment [shape=ellipse, fillcolor="#f4f4f4"];']
    for name, group in system.groups.items():
        inst = system.instances[group.members[0]]
        extra = " (passive)" if inst.passive else ""
        lines.append(f'  "{name}" [label="{_group_ref(system, group.members[0])}\\n{inst.table.machine}{extra}"];')
    for source, target, label in _edges(system):
        lines.append(f'  "{source}" -> "{target}" [label="{label}"];')
    for into, event in _inputs(system):
        lines.append(f'  environment -> "{into}" [label="{event}", style=dashed, color="#888888"];')
    lines.append("}")
    return "\n".join(lines) + "\n"


def structure_mermaid(system: System) -> str:
    lines = ["flowchart LR", "    environment([environment])"]
    for name, group in system.groups.items():
        inst = system.instances[group.members[0]]
        lines.append(f'    {name}["{_group_ref(system, group.members[0])}<br/>{inst.table.machine}"]')
    for source, target, label in _edges(system):
        lines.append(f'    {source} -->|"{label}"| {target}')
    for into, event in _inputs(system):
        lines.append(f'    environment -.->|"{event}"| {into}')
    return "\n".join(lines) + "\n"
