"""The Temporal fault campaign's baseline: each effect a plain Temporal activity under the SDK's
default retry policy, as a user would write it without agentfsm's guard. Kept apart from the
campaign so the workflow sandbox imports nothing but this."""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path

from temporalio import activity, workflow

with workflow.unsafe.imports_passed_through():
    from agentfsm.impl.durable.ledger import FileLedger
    from agentfsm.impl.temporal.activities import heartbeating

PLAIN_WORKFLOW = "agentfsm-chaos-plain"
PLAIN_ACTIVITY = "agentfsm-chaos-plain-effect"
START_TO_CLOSE = 10.0
HEARTBEAT = 2.0


@workflow.defn(name=PLAIN_WORKFLOW)
class PlainWorkflow:
    @workflow.run
    async def run(self, keys: list[str]) -> int:
        for key in keys:
            await workflow.execute_activity(PLAIN_ACTIVITY, key,
                                            start_to_close_timeout=timedelta(seconds=START_TO_CLOSE),
                                            heartbeat_timeout=timedelta(seconds=HEARTBEAT))
        return len(keys)


class PlainActivity:
    """Acts (a ledger line), then lingers, heartbeating meanwhile."""

    def __init__(self, ledger: Path, linger: float) -> None:
        self.ledger = FileLedger(ledger)
        self.linger = linger

    @activity.defn(name=PLAIN_ACTIVITY)
    async def effect(self, key: str) -> str:
        def act() -> None:
            self.ledger.execute(key)
            time.sleep(self.linger)
        await heartbeating(act)
        return key
