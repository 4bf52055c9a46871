"""Chaos campaigns (``agentfsm chaos``) with real processes, in ``make test-slow`` (at least
100 runs per store): no duplicated effect, no lost step, no stuck run, no unclean error;
every damaged journal reported (exit 2, the store named) or repaired by ``journal --repair``.
A short campaign of the scenarios that catch issue 25's defects runs in ``make test``."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from agentfsm.faults.chaos import PG_SCENARIOS, SCENARIOS, WORKER_SCENARIOS, campaign, table_text

from agentfsm.cli import main

ROOT = Path(__file__).resolve().parent.parent


def check(rows: list) -> None:  # type: ignore[type-arg]
    print("\n" + table_text(rows))
    for row in rows:
        assert row.trials > 0, row
        assert (row.duplicated, row.lost, row.stuck, row.unclean) == (0, 0, 0, 0), (row.scenario, row.notes)


@pytest.mark.slow
@pytest.mark.chaos
def test_sqlite_campaign() -> None:
    seed = int(os.environ.get("AGENTFSM_TEST_SEED", random.randrange(1 << 30)))
    print(f"seed {seed}")
    rows = campaign(SCENARIOS, trials=15, seed=seed)
    check(rows)
    assert sum(r.runs for r in rows) >= 100


@pytest.mark.slow
@pytest.mark.chaos
def test_worker_and_server_kill_campaign() -> None:
    if shutil.which("pg_ctl") is None and not list(Path("/usr/lib/postgresql").glob("*/bin/pg_ctl")):
        pytest.skip("no PostgreSQL server installed")
    folder = Path(tempfile.mkdtemp(prefix="agentfsm-chaos-pg-"))
    folder.chmod(0o755)
    env = {**os.environ, "AGENTFSM_PG_DIR": str(folder)}
    script = str(ROOT / "scripts" / "postgres.sh")
    try:
        started = subprocess.run([script, "start"], capture_output=True, text=True, timeout=300, env=env,
                                 start_new_session=True)
        assert started.returncode == 0, started.stderr
        url = started.stdout.strip().splitlines()[-1]
        seed = int(os.environ.get("AGENTFSM_TEST_SEED", random.randrange(1 << 30)))
        print(f"seed {seed}")
        rows = campaign(PG_SCENARIOS + WORKER_SCENARIOS, trials=4, seed=seed, url=url, pg_dir=folder)
        check(rows)
        assert sum(r.runs for r in rows) >= 100
    finally:
        subprocess.run([script, "stop"], capture_output=True, timeout=120, env=env)
        shutil.rmtree(folder, ignore_errors=True)


def test_chaos_cli_bad_input(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["chaos", "--trials", "0"]) == 2
    assert main(["chaos", "--pg-dir", "x"]) == 2
    assert "--pg-dir goes with --pg" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.chaos
def test_chaos_cli_one_trial(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["chaos", "--scenario", "sigkill", "--trials", "1", "--seed", "3"]) == 0
    out = capsys.readouterr().out
    assert "| sigkill | 1 | 1 | 1 | 0 | 0 | 0 | 0 |" in out and out.rstrip().endswith("ok")


def test_short_campaign_of_the_scenarios_that_caught_issue_25(pg_url: str) -> None:
    """One trial each: a repair then a resume answering rerun, a mistyped run id, two resumers on
    PostgreSQL deciding rerun, tools outliving the lease (asleep and keeping the GIL)."""
    seed = int(os.environ.get("AGENTFSM_TEST_SEED", random.randrange(1 << 30)))
    print(f"seed {seed}")
    check(campaign(("repair-resume", "mistyped-id", "pg-two-resumers"), trials=1, seed=seed, url=pg_url))
    check(campaign(("slow-tools",), trials=2, seed=seed, url=pg_url))
