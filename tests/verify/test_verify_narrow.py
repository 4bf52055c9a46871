"""The faster paths of the narrow series (docs/verifier.md, "Narrow") against the paths they replace.

Each must give the same result as before, not merely an equivalent one: the state memo
(``state_memo``: every edge of a configuration at one lookup) the same configurations,
numbering, edges, tallies, errors and verdicts as the per-label loop alone; the liveness
passes over a region's own graph (``regions``) the same avoiders, ends and fair components
(up to their ids, which are only compared with each other) as the whole-graph passes they
replace, written out below as they were; ``graph.can_reach`` with its reversed graph kept the
same marks as a search of the graph as explored. On the bundled tables, the Loom table grown,
and hypothesis-generated tables (weak and strong fairness, the ``ignore`` policy's stutter
edges, step errors).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import deque
from dataclasses import replace
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from agentfsm.spec import Table, load_table
from agentfsm.verify.table import columns, graph, liveness, regions, state_memo
from agentfsm.verify.table import explore as explore_module
from agentfsm.verify.table.checks import run_checks
from agentfsm.verify.table.explore import Exploration, explore
from conftest import TABLES
from hypothesis import given, settings
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import breadth_first_order, connected_components
from test_verify_differential import tables
from test_verify_oracle import tables_with_properties
from verify_tables import assert_same_exploration
from verify_tables import table as planted

ROOT = Path(__file__).parent.parent.parent
LOOM = ROOT / "spec" / "loom-agent.yaml"
WIDE = Path(__file__).parent.parent / "tables" / "wide-counters.yaml"
Bools = npt.NDArray[np.bool_]
Ints = npt.NDArray[np.int64]


def per_label(table: Table, monkeypatch: pytest.MonkeyPatch) -> Exploration:
    """The exploration without state memos: the per-label loop alone, as before them."""
    with monkeypatch.context() as patch:
        patch.setattr(explore_module, "state_memo", lambda plans, packing: None)
        return explore(table)


def grown(retries: int) -> Table:
    return load_table(LOOM, {"max_retries": retries, "max_tools": 2})


@pytest.mark.parametrize("path", [*TABLES, WIDE], ids=lambda p: p.stem)
def test_state_memo_on_bundled_tables(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table = load_table(path, {"n": 3} if path == WIDE else None)
    assert_same_exploration(explore(table), per_label(table, monkeypatch))


@pytest.mark.parametrize("retries", [1, 7, 40])
def test_state_memo_on_loom_grown(retries: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The retry counter keyed by interval, the interval tables of a state's plans merged."""
    assert_same_exploration(explore(grown(retries)), per_label(grown(retries), monkeypatch))


def test_state_memo_merges_the_intervals_of_its_plans() -> None:
    """Two plans folding one counter at different breakpoints: the state's key tells apart
    every pair of values either plan tells apart, and no other pair."""
    table = planted("""
variables: {n: {type: int, min: 0, max: 30, init: 0}}
states: {A: {initial: true}, Done: {final: true}}
events: {up: {}, down: {}, stop: {}}
transitions:
  - {from: A, on: up, when: n < 20, to: A, set: {n: n + 1}}
  - {from: A, on: down, when: n > 5, to: A, set: {n: n - 2}}
  - {from: A, on: stop, to: Done}
""")
    ex = explore(table)
    plans, _ = explore_module._plans(table, ex.labels, ex.packing)
    memo = state_memo.state_memo([(p.rmask, p.fold) for p in plans[0]], ex.packing)
    assert memo is not None
    folds = [p.fold for p in plans[0] if p.fold is not None]
    assert len(folds) == 2 and folds[0].classes != folds[1].classes
    values = range(31)
    for a in values:
        for b in values:
            apart = any(f.classes[a] != f.classes[b] for f in folds)
            assert (memo.classes[a] != memo.classes[b]) == apart, (a, b)


def test_state_memo_steps_aside_where_the_memo_would_not_merge(monkeypatch: pytest.MonkeyPatch) -> None:
    """Counters read by value (every value its own key): the state memo is used at first, then,
    as the plans' memos fill and they evaluate directly, gives way; the tallies stay the loop's."""
    table = planted("""
variables: {n: {type: int, min: 0, max: 6000, init: 0}, m: {type: int, min: 0, max: 3, init: 0}}
states: {A: {initial: true}, Done: {final: true}}
events: {up: {}, other: {}, stop: {}}
transitions:
  - {from: A, on: up, when: n < m + 5997, to: A, set: {n: n + 1}}
  - {from: A, on: other, when: m < 3, to: A, set: {m: m + 1}}
  - {from: A, on: stop, when: n == m + 5, to: Done}
""")
    ex = explore(table)
    plans, _ = explore_module._plans(table, ex.labels, ex.packing)
    assert state_memo.state_memo([(p.rmask, p.fold) for p in plans[0]], ex.packing) is not None
    assert ex.count > 2 * explore_module.MEMO_LIMIT
    assert_same_exploration(ex, per_label(table, monkeypatch))


