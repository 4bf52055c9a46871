"""Exploring without storing the edges (``explore(..., edges=False)``), as ``verify`` does when
no check of the table reads them (``verify.reads_edges``).

The edges are counted, not kept: the configurations, their numbering, the parents (so every
shortest path), the offsets, the stutter positions, the counts and every verdict and
counterexample of the checks that read no edge must be those of an exploration with its
edges, on the bundled tables, the wide table (batches) and random tables, in the scalar
loop and in batches. A check that does read edges fails loudly on such an exploration, and
``verify`` keeps the edges for a table that has one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest
from agentfsm.spec import Table, load_table
from agentfsm.verify.table import explore as explore_module
from agentfsm.verify.table import graph
from agentfsm.verify.table.checks import run_checks
from agentfsm.verify.table.explore import Exploration, explore
from agentfsm.verify.table.verify import EDGE_KINDS, reads_edges, verify_table
from conftest import SPEC, TABLES
from hypothesis import HealthCheck, given, settings
from strategies_tables import tables
from verify_tables import steps
from verify_tables import table as planted

WIDE = Path(__file__).parent.parent / "tables" / "wide-counters.yaml"
BUNDLED = [*TABLES, *sorted(WIDE.parent.glob("*.yaml"))]

# (LEVEL_MIN, CHECK_EVERY): the scalar loop alone, in small chunks; batches from the first
# configuration on; back and forth between them.
MODES = {"scalar": (None, 3), "batches": (0, 1), "back-and-forth": (3, 2)}


@pytest.fixture(params=list(MODES))
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    level_min, check_every = MODES[request.param]
    monkeypatch.setattr(explore_module, "LEVEL_MIN", level_min)
    monkeypatch.setattr(explore_module, "LEVEL_LOW", 0 if level_min == 0 else 2)
    monkeypatch.setattr(explore_module, "CHECK_EVERY", check_every)
    yield


def without_edge_checks(table: Table) -> Table:
    return dataclasses.replace(table, properties=tuple(p for p in table.properties if p.kind not in EDGE_KINDS))


def assert_counted_alike(counted: Exploration, kept: Exploration) -> None:
    """Everything but the edges themselves is the same, and so is every check's outcome."""
    assert not counted.kept_edges and kept.kept_edges
    assert (len(counted.edge_label), len(counted.edge_target)) == (0, 0)
    assert [counted.config(i) for i in range(counted.count)] == [kept.config(i) for i in range(kept.count)]
    for name in ("parent", "parent_label", "offsets", "stutter"):
        assert list(getattr(counted, name)) == list(getattr(kept, name)), name
    assert counted.transitions == kept.transitions == len(kept.edge_target)
    assert (counted.row_fires, counted.unhandled) == (kept.row_fires, kept.unhandled)
    assert (counted.errors, counted.error_count, counted.reached) == (kept.errors, kept.error_count, kept.reached)
    checked = [(c.kind, c.name, c.ok, c.message, c.trace) for c in run_checks(counted).checks]
    assert checked == [(c.kind, c.name, c.ok, c.message, c.trace) for c in run_checks(kept).checks]


@pytest.mark.usefixtures("mode")
@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.stem)
def test_bundled_tables_give_the_same_verdicts_without_their_edges(path: Path) -> None:
    table = without_edge_checks(load_table(path))
    assert_counted_alike(explore(table, edges=False), explore(table))


@pytest.mark.usefixtures("mode")
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(table=tables())
def test_random_tables_give_the_same_verdicts_without_their_edges(table: Table) -> None:
    table = without_edge_checks(table)
    assert_counted_alike(explore(table, edges=False), explore(table))


def test_the_wide_table_reads_no_edge_and_loom_does() -> None:
    assert not reads_edges(load_table(WIDE, {"n": 4}))
    assert reads_edges(load_table(SPEC / "loom-agent.yaml"))


DEADLOCK = """
states: {Idle: {initial: true}, Busy: {}, Stuck: {}, Done: {final: true}}
variables: {n: {type: int, min: 0, max: 3, init: 0}}
events: {go: {}, tick: {}, stop: {}}
transitions:
  - {from: Idle, on: go, to: Busy}
  - {from: Busy, on: tick, when: n < 3, to: Busy, set: {n: n + 1}}
  - {from: Busy, on: tick, when: n == 3, to: Stuck}
  - {from: Busy, on: stop, when: n < 2, to: Done}
unhandled: {policy: ignore}
"""


def test_a_deadlock_counterexample_is_rebuilt_from_the_parents_alone() -> None:
    """The shortest path to a dead end (through stutter edges under ``ignore``) needs no edge."""
    table = planted(DEADLOCK)
    verdict, _ = verify_table(table)
    assert not verdict.exploration.kept_edges
    [deadlock] = [c for c in verdict.checks if c.kind == "deadlock"]
    assert not deadlock.ok
    assert steps(deadlock) == ["go", "tick", "tick", "tick", "tick"]


LASSO = DEADLOCK.replace("  - {from: Busy, on: tick, when: n == 3, to: Stuck}\n",
                         "  - {from: Busy, on: tick, when: n == 3, to: Idle, set: {n: 0}}\n") + \
    "properties:\n  - {name: ticks-end, no-cycle-within: {events: [go, tick]}}\n"


def test_verify_keeps_the_edges_a_check_walks_and_its_lasso_is_the_same() -> None:
    table = planted(LASSO)
    verdict, _ = verify_table(table)
    assert verdict.exploration.kept_edges
    [cycle] = [c for c in verdict.checks if c.kind == "no-cycle-within"]
    assert not cycle.ok and steps(cycle) == ["go", "tick", "tick", "tick", "tick"]
    assert [(c.kind, c.ok, c.message, c.trace) for c in run_checks(explore(table)).checks] == \
        [(c.kind, c.ok, c.message, c.trace) for c in verdict.checks]


@pytest.mark.parametrize("walk", [lambda ex: graph.csr(ex), lambda ex: list(ex.edges(0))], ids=["csr", "edges"])
def test_reading_edges_that_were_not_kept_is_a_clear_error(walk: object) -> None:
    ex = explore(planted(LASSO), edges=False)
    with pytest.raises(ValueError, match="explored without its edges"):
        walk(ex)  # type: ignore[operator]
