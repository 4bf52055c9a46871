"""Pictures of systems: the instances and their links, and a trace as a message sequence chart.

A chart has one lifeline per instance (and one for the environment). A message is drawn
when it is sent, from its sender to its target, with its parameters named; the step where
the target takes it is a note on the target's lifeline with the state change; faults are
notes too. Each step is numbered as the text report numbers it. A lasso's cycle is a loop
block, and a counterexample ends on a note naming the check it violates and the values that
check reads. Mermaid ``sequenceDiagram`` text, or SVG built here (no layout engine needed:
rows and columns). The structure picture (``diagram SYSTEM``) is DOT, rendered by Graphviz,
or Mermaid. Mermaid ids are prefixed, so no instance name is read as a word of its grammar.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from typing import TypeVar

from agentfsm.diagrams.violation import verdict
from agentfsm.spec.system_model import System
from agentfsm.spec.system_trace import Label, SystemTrace, label_text, param_names
from agentfsm.verify.system.step import Config, Effect

ENV = "environment"
OUTSIDE = "(environment)"  # the environment's lifeline in a chart's rows: no instance can have this name
COLUMN = 170
ROW = 30
TOP = 60
NOTE_CHARS = 60  # a note's text wraps here in the SVG (6 px a character at font size 11)

Steps = Sequence[tuple[Label, Config, Effect]]
_K = TypeVar("_K")
_V = TypeVar("_V")


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


@dataclass(frozen=True)
class Chart:
    """A chart's rows; ``loop_from``: the row where a lasso's cycle starts; ``verdict``: the closing note."""

    title: str
    items: list[Item]
    loop_from: int | None
    verdict: str | None


def _params(system: System, i: int, event: str, values: Sequence[object]) -> str:
    named = param_names(system, i, event, values)  # type: ignore[arg-type]
    shown = ", ".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}" for k, v in named.items())
    return f"({shown})" if shown else ""


def step_items(system: System, n: int, label: Label, effect: Effect) -> list[Item]:
    """The rows of step ``n``: what it sent, took, changed or broke."""
    kind, i, event, params, _ = label
    inst = system.instances[i]
    states = inst.table.states
    change = ""
    if effect.before is not None and effect.after is not None and effect.before[0] != effect.after[0]:
        change = f"{states[effect.before[0]].name} → {states[effect.after[0]].name}"
    items: list[Item] = []
    if kind == "env":
        items.append(Arrow(OUTSIDE, inst.name, f"{n}. {event}{_params(system, i, event, params)}"))
        if change:
            items.append(Note(inst.name, change))
    elif kind == "deliver":
        taken = f"{n}. takes {event}{_params(system, i, event, params)}" + (f": {change}" if change else "")
        items.append(Note(inst.name, taken + (" (rejected)" if effect.status == "rejected" else "")))
    else:
        items.append(Note(inst.name, f"{n}. " + label_text(system, label).removeprefix("fault: "),
                          alarm=kind != "wake"))
    for sent in effect.sent:
        items.append(Arrow(system.instances[sent.source].name, system.instances[sent.target].name,
                           f"{sent.event}{_params(system, sent.target, sent.event, sent.params)}"
                           + (" (dropped: mailbox full)" if sent.dropped else ""), sent.dropped))
    for finding in effect.findings:
        items.append(Note(inst.name, f"{finding.kind}: {finding.message}", alarm=True))
    return items


def chart(system: System, steps: Steps, trace: SystemTrace | None = None) -> Chart:
    """The chart of ``steps``; with the ``trace`` they replay, its title, loop and verdict."""
    items: list[Item] = []
    loop_from = None
    for n, (label, _, effect) in enumerate(steps, start=1):
        if trace is not None and trace.loop_start == n - 1:
            loop_from = len(items)
        items += step_items(system, n, label, effect)
    if trace is None:
        return Chart("", items, None, None)
    title = f"{system.name}: {trace.kind or 'trace'} {trace.check or ''}".strip()
    return Chart(title, items, loop_from, verdict(system, trace, steps))


def chart_items(system: System, steps: Steps) -> list[Item]:
    """The chart's rows, in order: what each step sent, took, changed or broke."""
    return chart(system, steps).items


def _id(name: str) -> str:
    return ENV if name == OUTSIDE else "i_" + re.sub(r"\W", "_", name)


def _loop_text(system: System, trace: SystemTrace | None) -> str:
    return f"repeats forever (from step {trace.loop_start + 1})" if trace and trace.loop_start is not None else ""


def sequence_mermaid(system: System, steps: Steps, trace: SystemTrace | None = None) -> str:
    drawn = chart(system, steps, trace)
    lines = ["sequenceDiagram"]
    if drawn.title:
        lines.append(f"    title {_mermaid_text(drawn.title)}")
    lines.append(f"    participant {ENV}")
    for inst in system.instances:
        lines.append(f"    participant {_id(inst.name)} as {inst.name}")
    indent = "    "
    for row, item in enumerate(drawn.items):
        if row == drawn.loop_from:
            lines.append(f"    loop {_loop_text(system, trace)}")
            indent = "        "
        if isinstance(item, Arrow):
            arrow = "-x" if item.dropped else ("->>" if item.source == OUTSIDE else "-)")
            lines.append(f"{indent}{_id(item.source)}{arrow}{_id(item.target)}: {_mermaid_text(item.text)}")
        else:
            lines.append(f"{indent}Note over {_id(item.over)}: {'⚠ ' if item.alarm else ''}"
                         f"{_mermaid_text(item.text)}")
    if drawn.loop_from is not None:
        lines.append("    end")
    if drawn.verdict:
        across = f"{ENV},{_id(system.instances[-1].name)}"  # the whole width: every lifeline
        lines.append(f"    Note over {across}: ✗ {'<br/>'.join(map(_mermaid_text, _wrapped(drawn.verdict)))}")
    return "\n".join(lines) + "\n"


