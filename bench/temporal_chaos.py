"""The Temporal fault campaign's counts, for the docs (``agentfsm.faults.temporal_chaos``): real
worker processes SIGKILLed and SIGSTOPped inside activities, the dev server killed and restarted,
over the Loom table's runs as table workflows, the tool-call agent's runs and the plain-activity
baseline; per kind, the runs, effects, duplicated effects, lost signals, stuck runs, unknown
outcomes, operator decisions, and the effects whose protocol log was audited against
spec/systems/temporal-run.yaml (unexplained, cut). ``make temporal-chaos`` runs 100 of each kind in batches of 20
and renders the block in docs/temporal.md; exit status 1 when an agentfsm run duplicated an
effect, lost a signal, got stuck or did what its model does not explain, or a worker failed.

    .venv/bin/python bench/temporal_chaos.py [--runs N] [--batch N] [--workers N] [--seed N]
"""

from __future__ import annotations

import argparse

from agentfsm.faults.temporal_agent_runs import CALLS
from agentfsm.faults.temporal_chaos import PLAIN_EFFECTS, Tally, campaign, clean, summary
from figures import record

KINDS = {"agentfsm": "Loom table (table workflow)", "agents": "tool-call agent", "baseline": "plain activities"}


def row(kind: str, tally: Tally) -> dict[str, object]:
    return {"runs of": KINDS[kind], "runs": tally.runs, "effects": tally.effects, "duplicated": tally.duplicated,
            "lost signals": tally.lost_signals, "stuck": tally.stuck, "unknown": tally.unknown,
            "operator decisions": tally.decisions, "effects audited": tally.audited, "unexplained": tally.unexplained,
            "cut": tally.cut}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=100, help="runs of each kind")
    parser.add_argument("--batch", type=int, default=20, help="runs of each kind at once")
    parser.add_argument("--workers", type=int, default=3)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if min(args.runs, args.batch, args.workers) < 1:
        parser.error("--runs, --batch and --workers must be 1 or more")
    outcome = campaign(args.runs, args.workers, args.seed, args.batch)
    print(summary(outcome))
    faults = ", ".join(f"{kind} {n}" for kind, n in sorted(outcome.faults.items()))
    record("temporal-chaos", [row(k, getattr(outcome, k)) for k in KINDS],
           table=f"{args.runs} runs of each kind, {args.workers} worker processes, batches of {args.batch}, "
                 f"seed {args.seed}", command="make temporal-chaos",
           note=f"Faults ({faults}) in {outcome.seconds:.0f} s; tracebacks {outcome.tracebacks}. A Loom run: 4 "
                f"effects, 2 of them non-idempotent, its 8 events sent as signals; a tool-call agent run: "
                f"{CALLS} run_command calls (non-idempotent, no status query), each a unit run; a baseline run: "
                f"{PLAIN_EFFECTS} plain activities under the SDK's default retry policy.")
    return 0 if clean(outcome) else 1


if __name__ == "__main__":
    raise SystemExit(main())
