"""The figures of the model-based walks (docs/durability.md, "The code held to its model"): how
many seeded walks of durable-run-fixed.yaml the real store and ledger tool followed, their
steps, the real calls checked, the distinct system configurations the walks passed through
(as the explorer counts them, under symmetry, beside the explorer's total) and the time; then,
for each planted defect (tests/protocol_plants.py), the walk and step that caught it. Usage:
``.venv/bin/python bench/protocol_walks.py [--walks N] [--length N] [--pg URL]``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import uuid
from pathlib import Path

import pytest
from agentfsm.faults.protocol_walk import RealProtocol, Walked, walk
from agentfsm.impl.durable.ledger import MemoryLedger
from agentfsm.impl.stores.leases import OwnedStore
from agentfsm.impl.stores.sqlite import SqliteStore
from agentfsm.spec.system_load import load_system
from agentfsm.verify.system.explore import explore_system
from agentfsm.verify.system.step import Config, canonicalizer

ROOT = Path(__file__).resolve().parent.parent
SYSTEM = load_system(str(ROOT / "spec/systems/durable-run-fixed.yaml"))


def clean(name: str, store: OwnedStore, walks: int, length: int, total: int) -> None:
    walked, seen = Walked(), set[Config]()
    start, cpu = time.perf_counter(), time.process_time()
    diverged = [d for seed in range(walks)
                if (d := walk(SYSTEM, RealProtocol(store, MemoryLedger(), uuid.uuid4().hex), seed, length, walked,
                              seen)) is not None]
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    canonical = canonicalizer(SYSTEM, True)
    reached = len({canonical(c) for c in seen})
    print(f"{name}: {walked.walks} walks of up to {length} steps, {walked.steps:,} steps, {walked.checked:,} real "
          f"calls checked, {reached:,} of the model's {total:,} configurations passed through, "
          f"{len(diverged)} diverged; {seconds:.1f} s wall, {cpu:.1f} s CPU")
    for d in diverged[:3]:
        print(f"  {d}")


def plants(store: OwnedStore, walks: int, length: int) -> None:
    sys.path.insert(0, str(ROOT / "tests"))
    from protocol_plants import PLANTS
    for name, plant in sorted(PLANTS.items()):
        with pytest.MonkeyPatch.context() as mp:
            plant(mp)
            start = time.perf_counter()
            found = next((d for seed in range(walks)
                          if (d := walk(SYSTEM, RealProtocol(store, MemoryLedger(), uuid.uuid4().hex), seed, length,
                                        Walked())) is not None), None)
            seconds = time.perf_counter() - start
        print(f"plant {name}: " + (f"caught by {found} ({seconds:.2f} s)" if found else
                                    f"not caught in {walks} walks ({seconds:.1f} s)"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--walks", type=int, default=1000)
    parser.add_argument("--length", type=int, default=60)
    parser.add_argument("--pg", metavar="URL", help="walk the PostgreSQL store too")
    args = parser.parse_args()
    total = len(explore_system(SYSTEM).configs)
    with tempfile.TemporaryDirectory() as folder:
        store = SqliteStore(Path(folder) / "runs.db")
        clean("sqlite", store, args.walks, args.length, total)
        plants(store, 200, args.length)
        store.close()
    if args.pg:
        from agentfsm.impl.stores.postgres import PostgresStore
        schema = f"walks_{uuid.uuid4().hex[:8]}"
        pg = PostgresStore(args.pg, schema)
        try:
            clean("postgresql", pg, args.walks, args.length, total)
        finally:
            pg._execute(f"DROP SCHEMA {schema} CASCADE")
            pg.close()


if __name__ == "__main__":
    main()
