"""The kit measures itself: mutants of a table, run as implementations against its vectors.

Each mutant is one small edit a real implementation could get wrong: a row dropped, a
row's target moved, a guard negated, a comparison bound off by one, an emitted action
swapped for another or dropped, a row's actions in another order, an update dropped or changed, the unhandled policy
flipped or its action dropped. Edits are made on the table's plain data and the result
goes through the ordinary loader (so a mutant is a real table file, servable by
``agentfsm adapter``); expressions are edited as IR and printed back with ``to_source``.

A mutant is *killed* when some vector fails against it. Every mutant is first checked
for observational equivalence by a product exploration of original and mutant from
their initial configurations: if no reachable pair answers any event differently
(accepted, state, actions, vars), no test could tell them apart and it is *equivalent*
(its vectors are not run: none could fail). A mutant neither equivalent nor killed
*survived*, and the vectors have a gap.

With ``vars=False`` every mutant plays an implementation that hides its variables (as
most do: the protocol makes ``vars`` optional): its replies lose ``vars``, and the
product exploration compares only accepted, state and actions. A counter bug must then
show in what the implementation does later, which is what distinguishing suffixes test.
"""

from __future__ import annotations

import copy
import itertools
import json
import sys
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Literal

from agentfsm.impl.adapter import Adapter
from agentfsm.spec import Table, TableError
from agentfsm.spec.build import compile_document
from agentfsm.spec.expr import Binary, Expr, Lit, Ref, Unary, Value, to_source
from agentfsm.spec.semantics import SemanticError, StepResult, step
from agentfsm.spec.vectorfile import Label, Vector, describe_config, describe_label
from agentfsm.spec.yamlio import Document, load_document
from agentfsm.verify.conformance.conform import Runner, format_observed
from agentfsm.verify.conformance.harness import FunctionTransport, ProcessTransport, Transport, WithoutVars
from agentfsm.verify.table.explore import labels_of
from agentfsm.verify.table.graph import path_back

Verdict = Literal["killed", "equivalent", "survived", "invalid"]
_ORDER = ("<", "<=", ">", ">=", "==", "!=")
# Starts an implementation of a (mutant) table, given compiled and as plain data.
Connect = Callable[[Table, dict[str, Any]], Transport]


@dataclass(frozen=True)
class Mutant:
    name: str
    data: dict[str, Any]


@dataclass(frozen=True)
class MutantResult:
    name: str
    verdict: Verdict
    detail: str = ""


def mutants(table: Table, data: dict[str, Any]) -> Iterator[Mutant]:
    """Every mutant of the table, in a fixed order; ``data`` is the table file's plain data."""
    states = [s.name for s in table.states]
    actions = [a.name for a in table.actions]
    for row in table.rows:
        at, where = row.index - 1, f"row {row.index}"
        yield _edit(data, f"{where}: dropped", partial(_drop_row, at=at))
        for state in states:
            if state != row.target:
                yield _edit(data, f"{where}: target {row.target} -> {state}", partial(_put, at=at, key="to",
                                                                                   value=state))
        if row.guard is not None:
            yield _edit(data, f"{where}: guard negated", partial(_put, at=at, key="when",
                                                                 value=f"not ({row.guard_text})"))
            for k, mutated in enumerate(off_by_one(row.guard), start=1):
                text = to_source(mutated)
                yield _edit(data, f"{where}: bound off by one #{k}: {text}", partial(_put, at=at, key="when",
                                                                                  value=text))
        for j, action in enumerate(row.emit):
            other = actions[(actions.index(action) + 1) % len(actions)]
            yield _edit(data, f"{where}: action {action} -> {other}", partial(_emit, at=at, j=j, action=other))
            yield _edit(data, f"{where}: action {action} dropped", partial(_emit, at=at, j=j, action=None))
        for order in reorderings(row.emit):
            yield _edit(data, f"{where}: actions in another order: {', '.join(order)}",
                        partial(_reorder, at=at, order=order))
        for update in row.updates:
            yield _edit(data, f"{where}: update of {update.var} dropped",
                        partial(_update, at=at, var=update.var, text=None))
            for text in changed(update.expr):
                yield _edit(data, f"{where}: update {update.var} = {text}",
                            partial(_update, at=at, var=update.var, text=text))
    policy = table.unhandled.policy
    flipped = "ignore" if policy == "reject" else "reject"
    yield _edit(data, f"unhandled: policy {policy} -> {flipped}", partial(_policy, policy=flipped))
    for j, action in enumerate(table.unhandled.emit):
        yield _edit(data, f"unhandled: action {action} dropped", partial(_unhandled_drop, j=j))


