"""The system export on shapes the fixture systems lack: steps that pick among a group's members
(one copy of a ``d_step`` per choice, up to the documented 256), an instance with nothing to do,
an instance table of more than 256 states, values past Promela's 32-bit ``int``."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest
from agentfsm.spec.system_load import load_system
from agentfsm.spec.system_model import System
from agentfsm.verify.spin.system_promela import ExportError, export_system_promela
from agentfsm.verify.system.checks import run_system_checks
from agentfsm.verify.system.explore import explore_system
from spin_support import needs_spin, spin_system

BELL = """format: 1
machine: bell
variables: {rung: {type: int, min: 0, max: 4, init: 0}}
states: {Quiet: {initial: true}}
events: {Ring: {}}
transitions:
  - {from: Quiet, on: Ring, when: rung < 4, to: Quiet, set: {rung: rung + 1}}
"""


def written(tmp: Path, system: str, **tables: str) -> System:
    """The system (its YAML text) over the tables named by file stem, written into ``tmp`` and loaded."""
    for stem, text in tables.items():
        (tmp / f"{stem}.yaml").write_text(text)
    (tmp / "system.yaml").write_text(system)
    return load_system(tmp / "system.yaml")


def counted_alike(system: System, tmp: Path) -> int:
    """The configurations the explorer finds without symmetry, once Spin has counted as many."""
    count = len(explore_system(system, symmetry=False).configs)
    assert spin_system(system, tmp / "spin").states == count
    return count


def _picking(tmp: Path, members: int, sends: int) -> System:
    """A sender whose step sends ``sends`` messages to any member of a group: ``sends - 1`` from
    its row, one more from the eventless row of the transient state it lands in."""
    actions = [f"A{k}" for k in range(sends)]
    sender = ("format: 1\nmachine: sender\n"
              "states: {Idle: {initial: true}, T: {transient: true}, Done: {final: true}}\nevents: {Go: {}}\n"
              f"actions: {{{', '.join(f'{a}: {{}}' for a in actions)}}}\ntransitions:\n"
              f"  - {{from: Idle, on: Go, to: T, emit: [{', '.join(actions[:-1])}]}}\n"
              f"  - {{from: T, to: Done, emit: [{actions[-1]}]}}\n")
    links = "".join(f'  - {{from: s, action: {a}, to: "g[any]", event: Ring}}\n' for a in actions)
    return written(tmp, "format: 1\nsystem: picks\ninstances:\n  s: {table: sender.yaml}\n"
                        f"  g: {{table: bell.yaml, count: {members}}}\nmailbox: {{capacity: {sends}}}\n"
                        f"links:\n{links}environment:\n  s: [Go]\n", bell=BELL, sender=sender)


def test_a_step_is_copied_once_per_choice_of_members_up_to_256(tmp_path: Path) -> None:
    text = export_system_promela(_picking(tmp_path, members=4, sends=4))
    picks = set(re.findall(r"pk0\[0\] = (\d); pk0\[1\] = (\d); pk0\[2\] = (\d); pk0\[3\] = (\d);", text))
    assert len(picks) == 4 ** 4 and "pk0[4] =" not in text


def test_more_than_256_copies_are_refused(tmp_path: Path) -> None:
    refused = "s sends up to 4 group[any] messages in one step to groups of 5: 625 copies"
    with pytest.raises(ExportError, match=re.escape(refused)):
        export_system_promela(_picking(tmp_path, members=5, sends=4))


@needs_spin
def test_spin_counts_the_steps_that_pick_members_alike(tmp_path: Path) -> None:
    counted_alike(_picking(tmp_path, members=2, sends=3), tmp_path)


@needs_spin
def test_spin_counts_a_system_whose_instance_has_nothing_to_do(tmp_path: Path) -> None:
    quiet = "format: 1\nmachine: quiet\nstates: {Idle: {initial: true}}\nevents: {}\ntransitions: []\n"
    counted_alike(written(tmp_path, "format: 1\nsystem: quiet\ninstances:\n  a: {table: quiet.yaml}\n"
                                    "faults:\n  crash: {max: 1}\n", quiet=quiet), tmp_path)


@needs_spin
def test_spin_counts_an_instance_of_more_than_256_states(tmp_path: Path) -> None:
    names = [f"S{i}" for i in range(300)]
    states = ", ".join(f"{n}: {{{'initial: true' if i == 0 else ''}}}" for i, n in enumerate(names))
    rows = "".join(f"  - {{from: {a}, on: next, to: {b}}}\n" for a, b in itertools.pairwise(names))
    long = f"format: 1\nmachine: long\nstates: {{{states}}}\nevents: {{next: {{}}}}\ntransitions:\n{rows}"
    system = written(tmp_path, "format: 1\nsystem: long\ninstances:\n  a: {table: long.yaml}\n"
                               "environment:\n  a: [next]\n", long=long)
    assert counted_alike(system, tmp_path) == 300


def test_a_value_past_32_bits_is_refused(tmp_path: Path) -> None:
    wide = ("format: 1\nmachine: wide\nvariables: {n: {type: int, min: 0, max: 5000000000, init: 0}}\n"
            "states: {A: {initial: true}}\nevents: {go: {}}\ntransitions:\n  - {from: A, on: go, to: A, set: {n: 1}}\n")
    system = written(tmp_path, "format: 1\nsystem: wide\ninstances:\n  a: {table: wide.yaml}\n"
                               "environment:\n  a: [go]\n", wide=wide)
    refused = "a: variable n ranges over 0..5000000000, outside Promela's 32-bit int"
    with pytest.raises(ExportError, match=re.escape(refused)):
        export_system_promela(system)


LOOPER = """format: 1
machine: looper
variables: {n: {type: int, min: 0, max: 3, init: 0}}
states: {A: {initial: true}, T1: {transient: true}, T2: {transient: true}, T3: {transient: true}, B: {}, C: {}}
events: {go: {}, back: {}}
transitions:
  - {from: A, on: go, to: T1}
  - {from: T1, when: n < 3, to: T1, set: {n: n + 1}}
  - {from: T1, when: n == 3, to: T2}
  - {from: T2, to: T3}
  - {from: T3, to: B}
  - {from: B, on: back, to: C}
  - {from: C, on: back, to: A, set: {n: 0}}
