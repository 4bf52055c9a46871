"""What the Promela export means, checked where Spin would conclude otherwise: Spin (pan built
without optimisation, a fraction of a second a table) against the explorer on small tables that
each use one feature of the export, and the limits that keep every value within Promela's 32-bit
``int``, at their edges."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from agentfsm.spec import Table
from agentfsm.verify.spin import runner as spin
from agentfsm.verify.spin.promela import INT_MAX, INT_MIN, PromelaLimit, _state_type, export_promela
from agentfsm.verify.table.checks import run_checks
from agentfsm.verify.table.explore import explore
from spin_support import needs_spin
from verify_tables import table

# The verifier's checks that the export turns into Spin assertions.
SAFETY = {"determinism", "bounds", "transient", "invariant"}

# Tables Spin must count exactly as the explorer does, each using one feature of the export.
AGREE = {
    "not and unary minus": """
variables: {n: {type: int, min: -3, max: 3, init: 2}, b: {type: bool, init: true}}
states: {A: {initial: true}, B: {}}
events: {neg: {}, flip: {}, go: {}}
transitions:
  - {from: A, on: neg, when: n > 0, to: A, set: {n: -n}}
  - {from: A, on: flip, when: b, to: A, set: {b: not b}}
  - {from: A, on: go, when: not b and n < 0, to: B}
""",
    "state in and not in": """
variables: {seen: {type: bool, init: false}, k: {type: int, min: 0, max: 3, init: 0}}
states: {A: {initial: true}, B: {}, C: {}}
events: {next: {}, mark: {}, other: {}}
transitions:
  - {from: A, on: next, to: B}
  - {from: B, on: next, to: C}
  - {from: "*", on: mark, when: "state in (B, C) and not seen", to: A, set: {seen: true}}
  - {from: "*", on: other, when: "state not in (A, B) and k < 3", to: C, set: {k: k + 1}}
""",
    "parameters": """
variables: {n: {type: int, min: 0, max: 9, init: 0}, f: {type: bool, init: false}}
states: {A: {initial: true}, B: {}, C: {}}
events: {go: {params: {k: {type: int, min: 1, max: 3}, fast: {type: bool}}}, back: {}}
transitions:
  - {from: A, on: go, when: fast and k > 1, to: B, set: {n: k, f: fast}}
  - {from: A, on: go, when: not fast and k == 3, to: C, set: {n: n + k}}
  - {from: B, on: go, when: n == 0, to: C}
  - {from: B, on: go, when: n > 0 and k == 1 and not fast, to: A, set: {n: n + 3}}
  - {from: C, on: back, to: A, set: {n: 0, f: false}}
""",
    "ranges, bools and a simultaneous swap": """
variables: {n: {type: int, min: 0, max: 2, init: 0}, b: {type: bool, init: false},
            m: {type: int, min: -1, max: 5, init: 5}}
states: {A: {initial: true}}
events: {up: {}, down: {}, swap: {}}
transitions:
  - {from: A, on: up, when: n < 2, to: A, set: {n: n + 1, b: not b}}
  - {from: A, on: down, when: m > -1, to: A, set: {m: m - 1}}
  - {from: A, on: swap, when: n < 2 and m < 2 and m >= 0 and n != m, to: A, set: {n: m, m: n}}
""",
    "a transient chain through every transient configuration": """
variables: {n: {type: int, min: 0, max: 2, init: 0}}
states: {A: {initial: true}, T1: {transient: true}, T2: {transient: true}, B: {}}
events: {go: {}, back: {}}
transitions:
  - {from: A, on: go, to: T1}
  - {from: T1, to: T2}
  - {from: T2, when: n < 2, to: T1, set: {n: n + 1}}
  - {from: T2, when: n == 2, to: B}
  - {from: B, on: back, to: A, set: {n: 0}}
""",
    "a transient chain through both values of a bool": """
variables: {b: {type: bool, init: false}}
states: {A: {initial: true}, T: {transient: true}, B: {}}
events: {go: {}, back: {}}
transitions:
  - {from: A, on: go, to: T}
  - {from: T, when: not b, to: T, set: {b: true}}
  - {from: T, when: b, to: B}
  - {from: B, on: back, to: A, set: {b: false}}
""",
    "an invariant that holds": """
variables: {n: {type: int, min: 0, max: 2, init: 0}}
states: {A: {initial: true}}
events: {up: {}}
transitions:
  - {from: A, on: up, when: n < 2, to: A, set: {n: n + 1}}
invariants:
  - {name: small, expr: n < 3}
""",
    "a variable nothing reads": """
variables: {w: {type: bool, init: false}}
states: {A: {initial: true}, B: {}}
events: {go: {}, back: {}}
transitions:
  - {from: A, on: go, to: B, set: {w: true}}
  - {from: B, on: back, to: A}
""",
    "a wildcard row leaves stable states only": """
variables: {n: {type: int, min: 0, max: 1, init: 0}}
states: {A: {initial: true}, F: {final: true}, X: {}}
events: {go: {}, mark: {}}
transitions:
  - {from: A, on: go, to: F, set: {n: 1}}
  - {from: "*", on: mark, to: X}
