"""The chaos campaign's audit counts, for the docs: every trial's protocol log audited against
``durable-run-fixed.yaml`` (``agentfsm.faults.chaos``), summed per store — runs, effects whose
window was audited, unexplained (the campaign fails on one), cut. By default the campaigns are as
long as ``make chaos``'s (at least 100 runs a store: SQLite's 7 scenarios 15 trials each; PostgreSQL's
scenarios but the server kill, which needs a cluster of the campaign's own, 6 trials each), so the
published counts are those of a campaign of the full size; a shorter one (``--trials``) says so.

    .venv/bin/python bench/chaos_audit.py [--trials N] [--pg URL --pg-trials N] [--seed N]
"""

from __future__ import annotations

import argparse
import os

from agentfsm.faults.chaos import PG_SCENARIOS, SCENARIOS, WORKER_SCENARIOS, Row, campaign
from figures import record

# server-kill restarts the server it is given: a campaign's own cluster only (make chaos).
PG_CAMPAIGN = (*PG_SCENARIOS, *(s for s in WORKER_SCENARIOS if s != "server-kill"))
RUNS = 100   # runs a store: the clean campaign, and make chaos's


def summed(store: str, scenarios: tuple[str, ...], trials: int, rows: list[Row]) -> dict[str, int | str]:
    for row in rows:   # what the audit could not explain, to look at (the campaign's notes say why)
        for note in row.notes if row.unexplained else ():
            print(f"{store} {row.scenario} ({row.agent}): {note}", flush=True)
    return {"store": store, "scenarios": len(scenarios), "trials a scenario": trials,
            "runs": sum(r.runs for r in rows), "effects audited": sum(r.audited for r in rows),
            "unexplained": sum(r.unexplained for r in rows), "cut": sum(r.cut for r in rows)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--trials", type=int, default=15, help="trials of each SQLite scenario (make chaos: 15)")
    parser.add_argument("--pg", metavar="URL", default=os.environ.get("AGENTFSM_TEST_PG_URL"),
                        help="a PostgreSQL server (make pg-start prints one; default $AGENTFSM_TEST_PG_URL)")
    parser.add_argument("--pg-trials", type=int, default=6,
                        help="trials of each PostgreSQL scenario (make chaos: 4, with the server kill's)")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rows = [summed("SQLite", SCENARIOS, args.trials, campaign(SCENARIOS, args.trials, args.seed))]
    if args.pg:
        found = campaign(PG_CAMPAIGN, args.pg_trials, args.seed, url=args.pg)
        rows.append(summed("PostgreSQL", PG_CAMPAIGN, args.pg_trials, found))
    for row in rows:
        print(row)
    short = [str(row["store"]) for row in rows if int(row["runs"]) < RUNS]
    if short:
        print(f"fewer than {RUNS} runs on {', '.join(short)}: the published counts will say so")
    record("chaos-audit", rows, table=f"agentfsm chaos campaigns, seed {args.seed}",
           note="SQLite: " + ", ".join(SCENARIOS) + ("; PostgreSQL: " + ", ".join(PG_CAMPAIGN) if args.pg else "")
           + "; every trial's protocol log audited against durable-run-fixed.yaml, a window per effect"
           + (f"; fewer than {RUNS} runs on {', '.join(short)} (make chaos runs at least {RUNS} a store)" if short
              else f"; at least {RUNS} runs a store, as make chaos") + ".")


if __name__ == "__main__":
    main()