@settings(max_examples=60, deadline=None)
@given(table=tables())
def test_state_memo_on_random_tables(table: Table) -> None:
    with pytest.MonkeyPatch.context() as patch:
        expected = per_label(table, patch)
    assert_same_exploration(explore(table), expected)


def _matrix(n: int, sources: Ints, targets: Ints) -> csr_matrix:
    return csr_matrix((np.ones(len(sources)), (sources, targets)), shape=(n, n))


def whole_graph_fair_components(ex: Exploration, region: Bools) -> Ints:
    """The fair components of ``region`` as ``liveness`` found them before regions: every pass over
    the whole progress graph."""
    n, g = ex.count, liveness.progress(ex)
    fairness = [(ex.table.events.index(ex.table.event(name)), kind) for name, kind in ex.table.fairness.items()]
    enabled_by = {e: liveness.enabled(ex, e) for e, _ in fairness}
    alive = region.copy()
    fair = np.full(n, -1, dtype=np.int64)
    next_id = 0
    while alive.any():
        inside = alive[g.sources] & alive[g.targets]
        s, t, ev = g.sources[inside], g.targets[inside], g.events[inside]
        count, comp = connected_components(_matrix(n, s, t), directed=True, connection="strong")
        internal = comp[s] == comp[t]
        size = np.bincount(comp[alive], minlength=count)
        nontrivial = size > 1
        nontrivial[comp[s[s == t]]] = True
        weak_ok, strong_bad = nontrivial, np.zeros(count, dtype=np.bool_)
        cut = np.zeros(n, dtype=np.bool_)
        for e, kind in fairness:
            taken = np.zeros(count, dtype=np.bool_)
            taken[comp[s[internal & (ev == e)]]] = True
            where = np.bincount(comp[alive & enabled_by[e]], minlength=count)
            if kind == "weak":
                weak_ok = weak_ok & ~((where == size) & ~taken)
            else:
                bad = (where > 0) & ~taken
                strong_bad |= bad
                cut |= enabled_by[e] & bad[comp]
        good = alive & (weak_ok & ~strong_bad)[comp]
        fair[good] = comp[good] + next_id
        next_id += count
        alive = alive & (weak_ok & strong_bad)[comp] & ~cut
    return fair


def whole_graph_avoiders(ex: Exploration, avoid: Bools) -> tuple[Bools, Bools, Ints]:
    """``liveness.avoiders`` as it was: the search back over the whole graph's edges inside ``avoid``."""
    g, n = liveness.progress(ex), ex.count
    fair = whole_graph_fair_components(ex, avoid)
    ends = (avoid & (g.out_degree == 0)) | (fair >= 0)
    inside = avoid[g.sources] & avoid[g.targets]
    if not ends.any():
        return ends.copy(), ends, fair
    rows = np.concatenate((g.targets[inside], np.full(int(ends.sum()), n, dtype=np.int64)))
    cols = np.concatenate((g.sources[inside], np.flatnonzero(ends)))
    reached = breadth_first_order(_matrix(n + 1, rows, cols), n, directed=True, return_predecessors=False)
    marked = np.zeros(n + 1, dtype=np.bool_)
    marked[reached] = True
    return marked[:n] & avoid, ends, fair


def assert_same_partition(got: Ints, expected: Ints) -> None:
    """The same configurations in no component, and the same grouping of the others."""
    assert ((got >= 0) == (expected >= 0)).all()
    pairs = set(zip(got[got >= 0].tolist(), expected[expected >= 0].tolist(), strict=True))
    assert len({a for a, _ in pairs}) == len({b for _, b in pairs}) == len(pairs)


def assert_liveness_agrees(ex: Exploration) -> None:
    """Every liveness property's region (and its complement) as the checks see it, and the
    always-reachable goals, against the whole-graph passes."""
    table = ex.table
    for prop in table.properties:
        if prop.goal is None:
            continue
        goal = columns.holds(ex, prop.goal)
        if prop.kind in ("eventually", "leads-to"):
            for avoid in (~goal, goal):
                escapes, ends, fair = liveness.avoiders(ex, avoid)
                expected = whole_graph_avoiders(ex, avoid)
                assert escapes.tolist() == expected[0].tolist()
                assert ends.tolist() == expected[1].tolist()
                assert_same_partition(fair, expected[2])
        if prop.kind == "always-reachable":
            assert graph.can_reach(ex, goal).tolist() == searched_back(ex, goal).tolist()


