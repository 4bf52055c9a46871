"""Run conformance vectors inside a Python implementation's own pytest suite.

One test per vector, named by its id, failing with the step-by-step trace::

    from agentfsm.verify.pytest_plugin import conformance_vectors, assert_conforms

    @conformance_vectors("path/to/loom-agent.yaml")
    def test_loom_conformance(table, vector):
        assert_conforms(table, vector, MyAgentAdapter())   # a callable: request dict -> reply dict

The implementation is either a callable from request to reply dicts (the adapter
protocol without the pipes, in the same process) or a command line for an adapter
process (``adapter="node dist/adapter.js"``). Vectors come from a file (``vectors=``) or are
generated from the table when the tests are collected.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import pytest
from agentfsm.spec import Table, load_table
from agentfsm.spec.vectorfile import Vector, read_vectors
from agentfsm.verify.conformance.conform import Runner, format_trace
from agentfsm.verify.conformance.harness import FunctionTransport, Message, ProcessTransport, Transport, split_command
from agentfsm.verify.conformance.vectors import SETS, generate

F = TypeVar("F", bound=Callable[..., Any])
Implementation = Callable[[Message], Message] | str | Sequence[str]


def load_vectors(table: Table, vectors: str | Path | None = None, sets: Sequence[str] = SETS) -> list[Vector]:
    if vectors is None:
        return generate(table, sets)[1]
    return read_vectors(vectors)[1]


def conformance_vectors(table: str | Path | Table, vectors: str | Path | None = None,
                        sets: Sequence[str] = SETS) -> Callable[[F], F]:
    """Parametrize a test over every vector: it receives ``table`` and ``vector``."""
    loaded = table if isinstance(table, Table) else load_table(table)
    cases = [pytest.param(loaded, v, id=v.id) for v in load_vectors(loaded, vectors, sets)]
    mark: Callable[[F], F] = pytest.mark.parametrize(("table", "vector"), cases)
    return mark


def _transport(implementation: Implementation, timeout: float) -> Transport:
    if callable(implementation):
        return FunctionTransport(implementation)
    argv = split_command(implementation) if isinstance(implementation, str) else list(implementation)
    return ProcessTransport(argv, timeout)


def assert_conforms(table: Table, vector: Vector, implementation: Implementation, timeout: float = 5.0) -> None:
    """Run one vector from a reset; on any difference fail with the step-by-step trace."""
    runner = Runner(table, lambda: _transport(implementation, timeout))
    [result] = runner.run([vector]).results
    if result.status != "pass":
        pytest.fail(f"{result.status}: {result.message}\n{format_trace(result)}", pytrace=False)
