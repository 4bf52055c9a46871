"""The checks' passes that read the explored graph in place against their whole-graph forms.

``graph.dead_ends`` (the deadlock check) reads only the offsets and the stutter edges;
``graph.states_at`` and ``graph.state_counts`` make no column of every configuration's
state; ``liveness.progress`` copies no edge array when there is no stutter edge. Each must
give what the copied progress graph and the full state column give: on random tables (the
``ignore`` policy among them, so stutter edges: in test_verify_checks.py, which the mutation
run selects), on the bundled tables, on codes wider than 63 bits, and counted over many
slices. A table whose checks need no graph routine is
verified without importing scipy (half a CPU-second of start-up).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from agentfsm.spec import load_table
from agentfsm.verify.table import columns, graph, liveness
from agentfsm.verify.table.explore import Exploration, explore
from conftest import TABLES
from hypothesis import given, settings
from hypothesis import strategies as st
from test_verify_columns import WIDE as WIDE_BOOLS
from verify_tables import table as planted

WIDE = Path(__file__).parent.parent / "tables" / "wide-counters.yaml"


def copied_progress(ex: Exploration) -> tuple[list[int], ...]:
    """The progress graph as the checks built it before: int64 copies of every array, stutter
    edges dropped by a mask even when there are none."""
    offsets = np.frombuffer(ex.offsets, dtype=np.int64).astype(np.int64)
    targets = np.frombuffer(ex.edge_target, dtype=np.int64).astype(np.int64)
    labels = np.frombuffer(ex.edge_label, dtype=np.intc).astype(np.int64)
    keep = np.ones(len(targets), dtype=np.bool_)
    keep[np.frombuffer(ex.stutter, dtype=np.int64)] = False
    sources = np.repeat(np.arange(ex.count, dtype=np.int64), np.diff(offsets))
    kept = np.concatenate(([0], np.cumsum(keep, dtype=np.int64)))[offsets]
    event_of_label = np.array([ex.table.events.index(ex.table.event(name)) for name, _ in ex.labels] or [0])
    return (kept.tolist(), targets[keep].tolist(), labels[keep].tolist(), sources[keep].tolist(),
            event_of_label[labels[keep]].tolist())


def assert_in_place_agrees(ex: Exploration) -> None:
    """Every in-place pass equals its definition over the progress graph and the state column,
    and the progress graph (views where there are no stutter edges) equals its copied form."""
    g = liveness.progress(ex)
    assert (g.offsets.tolist(), g.targets.tolist(), g.labels.tolist(), g.sources.tolist(),
            g.events.tolist()) == copied_progress(ex)
    expected_ends = np.flatnonzero(liveness.progress(ex).out_degree == 0)
    rows = np.arange(ex.count, dtype=np.int64)[::-1]
    before = graph.states_at(ex, rows).tolist()
    counts = graph.state_counts(ex).tolist()
    assert "states" not in ex.columns   # neither made the whole column
    every = columns.states(ex)
    assert graph.dead_ends(ex).tolist() == expected_ends.tolist()
    assert before == every[rows].tolist() == graph.states_at(ex, rows).tolist()
    assert counts == np.bincount(every, minlength=len(ex.table.states)).tolist() == graph.state_counts(ex).tolist()


@pytest.mark.parametrize("path", [*TABLES, WIDE], ids=lambda p: p.stem)
def test_bundled_tables(path: Path) -> None:
    assert_in_place_agrees(explore(load_table(path, {"n": 3} if path == WIDE else None)))


def test_codes_wider_than_63_bits_and_stutter_only_configurations() -> None:
    """Object codes; a configuration whose only edges are stutter edges is a dead end, one
    with a stutter edge and a real one is not, and a final one with none is listed too."""
    ex = explore(planted(f"""
variables:
{WIDE_BOOLS}states:
  A: {{initial: true}}
  B: {{}}
  C: {{}}
  Done: {{final: true}}
events: {{go: {{}}, flip: {{}}, end: {{}}}}
transitions:
  - {{from: A, on: go, to: B}}
  - {{from: A, on: flip, to: A, set: {{b69: not b69}}}}
  - {{from: B, on: go, to: C}}
  - {{from: B, on: end, to: Done}}
unhandled: {{policy: ignore}}
"""))
    assert ex.packing.all >= 1 << 63 and len(ex.stutter) > 0
    assert [ex.table.states[s].name for s in graph.states_at(ex, graph.dead_ends(ex))] == ["C", "Done", "C", "Done"]
    assert_in_place_agrees(ex)


@given(chunk=st.integers(min_value=1, max_value=40))
@settings(max_examples=10, deadline=None)
def test_counted_over_many_slices(chunk: int) -> None:
    ex = explore(load_table(WIDE, {"n": 2}))
    saved = graph.CHUNK
    graph.CHUNK = chunk
    try:
        assert_in_place_agrees(ex)
    finally:
        graph.CHUNK = saved


def test_checks_without_graph_routines_import_no_scipy() -> None:
    """scipy is imported by the first pass that needs it (always-reachable here), not before."""
    code = ("import json, sys\nfrom agentfsm.spec import load_table\n"
            "from agentfsm.verify.table.verify import verify_table\nseen = []\n"
            "for path in sys.argv[1:]:\n    verdict, _ = verify_table(load_table(path))\n"
            "    seen.append([verdict.ok, 'scipy' in sys.modules])\nprint(json.dumps(seen))")
    tool_call = Path(__file__).parent.parent.parent / "spec" / "tool-call.yaml"
    done = subprocess.run([sys.executable, "-P", "-c", code, str(WIDE), str(tool_call)], capture_output=True,
                          text=True, check=True)
    assert json.loads(done.stdout) == [[True, False], [True, True]]

