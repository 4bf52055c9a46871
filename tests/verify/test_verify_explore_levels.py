"""The batch (array) explorer against the scalar loop: the same exploration, bit for bit.

Every test explores a table twice: in the scalar loop only, and switching to batches at
once (or after a few configurations, so that the scalar loop's memo and direct paths
hand over mid-way). Configurations, numbering, parents, edges, stutter edges, row fire
and unhandled counts, errors, the reached depth, and every check's verdict and
counterexample must be equal.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from agentfsm.spec import Table, load_table, load_table_bytes
from agentfsm.verify.kernel import visited
from agentfsm.verify.table import batched
from agentfsm.verify.table import explore as explore_module
from agentfsm.verify.table.explore import Exploration, ExplorationLimit, explore
from conftest import SPEC, TABLES
from hypothesis import HealthCheck, given, settings
from strategies_tables import tables
from test_verify_differential import tables as differential_tables
from test_verify_limits import _limit_memory
from verify_tables import assert_same_exploration

WIDE = Path(__file__).parent.parent / "tables" / "wide-counters.yaml"
BUNDLED = [*TABLES, *sorted(WIDE.parent.glob("*.yaml"))]
LENIENT = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture]   # the fixture only sets module constants

# (LEVEL_MIN, LEVEL_LOW, CHECK_EVERY, MEMO_LIMIT, visited set): batches from the first
# configuration on; after a few, from the memo or the direct path; through the hash table;
# back and forth between the batches and the scalar loop as the queue narrows and widens; an
# array watched for sparseness that moves its codes to the hash table after a few pages.
SWITCHES = [(0, 0, 1, explore_module.MEMO_LIMIT, "dense"),
            (3, 0, 2, explore_module.MEMO_LIMIT, "hashed"),
            (2, 0, 3, 0, "dense"),
            (4, 3, 1, explore_module.MEMO_LIMIT, "dense"),
            (3, 2, 1, 0, "hashed"),
            (2, 0, 2, explore_module.MEMO_LIMIT, "moved"),
            (3, 2, 1, 0, "moved")]
IDS = ["at-once", "after-memo-hashed", "after-direct", "back-and-forth", "back-and-forth-direct-hashed",
       "after-memo-moved", "back-and-forth-direct-moved"]


def visited_set(monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    """``dense``: the array (as shipped for small spans); ``hashed``: the hash table from the
    start; ``moved``: a watched array with 4-code pages that moves past 4 pages."""
    if kind != "dense":
        monkeypatch.setattr(visited, "DENSE_CODES", 0)
        monkeypatch.setattr(visited, "DENSE_MAX", 0 if kind == "hashed" else visited.DENSE_MAX)
    if kind == "moved":
        monkeypatch.setattr(visited, "PAGE_BITS", 2)
        monkeypatch.setattr(visited, "DENSE_FLOOR", 4 * 16)
        monkeypatch.setattr(visited, "SPARSE_BYTES", 4)


@pytest.fixture(params=SWITCHES, ids=IDS)
def switch(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    level_min, level_low, check_every, memo_limit, kind = request.param
    monkeypatch.setattr(explore_module, "LEVEL_MIN", level_min)
    monkeypatch.setattr(explore_module, "LEVEL_LOW", level_low)
    monkeypatch.setattr(explore_module, "CHECK_EVERY", check_every)
    monkeypatch.setattr(explore_module, "MEMO_LIMIT", memo_limit)
    visited_set(monkeypatch, kind)
    yield


def scalar(table: Table) -> Exploration:
    saved = explore_module.LEVEL_MIN
    explore_module.LEVEL_MIN = None
    try:
        return explore(table)
    finally:
        explore_module.LEVEL_MIN = saved


def assert_same(table: Table) -> Exploration:
    """Explore in batches (as the ``switch`` fixture set up) and in the scalar loop; compare."""
    wide, narrow = explore(table), scalar(table)
    assert_same_exploration(wide, narrow)
    for i in range(wide.count):
        assert wide.index_of(*wide.config(i)) == i
        assert wide.path(i) == narrow.path(i)
    return wide


@pytest.mark.usefixtures("switch")
@pytest.mark.parametrize("path", BUNDLED, ids=lambda p: p.stem)
def test_bundled_tables_explore_alike(path: Path) -> None:
    assert_same(load_table(path))


@pytest.mark.usefixtures("switch")
def test_grown_loom_explores_alike() -> None:
    assert_same(load_table(SPEC / "loom-agent.yaml", {"max_retries": 60, "max_tools": 3}))


@pytest.mark.usefixtures("switch")
@settings(max_examples=40, deadline=None, suppress_health_check=LENIENT)
@given(table=tables())
def test_random_tables_explore_alike(table: Table) -> None:
    assert_same(table)


@pytest.mark.usefixtures("switch")
@settings(max_examples=40, deadline=None, suppress_health_check=LENIENT)
@given(table=differential_tables())
def test_random_tables_with_transient_chains_explore_alike(table: Table) -> None:
    assert_same(table)


EMITTING = b"""format: 1
machine: emitting
variables:
  n: {type: int, min: 0, max: 6, init: 0}
  on: {type: bool, init: false}
