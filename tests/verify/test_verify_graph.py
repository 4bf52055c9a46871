"""The whole-space graph passes on graphs with duplicate edges (several events, one target)."""

from __future__ import annotations

from verify_tables import check, steps, verdict

TWO_WAYS = """
variables: {n: {type: int, min: 0, max: 2, init: 0}}
states: {A: {initial: true}, B: {}, Done: {final: true}}
events: {go: {params: {fast: {type: bool}}}, back: {}, stop: {}}
transitions:
  - {from: A, on: go, to: B}
  - {from: B, on: back, when: n < 2, to: A, set: {n: n + 1}}
  - {from: B, on: back, when: n >= 2, to: A}
  - {from: "*", on: stop, to: Done}
properties:
  - {name: go-back-ends, no-cycle-within: {events: [go, back]}}
  - {name: can-stop, always-reachable: Done}
"""


def test_duplicate_edges_keep_cycles_and_reachability_exact() -> None:
    v = verdict(TWO_WAYS)
    cycle = check(v, "no-cycle-within", "go-back-ends")
    assert not cycle.ok and steps(cycle) == ["go(fast=False)", "back", "go(fast=False)", "back",
                                             "go(fast=False)", "back"]
    assert check(v, "always-reachable", "can-stop").ok
