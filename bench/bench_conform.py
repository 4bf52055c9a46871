"""Benchmark of the conformance harness against the adapter's own speed.

The same request stream (every vector of the Loom table, with the suffix extension for
one extra state: a reset, then each vector's events) goes once through ``conform``'s
harness as ``conform --jobs 1`` runs it without ``--junit`` (pipelined requests, every reply
judged, the passing results kept as counts, no seconds measured) and once straight into
the adapter's stdin, its replies read and counted and nothing else. Both clocks start once
the adapter has answered a first reset, so neither counts its start-up, and both count
CPU seconds: the adapter's and this process's. The goal: piping's CPU at least 0.8x the
harness's (the harness costs at most a quarter of the adapter's own time). Adapters:
the Python reference (``agentfsm adapter``) and the TypeScript example (when built).

Then ``conform`` at depth as a user runs it: ``agentfsm conform`` on Loom with
``--extra-states D --jobs 2`` and the TypeScript adapter (the Python one without node), in
its own process, start to exit: wall and CPU seconds (harness, adapters and generation,
from the kernel's accounting of that process and the descendants it waited for), the
vectors, the peak resident memory of the run's own process and that of the largest process
it waited for (a harness process or an adapter). ``--before REV`` runs the same command
first with revision REV's code (``source_tree.py``), so the two stand side by side.

    .venv/bin/python bench/bench_conform.py [--extra-states K] [--rounds R] [--depth D] [--before REV]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from agentfsm.spec import Table, load_table
from agentfsm.spec.vectorfile import Vector
from agentfsm.verify.conformance.conform import Runner
from agentfsm.verify.conformance.harness import ProcessTransport, Transport, encode
from agentfsm.verify.conformance.vectors import generate_extended
from cpu import children_cpu, process_cpu
from figures import record
from source_tree import command, export_tree

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
    """CPU seconds (adapter and this process) to pipe the stream straight in and read every reply.

    Counted from the adapter's first reply, so neither side counts the adapter's start-up.
    """
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(encode(RESET))
    reader = proc.stdout
    reader.readline()
    started, mine = process_cpu(proc.pid), time.process_time()
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
    writer.join()
    seconds = process_cpu(proc.pid) - started + time.process_time() - mine
    proc.wait(timeout=10)
    return seconds


def harnessed(table: Table, argv: list[str], vectors: list[Vector]) -> tuple[float, bool]:
    """CPU seconds (adapter and harness) for ``conform``'s harness to run the vectors, and the verdict.

    Counted from the adapter's first reply too: its start-up CPU is taken off its total.
    """
    first = ProcessTransport(argv, 30.0)
    first.request(RESET)
    made = [first]

    def connect() -> Transport:
        return made.pop() if made else ProcessTransport(argv, 30.0)

    before, mine = children_cpu(), time.process_time()
    started = process_cpu(first.proc.pid)
    report = Runner(table, connect, timed=False).run(vectors, keep_passing=False)
    mine = time.process_time() - mine
    return children_cpu() - before - started + mine, report.ok


def at_depth(tree: Path | None, argv: list[str], depth: int, jobs: int = 2) -> dict[str, float]:
    """``agentfsm conform`` (``tree``'s code) with ``--extra-states depth --jobs jobs``, start to
    exit: its figures (wait4's accounting covers the process, its harness processes and the
    adapters they waited for; the process itself writes its own peak and the largest of theirs)."""
    args = ["conform", str(LOOM), "--adapter", shlex.join(argv), "--extra-states", str(depth), "--jobs", str(jobs),
            "--json"]
    with tempfile.TemporaryFile() as out, tempfile.TemporaryDirectory() as scratch:
        peaks = Path(scratch) / "peaks.json"
        start = time.monotonic()
        child = subprocess.Popen(command(tree, peaks, args), stdout=out, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(child.pid, 0)
        wall = time.monotonic() - start
        out.seek(0)
        report = json.loads(out.read())
        peak = json.loads(peaks.read_text())
    return {"vectors": report["vectors"], "passed": report["counts"]["pass"], "wall_s": wall,
            "cpu_s": usage.ru_utime + usage.ru_stime, "main_mb": peak["main_mb"], "others_mb": peak["others_mb"],
            "exit": os.waitstatus_to_exitcode(status)}


def compare_with_piping(table: Table, adapters: dict[str, list[str]], extra_states: int, rounds: int) -> None:
    """Each adapter's CPU through the harness and piped straight in, recorded as ``conform-extra-K``."""
    vectors = list(generate_extended(table, extra_states=extra_states)[1])
    data, count = stream(vectors)
    steps = count - len(vectors)
    print(f"conform harness vs direct pipe: {len(vectors)} vectors, {steps} steps, {count} requests "
          f"(loom-agent, --extra-states {extra_states})")
    results, rows = {}, []
    for name, argv in adapters.items():
        alone, through, ok = float("inf"), float("inf"), True
        for _ in range(rounds):   # interleaved; each side's least CPU (the load only ever adds)
            alone = min(alone, direct(argv, data, count))
            cpu, passed = harnessed(table, argv, vectors)
            through, ok = min(through, cpu), ok and passed
        ratio = alone / through
        results[name] = {"direct_cpu_s": round(alone, 3), "harness_cpu_s": round(through, 3),
                         "pipe_over_harness": round(ratio, 3), "passed": ok}
        rows.append({"adapter": name, "piped (CPU-s)": alone, "conform (CPU-s)": through,
                     "× piping's CPU": ratio})
        goal = "met" if ratio >= 0.8 else "NOT met"
        print(f"  {name:<10} piped {alone:7.2f} CPU-s   conform {through:7.2f} CPU-s   "
              f"piping / conform {ratio:.2f}x (goal >= 0.8x: {goal})" + ("" if ok else "   (vectors FAILED)"))
    print(json.dumps({"bench": "conform", "vectors": len(vectors), "steps": steps, "adapters": results}))
    record(f"conform-extra-{extra_states}", rows, table=f"spec/loom-agent.yaml, --extra-states "
           f"{extra_states}", note=f"{len(vectors):,} vectors, {count:,} requests; CPU of the adapter and "
           "of the harness (or the pipe), from the adapter's first reply; the least of "
           f"{rounds} interleaved rounds each.")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--extra-states", type=int, default=1, help="suffix extension (default 1)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds of each side (default 3; "
                        "0: only the run at depth)")
    parser.add_argument("--depth", type=int, default=2, help="--extra-states of the end-to-end run (default 2; "
                        "3 is 7 million vectors, about 20 minutes on two loaded cores; 0: skip it)")
    parser.add_argument("--before", metavar="REV", help="run the end-to-end run with REV's code too, first")
    args = parser.parse_args()
    table = load_table(LOOM)
    adapters = {"python": [str(Path(sys.executable).parent / "agentfsm"), "adapter", str(LOOM)]}
    node, built = shutil.which("node"), ROOT / "examples" / "conformance" / "dist" / "adapter.js"
    if node and built.exists():
        adapters["typescript"] = [node, str(built)]
    else:
        print("typescript: skipped (node or examples/conformance/dist missing: run make setup)")
    if args.rounds > 0:
        compare_with_piping(table, adapters, args.extra_states, args.rounds)
    if args.depth:
        name = "typescript" if "typescript" in adapters else "python"
        trees: list[tuple[str, Path | None]] = [("this checkout", None)]
        with tempfile.TemporaryDirectory() as scratch:
            if args.before:
                trees.insert(0, (args.before, export_tree(ROOT, args.before, Path(scratch))))
            rows = []
            for code, tree in trees:
                deep = at_depth(tree, adapters[name], args.depth)
                print(f"conform --extra-states {args.depth} --jobs 2, {name} adapter, code: {code}: "
                      f"{deep['vectors']:,.0f} vectors ({deep['passed']:,.0f} passed), {deep['wall_s']:.0f} s wall, "
                      f"{deep['cpu_s']:.0f} CPU-s, peak {deep['main_mb']:,.0f} MB (run), {deep['others_mb']:,.0f} MB "
                      f"(largest harness process or adapter), exit {deep['exit']:.0f}")
                rows.append({"code": code, "--extra-states": args.depth, "adapter": name,
                             "vectors": int(deep["vectors"]), "passed": int(deep["passed"]), "wall s": deep["wall_s"],
                             "CPU-s": deep["cpu_s"], "peak MB, run": deep["main_mb"],
                             "peak MB, harness/adapter": deep["others_mb"]})
        record("conform-depth", rows, table="agentfsm conform spec/loom-agent.yaml --jobs 2, as a user runs it",
               note="Process start to exit, one after the other; CPU of the harness, the generation and the adapters; "
                    "peak: the run's own process, and the largest process it waited for (a harness process or an "
                    "adapter).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
