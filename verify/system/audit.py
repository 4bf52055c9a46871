"""Trace validation of a system: does some interleaving of the system's steps explain the logs?

As TLC validates a trace, the audit keeps, for each number of records explained so far, the
set of system configurations the processes could be in (with how far each log has got, when
there are several). A logged record is one instance step, matched against the successors of
``agentfsm.verify.system.step`` (the verifier's own step function); between two records the
steps no log holds — a silent instance's, an event the mapping says is not logged, a
message taken and ignored, a fault — are searched for breadth-first, at most ``max_silent``
of them, and at most ``limit`` configurations in all at one position (past it: an
ExplorationLimit, as the explorer's). The first record no configuration can take is the
verdict, with the configurations just before it and one interleaving that reached them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from agentfsm.spec.audit_mapping import AuditMapping
from agentfsm.spec.expr import Value
from agentfsm.spec.system_log import LoggedStep
from agentfsm.spec.system_model import System
from agentfsm.spec.system_trace import Label, param_names
from agentfsm.verify.system.step import Config, Effect, Stepper, initial_config
from agentfsm.verify.table.explore import ExplorationLimit

DEFAULT_MAX_SILENT = 8
DEFAULT_LIMIT = 200_000

Positions = tuple[int, ...]
Node = tuple[Config, Positions]


@dataclass(frozen=True)
class SystemAudit:
    """The verdict: ``unexplained`` empty when every record is explained."""

    records: int                       # logged steps in all
    explained: int                     # how many some interleaving explains, in order
    unexplained: tuple[LoggedStep, ...] = ()   # the next record of each log nothing explains
    before: tuple[Config, ...] = ()    # the configurations the system could be in just before
    prefix: tuple[tuple[Label, Config, Effect], ...] = ()   # one interleaving that reached one of them
    configurations: int = 0            # configurations visited by the search in all

    @property
    def ok(self) -> bool:
        return not self.unexplained


class _Graph:
    """The nodes visited, each with the step that first reached it, to draw one interleaving back."""

    def __init__(self) -> None:
        self.nodes: list[Node] = []
        self.parent: list[int] = []
        self.step: list[tuple[Label, Config, Effect] | None] = []

    def add(self, node: Node, parent: int, step: tuple[Label, Config, Effect] | None) -> int:
        self.nodes.append(node)
        self.parent.append(parent)
        self.step.append(step)
        return len(self.nodes) - 1

    def path(self, index: int) -> tuple[tuple[Label, Config, Effect], ...]:
        steps = []
        while index >= 0:
            step = self.step[index]
            if step is not None:
                steps.append(step)
            index = self.parent[index]
        return tuple(reversed(steps))


def matches(system: System, step: LoggedStep, label: Label, after: Config, effect: Effect) -> bool:
    """Whether the system step ``label`` (reaching ``after``, doing ``effect``) is the logged ``step``."""
    kind, i, event, params, _ = label
    if i != step.instance or event != step.event or step.problem:
        return False
    if step.kind is None and kind not in ("env", "deliver"):
        return False
    if step.kind is not None and kind != step.kind:
        return False
    if any(params[k] != v for k, v in step.params):
        return False
    if step.state is not None and after[0][i][0] != step.state:
        return False
    return step.sends is None or _sent(system, effect) == step.sends


def _sent(system: System, effect: Effect) -> tuple[str, tuple[tuple[str, Value], ...]]:
    """The first message a step sent, its parameters named as its receiver names them."""
    if not effect.sent:
        return "", ()
    sent = effect.sent[0]
    return sent.event, tuple(sorted(param_names(system, sent.target, sent.event, sent.params).items()))


def logged(mapping: AuditMapping, label: Label, effect: Effect) -> bool:
    """Whether a log holds this step: a fired env or deliver step of a logged instance and event."""
    kind, i, event, _, _ = label
    return kind in ("env", "deliver") and effect.status == "fired" and mapping.logged(i, event)


def audit_system(system: System, mapping: AuditMapping, logs: Sequence[Sequence[LoggedStep]],
                 max_silent: int = DEFAULT_MAX_SILENT, limit: int = DEFAULT_LIMIT) -> SystemAudit:
    """Explain ``logs`` (one step sequence per log) by the system's interleavings, or say where not."""
    stepper = Stepper(system)
    graph = _Graph()
    total = sum(len(log) for log in logs)
    layer = [graph.add((initial_config(system), (0,) * len(logs)), -1, None)]
    for done in range(total + 1):
        closure = _silent_closure(stepper, mapping, graph, layer, max_silent, limit)
        if done == total:
            return SystemAudit(total, total, configurations=len(graph.nodes))
        layer = _take_records(stepper, mapping, graph, closure, logs)
        if not layer:
            pending = sorted({(k, graph.nodes[n][1][k]) for n in closure for k in range(len(logs))
                              if graph.nodes[n][1][k] < len(logs[k])})
            unexplained = tuple(logs[k][p] for k, p in pending)
            before = tuple(dict.fromkeys(graph.nodes[n][0] for n in closure))
            return SystemAudit(total, done, unexplained, before, graph.path(closure[0]), len(graph.nodes))
    raise AssertionError("unreachable: every layer explains one record more")


def _silent_closure(stepper: Stepper, mapping: AuditMapping, graph: _Graph, layer: list[int],
                    max_silent: int, limit: int) -> list[int]:
    """``layer`` and every node reachable from it by at most ``max_silent`` unlogged steps."""
    seen = {graph.nodes[n]: n for n in layer}
    frontier = list(layer)
    for _ in range(max_silent):
        nxt: list[int] = []
        for n in frontier:
            config, positions = graph.nodes[n]
            for label, after, effect in stepper.successors(config):
                if after is config or logged(mapping, label, effect):
                    continue
                node = (after, positions)
                if node not in seen:
                    seen[node] = graph.add(node, n, (label, after, effect))
                    nxt.append(seen[node])
                    if len(seen) > limit:
                        raise ExplorationLimit(f"more than {limit:,} configurations at one position of the logs "
                                               f"(--max-configurations {limit})", len(seen), 0, max_silent)
        frontier = nxt
    return list(seen.values())


def _take_records(stepper: Stepper, mapping: AuditMapping, graph: _Graph, closure: list[int],
                  logs: Sequence[Sequence[LoggedStep]]) -> list[int]:
    """The nodes one logged step further: each log's next record taken by a matching system step
    (a step a log need not hold, a fault say, is taken here too when a log does hold it)."""
    reached: dict[Node, int] = {}
    for n in closure:
        config, positions = graph.nodes[n]
        pending = [(k, logs[k][p]) for k, p in enumerate(positions) if p < len(logs[k])]
        if not pending:
            continue
        for label, after, effect in stepper.successors(config):
            if after is config:
                continue
            for k, record in pending:
                if matches(stepper.system, record, label, after, effect):
                    moved = (*positions[:k], positions[k] + 1, *positions[k + 1:])
                    node = (after, moved)
                    if node not in reached:
                        reached[node] = graph.add(node, n, (label, after, effect))
    return list(reached.values())