""",
    "no rows": "states: {A: {initial: true}}\nevents: {}\ntransitions: []\n",
    "the whole 32-bit range": f"""
variables: {{n: {{type: int, min: {INT_MIN}, max: {INT_MAX}, init: {INT_MIN}}}}}
states: {{A: {{initial: true}}, B: {{}}}}
events: {{flip: {{}}, back: {{}}}}
transitions:
  - {{from: A, on: flip, when: n < {INT_MAX}, to: A, set: {{n: -1 - n}}}}
  - {{from: A, on: back, when: n > {INT_MIN}, to: B}}
""",
}

# Tables with one violation, the assertion Spin must fail on (pan's text of it, a regex).
VIOLATE = {
    "a value out of its range": ("bounds", r"\(\(v_n>=0\)&&\(v_n<=2\)\)", """
variables: {n: {type: int, min: 0, max: 2, init: 0}, m: {type: int, min: 0, max: 5, init: 0}}
states: {A: {initial: true}}
events: {up: {}, more: {}}
transitions:
  - {from: A, on: up, when: n < 3, to: A, set: {n: n + 1}}
  - {from: A, on: more, when: m < 5, to: A, set: {m: m + 1}}
"""),
    "two rows of one event from one state": ("determinism", r"!\(", """
variables: {n: {type: int, min: 0, max: 1, init: 0}}
states: {A: {initial: true}, B: {}}
events: {go: {}, back: {}}
transitions:
  - {from: A, on: go, to: B}
  - {from: A, on: go, when: n == 0, to: A}
  - {from: B, on: back, to: A}
"""),
    "a wildcard row and a row of the same event": ("determinism", r"!\(", """
states: {A: {initial: true}, B: {}, C: {}}
events: {go: {}, back: {}}
transitions:
  - {from: "*", on: go, to: B}
  - {from: C, on: go, to: A}
  - {from: B, on: back, to: C}
"""),
    "an eventless cycle": ("transient", r"settle<=", """
states: {A: {initial: true}, T: {transient: true}}
events: {go: {}}
transitions:
  - {from: A, on: go, to: T}
  - {from: T, to: T}
"""),
    "a transient state no row leaves": ("transient", r"==1\)", """
variables: {n: {type: int, min: 0, max: 1, init: 0}}
states: {A: {initial: true}, T: {transient: true}}
events: {go: {}}
transitions:
  - {from: A, on: go, to: T}
  - {from: T, when: n > 0, to: A}
"""),
    "two eventless rows at once": ("transient", r"==1\)", """
variables: {n: {type: int, min: 0, max: 1, init: 0}}
states: {A: {initial: true}, T: {transient: true}, B: {}}
events: {go: {}, back: {}}
transitions:
  - {from: A, on: go, to: T}
  - {from: T, to: B}
  - {from: T, when: n == 0, to: A}
  - {from: B, on: back, to: A}
"""),
    "an invariant broken by the step into a dead end": ("invariant", r"v_n<1", """
variables: {n: {type: int, min: 0, max: 1, init: 0}}
states: {A: {initial: true}, B: {}}
events: {go: {}}
transitions:
  - {from: A, on: go, to: B, set: {n: 1}}
invariants:
  - {name: low, expr: n < 1}
"""),
    "an invariant broken by the initial configuration alone": ("invariant", r"v_n<1", """
variables: {n: {type: int, min: 0, max: 1, init: 1}}
states: {A: {initial: true}}
events: {go: {}}
transitions:
  - {from: A, on: go, to: A, set: {n: 0}}
invariants:
  - {name: low, expr: n < 1}
