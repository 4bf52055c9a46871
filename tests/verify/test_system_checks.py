"""What each system check reports, field by field: its kind and name, and a counterexample that
names the system and the check it belongs to; a table's own invariant checked in every
instance of it (verify/system/checks.py)."""

from __future__ import annotations

from pathlib import Path

from agentfsm.spec.system_load import load_system
from agentfsm.verify.system.checks import SysCheck, run_system_checks
from agentfsm.verify.system.explore import explore_system

FIXTURES = Path(__file__).resolve().parent.parent / "systems"


def failed(path: Path) -> list[SysCheck]:
    return [c for c in run_system_checks(explore_system(load_system(path))).checks if not c.ok]


def test_an_invariants_counterexample_names_its_system_and_check() -> None:
    [check] = failed(FIXTURES / "toggles-system.yaml")
    assert (check.kind, check.name) == ("invariant", "watched-stays-off")
    assert check.trace is not None
    assert (check.trace.system, check.trace.check, check.trace.kind) == ("toggles", "watched-stays-off", "invariant")


def test_a_step_check_is_named_by_its_kind_alone(tmp_path: Path) -> None:
    """A full mailbox is a ``mailbox-overflow`` check, with no name of its own (it is no invariant)."""
    (tmp_path / "sender.yaml").write_text(
        "format: 1\nmachine: sender\nstates:\n  Ready: {initial: true}\n  Sent: {final: true}\n"
        "events:\n  Go: {}\nactions:\n  Ping: {}\n"
        "transitions:\n  - {from: Ready, on: Go, to: Sent, emit: [Ping, Ping]}\n")
    (tmp_path / "full-system.yaml").write_text(
        f"format: 1\nsystem: full\nmailbox: {{capacity: 1}}\n"
        f"instances:\n  sender: {{table: sender.yaml}}\n  bell: {{table: {FIXTURES / 'bell.yaml'}}}\n"
        "links:\n  - {from: sender, action: Ping, to: bell, event: Ring}\nenvironment:\n  sender: [Go]\n")
    [check] = [c for c in failed(tmp_path / "full-system.yaml") if c.kind == "mailbox-overflow"]
    assert check.name is None and check.trace is not None
    assert (check.trace.system, check.trace.check, check.trace.kind) == ("full", None, "mailbox-overflow")
    assert len(check.trace.steps) == 1


def test_a_tables_own_invariant_is_checked_in_each_instance(tmp_path: Path) -> None:
    """``low`` (n < 2) of the table ``up`` breaks in ``b``, which counts to 2; ``a`` stops at 1."""
    (tmp_path / "up.yaml").write_text(
        "format: 1\nmachine: up\nvariables:\n  n: {type: int, min: 0, max: 2, init: 0}\n"
        "states:\n  On: {initial: true}\nevents:\n  Up: {}\n  Top: {}\n"
        "transitions:\n  - {from: On, on: Up, to: On, when: n < 1, set: {n: n + 1}}\n"
        "  - {from: On, on: Top, to: On, when: n == 1, set: {n: 2}}\n"
        "invariants:\n  - {name: low, expr: n < 2}\n")
    (tmp_path / "ups-system.yaml").write_text(
        "format: 1\nsystem: ups\ninstances:\n  a: {table: up.yaml}\n  b: {table: up.yaml}\n"
        "environment:\n  a: [Up]\n  b: [Up, Top]\n")
    verdict = run_system_checks(explore_system(load_system(tmp_path / "ups-system.yaml")))
    checks = {(c.kind, c.name): c for c in verdict.checks}
    assert checks[("invariant", "a: low")].ok
    broken = checks[("invariant", "b: low")]
    assert not broken.ok and broken.message == "n < 2 is false" and broken.trace is not None
    assert [(label[0], label[1], label[2]) for label in broken.trace.steps] == [("env", 1, "Up"), ("env", 1, "Top")]