"""


@needs_spin
def test_spin_settles_a_chain_longer_than_the_transient_states(tmp_path: Path) -> None:
    counted_alike(written(tmp_path, "format: 1\nsystem: loop\ninstances:\n  a: {table: looper.yaml}\n"
                                    "environment:\n  a: [go, back]\n", looper=LOOPER), tmp_path)


@needs_spin
def test_spin_counts_a_crash_that_resets_what_is_not_durable(tmp_path: Path) -> None:
    once = ("format: 1\nmachine: once\nvariables: {n: {type: int, min: 0, max: 1, init: 0}}\n"
            "states: {A: {initial: true}, B: {}}\nevents: {go: {}}\ntransitions:\n"
            "  - {from: A, on: go, when: n == 0, to: B, set: {n: 1}}\n")
    counted_alike(written(tmp_path, "format: 1\nsystem: once\ninstances:\n  a: {table: once.yaml}\n"
                                    "environment:\n  a: [go]\nfaults:\n  crash: {max: 1}\n", once=once), tmp_path)


SOURCE = """format: 1
machine: source
variables:
  k: {type: int, min: 0, max: 3, init: 0}
  w: {type: int, min: 0, max: 256, init: 0}
states: {Idle: {initial: true}}
events: {Go: {}, Flip: {}}
actions: {Send: {}}
transitions:
  - {from: Idle, on: Go, when: k < 3, to: Idle, set: {k: k + 1}, emit: [Send]}
  - {from: Idle, on: Flip, to: Idle, set: {w: 256 - w}}
"""
SINK = """format: 1
machine: sink
variables: {n: {type: int, min: 0, max: 1, init: 0}}
states: {Open: {initial: true}, Shut: {final: true}}
events: {Ping: {}, Close: {}}
transitions:
  - {from: Open, on: Ping, when: n < 1, to: Open, set: {n: n + 1}}
  - {from: Open, on: Close, to: Shut}
"""


@needs_spin
@pytest.mark.parametrize("fault", ["none", "duplicate", "stall"])
def test_spin_counts_messages_taken_by_rows_past_them_and_when_finished(fault: str, tmp_path: Path) -> None:
    """A sink takes a Ping by its row while the row's guard holds, takes and ignores one
    past it, and takes and ignores what reaches it once it is finished; the source's ``w``
    flips between 0 and 256 (past a byte, through the temporary of its update). With a
    duplicated message, and with a stall of the sink and its wake."""
    faults = {"none": "", "duplicate": "faults:\n  duplicate: {max: 1}\n",
              "stall": "faults:\n  stall: {instances: [sink], max: 1}\n  crash: {instances: [source], max: 1}\n"}
    system = written(
        tmp_path, "format: 1\nsystem: sink\ninstances:\n  source: {table: source.yaml}\n  sink: {table: sink.yaml}\n"
        "mailbox: {capacity: 2}\nlinks:\n  - {from: source, action: Send, to: sink, event: Ping}\n"
        f"environment:\n  source: [Go, Flip]\n  sink: [Close]\n{faults[fault]}", source=SOURCE, sink=SINK)
    counted_alike(system, tmp_path)


@needs_spin
def test_spin_fails_where_an_instance_breaks_its_own_tables_invariant(tmp_path: Path) -> None:
    """Two instances of a table with an invariant; only the second can break it."""
    low = ("format: 1\nmachine: low\nvariables: {n: {type: int, min: 0, max: 1, init: 0}}\n"
           "states: {A: {initial: true}}\nevents: {go: {}}\ntransitions:\n  - {from: A, on: go, to: A, set: {n: 1}}\n"
           "invariants:\n  - {name: low, expr: n < 1}\n")
    system = written(tmp_path, "format: 1\nsystem: low\ninstances:\n  a: {table: low.yaml}\n"
                               "  b: {table: low.yaml}\nenvironment:\n  b: [go]\n", low=low)
    checks = run_system_checks(explore_system(system, symmetry=False)).checks
    assert {c.kind for c in checks if not c.ok} == {"invariant"}
    run = spin_system(system, tmp_path / "spin", assertions=True)
    assert run.errors == 1 and "assertion violated" in run.output and "v1_n<1" in run.output.replace(" ", "")
