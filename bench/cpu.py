"""CPU seconds, the unit every bench compares in (wall time follows the machine's load)."""

from __future__ import annotations

import os
import resource
from pathlib import Path


def children_cpu() -> float:
    """User + system seconds of this process's waited-for children so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def process_cpu(pid: int) -> float:
    """User + system seconds a live or not yet reaped process has used so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