"""),
}


def _spin(t: Table, workdir: Path) -> spin.SpinRun:
    """pan unoptimised, with a small stack and hash table: it starts in milliseconds, not a second."""
    return spin.run_spin_model(export_promela(t), workdir, depth=10_000, timeout=120, pan_flags=("-w16",),
                               optimise=False)


def _broken(text: str) -> set[str]:
    return {c.kind for c in run_checks(explore(table(text))).checks if not c.ok} & SAFETY


@needs_spin
@pytest.mark.parametrize("name", AGREE)
def test_spin_counts_the_configurations_the_explorer_finds(name: str, tmp_path: Path) -> None:
    assert not _broken(AGREE[name])
    t = table(AGREE[name])
    run = _spin(t, tmp_path)
    assert run.errors == 0, run.output[-800:]
    assert run.states == explore(t).count


@needs_spin
@pytest.mark.parametrize("name", VIOLATE)
def test_spin_fails_the_assertion_of_the_violation_the_explorer_finds(name: str, tmp_path: Path) -> None:
    kind, assertion, text = VIOLATE[name]
    assert _broken(text) == {kind}
    run = _spin(table(text), tmp_path)
    failed = re.search(r"assertion violated (.*) \(at depth", run.output)
    assert run.errors == 1 and failed is not None, run.output[-800:]
    assert re.search(assertion, failed.group(1).replace(" ", "")), failed.group(1)


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


def _guarded(variables: dict[str, tuple[int, int]], guard: str, constants: str = "") -> Table:
    declared = ", ".join(f"{name}: {{type: int, min: {lo}, max: {hi}, init: {lo}}}"
                         for name, (lo, hi) in variables.items())
    return table(f"{constants}variables: {{{declared}, b: {{type: bool, init: false}}}}\n"
                 "states: {A: {initial: true}}\nevents: {go: {}}\n"
                 f'transitions:\n  - {{from: A, on: go, when: "{guard}", to: A, set: {{b: true}}}}\n')


@pytest.mark.parametrize(("lo", "hi", "refused"), [
    (INT_MIN, INT_MAX, None),
    (INT_MIN - 1, 0, f"variable n ranges over {INT_MIN - 1}..0, outside"),
    (0, INT_MAX + 1, f"variable n ranges over 0..{INT_MAX + 1}, outside"),
])
def test_a_variable_ranges_within_32_bits(lo: int, hi: int, refused: str | None) -> None:
    t = _guarded({"n": (lo, hi)}, "n == 0")
    if refused is None:
        assert f"int v_n = ({INT_MIN + 1} - 1);" in export_promela(t)
        return
    with pytest.raises(PromelaLimit, match=refused):
        export_promela(t)


@pytest.mark.parametrize(("variables", "guard", "reached"), [
    ({"n": (INT_MIN + 1, INT_MAX - 1)}, "n + 1 != n - 1", None),
    ({"n": (INT_MIN + 1, INT_MAX)}, "n + 1 != 0", INT_MAX + 1),
    ({"n": (INT_MIN, INT_MAX - 1)}, "n - 1 != 0", INT_MIN - 1),
    ({"n": (-INT_MAX, 0)}, "-n != 0", None),
    ({"n": (INT_MIN, 0)}, "-n != 0", INT_MAX + 1),
    ({"n": (0, INT_MAX)}, "-(n + 1) != 0", INT_MAX + 1),
    ({"n": (INT_MIN, INT_MAX), "m": (INT_MIN, INT_MAX)}, "n < m and not (m < n)", None),
    ({"n": (-(1 << 30), INT_MAX), "m": (-1, 1 << 30)}, "n - m != 0", INT_MAX + 1),
    ({"n": (0, 1), "m": (0, INT_MAX)}, "n + 1 != m", None),
    ({"n": (0, 1), "m": (0, INT_MAX)}, "n != m + 1", INT_MAX + 1),
])
def test_every_value_an_expression_computes_fits_32_bits(variables: dict[str, tuple[int, int]], guard: str,
                                                         reached: int | None) -> None:
    t = _guarded(variables, guard)
    if reached is None:
        assert "d_step" in export_promela(t)
        return
    with pytest.raises(PromelaLimit, match=f"row 1's guard can reach {reached}, outside Promela's 32-bit int"):
        export_promela(t)


def test_a_constant_past_32_bits_is_refused() -> None:
    t = _guarded({"n": (0, 1)}, "n < big", constants="constants: {big: 3000000000}\n")
    with pytest.raises(PromelaLimit, match="row 1's guard can reach 3000000000, outside Promela's 32-bit int"):
        export_promela(t)


@pytest.mark.parametrize(("k_max", "plain_rows", "alternatives"), [
    (1004, 0, 2000), (1003, 2, 2000), (1004, 1, 2001), (1005, 0, 2002),
])
def test_a_row_is_expanded_per_parameter_value_up_to_the_limit(k_max: int, plain_rows: int, alternatives: int) -> None:
    plain = "".join(f"  - {{from: A, on: e{i}, to: A}}\n" for i in range(plain_rows))
    events = "".join(f", e{i}: {{}}" for i in range(plain_rows))
    t = table("states: {A: {initial: true}}\n"
              f"events: {{go: {{params: {{k: {{type: int, min: 5, max: {k_max}}}, fast: {{type: bool}}}}}}{events}}}\n"
              f'transitions:\n{plain}  - {{from: A, on: go, when: "k > 5 and fast", to: A}}\n')
    if alternatives <= 2000:   # the limit docs/verifier.md gives
        assert export_promela(t).count(":: d_step") == alternatives
        return
    with pytest.raises(PromelaLimit, match="more than 2000 alternatives"):
        export_promela(t)


def test_each_alternative_names_its_row_and_parameter_values() -> None:
    text = export_promela(table(AGREE["parameters"]))
    assert "/* row 1: A go(k=1, fast=false) */" in text
    assert "/* row 3: B go(k=3, fast=true) */" in text
    assert "/* row 5: C back */" in text


@pytest.mark.parametrize("count", [1, 256, 257, 1 << 15, (1 << 15) + 1])
def test_the_state_variable_is_the_smallest_type_that_holds_every_state(count: int) -> None:
    ranges = {"byte": (0, 255), "short": (-(1 << 15), (1 << 15) - 1), "int": (INT_MIN, INT_MAX)}
    smallest = next(kind for kind, (lo, hi) in ranges.items() if lo <= 0 and count - 1 <= hi)
    assert _state_type(count) == smallest
