"""The table explorer's pieces held to their definitions (verify/table/explore.py), on tables
whose answers can be read off their text: the labels it delivers, how a configuration is
packed, and looking a configuration up."""

from __future__ import annotations

import numpy as np
import pytest
from agentfsm.verify.table.explore import ExplorationLimit, Packing, explore, labels_of
from verify_tables import table

LIMIT = 1 << 20   # docs/verifier.md: more than 2^20 (event, parameter values) combinations are refused
HALF = LIMIT // 2


def events(first: int, second: int) -> str:
    """Two events: ``Go(k)`` of ``first`` values from 0, ``Stop(j)`` of ``second`` from 1."""
    return ("states: {A: {initial: true}}\n"
            f"events: {{Go: {{params: {{k: {{type: int, min: 0, max: {first - 1}}}}}}}, "
            f"Stop: {{params: {{j: {{type: int, min: 1, max: {second}}}}}}}}}\n"
            "transitions:\n  - {from: A, on: Go, to: A}\n")


def test_every_label_up_to_max_labels_is_delivered_and_one_more_stops() -> None:
    """The documented 2^20 labels in all (summed over events) are enumerated, in table order
    and ascending values; one more stops with the event that passed the limit and its count."""
    labels = labels_of(table(events(HALF, HALF)))
    assert len(labels) == LIMIT
    assert labels[:2] == [("Go", (0,)), ("Go", (1,))]
    assert labels[HALF - 1:HALF + 1] == [("Go", (HALF - 1,)), ("Stop", (1,))]
    assert labels[-1] == ("Stop", (HALF,))
    with pytest.raises(ExplorationLimit) as stopped:
        labels_of(table(events(HALF, HALF + 1)))
    assert stopped.value.reason == (f"event Stop has {HALF + 1:,} parameter value combinations (the verifier "
                                    "delivers each; more than 1,048,576 in all)")
    assert (stopped.value.configurations, stopped.value.transitions, stopped.value.depth) == (0, 0, 0)


WIDE = """variables:
  flag: {type: bool, init: true}
  one: {type: int, min: 5, max: 5, init: 5}
  n: {type: int, min: -3, max: 4, init: -3}
states: {A: {initial: true}, B: {}, C: {final: true}}
events: {Go: {}, End: {}}
transitions:
  - {from: A, on: Go, when: n < 4, to: B, set: {n: n + 1}}
  - {from: B, on: Go, to: A, set: {flag: not flag}}
  - {from: A, on: End, to: C}
"""


def test_a_configuration_packs_its_state_then_each_variable_from_its_lower_bound() -> None:
    """Three states take 2 bits, a bool 1, a variable of one value none, one of 8 values 3."""
    packing = Packing(table(WIDE))
    assert (packing.state_bits, packing.state_mask, packing.shifts, packing.masks, packing.all) == (
        2, 3, [2, 3, 3], [1, 0, 7], (1 << 6) - 1)
    assert packing.pack(2, (True, 5, 4)) == 2 | 1 << 2 | 7 << 3
    assert packing.unpack(2 | 1 << 2 | 7 << 3) == (2, (True, 5, 4))
    assert packing.unpack(1) == (1, (False, 5, -3))
    assert packing.field(2) == 7 << 3
    assert packing.in_range((True, 5, -3)) and packing.in_range((False, 5, 4))
    assert not packing.in_range((True, 5, -4)) and not packing.in_range((True, 5, 5))
    assert not packing.in_range((True, 6, 0)) and not packing.in_range((True, 4, 0))


def test_looking_a_configuration_up_finds_its_number_and_nothing_outside_the_space() -> None:
    """Every reachable configuration by its number, before and after ``compact``; a state or
    values outside the table, or a configuration not reached, is ``None``."""
    ex = explore(table(WIDE))
    configs = [ex.config(i) for i in range(ex.count)]
    assert len(configs) == 23   # A at n = -3..4 and B at n = -2..4, flag flipping each round; C from each A
    for compacted in (False, True):
        if compacted:
            ex.compact()
            assert isinstance(ex.codes, np.ndarray) and not ex.index
        assert [ex.index_of(*config) for config in configs] == list(range(ex.count))
        for state, values in ((-1, (True, 5, -3)), (3, (True, 5, -3)), (0, (True, 5)), (0, (True, 5, -3, 0)),
                              (0, (True, 5, -4)), (0, (True, 5, 5)), (0, (True, 6, -3)), (0, (False, 5, -3)),
                              (2, (False, 5, -3))):
            assert ex.index_of(state, values) is None, (state, values)


def two_steps(top: int) -> str:
    """A table of one variable of ``top + 1`` values (0 to ``top``) that jumps to ``top``."""
    return f"""variables: {{big: {{type: int, min: 0, max: {top}, init: 0}}}}
states: {{A: {{initial: true}}, B: {{}}}}
events: {{Go: {{}}}}
transitions:
  - {{from: A, on: Go, to: B, set: {{big: {top}}}}}
"""


def test_codes_past_63_bits_stay_python_ints() -> None:
    """A table whose codes take more than 63 bits keeps them as Python ints: the code array is
    of objects, and ``compact`` keeps the list and the index. Codes of 63 bits are int64."""
    ex = explore(table(two_steps(2**63 - 1)))   # 1 + 63 bits
    codes = ex.code_array()
    assert codes.dtype == object and codes.tolist() == [0, 1 | (2**63 - 1) << 1]
    ex.compact()
    assert isinstance(ex.codes, list) and ex.index_of(1, (2**63 - 1,)) == 1
    assert np.array_equal(ex.code_array(), codes)
    ex = explore(table(two_steps(2**62 - 1)))   # 1 + 62 bits
    assert ex.code_array().dtype == np.int64 and ex.code_array().tolist() == [0, 1 | (2**62 - 1) << 1]
    ex.compact()
    assert isinstance(ex.codes, np.ndarray) and ex.codes.tolist() == [0, 1 | (2**62 - 1) << 1]
    assert ex.index_of(1, (2**62 - 1,)) == 1


def test_a_state_outside_the_table_is_not_read_as_another_configurations_code() -> None:
    """Two states take one bit, so state 2 with n = 0 packs as state 0 with n = 1, and state -1
    as every bit set (B with n = 3, the largest code): both reached, neither is the answer."""
    ex = explore(table("""variables: {n: {type: int, min: 0, max: 3, init: 0}}
states: {A: {initial: true}, B: {}}
events: {Go: {}, Flip: {}}
transitions:
  - {from: A, on: Go, when: n < 3, to: A, set: {n: n + 1}}
  - {from: A, on: Flip, to: B}
"""))
    for compacted in (False, True):
        if compacted:
            ex.compact()
        assert ex.index_of(0, (1,)) is not None and ex.index_of(1, (3,)) == ex.count - 1
        assert ex.index_of(2, (0,)) is None
        assert ex.index_of(-1, (3,)) is None
