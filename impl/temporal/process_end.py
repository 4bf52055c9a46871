"""Ending a process that used the Temporal SDK, without the interpreter's finalization.

The SDK's Rust threads can take the GIL while the interpreter finalizes, which aborts the
process (SIGABRT, "Fatal Python error: PyGILState_Release ... must be current when
releasing", temporalio/sdk-python#300) after its work is done: one `agentfsm temporal list`
in twenty did. A process that has used the SDK ends here instead, once its output is out.
This module imports nothing of the SDK, so that any entry point can call it."""

from __future__ import annotations

import contextlib
import os
import sys
from typing import NoReturn


def used_temporal() -> bool:
    return "temporalio.bridge" in sys.modules


def exit_before_finalizing(code: int) -> NoReturn:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):   # a closed pipe or stream: nothing more can be said
            stream.flush()
    os._exit(code)
