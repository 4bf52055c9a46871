"""A heartbeat in a process of its own, which nothing the owner runs can starve.

A heartbeat thread shares its interpreter with the tools: a tool inside a C call that keeps
the GIL (a CPU-bound extension) stops it, the lease lapses although its owner is alive and
working, and the tool's completed result is then refused. ``Beats`` renews leases from a
child process instead (``python -P -m agentfsm.impl.durable.beat URL PID``; ``-P``: not
the package of a source checkout in the working directory), on its own
connection to the store. The owner tells it which leases to hold and drop, one JSON line
each on the child's stdin; a lease the child finds lost it stops renewing (the owner's own
writes are fenced, so the owner learns it there). A child that cannot reach the store says so
instead of being ready, and its owner raises ``JournalError``.

The child renews only while its owner can act: it stops renewing while the owner is stopped
(SIGSTOP, a debugger: its lease must lapse so another process can take the run over, as the
owner's own thread would have), and exits when the owner is gone (its stdin closes, or its
parent changes).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import cast

from agentfsm.impl.stores.journal import JournalError
from agentfsm.impl.stores.leases import Lease, LeaseLost, OwnedStore


class Beats:
    """The owner's side: one child process renewing the leases it is told to hold."""

    def __init__(self, url: str) -> None:
        argv = [sys.executable, "-P", "-m", "agentfsm.impl.durable.beat", url, str(os.getpid())]
        self._child = subprocess.Popen(argv,
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, close_fds=True)
        self._lock = threading.Lock()
        assert self._child.stdout is not None
        line = self._child.stdout.readline()  # ready (connected): its first renewal will not come late
        answer = json.loads(line) if line else {"error": f"exited with status {self._child.wait()}"}
        if "error" in answer:  # no one would renew the leases the owner took
            self.close()
            raise JournalError(f"heartbeat process: {answer['error']}")

    def _send(self, message: dict[str, object]) -> None:
        assert self._child.stdin is not None
        with self._lock:
            try:
                self._child.stdin.write(json.dumps(message) + "\n")
                self._child.stdin.flush()
            except (BrokenPipeError, ValueError):  # the child is gone: the owner's writes are still fenced
                pass

    def hold(self, lease: Lease) -> None:
        self._send({"run_id": lease.run_id, "token": lease.token, "seconds": lease.seconds, "owned": lease.owned,
                    "owner": lease.owner, "machine": lease.machine})

    def drop(self, lease: Lease) -> None:
        self._send({"drop": lease.run_id, "token": lease.token})

    @contextmanager
    def holding(self, lease: Lease) -> Iterator[None]:
        self.hold(lease)
        try:
            yield
        finally:
            self.drop(lease)

    def close(self) -> None:
        if self._child.stdin is not None:
            with contextlib.suppress(BrokenPipeError):
                self._child.stdin.close()
        try:
            self._child.wait(10)
        except subprocess.TimeoutExpired:
            self._child.kill()
            self._child.wait()
        if self._child.stdout is not None:
            self._child.stdout.close()


def stopped(pid: int) -> bool:
    """Whether process ``pid`` is stopped (SIGSTOP, traced): it cannot act, so it must not look alive."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[:1] in (["T"], ["t"])


def main(url: str, owner: int) -> None:
    """The child: hold the leases the owner names, renew each every third of its length."""
    from agentfsm.impl.stores.urls import open_store

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the owner's to handle; the owner ends this
    try:
        store = open_store(url)
    except JournalError as exc:  # the server may be down or restarting: the owner decides what follows
        print(json.dumps({"error": str(exc).strip()}), flush=True)
        return
    print(json.dumps({"ready": True}), flush=True)
    renew = cast(OwnedStore, store).renew  # both stores' renew serves a CLI run's and a worker's lease
    held: dict[tuple[str, int], tuple[Lease, float]] = {}  # (run, token): (lease, next renewal)
    pending = b""
    try:
        while os.getppid() == owner:
            now = time.monotonic()
            wait = min([due for _, due in held.values()], default=now + 1.0) - now
            ready, _, _ = select.select([sys.stdin.fileno()], [], [], max(0.0, min(wait, 1.0)))
            if ready:
                chunk = os.read(sys.stdin.fileno(), 65536)
                if not chunk:
                    return
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    told = json.loads(line)
                    if "drop" in told:
                        held.pop((str(told["drop"]), int(told["token"])), None)
                    else:
                        lease = Lease(str(told["run_id"]), str(told["machine"]), int(told["token"]),
                                      str(told["owner"]), float(told["seconds"]), owned=bool(told["owned"]))
                        held[(lease.run_id, lease.token)] = (lease, time.monotonic() + lease.seconds / 3)
            if stopped(owner):
                continue
            for key, (lease, due) in list(held.items()):
                if time.monotonic() < due:
                    continue
                try:
                    renew(lease)
                except LeaseLost:
                    del held[key]
                    continue
                except Exception:  # the store is unreachable now: try again at the next beat
                    pass
                held[key] = (lease, time.monotonic() + lease.seconds / 3)
    finally:
        # Gone as its owner goes, without closing the store: the last SQLite connection to close
        # would checkpoint and delete the write-ahead log, which a killed owner leaves as it is.
        os._exit(0)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