def searched_back(ex: Exploration, goal: Bools) -> Bools:
    """Which configurations reach ``goal``, by a plain search backwards over the edges as explored."""
    back: list[list[int]] = [[] for _ in range(ex.count)]
    for i in range(ex.count):
        for _, j in ex.edges(i):
            back[j].append(i)
    marked = goal.copy()
    todo = deque(np.flatnonzero(goal).tolist())
    while todo:
        for i in back[todo.popleft()]:
            if not marked[i]:
                marked[i] = True
                todo.append(i)
    return marked


@pytest.mark.parametrize("path", TABLES, ids=lambda p: p.stem)
def test_region_passes_on_bundled_tables(path: Path) -> None:
    assert_liveness_agrees(explore(load_table(path)))


def test_region_passes_on_loom_grown() -> None:
    assert_liveness_agrees(explore(grown(12)))


@settings(max_examples=80, deadline=None)
@given(table=tables_with_properties())
def test_region_passes_on_random_tables(table: Table) -> None:
    assert_liveness_agrees(explore(table))


def test_region_renumbers_in_order_and_keeps_only_inner_edges() -> None:
    """Local node k is the k-th marked configuration; the edges are those between marked
    ones, in the graph's order, with their indices in it."""
    offsets = np.array([0, 2, 3, 3, 6, 7], dtype=np.int64)
    targets = np.array([1, 3, 0, 0, 3, 4, 2], dtype=np.int64)
    part = regions.region(offsets, targets, np.array([True, False, False, True, True]))
    assert part.nodes.tolist() == [0, 3, 4]
    assert part.edges.tolist() == [1, 3, 4, 5]
    assert part.sources.tolist() == [0, 1, 1, 1] and part.targets.tolist() == [1, 0, 1, 2]
    assert part.offsets.tolist() == [0, 1, 4, 4] and part.degree.tolist() == [2, 3, 1]
    assert part.spread(np.array([7, 8, 9]), -1, 5).tolist() == [7, -1, -1, 8, 9]


def test_verify_command_imports_no_diagram_and_asks_for_no_huge_pages() -> None:
    """`agentfsm verify` without --html draws nothing, so it imports no diagram module; it turns
    numpy's huge pages off unless the user set them."""
    code = ("import json, os, sys\nfrom agentfsm.cli.main import main\nstatus = main(sys.argv[1:])\n"
            "print(json.dumps([status, sorted(m for m in sys.modules if m.startswith('agentfsm.diagrams')),"
            " os.environ.get('NUMPY_MADVISE_HUGEPAGE')]))")
    env = {k: v for k, v in os.environ.items() if k != "NUMPY_MADVISE_HUGEPAGE"}
    run = [sys.executable, "-P", "-c", code, "verify", str(ROOT / "spec" / "tool-call.yaml")]
    done = subprocess.run(run, capture_output=True, text=True, check=True, env=env)
    assert json.loads(done.stdout.splitlines()[-1]) == [0, [], "0"]
    mine = subprocess.run(run, capture_output=True, text=True, check=True, env={**env, "NUMPY_MADVISE_HUGEPAGE": "1"})
    assert json.loads(mine.stdout.splitlines()[-1])[2] == "1"


@pytest.mark.parametrize("table", [grown(30), grown(1500), load_table(WIDE, {"n": 10})],
                         ids=["scalar-loop", "ahead", "batches"])
def test_a_compacted_exploration_finds_every_configuration_and_checks_alike(table: Table) -> None:
    """``compact`` (what ``verify`` does before the checks) hands back the visited set;
    ``index_of`` still finds each configuration, and nothing else a check reads changes."""
    kept, compacted = explore(table), explore(table)
    compacted.compact()
    assert not compacted.index and compacted.code_index is None
    assert all(compacted.index_of(*kept.config(i)) == i for i in range(0, kept.count, 5))
    assert compacted.index_of(kept.packing.nstates, kept.config(0)[1]) is None
    assert_same_exploration(compacted, kept)


def test_leads_to_properties_with_one_goal_share_its_region(monkeypatch: pytest.MonkeyPatch) -> None:
    """Loom's six ``leads-to`` properties have three goals, each pair one after the other:
    three regions are worked out, and each pair's verdicts are as if worked out alone."""
    table = grown(3)
    made: list[int] = []
    real = regions.region

    def counted(offsets: Ints, targets: Ints, mask: Bools) -> regions.Region:
        made.append(int(mask.sum()))
        return real(offsets, targets, mask)

    monkeypatch.setattr(regions, "region", counted)
    shared = [(c.name, c.ok, c.message) for c in run_checks(explore(table)).checks if c.kind == "leads-to"]
    assert len(shared) == 6 and len(made) == 3 and len(set(made)) == 3
    alone = []
    for name in [name for name, _, _ in shared]:
        one = replace(table, properties=tuple(p for p in table.properties if p.name == name))
        alone += [(c.name, c.ok, c.message) for c in run_checks(explore(one)).checks if c.kind == "leads-to"]
    assert alone == shared
