"""System expressions: a table's expression language lifted over named instances.

``agent.state == ExecutingTools``, ``call[1].attempts``, ``count(call[*], state == Running)``,
``all(worker[*], not stalled)``, ``any(...)``, ``agent.mailbox`` (messages waiting) and
``agent.stalled``. Like table expressions the text is parsed with ``ast`` against a
whitelist and never evaluated: the checked tree becomes closures over a system
configuration and, in the same pass, the Promela text the export needs. ``count``,
``all`` and ``any`` are unrolled over the group's members.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from agentfsm.spec.errors import shown
from agentfsm.spec.expr import MAX_DEPTH, MAX_NODES, MAX_TEXT, ExprError, Type
from agentfsm.spec.model import Table

# A system configuration as the explorer keeps it: per instance (state, vars), per instance
# its mailbox, per instance whether it is stalled, the faults spent.
SysFn = Callable[[Any], Any]

_CMP: dict[type[ast.cmpop], tuple[str, Callable[[Any, Any], Any]]] = {
    ast.Eq: ("==", operator.eq), ast.NotEq: ("!=", operator.ne), ast.Lt: ("<", operator.lt),
    ast.LtE: ("<=", operator.le), ast.Gt: (">", operator.gt), ast.GtE: (">=", operator.ge),
}
_AGGREGATES = ("count", "all", "any")
_EXPECTED = ("expressions have instance.var, instance.state, count/all/any(group[*], ...), integers, "
             "true/false, + -, comparisons and and/or/not")


@dataclass(frozen=True)
class Member:
    """What an expression needs to know of one instance."""

    index: int
    name: str
    table: Table


@dataclass(frozen=True)
class Compiled:
    fn: SysFn
    type: Type
    promela: str  # the same expression over the export's global names (see verify/spin/system_promela.py)


def promela_state(i: int) -> str:
    return f"st{i}"


def promela_var(i: int, var: str) -> str:
    return f"v{i}_{var}"


def promela_state_const(i: int, state: str) -> str:
    return f"S{i}_{state}"


def parse_system_expr(text: str, singles: Mapping[str, Member], groups: Mapping[str, Sequence[Member]],
                      want: Type | None = "bool") -> Compiled:
    """Parse and compile ``text``; raise ExprError with a 0-based column on failure."""
    if len(text) > MAX_TEXT:
        raise ExprError(0, f"expression longer than {MAX_TEXT} characters")
    if not text.strip():
        raise ExprError(0, "empty expression")
    source = text.replace("[*]", "[_]")  # same length: columns stay exact
    shift = len(source) - len(source.lstrip())
    try:
        tree = ast.parse(source.strip(), mode="eval")
    except SyntaxError as exc:
        raise ExprError(shift + max((exc.offset or 1) - 1, 0), f"invalid expression: {exc.msg}") from None
    except (RecursionError, MemoryError):
        raise ExprError(0, "expression too deeply nested") from None
    if sum(1 for _ in ast.walk(tree)) > MAX_NODES:
        raise ExprError(0, f"expression too large (at most {MAX_NODES} nodes)")
    result = _Checker(singles, groups, shift).check(tree.body, None, 0)
    if want is not None and result.type != want:
        raise ExprError(shift, f"expected {'a bool' if want == 'bool' else 'an int'} expression, found {result.type}")
    return result


class _Checker:
    def __init__(self, singles: Mapping[str, Member], groups: Mapping[str, Sequence[Member]], shift: int) -> None:
        self.singles = singles
        self.groups = groups
        self.shift = shift

    def fail(self, node: ast.AST, message: str) -> ExprError:
        return ExprError(getattr(node, "col_offset", 0) + self.shift, message)

    def check(self, node: ast.expr, ctx: Member | None, depth: int) -> Compiled:
        if depth > MAX_DEPTH:
            raise self.fail(node, f"expression nested deeper than {MAX_DEPTH} levels")
        d = depth + 1
        if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
            value = node.value
            return Compiled(lambda c: value, "int", str(value))
        if isinstance(node, ast.Name) and node.id in ("true", "false"):
            flag = node.id == "true"
            return Compiled(lambda c: flag, "bool", node.id)
        if isinstance(node, ast.Name):
            if ctx is None:
                raise self.fail(node, f"unknown name {shown(node.id)} (write instance.{node.id}, or use it "
                                      "inside count/all/any(group[*], ...))")
            return self.field(node, ctx, node.id)
        if isinstance(node, ast.Attribute):
            return self.field(node, self.instance(node.value), node.attr)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            inner = self.expect(node.operand, ctx, d, "bool", "'not'")
            f = inner.fn
            return Compiled(lambda c: not f(c), "bool", f"!({inner.promela})")
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            inner = self.expect(node.operand, ctx, d, "int", "unary '-'")
            f = inner.fn
            return Compiled(lambda c: -f(c), "int", f"(-{inner.promela})")
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
            left = self.expect(node.left, ctx, d, "int", "'+'/'-'")
            right = self.expect(node.right, ctx, d, "int", "'+'/'-'")
            fn = operator.add if isinstance(node.op, ast.Add) else operator.sub
            a, b = left.fn, right.fn
            sym = "+" if isinstance(node.op, ast.Add) else "-"
            return Compiled(lambda c: fn(a(c), b(c)), "int", f"({left.promela} {sym} {right.promela})")
        if isinstance(node, ast.BoolOp):
            parts = [self.expect(v, ctx, d, "bool", "'and'/'or'") for v in node.values]
            fns = [p.fn for p in parts]
            if isinstance(node.op, ast.And):
                return Compiled(lambda c: all(f(c) for f in fns), "bool",
                                "(" + " && ".join(p.promela for p in parts) + ")")
            return Compiled(lambda c: any(f(c) for f in fns), "bool", "(" + " || ".join(p.promela for p in parts) + ")")
        if isinstance(node, ast.Compare):
            return self.compare(node, ctx, d)
        if isinstance(node, ast.Call):
            return self.aggregate(node, ctx, d)
        raise self.fail(node, f"{type(node).__name__.lower()} not allowed: {_EXPECTED}")

    def expect(self, node: ast.expr, ctx: Member | None, depth: int, want: Type, what: str) -> Compiled:
        result = self.check(node, ctx, depth)
        if result.type != want:
            raise self.fail(node, f"{what} needs {want} operands, found {result.type}")
        return result

    def instance(self, node: ast.expr) -> Member:
        """``agent`` or ``call[2]``: one instance, named where the expression stands."""
        if isinstance(node, ast.Name):
            if node.id in self.singles:
                return self.singles[node.id]
            if node.id in self.groups:
                raise self.fail(node, f"{shown(node.id)} is a group: name a member ({node.id}[0]) or use "
                                      f"count/all/any({node.id}[*], ...)")
            raise self.fail(node, f"unknown instance {shown(node.id)}")
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
            group = self.groups.get(node.value.id)
            if group is None:
                raise self.fail(node, f"unknown group {shown(node.value.id)}")
            key = node.slice
            if isinstance(key, ast.Constant) and isinstance(key.value, int) and not isinstance(key.value, bool):
                if not 0 <= key.value < len(group):
                    raise self.fail(key, f"{node.value.id} has members 0..{len(group) - 1}, not {key.value}")
                return group[key.value]
            raise self.fail(key, f"'{node.value.id}[*]' is read only by count/all/any; name one member by number")
        raise self.fail(node, "expected an instance name (agent, call[0])")

    def field(self, node: ast.expr, member: Member, name: str) -> Compiled:
        i = member.index
        if name == "state":
            raise self.fail(node, "'state' is compared with a state name: state == S, state != S, state in (A, B)")
        if name == "stalled":
            return Compiled(lambda c: c[2][i], "bool", f"stall{i}")
        if name == "mailbox":
            return Compiled(lambda c: len(c[1][i]), "int", f"len(mb{i})")
        slots = {var.name: (k, var.type) for k, var in enumerate(member.table.variables)}
        if name in slots:
            slot, typ = slots[name]
            return Compiled(lambda c: c[0][i][1][slot], typ, promela_var(i, name))
        if name in member.table.constants:
            value = member.table.constants[name]
            return Compiled(lambda c: value, "bool" if isinstance(value, bool) else "int",
                            ("true" if value else "false") if isinstance(value, bool) else str(value))
        raise self.fail(node, f"{member.name} ({member.table.machine}) has no variable or constant {shown(name)}")

    def state_of(self, node: ast.expr, ctx: Member | None) -> Member | None:
        """The instance whose state ``node`` reads (``x.state`` or, inside an aggregate, ``state``)."""
        if isinstance(node, ast.Name) and node.id == "state":
            if ctx is None:
                raise self.fail(node, "'state' alone is read inside count/all/any; write instance.state")
            return ctx
        if isinstance(node, ast.Attribute) and node.attr == "state":
            return self.instance(node.value)
        return None

    def state_names(self, node: ast.expr, member: Member) -> list[str]:
        items = node.elts if isinstance(node, (ast.Tuple, ast.List)) else [node]
        names = []
        for item in items:
            if not isinstance(item, ast.Name) or item.id not in member.table.state_index:
                raise self.fail(item, f"{member.table.machine} has no state "
                                      f"{shown(item.id if isinstance(item, ast.Name) else ast.unparse(item))}")
            names.append(item.id)
        return names

    def compare(self, node: ast.Compare, ctx: Member | None, depth: int) -> Compiled:
        member = self.state_of(node.left, ctx)
        if member is not None:
            if len(node.ops) != 1:
                raise self.fail(node, "compare a state once: x.state == S")
            op = node.ops[0]
            positive = isinstance(op, (ast.Eq, ast.In))
            if not isinstance(op, (ast.Eq, ast.NotEq, ast.In, ast.NotIn)):
                raise self.fail(node, "a state is compared with ==, !=, in or not in")
            names = self.state_names(node.comparators[0], member)
            indices = frozenset(member.table.state_index[n] for n in names)
            i = member.index
            tests = " || ".join(f"{promela_state(i)} == {promela_state_const(i, n)}" for n in names)
            if positive:
                return Compiled(lambda c: c[0][i][0] in indices, "bool", f"({tests})")
            return Compiled(lambda c: c[0][i][0] not in indices, "bool", f"!({tests})")
        left = self.check(node.left, ctx, depth)
        pairs: list[Compiled] = []
        for op, right_node in zip(node.ops, node.comparators, strict=True):
            if type(op) not in _CMP:
                raise self.fail(node, "comparisons are == != < <= > >= (and 'in' for states)")
            symbol, fn = _CMP[type(op)]
            right = self.check(right_node, ctx, depth)
            if symbol in ("==", "!=") and left.type != right.type:
                raise self.fail(right_node, f"cannot compare {left.type} with {right.type}")
            if symbol not in ("==", "!=") and "bool" in (left.type, right.type):
                raise self.fail(node, f"'{symbol}' needs int operands")
            a, b = left.fn, right.fn
            pairs.append(Compiled(lambda c, a=a, b=b, fn=fn: fn(a(c), b(c)), "bool",  # type: ignore[misc]
                                  f"({left.promela} {symbol} {right.promela})"))
            left = right
        if len(pairs) == 1:
            return pairs[0]
        fns = [p.fn for p in pairs]
        return Compiled(lambda c: all(f(c) for f in fns), "bool", "(" + " && ".join(p.promela for p in pairs) + ")")

    def aggregate(self, node: ast.Call, ctx: Member | None, depth: int) -> Compiled:
        name = node.func.id if isinstance(node.func, ast.Name) else None
        if name not in _AGGREGATES:
            raise self.fail(node, f"function call not allowed: only {', '.join(_AGGREGATES)}(group[*], condition)")
        if ctx is not None:
            raise self.fail(node, f"{name}(...) cannot be nested inside another count/all/any")
        if len(node.args) != 2 or node.keywords:
            raise self.fail(node, f"{name} takes two arguments: {name}(group[*], condition)")
        target, condition = node.args
        if not (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name)
                and isinstance(target.slice, ast.Name) and target.slice.id == "_"):
            raise self.fail(target, f"{name} reads a whole group: write group[*]")
        members = self.groups.get(target.value.id)
        if members is None:
            raise self.fail(target, f"unknown group {shown(target.value.id)}")
        parts = [self.expect(condition, member, depth, "bool", f"the condition of {name}") for member in members]
        fns = [p.fn for p in parts]
        texts = [p.promela for p in parts]
        if name == "count":
            return Compiled(lambda c: sum(1 for f in fns if f(c)), "int",
                            "(" + " + ".join(f"({t} -> 1 : 0)" for t in texts) + ")")
        if name == "all":
            return Compiled(lambda c: all(f(c) for f in fns), "bool", "(" + " && ".join(texts) + ")")
        return Compiled(lambda c: any(f(c) for f in fns), "bool", "(" + " || ".join(texts) + ")")
