"""A process's claim on one run before it opens it (``agentfsm run --resume``, ``journal --repair``):
one function, so the model-based walks (``agentfsm.faults.runtime_walk``) drive the very claim a
process takes, and a planted mistake in it shows in both."""

from __future__ import annotations

from agentfsm.impl.durable.protocol_log import ProtocolLog
from agentfsm.impl.stores.leases import Lease, OwnedStore, RunHeld


def claim_run(owned: OwnedStore, run_id: str, owner: str, seconds: float, log: ProtocolLog) -> Lease:
    """Take the run exclusively, with a new fencing token (``RunHeld`` while another live owner
    holds it), and log the store's answer: a granted claim or a refusal."""
    try:
        lease = owned.acquire(run_id, owner, seconds)
    except RunHeld:
        log.refused(run_id)
        raise
    log.claimed(lease)
    return lease
