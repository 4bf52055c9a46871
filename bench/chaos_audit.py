"""The chaos campaign's audit counts, for the docs: every trial's protocol log audited against
``durable-run-fixed.yaml`` (``agentfsm.faults.chaos``), summed per store — runs, effects whose
window was audited, unexplained (the campaign fails on one), cut. ``make chaos`` runs the full
campaigns (at least 100 runs a store); this records one campaign of the size asked for.

    .venv/bin/python bench/chaos_audit.py [--trials N] [--pg URL --pg-trials N] [--seed N]
"""

from __future__ import annotations

import argparse
import os

from agentfsm.faults.chaos import PG_SCENARIOS, SCENARIOS, WORKER_SCENARIOS, Row, campaign
from figures import record

# server-kill restarts the server it is given: a campaign's own cluster only (make chaos).
PG_CAMPAIGN = (*PG_SCENARIOS, *(s for s in WORKER_SCENARIOS if s != "server-kill"))


def summed(store: str, scenarios: tuple[str, ...], trials: int, rows: list[Row]) -> dict[str, object]:
    return {"store": store, "scenarios": len(scenarios), "trials a scenario": trials,
            "runs": sum(r.runs for r in rows), "effects audited": sum(r.audited for r in rows),
            "unexplained": sum(r.unexplained for r in rows), "cut": sum(r.cut for r in rows)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=2, help="trials of each SQLite scenario (make chaos: 15)")
    parser.add_argument("--pg", metavar="URL", default=os.environ.get("AGENTFSM_TEST_PG_URL"),
                        help="a PostgreSQL server (make pg-start prints one; default $AGENTFSM_TEST_PG_URL)")
    parser.add_argument("--pg-trials", type=int, default=2, help="trials of each PostgreSQL scenario (make chaos: 4)")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rows = [summed("SQLite", SCENARIOS, args.trials, campaign(SCENARIOS, args.trials, args.seed))]
    if args.pg:
        found = campaign(PG_CAMPAIGN, args.pg_trials, args.seed, url=args.pg)
        rows.append(summed("PostgreSQL", PG_CAMPAIGN, args.pg_trials, found))
    for row in rows:
        print(row)
    record("chaos-audit", rows, table=f"agentfsm chaos campaigns, seed {args.seed}",
           note="SQLite: " + ", ".join(SCENARIOS) + ("; PostgreSQL: " + ", ".join(PG_CAMPAIGN) if args.pg else "")
           + "; every trial's protocol log audited against durable-run-fixed.yaml, a window per effect.")


if __name__ == "__main__":
    main()