states:
  A: {initial: true}
  B: {}
events:
  Go: {params: {k: {type: int, min: 0, max: 3}}}
  Flip: {}
  Park: {}
actions:
  Tell: {params: {m: {type: int, min: 0, max: 4}, up: {type: bool}}}
transitions:
  - {from: A, on: Go, when: n + k <= 6, to: A, set: {n: n + k}, emit: [{action: Tell, args: {m: n + k - 1, up: on}}]}
  - {from: A, on: Go, when: k == 0 and on, to: A, set: {n: n + 1}}
  - {from: A, on: Flip, to: A, set: {on: not on}}
  - {from: A, on: Park, when: n == 6, to: B}
  - {from: B, on: Flip, when: n > 0, to: A, set: {on: not on, n: n - 1}}
unhandled: {policy: ignore}
"""


@pytest.mark.usefixtures("switch")
def test_errors_from_arguments_ranges_and_overlaps_are_recorded_alike() -> None:
    """Emitted arguments out of range, two enabled rows and values out of range all go to
    the fallback; the first error of each kind is the scalar loop's."""
    ex = assert_same(load_table_bytes(EMITTING, "emitting.yaml"))
    assert {e.kind for e in ex.errors} == {"bounds", "determinism"}


def test_a_wide_table_switches_at_the_default_threshold() -> None:
    """With the shipped threshold a wide space goes to batches (its visited set is the
    batches') and still explores exactly as the scalar loop does."""
    table = load_table(WIDE)
    ex = explore(table)
    assert ex.code_index is not None
    assert_same(table)


def test_a_limit_stops_the_batches_with_how_far_they_got() -> None:
    """Past ``max_configurations`` the batches stop as the scalar loop does: with the
    configurations found, the transitions and a breadth-first depth, and nothing kept."""
    table = load_table(WIDE, {"n": 16})
    with pytest.raises(ExplorationLimit) as stopped:
        explore(table, max_configurations=5000)
    reason, found, transitions, depth = (stopped.value.reason, stopped.value.configurations,
                                         stopped.value.transitions, stopped.value.depth)
    assert "--max-configurations 5000" in reason
    assert 5000 < found < 5000 + batched.BATCH * 20
    complete = explore(table)
    assert complete.code_index is not None
    assert 0 < transitions < complete.transitions
    assert 0 < depth < complete.reached[2]


def test_out_of_memory_in_the_batches_is_exit_2_without_a_traceback(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "agentfsm.cli", "verify", "--set", "n=200", str(WIDE)],
                          capture_output=True, text=True, preexec_fn=_limit_memory, timeout=600, check=False,
                          cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and "MemoryError" not in done.stderr
    assert "exploration stopped, out of memory:" in done.stderr
    assert "configurations and" in done.stderr and "breadth-first depth" in done.stderr


