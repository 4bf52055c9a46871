"""Work run in a child forked from this warm process, with its result read back over a pipe.

A fresh interpreter costs about half a second of imports (numpy, scipy, the runtime) per
start; the crash checks start hundreds of children (each SIGKILL scenario, each shard of a
table), so they fork instead. The child shares nothing it writes with the parent: it opens
its own files and stores, and leaves with ``os._exit`` (or dies by a signal), never
returning into the parent's stack or flushing its buffers.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import time
import traceback
from collections.abc import Callable


class ForkTimeout(Exception):
    """The child did not finish in time; it has been killed."""


class Forked:
    """A running child: ``wait`` gives its exit code (negative: killed by that signal) and
    the text its work returned (or, when it raised, the traceback)."""

    def __init__(self, work: Callable[[], str]) -> None:
        read, write = os.pipe()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                os.close(read)
                text = work()
            except BaseException:
                text, code = traceback.format_exc(), 1
            try:
                data = memoryview(text.encode())
                while data:
                    data = data[os.write(write, data):]
            finally:
                os._exit(code)
        os.close(write)
        self.pid = pid
        self.pipe = os.fdopen(read, "rb")

    def wait(self, timeout: float | None = None) -> tuple[int, str]:
        deadline = None if timeout is None else time.monotonic() + timeout
        chunks: list[bytes] = []
        with self.pipe:
            while True:
                left = None if deadline is None else max(0.0, deadline - time.monotonic())
                ready, _, _ = select.select([self.pipe], [], [], left)
                if not ready:
                    os.kill(self.pid, signal.SIGKILL)
                    os.waitpid(self.pid, 0)
                    raise ForkTimeout(f"no result within {timeout:.0f} s")
                chunk = self.pipe.read1(65536)
                if not chunk:
                    break
                chunks.append(chunk)
        _, status = os.waitpid(self.pid, 0)
        return os.waitstatus_to_exitcode(status), b"".join(chunks).decode(errors="replace")
