"""A command that used the Temporal SDK ends with its own exit status. The SDK's Rust threads
can take the GIL while the interpreter finalizes and abort the process with SIGABRT after the
command's work is done (temporalio/sdk-python#300): about one `agentfsm temporal list` in twenty
did, and a CI run failed on an aborted `temporal decide`."""

from __future__ import annotations

import subprocess
from concurrent.futures import ThreadPoolExecutor

from temporal_support import AGENTFSM

RUNS = 40


def test_forty_client_commands_all_exit_0_without_an_abort(temporal_address: str) -> None:
    def listed(_: int) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(AGENTFSM), "temporal", "list", "--address", temporal_address],
                              capture_output=True, text=True, timeout=120)
    with ThreadPoolExecutor(4) as pool:
        done = list(pool.map(listed, range(RUNS)))
    failed = [d for d in done if d.returncode != 0]
    assert not failed, f"{len(failed)} of {RUNS} exited {failed[0].returncode}: {failed[0].stderr[-400:]}"
    assert all(d.stdout.strip().endswith("run(s)") for d in done)


def test_a_client_command_s_bad_input_still_exits_2() -> None:
    done = subprocess.run([str(AGENTFSM), "temporal", "list", "--address", "127.0.0.1:1"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2 and "cannot connect" in done.stderr
