"""The batch explorer's pieces held to their definitions (verify/table/batched.py), on tables
whose answers can be read off their text: when the array path is exact (``applicable``)."""

from __future__ import annotations

import numpy as np
from agentfsm.spec import Table
from agentfsm.verify.kernel.arrays import SAFE
from agentfsm.verify.table import batched
from hypothesis import given, settings
from hypothesis import strategies as st
from verify_tables import table


def bits_table(states: int, sizes: list[int], row: str = "") -> Table:
    """A table of ``states`` states and int variables of ``sizes`` values (0 to size - 1), one
    row (``row`` added to it) and an action ``Tell(m: 0..3)``."""
    names = [f"S{k}" for k in range(states)]
    variables = ", ".join(f"v{k}: {{type: int, min: 0, max: {size - 1}, init: 0}}" for k, size in enumerate(sizes))
    state_text = ", ".join(f"{name}: {{initial: true}}" if k == 0 else f"{name}: {{}}" for k, name in enumerate(names))
    return table(f"variables: {{{variables}}}\nstates: {{{state_text}}}\nevents: {{Go: {{}}}}\n"
                 "actions: {Tell: {params: {m: {type: int, min: 0, max: 3}}}}\n"
                 f"transitions:\n  - {{from: S0, on: Go, to: {names[-1]}{row}}}\n")


def test_the_label_matrix_may_hold_exactly_cells_entries() -> None:
    """States times labels up to ``CELLS`` go by batches; one label more does not."""
    small = bits_table(4, [2])
    assert batched.applicable(small, batched.CELLS // 4) is True
    assert batched.applicable(small, batched.CELLS // 4 + 1) is False


def test_codes_of_63_bits_go_by_batches_and_of_64_bits_do_not() -> None:
    """A code is the state's bits (one at least) and each variable's: 63 in all fit an int64."""
    assert batched.applicable(bits_table(2, [1 << 31, 1 << 31]), 1) is True   # 1 + 31 + 31
    assert batched.applicable(bits_table(2, [1 << 31, (1 << 31) + 1]), 1) is False   # 1 + 31 + 32
    assert batched.applicable(bits_table(3, [1 << 31, 1 << 31]), 1) is False   # 2 + 31 + 31
    assert batched.applicable(bits_table(1, [1 << 31, 1 << 31]), 1) is True   # one state still takes a bit: 1 + 31 + 31
    assert batched.applicable(bits_table(1, [1 << 31, 1 << 31, 2]), 1) is False   # 1 + 31 + 31 + 1


def test_values_below_safe_go_by_batches_and_from_safe_on_do_not() -> None:
    """Sums of an expression's leaves stay in 64 bits below ``SAFE``: a variable's bound, and a
    literal of a guard, an update or an emitted argument, each at ``SAFE - 1`` are fine, at
    ``SAFE`` not."""
    assert batched.applicable(bits_table(2, [SAFE]), 1) is True   # v0 up to SAFE - 1
    assert batched.applicable(bits_table(2, [SAFE + 1]), 1) is False
    assert batched.applicable(bits_table(2, [4], f", set: {{v0: v0 + {SAFE - 1} - {SAFE - 1}}}"), 1) is True
    assert batched.applicable(bits_table(2, [4], f", set: {{v0: v0 + {SAFE} - {SAFE}}}"), 1) is False
    for row in (", when: v0 < {}", ", emit: [{{action: Tell, args: {{m: {} - 1}}}}]"):
        assert batched.applicable(bits_table(2, [4], row.format(SAFE - 1)), 1) is True
        assert batched.applicable(bits_table(2, [4], row.format(SAFE)), 1) is False


@settings(max_examples=100, deadline=None)
@given(states=st.lists(st.integers(0, 39), max_size=60), nstates=st.sampled_from([1, 16, 17, 40]))
def test_configurations_split_by_state_in_ascending_positions(states: list[int], nstates: int) -> None:
    """Both ways of splitting a batch by state (a mask per state up to 16 states, one sort past
    them) give each present state, ascending, with its configurations' positions, ascending."""
    states = [s % nstates for s in states]
    expected = {s: [k for k, t in enumerate(states) if t == s] for s in sorted(set(states))}
    found = batched._by_state(np.array(states, dtype=np.int64), nstates)
    assert [(state, rows.tolist()) for state, rows in found] == list(expected.items())
