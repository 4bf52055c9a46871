"""The table's expression language: parsed with ``ast``, checked, compiled to closures.

Only a whitelist of node types is accepted: names, int and bool literals, ``+ -``,
comparisons, ``and or not``, parentheses and ``state in (A, B)``. Anything else (calls,
attributes, subscripts, lambdas, comprehensions, ...) is rejected with its column. Text
is never handed to ``eval``: the checked tree is turned into a small IR, and the IR into
nested closures over an *environment* tuple ``(state, var..., param...)``.
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from agentfsm.spec.errors import shown
from agentfsm.spec.suggest import did_you_mean

Type = Literal["int", "bool"]
Value = int | bool
Env = Sequence[Any]
Fn = Callable[[Env], Any]

MAX_TEXT = 2000
MAX_NODES = 400
MAX_DEPTH = 40


@dataclass(frozen=True)
class Lit:
    value: Value


@dataclass(frozen=True)
class Ref:
    """A name: a variable or event parameter (read from ``slot``) or a constant (``value``)."""

    name: str
    kind: Literal["var", "param", "const"]
    type: Type
    slot: int = -1
    value: Value = 0


@dataclass(frozen=True)
class Unary:
    op: Literal["-", "not"]
    operand: Expr


@dataclass(frozen=True)
class Binary:
    op: Literal["+", "-", "==", "!=", "<", "<=", ">", ">=", "and", "or"]
    left: Expr
    right: Expr


@dataclass(frozen=True)
class InStates:
    """``state in (A, B)``; ``indices`` are the states' positions in the table."""

    states: tuple[str, ...]
    indices: frozenset[int]
    negated: bool = False


Expr = Lit | Ref | Unary | Binary | InStates


@dataclass(frozen=True)
class Symbol:
    kind: Literal["var", "param", "const"]
    type: Type
    slot: int = -1
    value: Value = 0


@dataclass(frozen=True)
class Scope:
    """What names mean where an expression stands; ``hints`` explain names that are not."""

    symbols: Mapping[str, Symbol]
    states: Mapping[str, int]
    allow_state: bool = True
    hints: Mapping[str, str] = field(default_factory=dict)


class ExprError(Exception):
    def __init__(self, col: int, message: str) -> None:
        super().__init__(message)
        self.col = col
        self.message = message


_A = {"int": "an int", "bool": "a bool"}
_CMP: dict[type[ast.cmpop], str] = {
    ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
}
_LITERAL_NAMES = {"true": True, "false": False}
_FORBIDDEN = {
    "Call": "function call", "Attribute": "attribute access", "Subscript": "subscript",
    "Lambda": "lambda", "ListComp": "comprehension", "SetComp": "comprehension",
    "DictComp": "comprehension", "GeneratorExp": "comprehension", "JoinedStr": "f-string",
    "NamedExpr": "assignment ':='", "IfExp": "conditional expression", "Tuple": "tuple",
    "List": "list", "Set": "set", "Dict": "dict", "Starred": "'*' unpacking", "Await": "await",
    "Yield": "yield", "YieldFrom": "yield", "Slice": "slice",
}
_OPERATORS = {
    "Mult": "*", "Div": "/", "FloorDiv": "//", "Mod": "%", "Pow": "**", "MatMult": "@",
    "LShift": "<<", "RShift": ">>", "BitOr": "|", "BitAnd": "&", "BitXor": "^", "UAdd": "+",
    "Invert": "~", "Is": "is", "IsNot": "is not", "In": "in", "NotIn": "not in",
}
_FOREIGN = re.compile(r"[^\x20-\x7e\t]")
# Operators of C-like languages that a guard written from habit contains, and the fix.
_FOREIGN_OPERATOR = re.compile(r"&&|\|\||!(?!=)|(?<![=!<>])=(?!=)")
_FOREIGN_FIX = {
    "&&": "write 'and', not '&&'", "||": "write 'or', not '||'", "!": "write 'not', not '!'",
    "=": "write '==' to compare, not '=' (a row changes variables with 'set:')",
}
_BITWISE_FIX = {"&": "; for a boolean 'and' write 'and'", "|": "; for a boolean 'or' write 'or'",
                "~": "; for a boolean 'not' write 'not'"}