OVERFLOW = b"""format: 1
machine: overflow
variables:
  n: {type: int, min: 0, max: 3, init: 0}
states:
  A: {initial: true}
events:
  Up: {}
transitions:
  - {from: A, on: Up, to: A, set: {n: n + 1}}
"""


FAR = b"""format: 1
machine: far
variables:
  a: {type: int, min: 0, max: 9, init: 0}
  b: {type: int, min: 0, max: 9, init: 0}
  c: {type: int, min: 0, max: 9, init: 0}
  d: {type: int, min: 0, max: 9, init: 0}
  big: {type: int, min: 0, max: 1180591620717411303424, init: 0}
states: {S: {initial: true}}
events: {A: {}, B: {}, C: {}, D: {}, Flip: {}}
transitions:
  - {from: S, on: A, when: a < 9, to: S, set: {a: a + 1}}
  - {from: S, on: B, when: b < 9, to: S, set: {b: b + 1}}
  - {from: S, on: C, when: c < 9, to: S, set: {c: c + 1}}
  - {from: S, on: D, when: d < 9, to: S, set: {d: d + 1}}
  - {from: S, on: Flip, to: S, set: {big: 1180591620717411303424 - big}}
"""


def test_a_wide_space_the_batches_cannot_take_stays_in_the_scalar_loop() -> None:
    """Codes past 63 bits (``big`` flips between 0 and 2**70): however wide the queue grows
    (past the shipped ``LEVEL_MIN``), the batches are never started."""
    table = load_table_bytes(FAR, "far.yaml")
    assert not batched.applicable(table, 5)
    ex = explore(table)
    assert ex.count == 2 * 10 ** 4 and ex.code_index is None and isinstance(ex.codes, list)


@pytest.mark.usefixtures("switch")
def test_a_single_enabled_row_past_its_upper_bound_goes_to_the_fallback() -> None:
    """The one enabled row overflows ``n`` at its top: the batches must not pack 4 into a
    0..3 slot (it would index past the visited set) but report the scalar loop's error."""
    ex = assert_same(load_table_bytes(OVERFLOW, "overflow.yaml"))
    assert [e.kind for e in ex.errors] == ["bounds"]
    assert ex.count == 4



@pytest.mark.usefixtures("switch")
@pytest.mark.parametrize("size", [1, 3])
@pytest.mark.parametrize("table", [load_table_bytes(EMITTING, "emitting.yaml"), load_table(WIDE, {"n": 3})],
                         ids=["emitting", "wide"])