def test_a_cycle_of_two_configurations_is_found_and_a_property_that_holds_keeps_its_name(tmp_path: Path) -> None:
    """A switch flipped back and forth: the flips close a cycle of two configurations (no step
    returns to its own), and its Off state stays reachable from each."""
    (tmp_path / "flips-system.yaml").write_text(
        f"format: 1\nsystem: flips\ninstances:\n  t: {{table: {FIXTURES / 'toggle.yaml'}}}\nenvironment:\n  t: [Flip]\n"
        "properties:\n  - {name: flips-end, no-cycle-within: {steps: [t.Flip]}}\n"
        "  - {name: back-off, always-reachable: t.state == Off}\n")
    verdict = run_system_checks(explore_system(load_system(tmp_path / "flips-system.yaml")))
    checks = {c.name: c for c in verdict.checks if c.name is not None}
    cycle, reachable = checks["flips-end"], checks["back-off"]
    assert (cycle.kind, cycle.ok) == ("no-cycle-within", False) and cycle.trace is not None
    assert (len(cycle.trace.steps), cycle.trace.loop_start) == (2, 0)
    assert (reachable.kind, reachable.ok) == ("always-reachable", True)


def test_a_cycles_counterexample_is_the_first_shortest_loop(tmp_path: Path) -> None:
    """From 0, Up reaches 1; from 1, Back and then Reset return to 0, and Up goes on to 2, whose
    Back returns too. The loop shown is the first shortest one found: Up, Back (not Up, Reset,
    found after it, nor the longer Up, Up, Back)."""
    (tmp_path / "steps.yaml").write_text(
        "format: 1\nmachine: steps\nvariables:\n  n: {type: int, min: 0, max: 2, init: 0}\n"
        "states:\n  On: {initial: true}\nevents:\n  Up: {}\n  Back: {}\n  Reset: {}\n"
        "transitions:\n  - {from: On, on: Up, to: On, when: n < 2, set: {n: n + 1}}\n"
        "  - {from: On, on: Back, to: On, when: n > 0, set: {n: 0}}\n"
        "  - {from: On, on: Reset, to: On, when: n > 0, set: {n: 0}}\n")
    (tmp_path / "steps-system.yaml").write_text(
        "format: 1\nsystem: steps\ninstances:\n  c: {table: steps.yaml}\nenvironment:\n  c: [Up, Back, Reset]\n"
        "properties:\n  - {name: steps-end, no-cycle-within: {steps: [c.Up, c.Back, c.Reset]}}\n")
    [check] = failed(tmp_path / "steps-system.yaml")
    assert check.trace is not None and check.trace.loop_start == 0
    assert [label[2] for label in check.trace.steps] == ["Up", "Back"]


def test_a_cycles_loop_is_read_back_through_the_first_way_each_configuration_was_reached(tmp_path: Path) -> None:
    """A reaches B by Up, and C by Side, whose Join reaches B again after B was found: the loop
    back to A is Up, Go, Home, never Side, Join, Go, Home."""
    (tmp_path / "ways.yaml").write_text(
        "format: 1\nmachine: ways\nstates:\n  A: {initial: true}\n  B: {}\n  C: {}\n  D: {}\n"
        "events:\n  Up: {}\n  Side: {}\n  Join: {}\n  Go: {}\n  Home: {}\n"
        "transitions:\n  - {from: A, on: Up, to: B}\n  - {from: A, on: Side, to: C}\n  - {from: C, on: Join, to: B}\n"
        "  - {from: B, on: Go, to: D}\n  - {from: D, on: Home, to: A}\n")
    (tmp_path / "ways-system.yaml").write_text(
        "format: 1\nsystem: ways\ninstances:\n  w: {table: ways.yaml}\nenvironment:\n  w: [Up, Side, Join, Go, Home]\n"
        "properties:\n  - {name: ways-end, no-cycle-within: {steps: [w.Up, w.Side, w.Join, w.Go, w.Home]}}\n")
    [check] = failed(tmp_path / "ways-system.yaml")
    assert check.trace is not None and check.trace.loop_start == 0
    assert [label[2] for label in check.trace.steps] == ["Up", "Go", "Home"]
