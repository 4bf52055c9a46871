"""Benchmark of the durable runtime: steps/s on SQLite against a bare SQLite insert loop with
the same durability settings (WAL, synchronous=FULL, one transaction per write), recovery
time against journal length with and without snapshots, and crash scenarios per second.

    .venv/bin/python bench/bench_durable.py [--steps N] [--dir DIR]

The store lives in DIR (default: the system's temporary directory); fsync cost depends on
that file system, which is why the baseline is measured there too, in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from agentfsm.faults.crash import CrashChecker
from agentfsm.impl.agents.loom import LoomAgent, LoomConfig, Transcript
from agentfsm.impl.durable.driver import DurableLink
from agentfsm.impl.durable.ledger import MemoryLedger, ledger_tools
from agentfsm.impl.durable.run import DurableRun, Options
from agentfsm.impl.llm.client import Call, ReplyStep, Say, ScriptedLlm
from agentfsm.impl.stores.journal import canonical
from agentfsm.impl.stores.sqlite import SqliteStore, connect
from agentfsm.spec import Table, load_table
from figures import record

ROOT = Path(__file__).resolve().parent.parent
COUNTER = ROOT / "tests" / "tables" / "counter.yaml"
LOOM = ROOT / "spec" / "loom-agent.yaml"


def bare_inserts(path: Path, n: int, body: str) -> float:
    """Seconds for n single-row transactions: the floor any durable step pays."""
    conn = connect(path)
    conn.execute("CREATE TABLE t (seq INTEGER PRIMARY KEY, body TEXT NOT NULL)")
    start = time.perf_counter()
    for i in range(n):
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO t VALUES (?, ?)", (i, body))
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - start
    conn.close()
    return elapsed


def durable_steps(table: Table, path: Path, n: int, snapshot_every: int = 0) -> float:
    store = SqliteStore(path)
    run = DurableRun.create(store, table, "bench", ledger_tools(table, MemoryLedger(), False),
                            options=Options(snapshot_every=snapshot_every))
    start = time.perf_counter()
    for i in range(n):
        run.deliver("Tick", event_id=f"t{i}")
    elapsed = time.perf_counter() - start
    store.close()
    return elapsed


def recovery(table: Table, path: Path) -> float:
    store = SqliteStore(path)
    start = time.perf_counter()
    DurableRun.open(store, table, "bench", ledger_tools(table, MemoryLedger(), False))
    elapsed = time.perf_counter() - start
    store.close()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()
    n = args.steps
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        root = Path(tmp)
        table = load_table(COUNTER, {"max": 100_000})
        # one step record of the counter table is about this long
        body = canonical({"event": "Tick", "params": {}, "prev": {"state": "Counting", "vars": {"n": 1}},
                          "next": {"state": "Counting", "vars": {"n": 2}}, "actions": ["Note"],
                          "reason": "row 1: Tick [n < max] / Note", "effects": [], "approvals": []})
        bare = bare_inserts(root / "bare.db", n, body)
        print(f"SQLite in {tmp} (WAL, synchronous=FULL)")
        print(f"  bare insert+commit loop: {n / bare:9.0f} writes/s")
        rows: list[dict[str, object]] = [{"what": "bare SQLite insert+commit", "per second": n / bare,
                                          "× bare writes": 1.0}]
        # Each counter step writes step, started, completed: three durable writes.
        durable = durable_steps(table, root / "durable.db", n)
        print(f"  durable steps (3 writes each: step, started, completed): {n / durable:9.0f} steps/s "
              f"= {3 * n / durable:.0f} writes/s, ratio to bare writes {(3 * n / durable) / (n / bare):.2f}")
        rows.append({"what": "durable steps (3 writes: step, started, completed)", "per second": n / durable,
                     "× bare writes": (3 * n / durable) / (n / bare)})
        quiet = _without_effects(table)
        plain = durable_steps(quiet, root / "plain.db", n)
        print(f"  durable steps without effects (1 write each): {n / plain:9.0f} steps/s, "
              f"ratio to bare {(n / plain) / (n / bare):.2f}")
        rows.append({"what": "durable steps without effects (1 write)", "per second": n / plain,
                     "× bare writes": (n / plain) / (n / bare)})
        record("durable-sqlite", rows, table=f"tests/tables/counter.yaml, {n} steps", note="Wall time, WAL, "
               "synchronous=FULL; per second: writes for the bare loop, steps for the others.")
        recovered = []
        print("recovery time against journal length (records; counter table, 3 records per step)")
        for steps in (100, 1000, 3000):
            for every in (0, 100):
                path = root / f"rec-{steps}-{every}.db"
                durable_steps(table, path, steps, every)
                took = recovery(table, path)
                label = f"snapshot every {every}" if every else "no snapshots"
                print(f"  {3 * steps + 1:6d} records, {label:<18}: {took * 1000:8.1f} ms")
                recovered.append({"records": 3 * steps + 1, "snapshots": label, "recovery (ms)": took * 1000})
        record("durable-recovery", recovered, table="tests/tables/counter.yaml, 3 records per step",
               note="Wall time to recover a run from its SQLite journal.")
        agent_figures(root)
    loom = load_table(LOOM)
    start = time.perf_counter()
    report = CrashChecker(loom).check()
    took = time.perf_counter() - start
    runs = report.crashes + report.double_crashes
    print(f"crash injection on loom-agent: {report.scenarios} scenarios, {report.crashes} crashes, "
          f"{report.double_crashes} double crashes in {took:.2f} s: {report.scenarios / took:.0f} scenarios/s, "
          f"{runs / took:.0f} crash-recoveries/s ({'ok' if report.ok else 'VIOLATIONS'})")


def agent_run(root: Path, turns: int, store: SqliteStore | None) -> tuple[int, float]:
    """Steps and seconds of a scripted Loom agent: per turn a streamed sentence with a read_file
    call, then a short answer; durable when ``store`` is given."""
    loom = load_table(LOOM)
    (root / "notes.txt").write_text("notes\n")
    sentence = " ".join(["word"] * 20)
    replies: list[list[ReplyStep]] = []
    for _ in range(turns):
        replies += [[Say(sentence), Call("read_file", {"path": "notes.txt"})], [Say("done")]]
    agent = LoomAgent(loom, ScriptedLlm(replies), config=LoomConfig(workdir=root, commit_hook=False),
                      display=Transcript())
    if store is not None:
        DurableLink.create(agent, agent, store, "bench")

    async def play() -> None:
        async with agent:
            for k in range(turns):
                agent.send_input("go", event_id=f"input-{k}")
                await agent.wait_idle()
    start = time.perf_counter()
    asyncio.run(play())
    return len(agent.history), time.perf_counter() - start


def agent_figures(root: Path, turns: int = 100) -> None:
    steps, plain = agent_run(root, turns, None)
    store = SqliteStore(root / "agent.db")
    durable_count, durable = agent_run(root, turns, store)
    records = store.version("bench")
    store.close()
    print(f"Loom agent (async driver, scripted LLM, read_file; {turns} turns, {steps} steps):")
    print(f"  in memory: {steps / plain:9.0f} steps/s")
    print(f"  durable on SQLite: {durable_count / durable:9.0f} steps/s ({records / durable_count:.2f} records per "
          f"step), ratio to in memory {(durable_count / durable) / (steps / plain):.2f}")


def _without_effects(table: Table) -> Table:
    """The counter table with its one action made internal: steps with no effect protocol."""
    actions = tuple(replace(a, effect="internal") for a in table.actions)
    return replace(table, actions=actions, action_index={a.name: a for a in actions})


if __name__ == "__main__":
    main()
