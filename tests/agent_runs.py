"""Helpers shared by the agent tests: a bounded asyncio run and state sequences seen by subscribe()."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

from agentfsm.impl.driver import Driver, StateChange

T = TypeVar("T")


def run(coro: Awaitable[T], timeout: float = 20.0) -> T:
    """Run ``coro`` with a deadline, then let cancelled activities finish (a killed command is reaped)."""
    async def bounded() -> T:
        async with asyncio.timeout(timeout):
            result = await coro
            others = asyncio.all_tasks() - {asyncio.current_task()}
            if others:
                await asyncio.wait(others, timeout=5)
            return result
    return asyncio.run(bounded())


class Watcher:
    """Collects what ``subscribe()`` delivers, in a task of its own, as a UI would."""

    def __init__(self, driver: Driver) -> None:
        self.changes: list[StateChange] = []
        self._subscription = driver.subscribe()
        self._task = asyncio.create_task(self._collect())

    async def _collect(self) -> None:
        async for change in self._subscription:
            self.changes.append(change)

    async def stop(self) -> list[StateChange]:
        self._subscription.close()
        await self._task
        return self.changes

    def states(self, initial: str) -> list[str]:
        """The state after every step, starting from ``initial`` (exact: nothing folded or skipped)."""
        return [initial] + [change.state for change in self.changes]
