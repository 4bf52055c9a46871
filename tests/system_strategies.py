"""Random small systems of random tables, for the explorer and the independent checker
(``system_checker``: written from docs/systems.md on top of the naive table interpreter,
sharing no code with the package) to be compared on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agentfsm.spec.errors import TableError
from agentfsm.spec.system_load import load_system
from agentfsm.spec.system_model import System
from hypothesis import assume
from hypothesis import strategies as st
from strategies_tables import table_data


@st.composite
def system_files(draw: st.DrawFn, directory: Path, checks: bool = True) -> Path:
    """Two or three random tables as instances (one maybe a group of two, some passive), random
    links (self-sends included), environment, capacity, faults and (with ``checks``) invariants
    and a ``no-cycle-within`` property, written to ``directory``; the system file's path. Half
    the tables get a row that fires and changes nothing."""
    tables = [draw(table_data(max_states=3, max_rows=5)) for _ in range(draw(st.integers(1, 2)))]
    for data in tables:
        if draw(st.booleans()):   # a row that fires and changes nothing (maybe sending something)
            data["transitions"].append({"from": "S0", "on": draw(st.sampled_from(list(data["events"]))), "to": "S0",
                                        "emit": draw(st.lists(st.sampled_from(list(data["actions"])), max_size=1))})
    for k, data in enumerate(tables):
        (directory / f"t{k}.yaml").write_text(json.dumps(data))
    names = ["a", "b", "c"][: draw(st.integers(2, 3))]
    instances: dict[str, Any] = {}
    table_of: dict[str, dict[str, Any]] = {}
    for name in names:
        k = draw(st.integers(0, len(tables) - 1))
        spec: dict[str, Any] = {"table": f"t{k}.yaml"}
        if name == "b" and draw(st.booleans()):
            spec["count"] = 2
        if draw(st.booleans()):
            spec["durable"] = ["state"]
        if name != "a" and draw(st.booleans()):
            spec["passive"] = True
        instances[name] = spec
        table_of[name] = tables[k]
    refs = {n: f"{n}[*]" if "count" in instances[n] else n for n in names}

    def plain_events(name: str) -> list[str]:
        return [e for e, spec in table_of[name]["events"].items() if not spec.get("params")]

    links = []
    for _ in range(draw(st.integers(1, 4))):
        source, target = draw(st.sampled_from(names)), draw(st.sampled_from(names))
        events = plain_events(target)
        if not events:
            continue
        mode = refs[target]
        if "count" in instances[target]:
            mode = draw(st.sampled_from([f"{target}[*]", f"{target}[any]"]))
        links.append({"from": refs[source], "action": draw(st.sampled_from(list(table_of[source]["actions"]))),
                      "to": mode, "event": draw(st.sampled_from(events))})
    environment = {refs[n]: draw(st.lists(st.sampled_from(list(table_of[n]["events"])), min_size=int(n == "a"),
                                          max_size=3, unique=True)) for n in names}
    faults = {kind: {"max": 1} for kind in ("crash", "lose", "duplicate", "stall") if draw(st.booleans())}
    invariants = []
    for name in draw(st.lists(st.sampled_from(names), max_size=2, unique=True)):
        state = draw(st.sampled_from(list(table_of[name]["states"])))
        expr = f"count({name}[*], state == {state}) <= 1" if "count" in instances[name] else f"{name}.state != {state}"
        invariants.append({"name": f"inv-{name}", "expr": expr})
    steps = sorted({f"{refs[n]}.{e}" for n in names for e in table_of[n]["events"]}
                   | {f"{refs[n]}.{kind}" for n in names for kind in faults})
    properties = [{"name": "steps-end", "no-cycle-within": {"steps": draw(st.lists(st.sampled_from(steps),
                                                                                    min_size=1, unique=True))}}
                  ] if draw(st.booleans()) else []
    if not checks:
        invariants, properties = [], []
    system = {"format": 1, "system": "random", "instances": instances,
              "mailbox": {"capacity": draw(st.integers(1, 2))}, "links": links,
              "environment": {k: v for k, v in environment.items() if v}, "faults": faults,
              "invariants": invariants, "properties": properties}
    path = directory / "system.yaml"
    path.write_text(json.dumps(system))
    return path


def random_system(path: Path) -> System:
    return load_system(path)


def drawn_system(data: st.DataObject, directory: Path, checks: bool = True) -> System:
    """A random system drawn into ``directory`` and loaded (a drawing the loader rejects is skipped);
    ``checks``: with invariants and properties."""
    path = data.draw(system_files(directory, checks))
    try:
        return random_system(path)
    except TableError:
        assume(False)
        raise
