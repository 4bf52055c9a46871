"""The table explorer's pieces held to their definitions (verify/table/explore.py), on tables
whose answers can be read off their text: the labels it delivers, how a configuration is
packed, and looking a configuration up."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from agentfsm.spec import load_table
from agentfsm.verify.table import batched
from agentfsm.verify.table import explore as explore_module
from agentfsm.verify.table.explore import ExplorationLimit, Packing, explore, labels_of
from verify_tables import table

WIDE_COUNTERS = Path(__file__).parent.parent / "tables" / "wide-counters.yaml"

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


# A counter of 70,001 configurations, each of them finding the next.
LINE = """variables: {n: {type: int, min: 0, max: 70000, init: 0}}
states: {A: {initial: true}}
events: {Go: {}}
transitions:
  - {from: A, on: Go, when: n < 70000, to: A, set: {n: n + 1}}
"""


@pytest.mark.parametrize("every", [explore_module.CHECK_EVERY, 1], ids=["chunks", "each"])
def test_progress_is_told_every_2_15_configurations_explored_and_at_the_end(every: int,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The scalar loop tells ``progress`` the configurations found each time another 2^15 have
    been explored (looked at after each chunk of 2^10, or of 1, so exactly then), and once more
    at the end (once, though both the loop that ends and its caller report it): not after every
    chunk, which would cost a call (and the CLI a line) per thousand configurations. Explored
    ahead, the guess is told once, when it is the exploration; explored in batches, the end is
    told once too."""
    monkeypatch.setattr(explore_module, "CHECK_EVERY", every)
    line = table(LINE)
    told: list[int] = []
    explore(line, progress=told.append)
    assert told == [70001]
    explore(load_table(WIDE_COUNTERS), progress=told.append)
    assert told == [70001, 15972]
    monkeypatch.setattr(explore_module, "AHEAD_AT", None)
    told.clear()
    explore(line, progress=told.append)
    assert told == [(1 << 15) + 1, (2 << 15) + 1, 70001]


def test_the_limit_is_looked_at_every_2_10_configurations_explored() -> None:
    """A narrow space passes ``max_configurations`` mid-chunk and stops at the end of that
    chunk of 2^10 configurations: each explored configuration finds the next, so the count
    reported is the next multiple of 2^10 plus one, and the depth the last explored one's."""
    line = table(LINE)
    for limit, stopped_at in ((1000, 1025), (1024, 1025), (1025, 2049), (1100, 2049), (2049, 3073)):
        told: list[int] = []
        with pytest.raises(ExplorationLimit) as stopped:
            explore(line, progress=told.append, max_configurations=limit)
        assert (stopped.value.configurations, stopped.value.transitions, stopped.value.depth) == (
            stopped_at, stopped_at - 1, stopped_at - 2), limit
        assert told == [stopped_at], limit   # a count at the limit is not past it: nothing to tell early


@pytest.mark.parametrize("level_min", [None, 0], ids=["scalar", "batches"])
def test_the_code_array_is_the_codes_themselves_once_they_are_an_array(level_min: int | None,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The checks read the codes as one numpy array: the batches' array itself, or (from the
    scalar loop's list) one made once and kept; after ``compact`` the codes are that array. A
    copy of an array would cost a wide space 8 bytes a configuration at the checks' peak, and
    the scalar loop's dict, kept once the batches have their visited set, about 100."""
    monkeypatch.setattr(explore_module, "LEVEL_MIN", level_min)
    monkeypatch.setattr(explore_module, "CHECK_EVERY", 1)   # the batches from the second configuration
    ex = explore(table(WIDE))
    codes = ex.code_array()
    assert codes.tolist() == [int(c) for c in ex.codes] and ex.code_array() is codes
    assert (codes is ex.codes) == (level_min == 0)
    assert (not ex.index) == (level_min == 0)   # the batches' visited set, not the scalar loop's dict too
    ex.compact()
    assert ex.code_array() is ex.codes


def test_the_guess_ahead_runs_for_what_is_left_past_ahead_at_and_only_with_the_batches(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A counter still counting past ``AHEAD_AT`` configurations (one more will do) is explored
    ahead (the guess closed by the batches); one of exactly ``AHEAD_AT``, which the scalar loop
    has finished when it looks, is not: nothing is left to guess. ``LEVEL_MIN`` None is the
    scalar loop alone, and so no guess ahead either."""
    used: list[str] = []
    real_run, real_ahead = batched.run, explore_module._ahead

    def spy_run(*args: Any) -> int:
        used.append("batches")
        return real_run(*args)

    def spy_ahead(*args: Any) -> bool:
        used.append("ahead")
        return real_ahead(*args)

    monkeypatch.setattr(batched, "run", spy_run)
    monkeypatch.setattr(explore_module, "_ahead", spy_ahead)
    assert explore(table(LINE)).count == 70001 and used == ["ahead", "batches"]
    used.clear()
    at = 1 << 14   # AHEAD_AT as docs/verifier.md gives it (16,384), not the module value mutants move
    assert explore(table(LINE.replace("70000", str(at - 1)))).count == at and used == []
    assert explore(table(LINE.replace("70000", str(at)))).count == at + 1 and used == ["ahead", "batches"]
    used.clear()
    monkeypatch.setattr(explore_module, "LEVEL_MIN", None)
    assert explore(table(LINE)).count == 70001 and used == []


def counter_of(text: str) -> tuple[explore_module._Counter | None, Packing]:
    loaded = table(text)
    packing = Packing(loaded)
    plans, _ = explore_module._plans(loaded, labels_of(loaded), packing)
    return explore_module._counter(loaded, packing, plans), packing


TWO = """variables: {n: {type: int, min: 0, max: 70, init: 0}, m: {type: int, min: 0, max: 70, init: 0}}
states: {A: {initial: true}, B: {}}
events: {Go: {}, Copy: {}}
transitions:
"""


def test_the_counter_to_guess_along_is_one_variable_keyed_by_interval_and_never_by_value() -> None:
    """A counter compared with 70 has two intervals (below 70, and 70); a second variable keyed by
    interval, or a row that reads the counter's value (copying it), leaves nothing to guess along."""
    found, packing = counter_of(LINE.replace("70000", "70"))
    assert found is not None and (found.shift, found.mask) == (packing.shifts[0], packing.masks[0])
    assert found.intervals.tolist() == [0] * 70 + [1]
    assert counter_of(TWO + "  - {from: A, on: Go, when: n < 70, to: B, set: {n: n + 1}}\n"
                            "  - {from: B, on: Go, when: m < 70, to: A, set: {m: m + 1}}\n")[0] is None
    assert counter_of(TWO + "  - {from: A, on: Go, when: n < 70, to: A, set: {n: n + 1}}\n"
                            "  - {from: A, on: Copy, to: B, set: {m: n}}\n")[0] is None
