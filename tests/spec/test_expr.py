"""The expression language: compiled closures mean what a plain interpreter says they mean.

Random typed IR trees are compiled with ``compile_expr`` and evaluated against a small
interpreter written here independently; ``to_source`` must print text that ``parse``
reads back into the same tree.
"""

from __future__ import annotations

from typing import Any

import pytest
from agentfsm.spec.expr import (
    Binary,
    Expr,
    ExprError,
    InStates,
    Lit,
    Ref,
    Scope,
    Symbol,
    Type,
    Unary,
    compile_expr,
    parse,
    to_source,
)
from hypothesis import given, settings
from hypothesis import strategies as st

STATES = {"Idle": 0, "Busy": 1, "Done": 2}
SYMBOLS = {
    "x": Symbol("var", "int", slot=1), "y": Symbol("var", "int", slot=2),
    "b": Symbol("var", "bool", slot=3), "c": Symbol("param", "bool", slot=4),
    "p": Symbol("param", "int", slot=5), "K": Symbol("const", "int", value=4),
    "F": Symbol("const", "bool", value=False),
}
SCOPE = Scope(SYMBOLS, STATES)


def refs(typ: Type) -> st.SearchStrategy[Expr]:
    names = [name for name, s in SYMBOLS.items() if s.type == typ]
    return st.sampled_from([Ref(n, SYMBOLS[n].kind, typ, SYMBOLS[n].slot, SYMBOLS[n].value) for n in names])


def in_states() -> st.SearchStrategy[Expr]:
    return st.builds(lambda names, neg: InStates(tuple(names), frozenset(STATES[n] for n in names), neg),
                     st.lists(st.sampled_from(sorted(STATES)), min_size=1, max_size=3), st.booleans())


@st.composite
def trees(draw: st.DrawFn, typ: Type, depth: int = 4) -> Expr:
    """A well-typed expression in the shape ``parse`` produces (literals folded, chains nested left)."""
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        if typ == "int":
            leaf: Expr = draw(st.one_of(st.builds(Lit, st.integers(-20, 20)), refs("int")))
        else:
            leaf = draw(st.one_of(st.builds(Lit, st.booleans()), refs("bool"), in_states()))
        return leaf
    if typ == "int":
        kind = draw(st.sampled_from(["+", "-", "neg"]))
        if kind == "neg":
            operand = draw(trees("int", depth - 1))
            if isinstance(operand, (Lit, Unary)):  # parse() folds -literal; keep the shape it produces
                return Binary("-", Lit(0), operand)
            return Unary("-", operand)
        return Binary(kind, draw(trees("int", depth - 1)), draw(trees("int", depth - 1)))  # type: ignore[arg-type]
    kind = draw(st.sampled_from(["and", "or", "not", "==", "!=", "<", "<=", ">", ">=", "beq"]))
    if kind == "not":
        return Unary("not", draw(trees("bool", depth - 1)))
    if kind in ("and", "or", "beq"):
        op = "==" if kind == "beq" else kind
        return Binary(op, draw(trees("bool", depth - 1)), draw(trees("bool", depth - 1)))  # type: ignore[arg-type]
    return Binary(kind, draw(trees("int", depth - 1)), draw(trees("int", depth - 1)))  # type: ignore[arg-type]


def interpret(e: Expr, env: tuple[Any, ...]) -> Any:
    """The meaning of an expression, written plainly and independently of ``compile_expr``."""
    if isinstance(e, Lit):
        return e.value
    if isinstance(e, Ref):
        return e.value if e.kind == "const" else env[e.slot]
    if isinstance(e, InStates):
        return (env[0] in e.indices) != e.negated
    if isinstance(e, Unary):
        value = interpret(e.operand, env)
        return (not value) if e.op == "not" else -value
    left, right = interpret(e.left, env), interpret(e.right, env)
    match e.op:
        case "+":
            return left + right
        case "-":
            return left - right
        case "==":
            return left == right
        case "!=":
            return left != right
        case "<":
            return left < right
        case "<=":
            return left <= right
        case ">":
            return left > right
        case ">=":
            return left >= right
        case "and":
            return left and right
        case "or":
            return left or right


