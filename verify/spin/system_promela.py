"""A system as a Promela model, so Spin can cross-check the system explorer.

One proctype per instance with one ``do`` loop of ``d_step``s (its table's rows, as the
table export writes them, over this instance's globals), one channel per mailbox, a
``faults`` proctype, and a never claim asserting the invariants. Every process rests at
its loop head between steps and a ``d_step`` stores no intermediate state, so Spin's
stored states are the explorer's configurations without symmetry reduction. Globals are
the names system expressions compile to: ``st{i}``, ``v{i}_{var}``, ``S{i}_{state}``,
``stall{i}``, ``mb{i}``.

A ``group[any]`` link lets the step choose the receiving member. A ``d_step`` cannot choose,
so each of the instance's ``d_step``s is written once per choice: ``pk{i}`` holds the choice
for each ``any`` message of the step (``np{i}`` counts them), both hidden, so the copies
store the same states as the explorer's one step per choice of targets.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from typing import Any

from agentfsm.spec.model import Row, Table
from agentfsm.spec.system_model import Link, System
from agentfsm.verify.spin.promela import (
    PromelaLimit,
    _effect,
    _state_type,
    check_limits,
    expr_to_promela,
    never_claim,
    settle_bound,
)

_TOKEN = re.compile(r"\b(st|v_(\w+)|S_(\w+)|t_(\w+))\b")


MAX_COPIES = 256   # copies of one d_step, one per choice of group[any] targets


class ExportError(ValueError):
    """The system uses something the Promela export does not model."""


def _local(i: int, text: str) -> str:
    """The table export's names (``st``, ``v_x``, ``S_X``, ``t_x``) as instance ``i``'s globals."""
    def rename(match: re.Match[str]) -> str:
        if match.group(1) == "st":
            return f"st{i}"
        if match.group(2):
            return f"v{i}_{match.group(2)}"
        if match.group(3):
            return f"S{i}_{match.group(3)}"
        return f"t{i}_{match.group(4)}"
    return _TOKEN.sub(rename, text)


def _send(target: int, fields: str) -> str:
    """Append to a mailbox; a full one drops the message (Spin has no 'else' beside channel tests)."""
    return f"if :: nfull(mb{target}) -> mb{target}!{fields} :: full(mb{target}) -> skip fi"


def _lit(value: object) -> str:
    return ("1" if value else "0") if isinstance(value, bool) else str(value)


class _Exporter:
    def __init__(self, system: System) -> None:
        self.system = system
        self.width = max([len(e.params) for inst in system.instances for e in inst.table.events] + [0])
        self.args = max([len(a.params) for inst in system.instances for a in inst.table.actions] + [0])
        self.picks = [self._any_sends(inst.index) for inst in system.instances]

    def _any_links(self, i: int, actions: Sequence[str]) -> list[Link]:
        return [link for a in actions for link in self.system.links_by_source.get((i, a), ()) if link.mode == "any"]

    def _any_sends(self, i: int) -> tuple[int, int]:
        """How many ``any`` messages one step of instance ``i`` can send at most, and the widest
        group they go to (0, 0 without any)."""
        table = self.system.instances[i].table
        per_row = [len(self._any_links(i, row.emit)) for row in table.rows]
        settling = max((len(self._any_links(i, r.emit)) for rows in table.eventless_rows.values() for r in rows),
                       default=0)
        transient = sum(1 for state in table.states if state.transient)   # a chain visiting each once
        count = max(per_row + [len(self._any_links(i, table.unhandled.emit))]) + settling * transient
        widest = max((len(link.targets) for link in self._any_links(i, [a.name for a in table.actions])), default=0)
        if widest ** count > MAX_COPIES:
            raise ExportError(f"{self.system.instances[i].name} sends up to {count} group[any] messages in one "
                              f"step to groups of {widest}: {widest ** count} copies of each d_step (at most "
                              f"{MAX_COPIES} are exported)")
        return (count, widest) if count else (0, 0)

    def choices(self, i: int) -> list[str]:
        """The assignments opening each copy of an instance's ``d_step``: one per choice of targets."""
        count, widest = self.picks[i]
        if not count:
            return [""]
        return [f"{'; '.join(f'pk{i}[{k}] = {c}' for k, c in enumerate(combo))}; np{i} = 0; "
                for combo in itertools.product(range(widest), repeat=count)]

    def expr(self, i: int, table: Table, expr: Any, params: Mapping[str, Any]) -> str:
        return _local(i, expr_to_promela(table, expr, params))

    def sends(self, i: int, row_actions: Sequence[tuple[str, Sequence[str]]]) -> list[str]:
        """Statements routing the emitted actions (args already in temporaries) to the mailboxes."""
        out = []
        inst = self.system.instances[i]
        for action, args in row_actions:
            for link in self.system.links_by_source.get((i, action), ()):
                values = [str(inst.member) if k < 0 else args[k] for k in link.params]
                targets = link.targets
                event = self.system.instances[targets[0]].table.event_index[link.event]
                code = [e.name for e in self.system.instances[targets[0]].table.events].index(event.name)
                fields = ", ".join([str(code), *values, *(["0"] * (self.width - len(values)))])
                if link.mode == "arg":
                    for k, target in enumerate(targets):
                        out.append(f"if :: {args[link.route_arg]} == {k} -> {_send(target, fields)} :: else -> skip fi")
                elif link.mode == "any":
                    chosen = " ".join(f":: pk{i}[np{i}] % {len(targets)} == {k} -> {_send(target, fields)}"
                                      for k, target in enumerate(targets))
                    out.append(f"if {chosen} fi; np{i}++")
                else:
                    out.extend(_send(t, fields) for t in targets)
        return out

    def fire(self, i: int, row: Row, params: Mapping[str, str]) -> list[str]:
        """One row: its args into temporaries (read before the set), the set, the sends."""
        inst = self.system.instances[i]
        table = inst.table
        body: list[str] = []
        emitted: list[tuple[str, list[str]]] = []
        for k, name in enumerate(row.emit):
            args = row.emit_args[k] if row.emit_args else ()
            names = []
            for j, arg in enumerate(args):
                body.append(f"a{i}_{k}_{j} = {self.expr(i, table, arg.expr, params)}")
                names.append(f"a{i}_{k}_{j}")
            emitted.append((name, names))
        body += [_local(i, s) for s in _effect(table, row, params)]
        body += self.sends(i, emitted)
        return body

    def settle(self, i: int) -> list[str]:
        """The eventless rows while one is enabled (else the step ends), the rounds counted:
        past ``settle_bound`` of them the chain repeats a configuration, a cycle."""
        table = self.system.instances[i].table
        transient = [s for s in table.states if s.transient]
        if not transient:
            return []
        options = []
        for state in transient:
            for row in table.eventless_rows.get(state.index, ()):
                guard = f"st{i} == S{i}_{state.name}"
                if row.guard is not None:
                    guard += f" && {self.expr(i, table, row.guard, {})}"
                options.append(f":: {guard} -> {'; '.join(self.fire(i, row, {}))}")
        return [f"settle{i} = 0", f"do :: if {' '.join(options)} :: else -> break fi; settle{i}++; "
                f"assert(settle{i} <= {settle_bound(table)}) od"]

    def handle(self, i: int, event: str, params: Mapping[str, str], consumed: bool) -> list[str]:
        """Alternatives for ``event`` in every state: each enabled row, else the unhandled policy."""
        inst = self.system.instances[i]
        table = inst.table
        options = []
        guards = []
        for state in table.states:
            if state.final or state.transient:
                continue
            for row in table.candidates(state.index, event):
                guard = f"st{i} == S{i}_{state.name}"
                if row.guard is not None:
                    guard += f" && {self.expr(i, table, row.guard, params)}"
                guards.append(f"({guard})")
                body = self.fire(i, row, params) + ["skip"]
                options.append(f":: {guard} -> {'; '.join(body)}")
        unhandled = self.sends(i, [(a, []) for a in table.unhandled.emit])
        final = " || ".join(f"st{i} == S{i}_{s.name}" for s in table.states if s.final) or "false"
        if consumed or unhandled:
            rest = unhandled if unhandled else ["skip"]
            options.append(f":: !({final}) && !({' || '.join(guards) or 'false'}) -> {'; '.join(rest)}")
            options.append(f":: ({final}) -> skip")
        return options

    def proctype(self, i: int) -> list[str]:
        inst = self.system.instances[i]
        lines = [f"active proctype P{i}() {{  /* {inst.name}: {inst.table.machine} */", "end:", "  do"]
        head = len(lines)
        settle = "".join(f"{statement}; " for statement in self.settle(i))   # once after the row, wherever it led
        for env in self.system.environment:
            if i not in env.instances:
                continue
            decl = inst.table.event_index[env.event]
            for values in env.choices:
                params = {p.name: _lit(v) for p, v in zip(decl.params, values, strict=True)}
                guard = f"!stall{i}" + (f" && {env.guard_promela}" if env.guard_promela else "")
                options = self.handle(i, env.event, params, consumed=False)
                if options:
                    lines += [f"  :: d_step {{ {guard} && ({self.enabled(options)}) -> {pick}"
                              f"if {' '.join(options)} fi; {settle}assert(INVARIANTS) }}" for pick in self.choices(i)]
        names = [e.name for e in inst.table.events]
        received = [f"m{i}_{k}" for k in range(self.width)]
        options = []
        for code, event in enumerate(inst.table.events):
            params = {p.name: received[k] for k, p in enumerate(event.params)}
            for option in self.handle(i, event.name, params, consumed=True):
                guard, _, body = option[3:].partition(" -> ")
                options.append(f":: m{i}_ev == {code} && ({guard}) -> {body}")
        if options and names:
            fields = ", ".join([f"m{i}_ev", *received])
            lines += [f"  :: d_step {{ !stall{i} && nempty(mb{i}) -> mb{i}?{fields}; {pick}"
                      f"if {' '.join(options)} fi; {settle}assert(INVARIANTS) }}" for pick in self.choices(i)]
        if len(lines) == head:   # Spin refuses a do without options
            lines.append("  :: false -> skip   /* no event: the instance never steps */")
        lines += ["  od", "}"]
        return lines

    @staticmethod
    def enabled(options: list[str]) -> str:
        return " || ".join(f"({o[3:].partition(' -> ')[0]})" for o in options)

    def faults(self) -> list[str]:
        system = self.system
        lines = ["active proctype faults() {", "end:", "  do"]
        for f, fault in enumerate(system.faults):
            for i in sorted(fault.instances):
                inst = system.instances[i]
                table = inst.table
                budget = f"spent{f} < {fault.max}"
                skip = ", ".join(["_"] * (self.width + 1))
                drain = f"do :: nempty(mb{i}) -> mb{i}?{skip} :: empty(mb{i}) -> break od"
                if fault.kind == "crash":
                    resets = [] if inst.durable_state else [f"st{i} = S{i}_{table.initial.name}"]
                    resets += [f"v{i}_{v.name} = {_lit(v.init)}" for k, v in enumerate(table.variables)
                               if k not in inst.durable_vars]
                    body = [f"spent{f}++", *resets, f"stall{i} = false", drain]
                    lines.append(f"  :: d_step {{ {budget} -> {'; '.join(body)}; assert(INVARIANTS) }}")
                elif fault.kind == "lose":
                    lines.append(f"  :: d_step {{ {budget} && nempty(mb{i}) -> spent{f}++; "
                                 f"mb{i}?{', '.join(['_'] * (self.width + 1))}; assert(INVARIANTS) }}")
                elif fault.kind == "duplicate":
                    head = ", ".join(f"h_{k}" for k in range(self.width + 1))
                    other = head.replace("h_", "g_")
                    rotate = (f"n_rot = len(mb{i}); mb{i}?{head}; mb{i}!{head}; mb{i}!{head}; "
                              f"do :: n_rot > 1 -> mb{i}?{other}; mb{i}!{other}; n_rot-- :: else -> break od")
                    lines.append(f"  :: d_step {{ {budget} && nempty(mb{i}) && len(mb{i}) < {inst.capacity} -> "
                                 f"spent{f}++; {rotate}; assert(INVARIANTS) }}")
                else:
                    final = " || ".join(f"st{i} == S{i}_{s.name}" for s in table.states if s.final) or "false"
                    lines.append(f"  :: d_step {{ {budget} && !stall{i} && !({final}) -> spent{f}++; "
                                 f"stall{i} = true; assert(INVARIANTS) }}")
        for i in range(len(system.instances)):
            if any(fault.kind == "stall" and i in fault.instances for fault in system.faults):
                lines.append(f"  :: d_step {{ stall{i} -> stall{i} = false }}")
        lines += ["  od", "}"]
        return lines

    def export(self) -> str:
        system = self.system
        lines = [f"/* system {system.name}: generated by agentfsm export --format promela from {system.file}. */"]
        invariants = [inv.promela for inv in system.invariants]
        for inst in system.instances:
            i, table = inst.index, inst.table
            lines += [f"#define S{i}_{s.name} {s.index}" for s in table.states]
            lines.append(f"{_state_type(len(table.states))} st{i} = S{i}_{table.initial.name};")
            for var in table.variables:
                lines.append(f"{'bool' if var.type == 'bool' else 'int'} v{i}_{var.name} = {_lit(var.init)};")
                lines.append(f"hidden {'byte' if var.type == 'bool' else 'int'} t{i}_{var.name};")
            lines.append(f"bool stall{i} = false;")
            lines.append(f"chan mb{i} = [{inst.capacity}] of {{ {', '.join(['byte'] + ['int'] * self.width)} }};")
            lines.append(f"hidden byte m{i}_ev;")
            if any(s.transient for s in table.states):
                lines.append(f"hidden int settle{i};")
            if self.picks[i][0]:
                lines += [f"hidden byte pk{i}[{self.picks[i][0]}];", f"hidden byte np{i};"]
            lines += [f"hidden int m{i}_{k};" for k in range(self.width)]
            for k, _ in enumerate(range(max((len(r.emit) for r in table.rows), default=0))):
                lines += [f"hidden int a{i}_{k}_{j};" for j in range(self.args)]
            invariants += [_local(i, expr_to_promela(table, inv.expr, {})) for inv in table.invariants]
        lines += [f"byte spent{f} = 0;" for f in range(len(system.faults))]
        lines += ["hidden byte n_rot;"] + [f"hidden int h_{k}; hidden int g_{k};" for k in range(self.width + 1)]
        lines.append(f"#define INVARIANTS ({' && '.join(invariants) or 'true'})")
        lines.append("")
        for inst in system.instances:
            lines += self.proctype(inst.index)
            lines.append("")
        if system.faults:
            lines += self.faults()
            lines.append("")
        lines.append(never_claim([f"v{inst.index}_{var.name}" for inst in system.instances
                                  for var in inst.table.variables]))
        return "\n".join(lines) + "\n"


def export_system_promela(system: System) -> str:
    for inst in system.instances:
        try:
            check_limits(inst.table)
        except PromelaLimit as exc:
            raise ExportError(f"{inst.name}: {exc}") from None
    return _Exporter(system).export()
