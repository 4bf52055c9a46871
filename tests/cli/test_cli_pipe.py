"""A reader that stops early (``agentfsm ... | head``) is not an error: no traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from conftest import SPEC

AGENTFSM = Path(sys.executable).parent / "agentfsm"


def test_closed_pipe_ends_quietly() -> None:
    proc = subprocess.Popen([str(AGENTFSM), "vectors", str(SPEC / "tool-call.yaml")],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.readline()
    proc.stdout.close()
    err = proc.stderr.read().decode()
    code = proc.wait(timeout=60)
    assert first.startswith(b'{"manifest"')
    assert "Traceback" not in err and "BrokenPipeError" not in err
    assert code == 141