def parse(text: str, scope: Scope, want: Type | None = None) -> tuple[Expr, Type]:
    """Parse and type-check ``text``; raise ExprError with a 0-based column on failure."""
    if len(text) > MAX_TEXT:
        raise ExprError(0, f"expression longer than {MAX_TEXT} characters")
    if not text.strip():
        raise ExprError(0, "empty expression")
    bad = _FOREIGN.search(text)
    if bad is not None:
        # Python would NFKC-normalise non-ASCII names (a fullwidth 'ｃount' reads as 'count').
        raise ExprError(bad.start(), f"character {bad.group()!r} is not allowed in an expression "
                                     "(names, digits, operators and parentheses are ASCII)")
    shift = len(text) - len(text.lstrip())
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as exc:
        foreign = _FOREIGN_OPERATOR.search(text)
        if foreign is not None:
            raise ExprError(foreign.start(), _FOREIGN_FIX[foreign.group()]) from None
        stripped = text.strip()
        col = (exc.offset or 0) - 1 if (exc.lineno or 1) == 1 else 0
        if col < 0:  # Python reports no offset when the text ends too early
            col = len(stripped)
        raise ExprError(shift + min(col, len(stripped)), f"invalid expression: {exc.msg}") from None
    except (RecursionError, MemoryError):
        raise ExprError(0, "expression too deeply nested") from None
    count = sum(1 for _ in ast.walk(tree))
    if count > MAX_NODES:
        raise ExprError(0, f"expression too large ({count} nodes, at most {MAX_NODES})")
    try:
        expr, typ = _Checker(scope, shift).check(tree.body, 0)
    except RecursionError:
        raise ExprError(0, "expression too deeply nested") from None
    if want is not None and typ != want:
        raise ExprError(shift, f"expected {_A[want]} expression, found {typ}")
    return expr, typ


