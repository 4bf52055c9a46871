"""``agentfsm crash``: crash the durable runtime at every write boundary of every step."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable

from agentfsm.cli.exits import EXIT_FAILED, EXIT_OK, BadInput
from agentfsm.cli.html_report import add_report_options, write_report
from agentfsm.cli.limits import reporting_limits
from agentfsm.cli.main import main
from agentfsm.cli.registry import load as load_command
from agentfsm.cli.util import add_set_option, json_envelope, load_tables
from agentfsm.diagrams.report_data import crash_entry
from agentfsm.faults.crash import CrashChecker, CrashReport, Violation
from agentfsm.faults.crash_agent import AgentCrash
from agentfsm.faults.crash_kill import kill_scenarios
from agentfsm.faults.forking import Forked
from agentfsm.impl.script import AgentScript, ScriptError, load_script
from agentfsm.verify.table.explore import explore


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = sub.add_parser(
        "crash", help="crash the durable runtime at every write boundary and check recovery",
        description="For every reachable configuration and event (shortest prefix, then the event), crash "
                    "the durable runtime at every write boundary of that step, recover and finish; then "
                    "crash again at every boundary of the recovery. Checks that no side effect ran twice, no "
                    "pending approval was skipped, sequence numbers continue and the outcome equals the "
                    "crash-free run's or is an explicit unknown decision. Exit 0 all hold, 1 a violation, "
                    "2 bad input.")
    parser.add_argument("table", metavar="TABLE")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    add_report_options(parser)
    parser.add_argument("--depth", type=int, default=None, metavar="N",
                        help="only configurations whose shortest prefix has at most N events")
    parser.add_argument("--kill", type=int, default=0, metavar="N",
                        help="add N scenarios where a real child process is SIGKILLed during a step, a second one "
                             "during its recovery, and the run is recovered from SQLite")
    parser.add_argument("--snapshot-every", type=int, default=0, metavar="N",
                        help="write a snapshot every N records (recovery then starts from it)")
    parser.add_argument("--jobs", type=int, default=0, metavar="N",
                        help="share the scenarios among N processes forked from this one (default: one per CPU)")
    parser.add_argument("--approval", action="append", default=[], metavar="ACTION[=SECONDS]",
                        help="an action that asks the user for approval, with its lifetime (repeatable; "
                             "besides the actions the table marks 'approval:')")
    parser.add_argument("--agent-script", metavar="SCRIPT",
                        help="crash the table's own agent instead: play this agent script with 'agentfsm run "
                             "--store' in children SIGKILLed at --kill N write boundaries spread over the run, "
                             "resume each and compare its end with the crash-free run's")
    add_set_option(parser)
    parser.set_defaults(func=reporting_limits(run_crash))


def run_agent_crash(args: argparse.Namespace) -> int:
    if args.kill < 1:
        raise BadInput("--agent-script needs --kill N (N >= 1 scenarios)")
    if args.overrides or args.depth is not None or args.snapshot_every or args.approval:
        raise BadInput("--agent-script takes only --kill and --json (the agent runs as 'agentfsm run' would)")
    [table] = load_tables([args.table])
    try:
        script = load_script(args.agent_script)
    except ScriptError as exc:
        raise BadInput(str(exc)) from None
    if not isinstance(script, AgentScript):
        raise BadInput(f"{args.agent_script}: an event script; --agent-script takes an agent script")
    load_command("run")   # the children fork from this process: `run`'s imports are paid here once, not per child
    campaign = AgentCrash(args.table, args.agent_script, script, table.machine, main)
    show = not args.json and sys.stderr.isatty()

    def progress(done: int, total: int) -> None:
        print(f"\r  crashing the {table.machine} agent: {done}/{total} SIGKILL scenarios", end="",
              file=sys.stderr, flush=True)
    try:
        report = campaign.check(args.kill, progress if show else None)
    finally:
        campaign.close()
        if show:
            print("\r\033[K", end="", file=sys.stderr, flush=True)
    write_report(args, "crash", [crash_entry(report.to_json())], [])
    if args.json:
        print(json.dumps(json_envelope("crash", report.to_json()), indent=2))
    else:
        verdict = "ok" if report.ok else f"FAILED: {len(report.violations)} violations"
        print(f"{report.machine} agent: {report.boundaries} write boundaries, {report.kills} SIGKILLs, "
              f"{report.decisions} unknown effects decided rerun: {verdict}")
        for scenario, message in report.violations[:20]:
            print(f"  {scenario}\n    {message}")
    return EXIT_OK if report.ok else EXIT_FAILED


def parse_approvals(items: list[str], actions: set[str]) -> dict[str, float | None]:
    approvals: dict[str, float | None] = {}
    for item in items:
        name, sep, text = item.partition("=")
        if name not in actions:
            raise BadInput(f"--approval {item!r}: the table has no action {name!r}")
        try:
            approvals[name] = float(text) if sep else None
        except ValueError:
            raise BadInput(f"--approval {item!r}: SECONDS must be a number") from None
    return approvals


def print_report(report: CrashReport, seconds: float) -> None:
    verdict = "ok" if report.ok else f"FAILED: {len(report.violations)} violations"
    print(f"{report.machine}: {report.configurations} configurations, {report.scenarios} scenarios, "
          f"{report.crashes} crashes at {report.boundaries} boundaries, {report.double_crashes} during recovery, "
          f"{report.races} races, {report.kills} SIGKILLs ({report.recovery_kills} more during recovery), "
          f"{report.approvals} with a pending approval ({seconds:.1f}s): {verdict}")
    for v in report.violations[:20]:
        print(f"  {v.kind}: {v.scenario}\n    {v.message}")
    if len(report.violations) > 20:
        print(f"  ... and {len(report.violations) - 20} more violations")


def run_crash(args: argparse.Namespace) -> int:
    if args.agent_script is not None:
        return run_agent_crash(args)
    if args.depth is not None and args.depth < 0:
        raise BadInput("--depth must be 0 or more")
    if args.kill < 0 or args.snapshot_every < 0 or args.jobs < 0:
        raise BadInput("--kill, --snapshot-every and --jobs must be 0 or more")
    [table] = load_tables([args.table], args.overrides)
    if not any(a.effect == "external" for a in table.actions):
        message = f"{table.machine}: no external actions, nothing a crash could run twice; skipped"
        write_report(args, "crash", [crash_entry({"ok": True, "machine": table.machine, "skipped": message})], [])
        print(json.dumps(json_envelope("crash", {"ok": True, "machine": table.machine, "skipped": message}))
              if args.json else message)
        return EXIT_OK
    approvals = parse_approvals(args.approval, {a.name for a in table.actions})
    jobs = args.jobs or len(os.sched_getaffinity(0))
    start = time.perf_counter()
    show = not args.json and sys.stderr.isatty()
    explored = explore(table)   # once, here: its limit is this process's error, and the shards share it

    def shard(k: int) -> CrashReport:
        checker = CrashChecker(table, approvals=approvals, depth=args.depth, exploration=explored)
        checker.options.snapshot_every = args.snapshot_every
        progress = None
        if show and k == 0:
            def progress(done: int, total: int) -> None:
                print(f"\r  crashing {table.machine}: {done}/{total} configurations" + (
                      f" (1 of {jobs} processes)" if jobs > 1 else ""), end="", file=sys.stderr, flush=True)
        report = checker.check(progress, (k, jobs))
        if progress is not None:
            print("\r\033[K", end="", file=sys.stderr, flush=True)
        if args.kill:
            kill_scenarios(checker, args.kill, (k, jobs))
        return report

    report = shard(0) if jobs == 1 else merge([_shard_in_fork(shard, k) for k in range(jobs)])
    write_report(args, "crash", [crash_entry(report.to_json())], [])
    if args.json:
        print(json.dumps(json_envelope("crash", report.to_json()), indent=2))
    else:
        print_report(report, time.perf_counter() - start)
    return EXIT_OK if report.ok else EXIT_FAILED


def _shard_in_fork(shard: Callable[[int], CrashReport], k: int) -> Forked:
    return Forked(lambda: json.dumps(shard(k).to_json()))


def merge(children: list[Forked]) -> CrashReport:
    """One report from the shards' reports: counts add up, violations join."""
    parts = []
    for child in children:
        code, text = child.wait()
        if code != 0:
            raise RuntimeError(f"a crash-check process failed (exit {code}):\n{text}")
        parts.append(json.loads(text))
    report = CrashReport(str(parts[0]["machine"]), configurations=int(parts[0]["configurations"]))
    for part in parts:
        for name in COUNTS:
            setattr(report, name, getattr(report, name) + int(part[name]))
        report.violations += [Violation(v["kind"], v["scenario"], v["message"]) for v in part["violations"]]
    return report


COUNTS = ("scenarios", "boundaries", "crashes", "double_crashes", "kills", "recovery_kills", "races", "approvals")
