"""``agentfsm chaos``: the command line of the fault campaigns (``agentfsm.faults.chaos``)."""

from __future__ import annotations

import argparse
import json
import random
import sys
from dataclasses import asdict
from pathlib import Path

from agentfsm.cli.exits import EXIT_FAILED, EXIT_OK, BadInput
from agentfsm.cli.util import json_envelope
from agentfsm.faults.chaos import PG_SCENARIOS, SCENARIOS, WORKER_SCENARIOS, campaign, table_text
from agentfsm.faults.chaos_agents import AGENTS


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "chaos", help="fault campaigns against real durable runs: count duplicated effects, lost steps, stuck runs",
        description="Run bounded campaigns of real agentfsm processes, every bundled agent in turn (the Loom "
                    "agent, vibework, the tool-call runner, the explorer/evaluator loop), under faults (a second "
                    "resumer, SIGKILL, SIGSTOP past the lease, a full disk inside each write of a run in turn, journal "
                    "bit flips, a repair then a resume, a mistyped run id; with --pg, two resumers deciding rerun "
                    "on PostgreSQL, workers SIGKILLed and frozen, tools outliving the lease asleep or keeping the "
                    "GIL and, with --pg-dir, the PostgreSQL server "
                    "SIGKILLed and restarted), finish every run as a user would, and print a table of runs, "
                    "duplicated effects (beyond the reruns the user allowed), lost steps, stuck runs, unclean "
                    "errors and damage reported or repaired, a row per scenario and agent. Exit 0 when no effect "
                    "was duplicated, no step lost, no run stuck and no error unclean; 1 otherwise; 2 on bad input.")
    parser.add_argument("--scenario", action="append", choices=SCENARIOS + PG_SCENARIOS + WORKER_SCENARIOS,
                        default=[], help="a scenario to run (repeatable; default: the SQLite ones, and the "
                                         "PostgreSQL and worker ones with --pg)")
    parser.add_argument("--trials", type=int, default=5, metavar="N",
                        help="trials per scenario (default 5); an agent scenario's trials take the agents in turn; "
                             "full-disk's trials of an agent fill the disk inside its writes, at the frames they "
                             "add to the log spread evenly, at every one when they are as many")
    parser.add_argument("--agent", action="append", choices=[a.name for a in AGENTS], default=[],
                        help="an agent to play (repeatable; default: every bundled agent)")
    parser.add_argument("--seed", type=int, default=None, metavar="N", help="random seed (default: random, printed)")
    parser.add_argument("--pg", metavar="URL", help="a PostgreSQL server for the worker scenarios")
    parser.add_argument("--pg-dir", metavar="DIR", help="the scripts/postgres.sh cluster folder behind --pg "
                                                        "(AGENTFSM_PG_DIR), for server-kill")
    parser.add_argument("--keep", metavar="DIR", help="leave each trial's folder (SCENARIO-K: its store, protocol "
                                                      "log, ledger, workers' stderr) in DIR, a new or empty "
                                                      "folder, instead of removing it: the notes name the "
                                                      "trial's folder")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--verbose", action="store_true", help="a line per trial on stderr")
    parser.set_defaults(func=run_chaos)


def run_chaos(args: argparse.Namespace) -> int:
    if args.trials < 1:
        raise BadInput("--trials must be 1 or more")
    if args.pg_dir and not args.pg:
        raise BadInput("--pg-dir goes with --pg")
    if args.keep and Path(args.keep).exists() and (not Path(args.keep).is_dir() or any(Path(args.keep).iterdir())):
        raise BadInput(f"--keep {args.keep}: not a new or empty folder")
    scenarios = args.scenario or [*SCENARIOS, *(PG_SCENARIOS + WORKER_SCENARIOS if args.pg else ())]
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    agents = [a for a in AGENTS if a.name in args.agent] or AGENTS
    rows = campaign(scenarios, args.trials, seed, args.pg, Path(args.pg_dir) if args.pg_dir else None,
                    log=(lambda line: print(line, file=sys.stderr)) if args.verbose else (lambda line: None),
                    agents=agents, keep=Path(args.keep) if args.keep else None)
    ok = all(r.ok for r in rows)
    if args.json:
        print(json.dumps(json_envelope("chaos", {"ok": ok, "seed": seed, "rows": [asdict(r) for r in rows]}), indent=2))
    else:
        print(f"chaos campaign, seed {seed}")
        print(table_text(rows), end="")
        for row in rows:
            for note in row.notes:
                print(f"  {row.scenario}: {note}")
        print("ok" if ok else "FAILED")
    return EXIT_OK if ok else EXIT_FAILED
