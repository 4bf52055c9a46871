"""System exploration on the Loom system with 2, 3 and 4 tool-call instances, with and
without symmetry reduction, beside Spin on the Promela export in the same run.

For each size: configurations and configurations/s of the explorer with symmetry (the
representatives) and without (every configuration), and Spin's stored states and
states/s on the export without reduction (``-DNOREDUCE``) and with its partial-order
reduction; then the ratios. Usage: ``make bench`` or ``.venv/bin/python bench/bench_systems.py``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from agentfsm.spec.system_load import load_system
from agentfsm.spec.system_model import System
from agentfsm.verify import spin
from agentfsm.verify.system_explore import explore_system
from agentfsm.verify.system_promela import export_system_promela

SYSTEMS = Path(__file__).resolve().parent.parent / "spec" / "systems"


def loom_system(calls: int, directory: Path) -> System:
    """The bundled Loom system with ``calls`` tool-call instances (an LLM response asks for all)."""
    text = (SYSTEMS / "loom-with-tools.yaml").read_text()
    for old, new in (("count: 2", f"count: {calls}"),
                     ("agent: {table: ../loom-agent.yaml, mailbox: 2}",
                      f"agent: {{table: ../loom-agent.yaml, mailbox: {calls}, set: {{max_tools: {calls}}}}}"),
                     ("tool_calls: [0, 2]", f"tool_calls: [0, {calls}]"),
                     ("table: ../", f"table: {SYSTEMS.parent}/"), ("table: tables/", f"table: {SYSTEMS}/tables/")):
        assert old in text, old
        text = text.replace(old, new)
    path = directory / f"loom-{calls}.yaml"
    path.write_text(text)
    return load_system(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, nargs="+", default=[2, 3, 4])
    args = parser.parse_args()
    have_spin = spin.available()
    print("Loom system: agent + N tool calls (one crash), configurations/s; Spin on the export, same run")
    print(f"{'N':>2} {'sym confs':>10} {'sym conf/s':>10} {'full confs':>10} {'full conf/s':>11} {'sym x':>6} | "
          f"{'spin NR st':>10} {'NR st/s':>9} {'spin PO st':>10} {'PO st/s':>9} | {'NR/ours':>7} {'PO red.':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        for calls in args.calls:
            system = loom_system(calls, Path(tmp))
            start = time.perf_counter()
            reduced = explore_system(system, symmetry=True)
            sym_s = time.perf_counter() - start
            start = time.perf_counter()
            full = explore_system(system, symmetry=False)
            full_s = time.perf_counter() - start
            sym_n, full_n = len(reduced.configs), len(full.configs)
            row = (f"{calls:>2} {sym_n:>10,} {sym_n / sym_s:>10,.0f} {full_n:>10,} {full_n / full_s:>11,.0f} "
                   f"{full_n / sym_n:>6.1f}")
            if have_spin:
                model = export_system_promela(system)
                plain = spin.run_spin_model(model, Path(tmp) / f"nr{calls}", timeout=900)
                por = spin.run_spin_model(model, Path(tmp) / f"po{calls}", timeout=900, reduce=True)
                assert plain.states == full_n, (plain.states, full_n)
                plain_rate = plain.states / max(plain.search_s, 1e-3)
                por_rate = por.states / max(por.search_s, 1e-3)
                row += (f" | {plain.states:>10,} {plain_rate:>9,.0f} {por.states:>10,} {por_rate:>9,.0f} | "
                        f"{plain_rate / (full_n / full_s):>7.1f} {plain.states / por.states:>7.2f}")
            else:
                row += " | spin not installed"
            print(row, flush=True)
    print("sym x: configurations without symmetry / representatives with it; NR/ours: Spin's NOREDUCE states/s over "
          "ours without symmetry; PO red.: Spin's states without reduction / with partial-order reduction")


if __name__ == "__main__":
    main()
