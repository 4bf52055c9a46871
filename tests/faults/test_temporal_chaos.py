"""The Temporal fault campaign, short: real workers SIGKILLed and SIGSTOPped, the dev server
killed and restarted; the table runs and the tool-call agent's runs lose no signal, duplicate
no effect, all end, and every effect's protocol log is explained by temporal-run.yaml (make
temporal-chaos runs 100 of each kind; docs/temporal.md publishes its counts)."""

from __future__ import annotations

from pathlib import Path

import pytest
from agentfsm.faults.temporal_chaos import campaign, summary


@pytest.mark.slow
@pytest.mark.chaos
def test_a_short_campaign_duplicates_nothing(tmp_path: Path) -> None:
    outcome = campaign(runs=4, workers=2, seed=7, batch=4, folder=tmp_path)
    tally = outcome.agentfsm
    assert (tally.runs, tally.duplicated, tally.lost_signals, tally.stuck, outcome.tracebacks) == (4, 0, 0, 0, 0), \
        summary(outcome)
    assert tally.effects == 16 and outcome.baseline.runs == 4 and sum(outcome.faults.values()) >= 2
    agents = outcome.agents
    assert (agents.runs, agents.effects, agents.duplicated, agents.lost_signals, agents.stuck) == (4, 8, 0, 0, 0), \
        summary(outcome)
    # every run's protocol log audited against temporal-run.yaml: each non-idempotent effect a window
    assert tally.audited >= 8 and agents.audited >= 8, summary(outcome)
    assert tally.unexplained == agents.unexplained == 0, summary(outcome)