class _Checker:
    def __init__(self, scope: Scope, shift: int) -> None:
        self.scope = scope
        self.shift = shift

    def fail(self, node: ast.AST, message: str) -> ExprError:
        return ExprError(getattr(node, "col_offset", 0) + self.shift, message)

    def check(self, node: ast.expr, depth: int) -> tuple[Expr, Type]:
        if depth > MAX_DEPTH:
            raise self.fail(node, f"expression nested deeper than {MAX_DEPTH} levels")
        d = depth + 1
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool):
                raise self.fail(node, f"write {str(node.value).lower()}, not {node.value}: booleans are lowercase")
            if isinstance(node.value, int):
                return Lit(node.value), "int"
            raise self.fail(node, f"unsupported literal {shown(node.value)}: only integers and true/false")
        if isinstance(node, ast.Name):
            return self.name(node)
        if isinstance(node, ast.UnaryOp):
            operand, typ = self.check(node.operand, d)
            if isinstance(node.op, ast.Not):
                self.expect(node.operand, typ, "bool", "'not'")
                return Unary("not", operand), "bool"
            if isinstance(node.op, ast.USub):
                self.expect(node.operand, typ, "int", "unary '-'")
                if isinstance(operand, Lit):
                    return Lit(-int(operand.value)), "int"
                return Unary("-", operand), "int"
            symbol = _OPERATORS.get(type(node.op).__name__, type(node.op).__name__)
            raise self.fail(node, f"operator '{symbol}' not allowed: the unary operators are 'not' and '-'"
                                  f"{_BITWISE_FIX.get(symbol, '')}")
        if isinstance(node, ast.BinOp):
            if not isinstance(node.op, (ast.Add, ast.Sub)):
                symbol = _OPERATORS.get(type(node.op).__name__, type(node.op).__name__)
                raise self.fail(node, f"operator '{symbol}' not allowed: integers have only '+' and '-'"
                                      f"{_BITWISE_FIX.get(symbol, '')}")
            left, lt = self.check(node.left, d)
            right, rt = self.check(node.right, d)
            self.expect(node.left, lt, "int", "'+'/'-'")
            self.expect(node.right, rt, "int", "'+'/'-'")
            return Binary("+" if isinstance(node.op, ast.Add) else "-", left, right), "int"
        if isinstance(node, ast.BoolOp):
            op: Literal["and", "or"] = "and" if isinstance(node.op, ast.And) else "or"
            parts = []
            for value in node.values:
                part, typ = self.check(value, d)
                self.expect(value, typ, "bool", f"'{op}'")
                parts.append(part)
            result = parts[0]
            for part in parts[1:]:
                result = Binary(op, result, part)
            return result, "bool"
        if isinstance(node, ast.Compare):
            return self.compare(node, d)
        what = _FORBIDDEN.get(type(node).__name__, type(node).__name__.lower())
        raise self.fail(node, f"{what} not allowed: expressions have names, integers, true/false, "
                              "+ -, comparisons, and/or/not and 'state in (...)'")

    def expect(self, node: ast.expr, got: Type, want: Type, what: str) -> None:
        if got != want:
            raise self.fail(node, f"{what} needs {want} operands, found {got}")

    def name(self, node: ast.Name) -> tuple[Expr, Type]:
        if node.id in _LITERAL_NAMES:
            return Lit(_LITERAL_NAMES[node.id]), "bool"
        if node.id == "state":
            raise self.fail(node, "'state' may only be used as 'state in (A, B)'")
        symbol = self.scope.symbols.get(node.id)
        if symbol is None:
            if node.id in self.scope.states:
                raise self.fail(node, f"state {shown(node.id)} may only appear in 'state in (...)'")
            hint = self.scope.hints.get(node.id)
            if hint:
                raise self.fail(node, f"unknown name {shown(node.id)} ({hint})")
            raise self.fail(node, f"unknown name {shown(node.id)}{did_you_mean(node.id, self.scope.symbols)}")
        return Ref(node.id, symbol.kind, symbol.type, symbol.slot, symbol.value), symbol.type

    def compare(self, node: ast.Compare, depth: int) -> tuple[Expr, Type]:
        if isinstance(node.left, ast.Name) and node.left.id == "state":
            if len(node.ops) != 1 or not isinstance(node.ops[0], (ast.In, ast.NotIn)):
                raise self.fail(node, "'state' may only be used as 'state in (A, B)'")
            return self.state_test(node.comparators[0], isinstance(node.ops[0], ast.NotIn)), "bool"
        left, lt = self.check(node.left, depth)
        result: Expr | None = None
        for op, right_node in zip(node.ops, node.comparators, strict=True):
            symbol = _CMP.get(type(op))
            if symbol is None:
                symbol = _OPERATORS.get(type(op).__name__, type(op).__name__)
                raise self.fail(node, f"comparison '{symbol}' not allowed: use == != < <= > >= "
                                      "(or 'state in (...)')")
            right, rt = self.check(right_node, depth)
            if symbol in ("==", "!="):
                if lt != rt:
                    raise self.fail(right_node, f"cannot compare {lt} with {rt}")
            else:
                self.expect(node.left, lt, "int", f"'{symbol}'")
                self.expect(right_node, rt, "int", f"'{symbol}'")
            pair = Binary(symbol, left, right)  # type: ignore[arg-type]
            result = pair if result is None else Binary("and", result, pair)
            left, lt = right, rt
        assert result is not None
        return result, "bool"

    def state_test(self, node: ast.expr, negated: bool) -> InStates:
        if not self.scope.allow_state:
            raise self.fail(node, "'state' cannot be used here")
        items = node.elts if isinstance(node, (ast.Tuple, ast.List, ast.Set)) else [node]
        names: list[str] = []
        for item in items:
            if not isinstance(item, ast.Name):
                raise self.fail(item, "'state in (...)' takes state names")
            if item.id not in self.scope.states:
                raise self.fail(item, f"unknown state {shown(item.id)}{did_you_mean(item.id, self.scope.states)}")
            names.append(item.id)
        if not names:
            raise self.fail(node, "'state in ()' needs at least one state")
        return InStates(tuple(names), frozenset(self.scope.states[n] for n in names), negated)