def _mermaid_text(text: str) -> str:
    return text.replace(";", ",").replace("#", "no. ")


def _wrapped(text: str, chars: int = NOTE_CHARS) -> list[str]:
    return textwrap.wrap(text, chars, break_on_hyphens=False) or [""]


def sequence_svg(system: System, steps: Steps, trace: SystemTrace | None = None) -> bytes:
    names = [OUTSIDE, *(inst.name for inst in system.instances)]
    x = {name: COLUMN // 2 + k * COLUMN for k, name in enumerate(names)}
    drawn = chart(system, steps, trace)
    items = drawn.items
    width = COLUMN * len(names)
    closing = _wrapped(drawn.verdict, max(NOTE_CHARS, (width - 40) // 7)) if drawn.verdict else []  # bold: ~7 px
    header = 0 if drawn.loop_from is None else 1  # the loop's label gets a row of its own
    bottom = TOP + ROW * (len(items) + 1 + header)
    height = bottom + (ROW + 14 * len(closing) if closing else 0) + 20
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="Helvetica,Arial,sans-serif" font-size="11">',
           '<defs><marker id="head" markerWidth="8" markerHeight="8" refX="7" refY="4" orient="auto">'
           '<path d="M0,0 L8,4 L0,8 z" fill="#333"/></marker></defs>',
           f'<rect width="{width}" height="{height}" fill="white"/>']
    if drawn.title:
        out.append(f'<text x="8" y="16" font-size="13" font-weight="bold">{escape(drawn.title)}</text>')
    for name in names:
        out.append(f'<rect x="{x[name] - 70}" y="24" width="140" height="22" rx="4" fill="#eef" stroke="#336"/>')
        out.append(f'<text x="{x[name]}" y="39" text-anchor="middle">{escape(ENV if name == OUTSIDE else name)}</text>')
        out.append(f'<line x1="{x[name]}" y1="46" x2="{x[name]}" y2="{height - 10}" stroke="#99a" '
                   'stroke-dasharray="4,3"/>')
    if drawn.loop_from is not None:
        top = TOP + (drawn.loop_from + 1) * ROW - ROW // 2
        out.append(f'<rect x="4" y="{top}" width="{width - 8}" height="{bottom - ROW // 2 - top}" fill="none" '
                   'stroke="#555" stroke-dasharray="6,3"/>')
        out.append(f'<text x="10" y="{top + 12}" font-weight="bold">loop: {escape(_loop_text(system, trace))}</text>')
    for row, item in enumerate(items, start=1):
        y = TOP + (row + (header if drawn.loop_from is not None and row > drawn.loop_from else 0)) * ROW
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
            text = item.text if len(item.text) <= NOTE_CHARS else item.text[:NOTE_CHARS - 3] + "..."
            w = max(60, 6 * len(text) + 12)
            centre = min(max(x[item.over], w // 2 + 4), width - w // 2 - 4)  # kept inside the picture
            out.append(f'<rect x="{centre - w // 2}" y="{y - 13}" width="{w}" height="18" fill="{fill}" '
                       f'stroke="{stroke}"/>')
            out.append(f'<text x="{centre}" y="{y}" text-anchor="middle">{escape(text)}</text>')
    if closing:
        y = bottom + ROW // 2
        out.append(f'<rect x="8" y="{y - 13}" width="{width - 16}" height="{14 * len(closing) + 8}" fill="#fdd" '
                   'stroke="#b00" stroke-width="2"/>')
        for k, line in enumerate(closing):
            out.append(f'<text x="{width // 2}" y="{y + 14 * k}" text-anchor="middle" font-weight="bold">'
                       f'{"✗ " if k == 0 else ""}{escape(line)}</text>')
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


def _by_pair(edges: Sequence[tuple[_K, _V]]) -> dict[_K, list[_V]]:
    """Labels grouped by what they join, in the order the edges come."""
    grouped: dict[_K, list[_V]] = {}
    for key, label in edges:
        grouped.setdefault(key, []).append(label)
    return grouped


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
    """The instances and links as a flowchart that Mermaid lays out without a label on a label or a line.

    Mermaid stacks the labels of parallel edges and runs the environment's many edges through
    other labels (measured in Chromium, tests/diagrams/test_diagrams_browser.py), so this picture differs
    from the DOT one: the links between two boxes are one edge (``<-->`` with each line led by
    its sender when they go both ways), and each box lists the events the environment sends it.
    """
    lines = ["flowchart LR"]
    inputs = _by_pair(_inputs(system))
    for name, group in system.groups.items():
        inst = system.instances[group.members[0]]
        outside = f"<br/><i>from the {ENV}:</i><br/>{'<br/>'.join(inputs[name])}" if name in inputs else ""
        lines.append(f'    {_id(name)}["<b>{_group_ref(system, group.members[0])}</b><br/>{inst.table.machine}'
                     f'{outside}"]')
    pairs = _by_pair([(tuple(sorted((source, target))), (source, target, label))
                      for source, target, label in _edges(system)])
    for (one, other), edges in pairs.items():
        senders = {source for source, _, _ in edges}
        if len(senders) == 1:
            source, target, _ = edges[0]
            lines.append(f'    {_id(source)} -->|"{"<br/>".join(label for _, _, label in edges)}"| {_id(target)}')
        else:
            text = "<br/>".join(f"{source}: {label}" for source, _, label in edges)
            lines.append(f'    {_id(one)} <-->|"{text}"| {_id(other)}')
    return "\n".join(lines) + "\n"