def _edit(data: dict[str, Any], name: str, change: Callable[[dict[str, Any]], None]) -> Mutant:
    mutated = copy.deepcopy(data)
    change(mutated)
    return Mutant(name, mutated)


def _drop_row(data: dict[str, Any], at: int) -> None:
    del data["transitions"][at]


def _put(data: dict[str, Any], at: int, key: str, value: str) -> None:
    data["transitions"][at][key] = value


def _emit(data: dict[str, Any], at: int, j: int, action: str | None) -> None:
    emit = data["transitions"][at]["emit"]
    if action is None:
        del emit[j]
    else:
        emit[j] = action


def reorderings(emit: Sequence[str], limit: int = 24) -> list[tuple[str, ...]]:
    """Every other order of a row's actions (the first ``limit`` for a long list), each once."""
    original = tuple(emit)
    orders = dict.fromkeys(itertools.islice(itertools.permutations(original), limit + 1))
    orders.pop(original, None)
    return list(orders)[:limit]


def _reorder(data: dict[str, Any], at: int, order: tuple[str, ...]) -> None:
    data["transitions"][at]["emit"] = list(order)


def _update(data: dict[str, Any], at: int, var: str, text: str | None) -> None:
    updates = data["transitions"][at]["set"]
    if text is None:
        del updates[var]
    else:
        updates[var] = text


def _policy(data: dict[str, Any], policy: str) -> None:
    data.setdefault("unhandled", {})["policy"] = policy


def _unhandled_drop(data: dict[str, Any], j: int) -> None:
    del data["unhandled"]["emit"][j]


def _is_int(expr: Expr) -> bool:
    if isinstance(expr, Lit):
        return not isinstance(expr.value, bool)
    if isinstance(expr, Ref):
        return expr.type == "int"
    if isinstance(expr, Unary):
        return expr.op == "-"
    return isinstance(expr, Binary) and expr.op in ("+", "-")


def off_by_one(expr: Expr) -> Iterator[Expr]:
    """The expression with one integer comparison's right-hand bound moved by +1 or -1."""
    if isinstance(expr, Unary):
        for inner in off_by_one(expr.operand):
            yield Unary(expr.op, inner)
    if not isinstance(expr, Binary):
        return
    if expr.op in _ORDER and _is_int(expr.right):
        yield Binary(expr.op, expr.left, Binary("+", expr.right, Lit(1)))
        yield Binary(expr.op, expr.left, Binary("-", expr.right, Lit(1)))
        return
    for left in off_by_one(expr.left):
        yield Binary(expr.op, left, expr.right)
    for right in off_by_one(expr.right):
        yield Binary(expr.op, expr.left, right)


def changed(expr: Expr) -> list[str]:
    """Replacements for an update's right side: one more and one less, or the negation."""
    if _is_int(expr):
        return [to_source(Binary("+", expr, Lit(1))), to_source(Binary("-", expr, Lit(1)))]
    return [to_source(Unary("not", expr))]


def load_mutant(table: Table, source: Document, mutant: Mutant) -> Table | None:
    """The mutant through the table compiler's checks; None if it is not a valid table.

    Parsing and the schema check are skipped (they cost nine tenths of the time for
    hundreds of mutants): the data reuses the original's marks, and every edit keeps the
    shape the schema asks for (names stay names, expressions stay strings).
    """
    doc = Document(mutant.data, source.marks, source.key_marks)
    try:
        return compile_document(doc, f"{table.file} [{mutant.name}]", table.constants)
    except TableError:
        return None


def table_source(table: Table) -> Document:
    return load_document(Path(table.file).read_bytes(), table.file)


Observation = tuple[bool, str, tuple[str, ...], tuple[Value, ...] | None] | str


def _observe(table: Table, state: int, values: tuple[Value, ...], label: Label, with_vars: bool = True,
             ) -> tuple[Observation, StepResult | None]:
    try:
        result = step(table, state, values, *label)
    except SemanticError as exc:
        return f"{exc.kind} error: {exc.message}", None
    shown = result.vars if with_vars else None
    return (result.accepted, table.states[result.state].name, result.actions, shown), result


def _show(table: Table, seen: Observation) -> str:
    if isinstance(seen, str):
        return seen
    accepted, state, actions, values = seen
    return format_observed(accepted, state, actions, None if values is None else table.vars_dict(values))


