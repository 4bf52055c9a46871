"""The explored configuration graph (from the verifier), grouped by state, as DOT or Mermaid.

Each reachable configuration is a box showing its variables, inside a cluster for its
state; events that leave a configuration unchanged are listed in its box rather than
drawn as loops, and events between the same two configurations share one edge. Only
small spaces make readable pictures, so the size is capped.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape

import graphviz
from agentfsm.diagrams.dot import FILL, FONT, INK, START
from agentfsm.diagrams.mermaid import escape as mescape
from agentfsm.spec.expr import Value
from agentfsm.spec.model import Table
from agentfsm.spec.trace import describe_label
from agentfsm.verify.table.explore import Exploration

LIMIT = 80
"""Past about 80 configurations dot's clustered layout goes from seconds to minutes (Loom: 79
configurations lay out in 2 s, 99 in 54 s), and the picture stops being readable anyway."""


class TooLarge(ValueError):
    """More configurations than a picture can show."""


@dataclass(frozen=True)
class ConfigGraph:
    machine: str
    title: str
    groups: tuple[tuple[str, tuple[int, ...]], ...]
    """(state name, its configurations) in table order; states never reached are left out."""
    values: tuple[str, ...]
    loops: tuple[tuple[str, ...], ...]
    edges: tuple[tuple[int, int, tuple[str, ...]], ...]
    final: frozenset[int]


def _value(v: Value) -> str:
    return ("true" if v else "false") if isinstance(v, bool) else str(v)


def config_graph(table: Table, exploration: Exploration, limit: int = LIMIT) -> ConfigGraph:
    if exploration.count > limit:
        raise TooLarge(f"{exploration.count} reachable configurations: too many to draw (the limit is {limit}); "
                       f"shrink the bounds with --set NAME=VALUE")
    members: dict[int, list[int]] = {}
    values, loops = [], []
    merged: dict[tuple[int, int], list[str]] = {}
    for i in range(exploration.count):
        state, vars_ = exploration.config(i)
        members.setdefault(state, []).append(i)
        values.append(", ".join(f"{k}={_value(v)}" for k, v in table.vars_dict(vars_).items()))
        own: list[str] = []
        for label, target in exploration.edges(i):
            text = describe_label(table, exploration.labels[label])
            (own if target == i else merged.setdefault((i, target), [])).append(text)
        loops.append(tuple(own))
    groups = tuple((s.name, tuple(members[s.index])) for s in table.states if s.index in members)
    final = frozenset(i for i in range(exploration.count) if table.states[exploration.config(i)[0]].final)
    edges = tuple((a, b, tuple(texts)) for (a, b), texts in merged.items())
    return ConfigGraph(table.machine, table.title or table.machine, groups, tuple(values), tuple(loops), edges, final)


def explored_dot(graph: ConfigGraph) -> str:
    dot = graphviz.Digraph(name=f"{graph.machine}-explored")
    dot.attr("graph", rankdir="TB", fontname=FONT, fontsize="13", labelloc="t", labeljust="l", newrank="true",
             nodesep="0.3", ranksep="0.5", pad="0.2", compound="true",
             label=f"<<b>{escape(graph.title)}</b>: {len(graph.values)} reachable configurations<br align=\"left\"/>>")
    dot.attr("node", shape="box", style="rounded,filled", fillcolor="white", color=INK, fontname=FONT,
             fontsize="9", margin="0.08,0.04")
    dot.attr("edge", fontname=FONT, fontsize="8", color=INK, arrowsize="0.6")
    dot.node(START, label="", shape="circle", style="filled", fillcolor=INK, width="0.14", fixedsize="true")
    for n, (state, members) in enumerate(graph.groups):
        with dot.subgraph(name=f"cluster_{n}") as cluster:
            cluster.attr(label=f"<<b>{escape(state)}</b>>", style="rounded,filled", fillcolor=FILL, color=INK,
                         fontsize="11")
            for i in members:
                text = escape(graph.values[i] or state)
                if graph.loops[i]:
                    text += f'<br/><font point-size="8">↻ {escape(", ".join(graph.loops[i]))}</font>'
                cluster.node(f"c{i}", label=f"<{text}>", peripheries="2" if i in graph.final else "1")
    dot.edge(START, "c0")
    for a, b, texts in graph.edges:
        dot.edge(f"c{a}", f"c{b}", label="\n".join(texts))
    source: str = dot.source
    return source


def explored_mermaid(graph: ConfigGraph) -> str:
    """Composite states hold their configurations; labels as in the DOT picture."""
    out = ["---", f'title: "{graph.title} (explored)"', "---", "stateDiagram-v2"]
    for state, members in graph.groups:
        out.append(f'    state "{state}" as g_{state} {{')
        for i in members:
            text = mescape(graph.values[i] or state)
            if graph.loops[i]:
                text += "<br/>↻ " + mescape(", ".join(graph.loops[i]))
            out.append(f'        state "{text}" as c{i}')
        out.append("    }")
    out.append("    [*] --> c0")
    for a, b, texts in graph.edges:
        out.append(f"    c{a} --> c{b} : {'<br/>'.join(map(mescape, texts))}")
    out += [f"    c{i} --> [*]" for i in sorted(graph.final)]
    return "\n".join(out) + "\n"
