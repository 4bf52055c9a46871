"""A progress line on stderr for long explorations.

Silent for the first ``DELAY`` seconds so short runs (and tests) print nothing. After
that, a terminal gets one line rewritten in place; a log (not a TTY) gets a line at
most every ``LOG_EVERY`` seconds, so CI logs stay short. The line shows the process's
resident memory, so a run heading for the machine's limit is seen before it gets there.
"""

from __future__ import annotations

import resource
import sys
import time
from pathlib import Path
from typing import TextIO

DELAY = 1.0
LOG_EVERY = 5.0


class Progress:
    def __init__(self, what: str, stream: TextIO | None = None) -> None:
        self.what = what
        self.stream = stream if stream is not None else sys.stderr
        self.tty = self.stream.isatty()
        self.start = time.monotonic()
        self.last = 0.0
        self.shown = False

    def __call__(self, count: int) -> None:
        now = time.monotonic()
        elapsed = now - self.start
        if elapsed < DELAY or (not self.tty and now - self.last < LOG_EVERY):
            return
        self.last = now
        text = (f"{self.what}: {count:,} configurations ({count / elapsed:,.0f}/s, {elapsed:.0f}s, "
                f"{memory_bytes() / 1e6:,.0f} MB)")
        if self.tty:
            self.stream.write("\r\x1b[K" + text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()
        self.shown = True

    def done(self) -> None:
        if self.shown and self.tty:
            self.stream.write("\r\x1b[K")
            self.stream.flush()


def memory_bytes() -> int:
    """The process's resident memory now (Linux), or its peak where /proc is missing."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return pages * resource.getpagesize()
