"""The pieces of partial-order reduction (verify/system/reduction.py), each held to its definition
on small systems whose answers can be read off their text: what an expression reads, what a step
writes, who may send to a mailbox, the closure of a stubborn set, which step is visible, and the
set a configuration expands. tests/verify/test_system_por.py checks the whole (every bug still
found, equal verdicts); these say that the reduction prunes what it may and keeps what it must."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from agentfsm.spec.system_load import load_system
from agentfsm.spec.system_model import System
from agentfsm.verify.system.reduction import (
    Reducer,
    Resource,
    expression_reads,
    instance_fields,
    invariant_reads,
    step_writes,
)
from agentfsm.verify.system.step import Config, Effect, Finding, Sent, Stepper, Successor, initial_config

FIXTURES = Path(__file__).resolve().parent.parent / "systems"

# a and b play ping-pong; c rings when b has got 1; d turns, and may stall once. The invariant
# reads a's state, b's got, d's mailbox and whether c is stalled.
PARTS = f"""format: 1
system: parts
instances:
  a: {{table: {FIXTURES / 'pingpong.yaml'}}}
  b: {{table: {FIXTURES / 'pingpong.yaml'}}}
  c: {{table: {FIXTURES / 'bell.yaml'}}}
  d: {{table: {FIXTURES / 'dial.yaml'}}}
links:
  - {{from: a, action: SendPing, to: b, event: Ping}}
  - {{from: b, action: SendPong, to: a, event: Pong}}
environment:
  a: [Go]
  c: [{{event: Ring, when: b.got == 1}}]
  d: [Turn]
faults:
  stall: {{instances: [d], max: 1}}
invariants:
  - {{name: x, expr: a.state == Ready or b.got <= 1 or d.mailbox == 0 or c.stalled}}
"""

# A relay emits Rung only on the eventless row out of its transient state; Rung rings the bell.
RELAY_TABLE = """format: 1
machine: relay
title: Turned once, then rings on its own
states:
  S0: {initial: true}
  S1: {transient: true}
  S2: {final: true}
events:
  Turn: {}
actions:
  Rung: {}
transitions:
  - {from: S0, on: Turn, to: S1}
  - {from: S1, to: S2, emit: [Rung]}
"""


def write(tmp_path: Path, name: str, text: str) -> System:
    path = tmp_path / name
    path.write_text(text)
    return load_system(path)


@pytest.fixture
def parts(tmp_path: Path) -> System:
    return write(tmp_path, "parts.yaml", PARTS)


def relay(tmp_path: Path, faults: str = "", durable: bool = False) -> System:
    """The relay and the bell it rings, with ``faults`` (YAML of the ``faults`` mapping)."""
    (tmp_path / "relay.yaml").write_text(RELAY_TABLE)
    lines = ["format: 1", "system: relays", "instances:",
             f"  relay: {{table: relay.yaml{', durable: [state]' if durable else ''}}}",
             f"  bell: {{table: {FIXTURES / 'bell.yaml'}}}",
             "links:", "  - {from: relay, action: Rung, to: bell, event: Ring}",
             "environment:", "  relay: [Turn]", *(["faults:", f"  {faults}"] if faults else [])]
    return write(tmp_path, "relay-system.yaml", "\n".join(lines) + "\n")


def test_an_expression_reads_the_states_variables_mailboxes_and_stalls_it_names(parts: System) -> None:
    [invariant] = parts.invariants
    assert expression_reads(parts, invariant.promela) == {("st", 0), ("v", 1, 1), ("m", 3), ("x", 2)}
    assert expression_reads(parts, "(v0_seq == 1) && (v1_got == 2) && (len(mb2) > st3) && stall1") == {
        ("v", 0, 0), ("v", 1, 1), ("m", 2), ("st", 3), ("x", 1)}
    assert invariant_reads(parts) == {("st", 0), ("v", 1, 1), ("m", 3), ("x", 2)}


def test_a_tables_own_invariant_reads_its_instances_state_and_every_variable(tmp_path: Path) -> None:
    turner = (FIXTURES / "turner.yaml").read_text()
    (tmp_path / "counted.yaml").write_text(turner + "invariants:\n  - {name: few, expr: turns <= 2}\n")
    system = write(tmp_path, "system.yaml", f"""format: 1
