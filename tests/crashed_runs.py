"""The crash the durable tests resume from: a run dies after an effect ran and before its outcome
was journaled (the memory store's write boundary right before the ``completed`` record)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from agentfsm.impl.stores.memory import Crash, MemoryStore

CRASH_BEFORE_COMPLETED = 5
"""The boundary, counted from the arming, right before an effect's completed record."""


def crash_before_completed(store: MemoryStore, act: Callable[[], object]) -> None:
    """``act`` dies at the write of an effect's completed record, after the effect ran; the store
    is disarmed after, so what follows writes as usual."""
    store.arm(CRASH_BEFORE_COMPLETED)
    with pytest.raises(Crash, match="before completed"):
        act()
    store.arm(None)