Pair = tuple[tuple[int, tuple[Value, ...]], tuple[int, tuple[Value, ...]]]


def difference(original: Table, mutant: Table, with_vars: bool = True) -> str:
    """How the two tables can be told apart from outside ("" if they cannot): a product exploration.

    Without vars only accepted, state and actions are compared, and the difference names
    the whole event sequence that shows it (it may lie several steps past the fault).
    """
    start = ((original.initial.index, original.initial_vars()), (mutant.initial.index, mutant.initial_vars()))
    if original.initial.name != mutant.initial.name:
        return "different initial state"
    labels = labels_of(original)
    parent: dict[Pair, tuple[Pair, Label] | None] = {start: None}
    queue = deque([start])
    while queue:
        pair = queue.popleft()
        (s1, v1), (s2, v2) = pair
        for label in labels:
            seen_one, r1 = _observe(original, s1, v1, label, with_vars)
            seen_two, r2 = _observe(mutant, s2, v2, label, with_vars)
            if seen_one != seen_two:
                path = path_back(parent, pair)
                after = f" after {', '.join(describe_label(original, x) for x in path)}" if path else ""
                return (f"{describe_label(original, label)} in {describe_config(original, s1, v1)}{after}: "
                        f"table {_show(original, seen_one)}; mutant {_show(mutant, seen_two)}")
            if r1 is not None and r2 is not None:
                nxt = ((r1.state, r1.vars), (r2.state, r2.vars))
                if nxt not in parent:
                    parent[nxt] = (pair, label)
                    queue.append(nxt)
    return ""



def judge(table: Table, source: Document, mutant: Mutant, vectors: Sequence[Vector],
          connect: Connect, with_vars: bool = True) -> MutantResult:
    compiled = load_mutant(table, source, mutant)
    if compiled is None:
        return MutantResult(mutant.name, "invalid", "the loader rejects it")

    def start() -> Transport:
        transport = connect(compiled, mutant.data)
        return transport if with_vars else WithoutVars(transport)

    # Equivalence first: it is cheap, and no vector can fail against an equivalent mutant.
    diff = difference(table, compiled, with_vars)
    if not diff:
        return MutantResult(mutant.name, "equivalent")
    failing = Runner(table, start).first_failure(vectors)
    if failing is not None:
        return MutantResult(mutant.name, "killed", failing.vector.id)
    return MutantResult(mutant.name, "survived", diff)


def reference(table: Table, data: dict[str, Any]) -> Transport:
    """The reference adapter (the runtime's engine) on ``table``, in this process."""
    adapter = Adapter(table)
    return FunctionTransport(lambda request: adapter.handle(json.dumps(request))[0])


def reference_process(workdir: Path, timeout: float) -> Connect:
    """``agentfsm adapter FILE`` as a real process, the mutant written to ``workdir`` (JSON is YAML 1.2)."""
    def connect(table: Table, data: dict[str, Any]) -> Transport:
        path = workdir / "mutant.yaml"
        path.write_text(json.dumps(data))
        # Run from workdir: ``-m`` puts the current directory first on sys.path.
        return ProcessTransport([sys.executable, "-m", "agentfsm.cli", "adapter", str(path)], timeout,
                                cwd=str(workdir))
    return connect


def run_mutants(table: Table, vectors: Sequence[Vector], connect: Connect = reference,
                progress: Callable[[int], None] | None = None, with_vars: bool = True) -> list[MutantResult]:
    """Judge every mutant; ``with_vars=False`` hides the variables of every mutant's replies."""
    results = []
    source = table_source(table)
    for done, mutant in enumerate(mutants(table, source.data), start=1):
        results.append(judge(table, source, mutant, vectors, connect, with_vars))
        if progress is not None:
            progress(done)
    return results


def summary(results: Sequence[MutantResult], with_vars: bool = True) -> dict[str, Any]:
    """The ``--json`` object: counts, the survivors, the score (killed / non-equivalent), and whether vars were seen."""
    count = {v: sum(1 for r in results if r.verdict == v) for v in ("killed", "equivalent", "survived", "invalid")}
    valid = len(results) - count["invalid"]
    judged = valid - count["equivalent"]
    return {"mutants": valid, "killed": count["killed"], "equivalent": count["equivalent"],
            "survived": count["survived"],
            "survivors": [{"mutant": r.name, "difference": r.detail} for r in results if r.verdict == "survived"],
            "invalid": count["invalid"], "score": round(count["killed"] / judged, 4) if judged else 1.0,
            "vars": with_vars}
