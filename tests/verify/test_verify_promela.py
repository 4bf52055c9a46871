"""The Promela export on the tables that used to break it, and Spin against the verifier
on random tables: the same configurations, and a violation exactly when the verifier
finds a determinism, bounds or transient error."""

from __future__ import annotations

from pathlib import Path

import pytest
from agentfsm.spec import Table
from agentfsm.verify.spin import runner as spin
from agentfsm.verify.spin.promela import MAX_CHOICES, PromelaLimit, export_promela
from agentfsm.verify.table.checks import run_checks
from agentfsm.verify.table.explore import explore
from hypothesis import HealthCheck, given, settings
from spin_support import needs_spin
from strategies_tables import tables
from verify_tables import table


def agree(t: Table, workdir: Path) -> spin.SpinRun:
    run = spin.run_spin(t, workdir, optimise=False)
    assert run.errors == 0, run.output[-800:]
    assert run.states == explore(t).count
    return run


TRANSIENT_LOOP = """
variables: {n: {type: int, min: 0, max: 5, init: 0}}
states: {A: {initial: true}, T: {transient: true}, B: {}}
events: {go: {}, back: {}}
transitions:
  - {from: A, on: go, to: T}
  - {from: T, when: n < 5, to: T, set: {n: n + 1}}
  - {from: T, when: n == 5, to: B}
  - {from: B, on: back, to: A, set: {n: 0}}
"""


@needs_spin
def test_a_transient_state_looping_on_itself_is_a_loop(tmp_path: Path) -> None:
    agree(table(TRANSIENT_LOOP), tmp_path)


def chain(length: int) -> str:
    names = [f"T{i}" for i in range(length)]
    states = ", ".join(f"{n}: {{transient: true}}" for n in names)
    rows = "\n".join(f"  - {{from: {a}, to: {b}}}" for a, b in zip(names, [*names[1:], "B"], strict=True))
    return (f"states: {{A: {{initial: true}}, {states}, B: {{}}}}\nevents: {{go: {{}}, back: {{}}}}\n"
            f"transitions:\n  - {{from: A, on: go, to: T0}}\n{rows}\n  - {{from: B, on: back, to: A}}\n")


@needs_spin
def test_a_long_transient_chain_fits_one_d_step(tmp_path: Path) -> None:
    agree(table(chain(40)), tmp_path)


@needs_spin
def test_more_than_256_states_need_a_wider_state_variable(tmp_path: Path) -> None:
    names = [f"S{i}" for i in range(300)]
    states = ", ".join(f"{n}: {{{'initial: true' if i == 0 else ''}}}" for i, n in enumerate(names))
    rows = "\n".join(f"  - {{from: {a}, on: next, to: {b}}}" for a, b in zip(names, [*names[1:], names[0]],
                                                                               strict=True))
    t = table(f"states: {{{states}}}\nevents: {{next: {{}}}}\ntransitions:\n{rows}\n")
    assert "short st = " in export_promela(t)
    agree(t, tmp_path)


@needs_spin
def test_a_table_without_rows_exports_valid_promela(tmp_path: Path) -> None:
    agree(table("states: {A: {initial: true}}\nevents: {}\ntransitions: []\n"), tmp_path)


@needs_spin
def test_spin_sees_a_determinism_violation(tmp_path: Path) -> None:
    t = table("""
variables: {n: {type: int, min: 0, max: 3, init: 0}}
states: {A: {initial: true}, B: {}}
events: {go: {params: {k: {type: int, min: 0, max: 2}}}, back: {}}
transitions:
  - {from: A, on: go, when: k > 0, to: B, set: {n: k}}
  - {from: A, on: go, when: k == 2, to: A}
  - {from: B, on: back, to: A}
""")
    assert not next(c for c in run_checks(explore(t)).checks if c.kind == "determinism").ok
    run = spin.run_spin(t, tmp_path, optimise=False)
    assert run.errors >= 1 and "assertion violated" in run.output


@pytest.mark.parametrize(("text", "message"), [
    ("variables: {n: {type: int, min: 0, max: 5000000000, init: 0}}\n", "variable n ranges over 0..5000000000"),
    ("variables: {n: {type: int, min: 0, max: 9, init: 0}}\n", None),
])
def test_values_past_32_bits_are_refused(text: str, message: str | None) -> None:
    t = table(text + "states: {A: {initial: true}}\nevents: {go: {}}\ntransitions:\n"
              "  - {from: A, on: go, when: n < 9, to: A, set: {n: n + 1}}\n")
    if message is None:
        assert "int v_n = 0;" in export_promela(t)
        return
    with pytest.raises(PromelaLimit, match=message):
        export_promela(t)


def test_a_literal_past_64_bits_is_refused() -> None:
    t = table("variables: {n: {type: int, min: 0, max: 9, init: 0}}\nstates: {A: {initial: true}}\n"
              "events: {go: {}}\ntransitions:\n"
              "  - {from: A, on: go, when: n < 100000000000000000000, to: A, set: {n: 0}}\n")
    with pytest.raises(PromelaLimit, match="row 1's guard can reach 100000000000000000000, outside Promela's 32-bit"):
        export_promela(t)


def test_too_many_parameter_alternatives_are_refused() -> None:
    t = table("variables: {n: {type: int, min: 0, max: 9999, init: 0}}\nstates: {A: {initial: true}}\n"
              "events: {go: {params: {k: {type: int, min: 0, max: 9999}}}}\ntransitions:\n"
              "  - {from: A, on: go, to: A, set: {n: k}}\n")
    with pytest.raises(PromelaLimit, match=f"more than {MAX_CHOICES} alternatives"):
        export_promela(t)


def spin_agrees_with_the_verifier(t: Table, workdir: Path) -> None:
    verdict = run_checks(explore(t))
    broken = any(not c.ok for c in verdict.checks if c.kind in ("determinism", "bounds", "transient"))
    run = spin.run_spin(t, workdir, timeout=120, optimise=False)
    if broken:
        assert run.errors >= 1, "Spin missed a violation the verifier found"
    else:
        assert run.errors == 0, run.output[-800:]
        assert run.states == verdict.exploration.count


@needs_spin
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(t=tables(max_states=4, max_rows=8))
def test_spin_agrees_on_random_tables(t: Table, tmp_path: Path) -> None:
    spin_agrees_with_the_verifier(t, tmp_path)


@needs_spin
@pytest.mark.slow
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                   HealthCheck.function_scoped_fixture])
@given(t=tables())
def test_spin_agrees_on_many_random_tables(t: Table, tmp_path: Path) -> None:
    spin_agrees_with_the_verifier(t, tmp_path)
