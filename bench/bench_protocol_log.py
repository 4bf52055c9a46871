"""What the protocol log costs a run, and what auditing it costs a campaign: ``agentfsm run``
of a two-tool script on SQLite, with the log off (``AGENTFSM_PROTOCOL_LOG=off``) and on (beside
the store), in interleaved rounds, CPU seconds of the child processes (the machine may be
loaded: wall time means nothing); then the audit of each run's log, in this process's CPU."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from agentfsm.faults.protocol_audit import Auditor
from cpu import children_cpu
from figures import record

ROOT = Path(__file__).resolve().parent.parent
AGENTFSM = str(Path(sys.executable).parent / "agentfsm")
SCRIPT = """workdir: .
allow: [run_command]
inputs: []
replies:
  - - {tool_call: {name: run_command, arguments: {argv: [sh, -c, "echo t1 >> ledger"]}}}
    - {tool_call: {name: run_command, arguments: {argv: [sh, -c, "echo t2 >> ledger"]}}}
"""

def one_run(folder: Path, logged: bool) -> float:
    folder.mkdir()
    (folder / "s.yaml").write_text(SCRIPT)
    env = {**os.environ, "AGENTFSM_PROTOCOL_LOG": "" if logged else "off"}
    before = children_cpu()
    subprocess.run([AGENTFSM, "run", str(ROOT / "spec/tool-call.yaml"), "--script", "s.yaml", "--store", "j.db"],
                   cwd=folder, env=env, check=True, capture_output=True)
    return children_cpu() - before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=8)
    args = parser.parse_args()
    cpu = {False: 0.0, True: 0.0}
    with tempfile.TemporaryDirectory() as base:
        for k in range(args.rounds):
            for logged in (k % 2 == 0, k % 2 != 0):
                cpu[logged] += one_run(Path(base) / f"{k}-{int(logged)}", logged)
        logs = sorted(Path(base).glob("*-1/j.db.protocol.jsonl"))
        auditor = Auditor()
        start = time.process_time()
        effects = sum(auditor.audit_log(log).explained for log in logs)
        audit_cpu = time.process_time() - start
    print(f"protocol log: {args.rounds} runs each, CPU {cpu[False]:.2f} s without the log, {cpu[True]:.2f} s with it: "
          f"ratio {cpu[True] / cpu[False]:.3f}")
    print(f"audit: {len(logs)} logs, {effects} effects explained, {audit_cpu:.2f} CPU-s "
          f"({audit_cpu / max(len(logs), 1) * 1000:.0f} ms a log)")
    record("protocol-log", [
        {"what": "agentfsm run, log off", "runs": args.rounds, "CPU-s": cpu[False], "× off": 1.0},
        {"what": "agentfsm run, log on", "runs": args.rounds, "CPU-s": cpu[True], "× off": cpu[True] / cpu[False]},
        {"what": "audit of the logs (loading the system once)", "runs": len(logs), "CPU-s": audit_cpu,
         "× off": ""},
    ], table="spec/tool-call.yaml, a two-tool script on SQLite",
        note=f"CPU seconds of the child processes, interleaved rounds; the audit explained {effects} effects.")


if __name__ == "__main__":
    main()
