"""Lease owners for the store tests: a name that stands for a process of this host that is gone."""

from __future__ import annotations

import subprocess
import sys

from agentfsm.impl.stores.leases import owner_name


def reaped_owner() -> str:
    """The owner name of a process of this host that has exited and been reaped."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return f"{owner_name().rpartition(':')[0]}:{process.pid}"