system: counted
instances:
  plain: {{table: {FIXTURES / 'pingpong.yaml'}}}
  counted: {{table: counted.yaml}}
environment:
  plain: [Go]
""")
    counted = system.instance("counted")
    assert counted.table.invariants and not system.instance("plain").table.invariants
    assert instance_fields(system, counted.index) == {("st", 1), *(("v", 1, k) for k in range(len(
        counted.table.variables)))}
    assert invariant_reads(system) == instance_fields(system, counted.index)


def config(states: tuple[int, ...], boxes: tuple[int, ...] = (0, 0, 0), stalled: tuple[bool, ...] = (False,) * 3,
           spent: tuple[int, ...] = (0, 0), got: int = 0) -> Config:
    """Three instances with two variables each (the first's second is ``got``); a mailbox holds
    that many messages."""
    return (tuple((s, (0, got if k == 0 else 0)) for k, s in enumerate(states)),
            tuple((("Ping", ()),) * n for n in boxes), stalled, spent)


def test_a_step_writes_what_differs_between_its_configurations() -> None:
    before = config((0, 0, 0))
    assert step_writes(before, config((1, 0, 0)), 0) == {("st", 0)}
    assert step_writes(before, config((0, 0, 0), got=2), 0) == {("v", 0, 1)}
    assert step_writes(before, config((0, 0, 0), got=2), 1) == set(), "another instance's variables are not its"
    assert step_writes(before, config((0, 1, 0)), 0) == set(), "nor its state"
    assert step_writes(before, config((0, 0, 0), boxes=(0, 1, 0), stalled=(False, False, True), spent=(0, 1)), 0) \
        == {("m", 1), ("x", 2), ("f", 1)}


def test_the_reducer_reads_what_invariants_and_guards_read(parts: System) -> None:
    reducer = Reducer(parts)
    assert reducer.visible == {("st", 0), ("v", 1, 1), ("m", 3), ("x", 2)}
    assert reducer.visible_state == [True, False, False, False]
    assert reducer.visible_slots == [[], [1], [], []]
    assert (reducer.visible_boxes, reducer.visible_stalls) == ([3], [2])
    assert reducer.guard_readers == {("v", 1, 1): {2}}
    assert reducer.guard_reads == [set(), set(), {("v", 1, 1)}, set()]
    assert (reducer.blind_guards, reducer.guard_blind) == (set(), [False] * 4)
    assert reducer.fault_members == [{3}]


def test_a_guard_whose_reads_are_unknown_makes_its_instance_depend_on_every_other(parts: System) -> None:
    guarded = [env for env in parts.environment if env.guard is not None]
    blind = dataclasses.replace(parts, environment=tuple(
        dataclasses.replace(env, guard_promela=None) if env.guard is not None else env for env in parts.environment))
    reducer = Reducer(blind)
    assert [env.instances for env in guarded] == [(2,)]
    assert (reducer.blind_guards, reducer.guard_blind) == ({2}, [False, False, True, False])
    assert reducer.guard_readers == {} and reducer.guard_reads == [set()] * 4
    assert reducer.readers({("st", 3)}) == {2}
    pushers = reducer.pushers(tuple(s for s, _ in initial_config(blind)[0]))
    assert reducer.closure(2, pushers, {}, set()) == {0, 1, 2, 3}


def test_the_mailboxes_an_instance_may_ever_send_to(tmp_path: Path) -> None:
    system = relay(tmp_path)
    reducer = Reducer(system)
    table = system.instance("relay").table
    s0, s1, s2 = (table.state_index[name] for name in ("S0", "S1", "S2"))
    bell = system.instance("bell").index
    assert reducer.future_targets(0, s0) == reducer.future_targets(0, s1) == frozenset({bell})
    assert reducer.future_targets(0, s2) == frozenset(), "a final state sends nothing more"
    assert reducer.future_targets(0, s0) == frozenset({bell}), "and the memo answers the same"
    assert reducer.future_targets(bell, 0) == frozenset()
    assert reducer.pushers((s0, 0)) == [set(), {0}]
    assert reducer.pushers((s2, 0)) == [set(), set()]
    assert reducer.pushers((s0, 0)) == [set(), {0}]
    # A relay that may crash restarts from S0 and may ring again, unless its state is durable.
    crash = "crash: {instances: [relay], max: 1}"
    assert Reducer(relay(tmp_path, crash)).future_targets(0, s2) == frozenset({bell})
    assert Reducer(relay(tmp_path, crash, durable=True)).future_targets(0, s2) == frozenset()
    # Only its own crash restarts it: not another instance's, nor a stall of its own.
    for other in ("crash: {instances: [bell], max: 1}", "stall: {instances: [relay], max: 1}"):
        assert Reducer(relay(tmp_path, other)).future_targets(0, s2) == frozenset()


def test_who_may_change_a_resource_and_whose_guard_reads_it(parts: System) -> None:
    reducer = Reducer(parts)
    pushers = reducer.pushers(tuple(s for s, _ in initial_config(parts)[0]))
    assert pushers == [{1}, {0}, set(), set()]
    assert reducer.writers(pushers, ("m", 1)) == {0, 1}
    assert reducer.writers(pushers, ("m", 3)) == {3}
    assert reducer.writers(pushers, ("f", 0)) == {3}
    assert reducer.writers(pushers, ("st", 2)) == reducer.writers(pushers, ("v", 2, 0)) == {2}
    assert reducer.readers({("v", 1, 1), ("st", 0)}) == {2}
    assert reducer.readers({("st", 1)}) == set()


def steps_at(system: System, at: Config) -> dict[int, list[tuple[Successor, set[Resource]]]]:
    """The enabled steps at ``at`` by instance, each with what it writes (as ``Reducer.reduce`` makes them)."""
    steps: dict[int, list[tuple[Successor, set[Resource]]]] = {}
    for succ in Stepper(system).successors(at):
        steps.setdefault(succ[0][1], []).append((succ, step_writes(at, succ[1], succ[0][1])))
    return steps


def test_a_closure_takes_in_whoever_may_interact_before_its_members_move(parts: System) -> None:
    reducer = Reducer(parts)
    first = initial_config(parts)
    pushers = reducer.pushers(tuple(s for s, _ in first[0]))
    steps = steps_at(parts, first)
    assert sorted(steps) == [0, 3]
    assert reducer.closure(3, pushers, steps, set()) == {3}
    # c's guard reads b's got; b's mailbox is a's to fill; a's Go sends to b.
    assert reducer.closure(2, pushers, steps, set()) == {0, 1, 2}
    assert reducer.closure(0, pushers, steps, set()) == {0, 1}
    assert reducer.closure(2, pushers, steps, {0}) is None


def test_a_shared_fault_budget_and_a_message_sent_join_the_closure() -> None:
    budget = load_system(FIXTURES / "fault-budget-system.yaml")
    reducer = Reducer(budget)
    first = initial_config(budget)
    steps = steps_at(budget, first)
    assert reducer.closure(0, reducer.pushers(tuple(s for s, _ in first[0])), steps, set()) == {0, 1}
    race = load_system(FIXTURES / "crash-race-system.yaml")
    reducer = Reducer(race)
    first = initial_config(race)
    sender, bell = race.instance("sender").index, race.instance("bell").index
    steps = {sender: steps_at(race, first)[sender]}
    # The sender's ring reaches the bell: it joins, though no future sends remain (pushers cleared).
    assert reducer.closure(sender, [set(), set()], steps, set()) == {sender, bell}


def test_the_reduced_set_is_the_smallest_closure_of_invisible_steps(parts: System) -> None:
    reducer = Reducer(parts)
    first = initial_config(parts)
    successors = list(Stepper(parts).successors(first))
    assert sorted({label[1] for label, _, _ in successors}) == [0, 3]
    chosen = reducer.reduce(first, successors, lambda _: True)
    assert {label[1] for label, _, _ in chosen} == {3} and len(chosen) == len(
        [s for s in successors if s[0][1] == 3]) == 2
    assert reducer.reduce(first, successors, lambda _: False) == successors, "the cycle proviso"
    assert reducer.reduce(first, successors[:1], lambda _: True) == successors[:1]


def test_two_independent_peers_expand_one_of_them(tmp_path: Path) -> None:
    """Two peers, the invariant on the second: its Go is visible, the first's is not."""
    system = write(tmp_path, "two.yaml", f"""format: 1
system: two
instances:
  p: {{table: {FIXTURES / 'pingpong.yaml'}}}
  q: {{table: {FIXTURES / 'pingpong.yaml'}}}
environment:
  p: [Go]
  q: [Go]
invariants:
  - {{name: q-ready, expr: q.state == Ready}}
""")
    reducer = Reducer(system)
    first = initial_config(system)
    successors = list(Stepper(system).successors(first))
    assert len(successors) == 2
    assert [label[1] for label, _, _ in reducer.reduce(first, successors, lambda _: True)] == [0]
    # The smallest set of the seeds: with three peers and one watched, either free peer alone.
    peer = f"  r: {{table: {FIXTURES / 'pingpong.yaml'}}}\n"
    three = write(tmp_path, "three.yaml", (tmp_path / "two.yaml").read_text().replace(
        "  q: {", peer + "  q: {").replace("  q: [Go]", "  r: [Go]\n  q: [Go]"))
    reducer = Reducer(three)
    first = initial_config(three)
    successors = list(Stepper(three).successors(first))
    assert [label[1] for label, _, _ in reducer.reduce(first, successors, lambda _: True)] == [0]
    later = [s for s in successors if s[0][1] != 0]
    assert [label[1] for label, _, _ in reducer.reduce(first, later, lambda _: True)] == [1]


def effect(findings: tuple[Finding, ...] = (), sent: tuple[Sent, ...] = ()) -> Effect:
    return Effect(None, None, sent=sent, findings=findings)


def test_a_step_is_visible_when_it_fails_reports_or_changes_what_an_invariant_reads(parts: System) -> None:
    reducer = Reducer(parts)
    first = initial_config(parts)
    (a, b, c, d), boxes, stalled, spent = first

    def succ(i: int, nxt: Config, found: tuple[Finding, ...] = ()) -> tuple[tuple[str, int, str, tuple[()], tuple[()]],
                                                                              Config, Effect]:
        return ("env", i, "Go", (), ()), nxt, effect(found)
    moved_b = (b[0] + 1, b[1])
    assert reducer.shows(first, succ(0, first)), "a failing step leaves the configuration as it was"
    assert reducer.shows(first, succ(3, ((a, b, c, (1, d[1])), boxes, stalled, spent), (Finding("k", "m"),)))
    assert reducer.shows(first, succ(0, (((1, a[1]), b, c, d), boxes, stalled, spent)))
    assert not reducer.shows(first, succ(0, (((a[0], (1, 0)), b, c, d), boxes, stalled, spent))), "a's seq is unread"
    assert not reducer.shows(first, succ(1, ((a, moved_b, c, d), boxes, stalled, spent))), "b's state is unread"
    assert reducer.shows(first, succ(1, ((a, (b[0], (0, 1)), c, d), boxes, stalled, spent)))
    assert not reducer.shows(first, succ(1, ((a, (b[0], (1, 0)), c, d), boxes, stalled, spent)))
    message = (("Turn", ()),)
    assert reducer.shows(first, succ(3, ((a, b, c, d), ((), (), (), message), stalled, spent)))
    assert not reducer.shows(first, succ(0, ((a, b, c, d), ((), message, (), ()), stalled, spent)))
    assert reducer.shows(first, succ(2, ((a, b, c, d), boxes, (False, False, True, False), spent)))
    assert not reducer.shows(first, succ(3, ((a, b, c, d), boxes, (False, False, False, True), (1,))))


def test_a_configuration_nothing_can_be_pruned_at_keeps_its_successors_in_their_order(tmp_path: Path) -> None:
    """Two peers that ping each other: each one's closure holds the other, so the set is every
    step, returned as the stepper gave them (the environment lists q first), not by instance."""
    system = write(tmp_path, "pair.yaml", f"""format: 1
system: pair
instances:
  p: {{table: {FIXTURES / 'pingpong.yaml'}}}
  q: {{table: {FIXTURES / 'pingpong.yaml'}}}
links:
  - {{from: p, action: SendPing, to: q, event: Ping}}
  - {{from: q, action: SendPing, to: p, event: Ping}}
environment:
  q: [Go]
  p: [Go]
""")
    first = initial_config(system)
    successors = list(Stepper(system).successors(first))
    assert [label[1] for label, _, _ in successors] == [1, 0]
    assert Reducer(system).reduce(first, successors, lambda _: True) == successors