_PRECEDENCE = {"or": 1, "and": 2, "not": 3, "==": 4, "!=": 4, "<": 4, "<=": 4, ">": 4, ">=": 4,
               "+": 5, "-": 5}


def to_source(expr: Expr, parent: int = 0) -> str:
    """Canonical text of an expression, parenthesised only where needed."""
    if isinstance(expr, Lit):
        return ("true" if expr.value else "false") if isinstance(expr.value, bool) else str(expr.value)
    if isinstance(expr, Ref):
        return expr.name
    if isinstance(expr, InStates):
        text = f"state {'not in' if expr.negated else 'in'} ({', '.join(expr.states)})"
        prec = _PRECEDENCE["=="]  # a comparison: an operand of another one needs parentheses
    elif isinstance(expr, Unary):
        if expr.op == "-":
            return "-" + to_source(expr.operand, 6)
        text = "not " + to_source(expr.operand, 3)
        prec = 3
    else:
        prec = _PRECEDENCE[expr.op]
        right_prec = prec + 1  # parse() nests left: a right operand of the same level needs parentheses
        text = f"{to_source(expr.left, prec)} {expr.op} {to_source(expr.right, right_prec)}"
    return f"({text})" if prec < parent or (prec == 4 and parent == 4) else text


_BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add, "-": operator.sub, "==": operator.eq, "!=": operator.ne,
    "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
}


def constant_value(expr: Expr) -> Value | None:
    """The value of an expression with no variable, parameter or state in it, else None."""
    if isinstance(expr, Lit):
        return expr.value
    if isinstance(expr, Ref):
        return expr.value if expr.kind == "const" else None
    if _reads_env(expr):
        return None
    value: Value = compile_expr(expr)(())
    return value


def _reads_env(expr: Expr) -> bool:
    if isinstance(expr, Lit):
        return False
    if isinstance(expr, Ref):
        return expr.kind != "const"
    if isinstance(expr, InStates):
        return True
    if isinstance(expr, Unary):
        return _reads_env(expr.operand)
    return _reads_env(expr.left) or _reads_env(expr.right)


def compile_expr(expr: Expr) -> Fn:
    """Turn checked IR into a closure over an environment tuple (constants folded)."""
    if not _reads_env(expr) and not isinstance(expr, Lit | Ref):
        value = compile_expr_raw(expr)(())
        return lambda env: value
    return compile_expr_raw(expr)


def compile_expr_raw(expr: Expr) -> Fn:
    if isinstance(expr, Lit):
        lit = expr.value
        return lambda env: lit
    if isinstance(expr, Ref):
        if expr.kind == "const":
            const = expr.value
            return lambda env: const
        return operator.itemgetter(expr.slot)
    if isinstance(expr, InStates):
        members, negated = expr.indices, expr.negated
        if negated:
            return lambda env: env[0] not in members
        return lambda env: env[0] in members
    if isinstance(expr, Unary):
        inner = compile_expr(expr.operand)
        if expr.op == "not":
            return lambda env: not inner(env)
        return lambda env: -inner(env)
    if expr.op == "and":
        a, b = compile_expr(expr.left), compile_expr(expr.right)
        return lambda env: a(env) and b(env)
    if expr.op == "or":
        a, b = compile_expr(expr.left), compile_expr(expr.right)
        return lambda env: a(env) or b(env)
    fn = _BINARY[expr.op]
    left, right = expr.left, expr.right
    if isinstance(left, Ref) and left.kind != "const" and not _reads_env(right):
        slot, value = left.slot, compile_expr(right)(())
        return lambda env: fn(env[slot], value)
    a, b = compile_expr(left), compile_expr(right)
    return lambda env: fn(a(env), b(env))


def names_in(expr: Expr) -> set[str]:
    """Every variable, parameter and constant name an expression reads."""
    if isinstance(expr, Ref):
        return {expr.name}
    if isinstance(expr, Unary):
        return names_in(expr.operand)
    if isinstance(expr, Binary):
        return names_in(expr.left) | names_in(expr.right)
    return set()
