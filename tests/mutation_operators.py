"""The mutants of one Python module: small AST edits a test suite that checks the code must notice.

Pure: source text in, mutants out (each the whole mutated source, and a name that stays the same
when unrelated lines move, so that a published list of killed mutants can be compared run to
run). The operators are the classic ones: comparison flips, ``and``/``or`` swapped, integer
constants moved by one, conditions negated, statements and return values removed, the first
two positional arguments of a call swapped. Docstrings and annotations are never touched.
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass

_FLIPS: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is,
}


@dataclass(frozen=True)
class Mutant:
    """One mutated version of a module; ``key`` names it by function, operator and code, not line."""

    module: str
    key: str
    line: int
    source: str


# An edit changes its node in place (undone after the mutant is written out), or returns a
# node to put in its place.
Edit = Callable[[ast.AST], ast.AST | None]


def _snippet(node: ast.AST) -> str:
    """Short text of a mutated node; an ``if`` or ``while`` by its header alone, so that its key
    does not change with its body."""
    if isinstance(node, (ast.If, ast.While)):
        text = f"{'if' if isinstance(node, ast.If) else 'while'} {ast.unparse(node.test)}:"
    else:
        text = ast.unparse(node).replace("\n", " ")
    return text if len(text) <= 60 else text[:57] + "..."


def _edits(node: ast.AST, parent: ast.AST | None) -> Iterator[tuple[str, Edit]]:
    """Every mutation operator that applies to ``node``, as (operator name, edit)."""
    if isinstance(node, ast.Compare):
        for i, op in enumerate(node.ops):
            if type(op) in _FLIPS:
                yield "compare", _flip(i)
    if isinstance(node, ast.BoolOp):
        yield "boolop", _swap_boolop
    if (isinstance(node, ast.Constant) and type(node.value) is int
            and not (isinstance(parent, ast.UnaryOp) and isinstance(parent.op, ast.USub))):
        yield "const+1", _shift(1)
        yield "const-1", _shift(-1)
    if isinstance(node, (ast.If, ast.While, ast.IfExp, ast.Assert)):
        yield "negate", _negate
    if isinstance(node, ast.comprehension) and node.ifs:
        yield "negate", _negate_comprehension
    if isinstance(node, (ast.Expr, ast.AugAssign, ast.Raise, ast.Continue, ast.Break)) and not _is_docstring(node):
        yield "remove", lambda n: ast.Pass()
    if isinstance(node, ast.Return) and node.value is not None and not _returns_none(node):
        yield "return-none", _return_none
    if isinstance(node, ast.Call) and len(node.args) >= 2 and not any(isinstance(a, ast.Starred)
                                                                      for a in node.args[:2]):
        yield "swap-args", _swap_args


def _flip(i: int) -> Edit:
    def edit(node: ast.AST) -> None:
        assert isinstance(node, ast.Compare)
        node.ops[i] = _FLIPS[type(node.ops[i])]()
    return edit


def _swap_boolop(node: ast.AST) -> None:
    assert isinstance(node, ast.BoolOp)
    node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()


def _shift(delta: int) -> Edit:
    def edit(node: ast.AST) -> None:
        assert isinstance(node, ast.Constant) and isinstance(node.value, int)
        node.value = node.value + delta
    return edit


def _negate(node: ast.AST) -> None:
    assert isinstance(node, (ast.If, ast.While, ast.IfExp, ast.Assert))
    node.test = ast.UnaryOp(op=ast.Not(), operand=node.test)


def _negate_comprehension(node: ast.AST) -> None:
    assert isinstance(node, ast.comprehension)
    node.ifs[0] = ast.UnaryOp(op=ast.Not(), operand=node.ifs[0])


def _return_none(node: ast.AST) -> None:
    assert isinstance(node, ast.Return)
    node.value = ast.Constant(value=None)


def _swap_args(node: ast.AST) -> None:
    assert isinstance(node, ast.Call)
    node.args[0], node.args[1] = node.args[1], node.args[0]


def _is_docstring(node: ast.AST) -> bool:
    """A docstring, or ``...`` as a stub's body: removing either changes nothing."""
    return (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
            and (isinstance(node.value.value, str) or node.value.value is Ellipsis))


def _returns_none(node: ast.Return) -> bool:
    return isinstance(node.value, ast.Constant) and node.value.value is None


def _walk(node: ast.AST, scope: str, parent: ast.AST | None) -> Iterator[tuple[ast.AST, ast.AST | None, str]]:
    """Every node with its parent and the qualified name of its function or class; annotations,
    decorators and ``if TYPE_CHECKING`` blocks are skipped (mutating them changes nothing at run time)."""
    yield node, parent, scope
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        scope = f"{scope}.{node.name}" if scope else node.name
    for field, value in ast.iter_fields(node):
        if field in ("annotation", "returns", "decorator_list", "type_comment"):
            continue
        children = value if isinstance(value, list) else [value]
        for child in children:
            if isinstance(child, ast.AST) and not _is_type_checking(child):
                yield from _walk(child, scope, node)


def _is_type_checking(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING"


def mutants(module: str, source: str) -> list[Mutant]:
    """Every mutant of ``source`` (the text of ``module``, a path relative to the repository).

    A mutant's key is ``module:scope:operator:before -> after``, with ``#n`` added when the
    same edit occurs more than once in one scope, so keys survive edits elsewhere in the file.
    """
    tree = ast.parse(source)
    found: list[Mutant] = []
    seen: Counter[str] = Counter()
    for node, parent, scope in list(_walk(tree, "", None)):
        for operator, edit in _edits(node, parent):
            node_fields, parent_fields = _fields(node), _fields(parent)
            before = _snippet(node)
            replacement = edit(node)
            if replacement is not None:
                _replace(parent, node, replacement)
            after = _snippet(replacement or node)
            text = ast.unparse(ast.fix_missing_locations(tree))
            _restore(node, node_fields)
            _restore(parent, parent_fields)
            base = f"{module}:{scope or '<module>'}:{operator}:{before} -> {after}"
            seen[base] += 1
            key = base if seen[base] == 1 else f"{base}#{seen[base]}"
            found.append(Mutant(module, key, getattr(node, "lineno", 0), text))
    return found


def _fields(node: ast.AST | None) -> dict[str, object]:
    """A node's fields, lists copied, so that an edit of the node can be undone."""
    return {} if node is None else {k: list(v) if isinstance(v, list) else v for k, v in vars(node).items()}


def _restore(node: ast.AST | None, fields: dict[str, object]) -> None:
    if node is not None:
        vars(node).clear()
        vars(node).update(fields)


def _replace(parent: ast.AST | None, old: ast.AST, new: ast.AST) -> None:
    assert parent is not None
    for field, value in ast.iter_fields(parent):
        if isinstance(value, list):
            for i, item in enumerate(value):
                if item is old:
                    value[i] = new
                    return
        elif value is old:
            setattr(parent, field, new)
            return
    raise ValueError("node not found under its parent")
