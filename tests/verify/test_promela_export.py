"""What the Promela export means, checked where Spin would conclude otherwise: Spin (pan built
without optimisation, a fraction of a second a table) against the explorer on small tables that
each use one feature of the export, and the limits that keep every value within Promela's 32-bit
``int``, at their edges."""

from __future__ import annotations

import pytest
from agentfsm.verify.spin.promela import PromelaLimit, export_promela
from verify_tables import table


def test_a_parameter_is_bounded_by_the_range_its_own_event_gives_it() -> None:
    t = table("""
variables: {n: {type: int, min: 0, max: 1, init: 0}}
states: {A: {initial: true}, B: {}}
events: {go: {params: {k: {type: int, min: 0, max: 1}}},
         big: {params: {k: {type: int, min: 3000000000, max: 3000000001}}}}
transitions:
  - {from: A, on: go, when: k > 0, to: B}
  - {from: B, on: big, when: k > 0, to: A}
""")
    with pytest.raises(PromelaLimit, match="row 2's guard can reach 3000000001, outside Promela's 32-bit int"):
        export_promela(t)


@pytest.mark.parametrize(("expr", "reached"), [
    ("n + 3000000000 - 3000000000", 3000000001),
    ("n - 3000000000 + 3000000000", -3000000000),
    ("-(n - 3000000000) - 3000000000", 3000000000),
])
def test_an_intermediate_value_past_32_bits_is_refused(expr: str, reached: int) -> None:
    t = table("variables: {n: {type: int, min: 0, max: 1, init: 0}}\nstates: {A: {initial: true}}\n"
              f"events: {{go: {{}}}}\ntransitions:\n  - {{from: A, on: go, to: A, set: {{n: {expr}}}}}\n")
    with pytest.raises(PromelaLimit, match=f"row 1's set n can reach {reached}, outside Promela's 32-bit int"):
        export_promela(t)