def test_where_a_batch_ends_changes_nothing(table: Table, size: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Batches of one configuration, or of three, explore as the scalar loop does."""
    monkeypatch.setattr(batched, "BATCH", size)
    assert_same(table)


CHAIN = b"""format: 1
machine: chain
variables:
  n: {type: int, min: 0, max: 7, init: 0}
states:
  A: {initial: true}
  T1: {transient: true}
  T2: {transient: true}
  T3: {transient: true}
events:
  Go: {}
  Back: {}
  Jump: {}
transitions:
  - {from: A, on: Go, when: n < 7, to: T1}
  - {from: A, on: Back, when: n > 0, to: T3, set: {n: n - 1}}
  - {from: A, on: Jump, when: n < 2, to: A, set: {n: n + 5}}
  - {from: T1, to: T2, set: {n: n + 1}}
  - {from: T2, when: n < 5, to: T3}
  - {from: T2, when: n == 4 or n == 5, to: A}
  - {from: T3, to: A}
"""


@pytest.mark.usefixtures("switch")
@pytest.mark.parametrize("longest", [0, 1, 2, 3])
def test_transient_chains_longer_than_the_arrays_settle_go_to_the_fallback(longest: int,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A chain of three eventless steps (T1, T2, T3) settled by the arrays up to ``longest``
    steps, the rest by ``step``: the same exploration, and T2 stuck (n = 6) and with two
    enabled rows (n = 4) are the scalar loop's errors."""
    monkeypatch.setattr(batched, "MAX_CHAIN", longest)
    ex = assert_same(load_table_bytes(CHAIN, "chain.yaml"))
    assert [(e.kind, e.rows) for e in ex.errors] == [("transient", (1, 4)), ("transient", (5, 6))]


PLAIN_CHAIN = b"""format: 1
machine: plain_chain
variables:
  n: {type: int, min: 0, max: 9, init: 0}
states:
  A: {initial: true}
  T1: {transient: true}
  T2: {transient: true}
events:
  Go: {}
  Top: {}
  Reset: {}
actions:
  Tell: {params: {m: {type: int, min: 0, max: 9}}}
transitions:
  - {from: A, on: Go, when: n < 8, to: T1, set: {n: n + 1}}
  - {from: T1, to: T2}
  - {from: T2, when: n < 5, to: A}
  - {from: T2, when: n >= 5, to: A, set: {n: n + 1}}
  - {from: A, on: Top, when: n == 8, to: A, set: {n: n + 1}, emit: [{action: Tell, args: {m: n - 8}}]}
  - {from: A, on: Reset, when: n == 9, to: A, set: {n: n - 9}, emit: [{action: Tell, args: {m: n}}]}
"""


def test_plain_transient_chains_are_settled_by_the_arrays(monkeypatch: pytest.MonkeyPatch) -> None:
    """One enabled eventless row at each step, values in range (updates and emitted arguments
    at both ends of their ranges among them): the batches explore every configuration after the
    first (which the scalar loop takes before it looks at the queue), each once, settle every
    chain themselves and never call the fallback (``step``), with the scalar loop's exploration."""
    for name, value in (("LEVEL_MIN", 0), ("LEVEL_LOW", 0), ("CHECK_EVERY", 1)):   # batches after the first
        monkeypatch.setattr(explore_module, name, value)
    calls: list[int] = []
    slow = explore_module._slow

    def counted(*args: object) -> int:
        calls.append(1)
        return slow(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(explore_module, "_slow", counted)
    batched_codes: list[int] = []
    batch = batched.Levels.batch

    def seen(levels: batched.Levels, codes: batched.Ints, first: int) -> tuple[batched.Ints, batched.Ints]:
        batched_codes.extend(range(first, first + len(codes)))
        return batch(levels, codes, first)

    monkeypatch.setattr(batched.Levels, "batch", seen)
    table = load_table_bytes(PLAIN_CHAIN, "plain.yaml")
    ex = explore(table)
    assert ex.count == 8 and batched_codes == list(range(1, 8)) and not calls   # n = 0 to 4, 6, 8, 9
    assert_same_exploration(ex, scalar(table))


ERRORS_IN_ONE_BATCH = b"""format: 1
machine: errors_in_one_batch
variables:
  n: {type: int, min: 0, max: 3, init: 0}
states:
  A: {initial: true}
  B: {}
  T: {transient: true}
events:
  Go: {}
  Up: {}
  Down: {}
  Hop: {}
transitions:
  - {from: A, on: Go, to: B}
  - {from: A, on: Up, when: n < 3, to: A, set: {n: n + 1}}
  - {from: A, on: Down, when: n == 1, to: A, set: {n: n - 2}}
  - {from: A, on: Hop, to: T}
  - {from: T, to: A, set: {n: n + 1}}
  - {from: B, on: Go, to: B}
  - {from: B, on: Up, to: B}
  - {from: B, on: Down, to: B}
  - {from: B, on: Hop, to: B, set: {n: n + 4}}
"""


@pytest.mark.usefixtures("switch")
def test_fallback_errors_are_recorded_in_the_scalar_loops_order() -> None:
    """B at n = 0 (configuration 1) breaks a bound before A at n = 1 (configuration 2) does, in
    the same batch, though A's cells come first by state and B's edge position (3) is later
    than A's (2); an eventless update past its bound (T at n = 3) goes to the fallback too."""
    ex = assert_same(load_table_bytes(ERRORS_IN_ONE_BATCH, "errors.yaml"))
    assert [(e.config, e.kind, e.rows) for e in ex.errors] == [(1, "bounds", (9,)), (2, "bounds", (3,)),
                                                                (ex.index_of(0, (3,)), "bounds", (5,))]
