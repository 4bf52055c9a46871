"""Benchmark of the conformance harness against the adapter's own speed.

The same request stream (every vector of the Loom table, with the suffix extension for
one extra state: a reset, then each vector's events) goes once through ``conform``'s
harness — pipelined requests, every reply parsed and judged — and once straight into the
adapter's stdin, its replies read and counted and nothing else. Both clocks start once
the adapter has answered a first reset, so neither counts its start-up. The harness's
cost is the difference; the goal is less than half the adapter's own time. Adapters:
the Python reference (``agentfsm adapter``) and the TypeScript example (when built).

    .venv/bin/python bench/bench_conform.py [--extra-states K]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

from agentfsm.spec import Table, load_table
from agentfsm.spec.vectorfile import Vector
from agentfsm.verify.conformance.conform import Runner
from agentfsm.verify.conformance.harness import ProcessTransport, Transport, encode
from agentfsm.verify.conformance.vectors import generate_extended

ROOT = Path(__file__).resolve().parent.parent
LOOM = ROOT / "spec" / "loom-agent.yaml"
RESET = {"op": "reset", "machine": "loom-agent"}


def stream(vectors: list[Vector]) -> tuple[bytes, int]:
    """Every request of the run, as the harness sends them, and how many there are."""
    lines = []
    for vector in vectors:
        lines.append(encode(RESET))
        lines.extend(encode({"op": "event", "event": s.event, "params": dict(s.params)}) for s in vector.steps)
    return b"".join(lines), len(lines)


def direct(argv: list[str], data: bytes, count: int) -> float:
    """Seconds for the adapter to answer the stream piped straight in (after its first reply)."""
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(encode(RESET))
    reader = proc.stdout
    reader.readline()
    start = time.perf_counter()
    writer = threading.Thread(target=lambda: (proc.stdin.write(data), proc.stdin.close()))  # type: ignore[union-attr]
    writer.start()
    left, buffered = count, b""
    while left:
        chunk = reader.read(1 << 16)
        if not chunk:
            raise RuntimeError(f"{argv[0]} stopped with {left} replies missing")
        buffered += chunk
        *done, buffered = buffered.split(b"\n")
        left -= len(done)
    seconds = time.perf_counter() - start
    writer.join()
    proc.wait(timeout=10)
    return seconds


def harnessed(table: Table, argv: list[str], vectors: list[Vector]) -> tuple[float, bool]:
    """Seconds for ``conform``'s harness to run the vectors (after the adapter's first reply), and the verdict."""
    first = ProcessTransport(argv, 30.0)
    first.request(RESET)
    made = [first]

    def connect() -> Transport:
        return made.pop() if made else ProcessTransport(argv, 30.0)

    start = time.perf_counter()
    report = Runner(table, connect).run(vectors)
    return time.perf_counter() - start, report.ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--extra-states", type=int, default=1, help="suffix extension (default 1)")
    args = parser.parse_args()
    table = load_table(LOOM)
    vectors = list(generate_extended(table, extra_states=args.extra_states)[1])
    data, count = stream(vectors)
    steps = count - len(vectors)
    adapters = {"python": [str(Path(sys.executable).parent / "agentfsm"), "adapter", str(LOOM)]}
    node, built = shutil.which("node"), ROOT / "examples" / "conformance" / "dist" / "adapter.js"
    if node and built.exists():
        adapters["typescript"] = [node, str(built)]
    else:
        print("typescript: skipped (node or examples/conformance/dist missing: run make setup)")
    print(f"conform harness vs direct pipe: {len(vectors)} vectors, {steps} steps, {count} requests "
          f"(loom-agent, --extra-states {args.extra_states})")
    results = {}
    for name, argv in adapters.items():
        alone = direct(argv, data, count)
        through, ok = harnessed(table, argv, vectors)
        overhead = (through - alone) / alone
        results[name] = {"direct_steps_per_s": round(steps / alone), "harness_steps_per_s": round(steps / through),
                         "harness_cost": round(overhead, 3), "passed": ok}
        goal = "met" if overhead < 0.5 else "NOT met"
        print(f"  {name:<10} direct {steps / alone:>9,.0f} steps/s   harness {steps / through:>9,.0f} steps/s   "
              f"harness cost {overhead:+.0%} of the adapter's own time (goal < +50%: {goal})"
              + ("" if ok else "   (vectors FAILED)"))
    print(json.dumps({"bench": "conform", "vectors": len(vectors), "steps": steps, "adapters": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