envs = st.tuples(st.sampled_from(list(STATES.values())), st.integers(-9, 9), st.integers(-9, 9),
                 st.booleans(), st.booleans(), st.integers(-9, 9))
any_tree = st.sampled_from(["int", "bool"]).flatmap(lambda t: trees(t))  # type: ignore[arg-type]


@settings(max_examples=200, deadline=None)
@given(any_tree, envs)
def test_compiled_closures_agree_with_the_interpreter(tree: Expr, env: tuple[Any, ...]) -> None:
    got, want = compile_expr(tree)(env), interpret(tree, env)
    assert got == want and type(got) is type(want)


@settings(max_examples=200, deadline=None)
@given(any_tree)
def test_to_source_round_trips(tree: Expr) -> None:
    text = to_source(tree)
    parsed, typ = parse(text, SCOPE)
    assert parsed == tree, text
    assert typ == ("bool" if isinstance(interpret(tree, (0, 1, 2, True, False, 3)), bool) else "int")


@pytest.mark.parametrize(("text", "col", "message"), [
    ("x +", 3, "invalid expression: invalid syntax"),
    ("  x > zz", 6, "unknown name 'zz'"),
    ("x > Idle", 4, "state 'Idle' may only appear in 'state in (...)'"),
    ("state == Idle", 0, "'state' may only be used as 'state in (A, B)'"),
    ("state in (Idle, Nope)", 16, "unknown state 'Nope'"),
    ("state in ()", 9, "'state in ()' needs at least one state"),
    ("state in (1)", 10, "'state in (...)' takes state names"),
    ("x in (1, 2)", 0, "comparison 'in' not allowed: use == != < <= > >= (or 'state in (...)')"),
    ("x is 1", 0, "comparison 'is' not allowed: use == != < <= > >= (or 'state in (...)')"),
    ("not x", 4, "'not' needs bool operands, found int"),
    ("-b", 1, "unary '-' needs int operands, found bool"),
    ("b and x", 6, "'and' needs bool operands, found int"),
    ("x == b", 5, "cannot compare int with bool"),
    ("x // 2", 0, "operator '//' not allowed: integers have only '+' and '-'"),
    ("~x", 0, "operator '~' not allowed: the unary operators are 'not' and '-'; for a boolean 'not' write 'not'"),
    ("x = 1", 2, "write '==' to compare, not '=' (a row changes variables with 'set:')"),
    ("b && x > 0", 2, "write 'and', not '&&'"),
    ("b || x > 0", 2, "write 'or', not '||'"),
    ("!b", 0, "write 'not', not '!'"),
    ("b & b", 0, "operator '&' not allowed: integers have only '+' and '-'; for a boolean 'and' write 'and'"),
    ("x > 0 and bb", 10, "unknown name 'bb'; did you mean 'b'?"),
    ("'s' == 's'", 0, "unsupported literal 's': only integers and true/false"),
    ("1.5 > x", 0, "unsupported literal 1.5: only integers and true/false"),
    ("x if b else y", 0, "conditional expression not allowed: expressions have names, integers, true/false, "
                         "+ -, comparisons, and/or/not and 'state in (...)'"),
    ("x > 0 and é", 10, "character 'é' is not allowed in an expression (names, digits, operators and "
                        "parentheses are ASCII)"),
    ("", 0, "empty expression"),
    ("x" * 2001, 0, "expression longer than 2000 characters"),
    ("x + " * 150 + "x", 0, "expression too large (603 nodes, at most 400)"),
    ("not " * 60 + "b", 164, "expression nested deeper than 40 levels"),
    ("(" * 250 + "x" + ")" * 250, 200, "invalid expression: too many nested parentheses"),
])
def test_parse_errors(text: str, col: int, message: str) -> None:
    with pytest.raises(ExprError) as caught:
        parse(text, SCOPE)
    assert (caught.value.col, caught.value.message) == (col, message)


def test_constants_and_chains() -> None:
    tree, typ = parse("0 <= x < K and not F", SCOPE, "bool")
    assert typ == "bool"
    fn = compile_expr(tree)
    assert [fn((0, v, 0, False, False, 0)) for v in (-1, 0, 3, 4)] == [False, True, True, False]
    with pytest.raises(ExprError, match="expected an int expression, found bool"):
        parse("b", SCOPE, "int")
