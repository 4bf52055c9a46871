"""``agentfsm temporal``: table runs on Temporal (a worker, start, send, list, trace, decide,
interrupt). The SDK is imported only when a command runs (``pip install 'agentfsm[temporal]'``)."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import signal
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from agentfsm.cli import durable as durable_commands
from agentfsm.cli.exits import EXIT_OK, BadInput
from agentfsm.cli.util import add_set_option, json_envelope, load_tables, parse_overrides
from agentfsm.cli.workers import add_tool_options
from agentfsm.impl.script import EventScript, ScriptError, load_script
from agentfsm.impl.temporal.messages import HISTORY_BOUND
from agentfsm.impl.workers.worker import check_events
from agentfsm.spec.model import Table

ADDRESS_ENV = "AGENTFSM_TEMPORAL_ADDRESS"
DEFAULT_ADDRESS = "127.0.0.1:7233"
DEFAULT_QUEUE = "agentfsm"
T = TypeVar("T")


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--address", default=os.environ.get(ADDRESS_ENV, DEFAULT_ADDRESS), metavar="HOST:PORT",
                   help=f"the Temporal server's frontend (default ${ADDRESS_ENV}, else {DEFAULT_ADDRESS})")
    p.add_argument("--namespace", default="default", help="the Temporal namespace (default: default)")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    t = sub.add_parser("temporal", help="run tables on Temporal: a worker, start, send, list, trace, decide, "
                                        "interrupt",
                       description="Runs of any table as Temporal workflows (one workflow type; the table's text "
                                   "and content hash travel with the start), external effects as activities under "
                                   "the durable runtime's rules: an effect whose outcome is lost becomes unknown "
                                   "and waits for a status query or your decision, never re-run by a retry. "
                                   "Exit 0, 1 when a waited-for run did not end, 2 on bad input or an unreachable "
                                   "server. See docs/temporal.md.")
    t.set_defaults(func=run_temporal)
    own = t.add_subparsers(dest="temporal_command", required=True, metavar="SUBCOMMAND")

    w = own.add_parser("worker", help="serve table runs (workflows and effects) on a task queue",
                       description="Serve the table workflow and the effects' activities on a task queue until "
                                   "SIGTERM or Ctrl-C. Every table version is served: each run carries its own.")
    w.add_argument("tables", nargs="*", metavar="TABLE", help="tables whose external actions the tools must cover "
                                                             "(checked at start)")
    _common(w)
    w.add_argument("--task-queue", default=DEFAULT_QUEUE, metavar="NAME", help=f"default {DEFAULT_QUEUE}")
    w.add_argument("--concurrency", type=int, default=16, metavar="N", help="activities at once (default 16)")
    w.add_argument("--sticky-timeout", type=float, default=5.0, metavar="SECONDS",
                   help="how long a run's next task waits for this worker before another worker takes it "
                        "(default 5: after this worker dies, the delay before another carries its runs on)")
    only = w.add_mutually_exclusive_group()
    only.add_argument("--workflows-only", action="store_true", help="serve the workflows, no activities")
    only.add_argument("--activities-only", action="store_true", help="serve the activities, no workflows")
    add_tool_options(w)
    add_set_option(w)

    s = own.add_parser("start", help="start runs of a table, each with a script of events",
                       description="Start runs of TABLE (event script: YAML events: [NAME or {NAME: {param: value}}]). "
                                   "A run ends once its script is delivered and settled, or with --open only in a "
                                   "final state. Prints the run ids.")
    s.add_argument("table", metavar="TABLE")
    _common(s)
    s.add_argument("--task-queue", default=DEFAULT_QUEUE, metavar="NAME", help=f"default {DEFAULT_QUEUE}")
    given = s.add_mutually_exclusive_group()
    given.add_argument("--script", metavar="FILE", help="an event script: the events the run begins with")
    given.add_argument("--agent-script", metavar="FILE",
                       help="an agent script (inputs and replies, as agentfsm run --script takes): the table's own "
                            "agent runs it, its model calls and tools as activities on the workers")
    s.add_argument("--workdir", metavar="DIR", help="with --agent-script: the folder the agent's tools work in, on "
                                                    "the workers' machine (default: the script's workdir, else here)")
    s.add_argument("--openai", metavar="URL", help="with --agent-script: answer with the model at this OpenAI-"
                                                   "compatible endpoint instead of the scripted replies")
    s.add_argument("--model", metavar="NAME", help="the model name for --openai")
    s.add_argument("--llm-timeout", type=float, default=60.0, metavar="SECONDS",
                   help="with --openai: give up on a request when the server sends nothing for this long (default 60)")
    s.add_argument("--count", type=int, default=1, metavar="N", help="start N runs with this script")
    s.add_argument("--run-id", metavar="ID", help="the run's id (with --count N: ID-1 ... ID-N); default random")
    s.add_argument("--open", action="store_true", help="keep the run open for events until a final state")
    s.add_argument("--wait", action="store_true", help="wait for the runs to end; print each one's end state")
    s.add_argument("--timeout", type=float, default=300.0, metavar="SECONDS",
                   help="the longest one attempt of an effect may take (start-to-close, default 300)")
    s.add_argument("--heartbeat", type=float, default=10.0, metavar="SECONDS",
                   help="a worker silent this long while its tool runs is taken for dead (default 10)")
    s.add_argument("--approval-lifetime", action="append", default=[], metavar="ACTION=SECONDS",
                   help="how long ACTION's approval lives (over the table's approval: lifetime)")
    s.add_argument("--history-bound", type=int, default=HISTORY_BOUND, metavar="EVENTS",
                   help="continue a run as new once its history holds this many events, at its next quiet "
                        f"point (default {HISTORY_BOUND:,}, or earlier when the server suggests it)")
    add_set_option(s)

    e = own.add_parser("send", help="send a run an event (user input, an approval, any event of its table)")
    e.add_argument("run_id", metavar="RUN")
    e.add_argument("event", metavar="EVENT")
    e.add_argument("--param", action="append", default=[], metavar="NAME=VALUE", help="an event parameter")
    e.add_argument("--event-id", metavar="ID", help="an id that makes sending again harmless")
    _common(e)

    ls = own.add_parser("list", help="list the table runs and their status")
    _common(ls)
    ls.add_argument("--json", action="store_true", help="print one JSON object")

    tr = own.add_parser("trace", help="show a run's journal: configuration, pending decisions, every record")
    tr.add_argument("run_id", metavar="RUN")
    _common(tr)
    tr.add_argument("--json", action="store_true", help="print one JSON object")

    d = own.add_parser("decide", help="decide a run's unknown effect (completed, failed, rerun) or anomaly")
    d.add_argument("run_id", metavar="RUN")
    d.add_argument("decisions", nargs="+", metavar="KEY=DECISION")
    _common(d)

    i = own.add_parser("interrupt", help="interrupt a run's work under way")
    i.add_argument("run_id", metavar="RUN")
    i.add_argument("--reason", default="interrupted by the user")
    _common(i)


def run_temporal(args: argparse.Namespace) -> int:
    try:
        import temporalio  # noqa: F401
    except ImportError:
        raise BadInput("the Temporal SDK is not installed: pip install 'agentfsm[temporal]'") from None
    command: Callable[[argparse.Namespace], int] = COMMANDS[args.temporal_command]
    return command(args)


def _run(coro: Awaitable[T], args: argparse.Namespace) -> T:
    """Run a client coroutine; a server that cannot be reached or refuses is bad input (exit 2)."""
    from temporalio.service import RPCError

    async def main() -> T:
        return await coro
    try:
        return asyncio.run(main())
    except RPCError as exc:
        raise BadInput(f"temporal at {args.address}: {exc}") from None
    except RuntimeError as exc:
        if "connect" in str(exc).lower():
            raise BadInput(f"temporal at {args.address}: cannot connect ({exc}); is the server running "
                           "(scripts/temporal.sh start)?") from None
        raise


async def _client(args: argparse.Namespace) -> Any:
    from agentfsm.impl.temporal.worker import connect
    return await connect(args.address, args.namespace)


def cmd_worker(args: argparse.Namespace) -> int:
    from agentfsm.cli.workers import tool_factory
    from agentfsm.impl.temporal.worker import serve
    if args.concurrency < 1 or args.sticky_timeout <= 0:
        raise BadInput("--concurrency must be 1 or more; --sticky-timeout positive")
    factory = tool_factory(args)
    for table in load_tables(args.tables, args.overrides):
        missing = sorted(a.name for a in table.actions if a.effect == "external" and a.name not in factory(table))
        if missing:
            raise BadInput(f"{table.machine}: no tool for the external action(s) {', '.join(missing)} "
                           "(give --tools or --ledger)")

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await serve(args.address, args.task_queue, factory, stop, not args.activities_only, not args.workflows_only,
                    args.concurrency, args.sticky_timeout,
                    lambda: print(f"worker on {args.task_queue} at {args.address}", flush=True))
    _run(main(), args)
    return EXIT_OK


def _lifetimes(items: list[str]) -> dict[str, float | None]:
    found: dict[str, float | None] = {}
    for item in items:
        name, sep, text = item.partition("=")
        try:
            seconds = float(text)
        except ValueError:
            seconds = -1.0
        if not sep or not name or seconds <= 0:
            raise BadInput(f"--approval-lifetime {item!r}: expected ACTION=SECONDS (positive)")
        found[name] = seconds
    return found


def _events(table: Table, path: str | None) -> list[Any]:
    from agentfsm.impl.temporal.messages import EventMessage
    if path is None:
        return []
    try:
        script = load_script(path)
    except ScriptError as exc:
        raise BadInput(str(exc)) from None
    if not isinstance(script, EventScript):
        raise BadInput(f"{path}: --script takes event scripts ('events'); an agent script goes with "
                       "--agent-script")
    try:
        checked = check_events(table, script.events)
    except ValueError as exc:
        raise BadInput(f"{path}: {exc}") from None
    return [EventMessage(str(e["event"]), dict(e["params"]), f"script-{n}") for n, e in enumerate(checked, 1)]


def _agent_start(table: Table, args: argparse.Namespace) -> Any:
    """What makes the run an agent run: the script (checked as ``agentfsm run`` checks it), its inputs,
    the work folder and the model."""
    from agentfsm.impl.agents.loom import LoomConfig
    from agentfsm.impl.agents.play import SCRIPTED_ONLY, SETTINGS_OF
    from agentfsm.impl.agents.tool_call import runner_plan
    from agentfsm.impl.script import AgentScript
    from agentfsm.impl.temporal.agent_activity import AGENTS, UNITS
    from agentfsm.impl.temporal.messages import AgentInput, AgentStart
    LOOM_SETTINGS = frozenset(f.name for f in dataclasses.fields(LoomConfig)) - {"workdir"}
    if table.machine not in AGENTS:
        raise BadInput(f"--agent-script: no agent runs {table.machine} (agents: {', '.join(sorted(AGENTS))})")
    try:
        script = load_script(args.agent_script, replies=args.openai is None)
    except ScriptError as exc:
        raise BadInput(str(exc)) from None
    if not isinstance(script, AgentScript):
        raise BadInput(f"{args.agent_script}: --agent-script takes an agent script ('inputs', 'replies'); "
                       "an event script goes with --script")
    known = SETTINGS_OF.get(table.machine, LOOM_SETTINGS)
    unknown = sorted(set(script.settings) - known)
    if unknown:
        raise BadInput(f"{args.agent_script}: setting {unknown[0]!r} does not apply to {table.machine}")
    if args.openai is not None and (not args.model or table.machine in SCRIPTED_ONLY):
        raise BadInput("--openai needs --model NAME" if not args.model
                       else f"--openai: the {table.machine} agent calls no model")
    if args.model and args.openai is None:
        raise BadInput("--model goes with --openai")
    if args.llm_timeout <= 0:
        raise BadInput("--llm-timeout must be positive")
    script_path = Path(args.agent_script)
    if args.workdir is not None:
        workdir = Path(args.workdir)
    elif script.workdir is not None:
        workdir = script_path.parent / script.workdir
    else:
        workdir = Path.cwd()
    if not workdir.is_dir():
        raise BadInput(f"work directory {workdir} does not exist")
    units = {"explorer-evaluator": len(script.inputs), "tool-call": len(runner_plan(script.replies))}
    return AgentStart(script_path.read_text(encoding="utf-8"), script_path.name, str(workdir.resolve()),
                      [AgentInput(t.text, t.interrupt_after) for t in script.inputs], args.openai or "",
                      args.model or "", args.llm_timeout, units=units.get(table.machine, 0),
                      unit_name=UNITS.get(table.machine, ""))


def cmd_start(args: argparse.Namespace) -> int:
    from agentfsm.impl.temporal.client import start_message, start_run
    from agentfsm.impl.temporal.messages import Timeouts
    if args.count < 1 or args.timeout <= 0 or args.heartbeat <= 0:
        raise BadInput("--count must be 1 or more; --timeout and --heartbeat positive")
    if args.history_bound < 1:
        raise BadInput("--history-bound must be 1 or more")
    [table] = load_tables([args.table], args.overrides)
    lifetimes = _lifetimes(args.approval_lifetime)
    unknown = sorted(set(lifetimes) - set(table.action_index))
    if unknown:
        raise BadInput(f"--approval-lifetime: {table.machine} has no action {', '.join(unknown)}")
    events = _events(table, args.script)
    text = Path(args.table).read_text(encoding="utf-8")
    overrides = parse_overrides(args.overrides)
    agent = None
    if args.agent_script is not None:
        agent = _agent_start(table, args)
        overrides = {**table.runtime, **overrides}   # an agent serves the table's runtime limits
    elif args.workdir or args.openai or args.model:
        raise BadInput("--workdir, --openai and --model go with --agent-script")
    base = args.run_id or f"{table.machine}-{uuid.uuid4().hex[:12]}"
    ids = [base] if args.count == 1 else [f"{base}-{k}" for k in range(1, args.count + 1)]
    timeouts = Timeouts(args.timeout, args.heartbeat)

    async def main() -> list[dict[str, Any]]:
        client = await _client(args)
        handles = []
        for run_id in ids:
            start = start_message(run_id, Path(args.table), text, overrides, events, not args.open, timeouts,
                                  lifetimes)
            start.agent = agent
            start.history_bound = args.history_bound
            handles.append(await start_run(client, args.task_queue, start, table.machine))
            print(run_id, flush=True)
        return [await h.result() for h in handles] if args.wait else []
    for result in _run(main(), args):
        for unit in result.get("units", []):   # an agent that plays each input as a run of its own
            print(f"{unit['run_id']}: {unit['state']}: {unit['outcome'].get('answer', '')}")
        print(f"{result['run_id']}: {result['state']} {json.dumps(result['vars'], sort_keys=True)}")
    return EXIT_OK


def _param(item: str) -> tuple[str, Any]:
    import yaml
    name, sep, text = item.partition("=")
    if not sep or not name:
        raise BadInput(f"--param {item!r}: expected NAME=VALUE")
    return name, yaml.safe_load(text)


def cmd_send(args: argparse.Namespace) -> int:
    from agentfsm.impl.temporal.client import send_event
    from agentfsm.impl.temporal.messages import EventMessage
    message = EventMessage(args.event, dict(_param(p) for p in args.param), args.event_id)

    async def main() -> None:
        client = await _client(args)
        await send_event(client.get_workflow_handle(args.run_id), message)
    _run(main(), args)
    print(f"run {args.run_id}: {args.event} sent")
    return EXIT_OK


def cmd_list(args: argparse.Namespace) -> int:
    from agentfsm.impl.temporal.client import list_runs

    async def main() -> list[Any]:
        return await list_runs(await _client(args))
    runs = _run(main(), args)
    if args.json:
        print(json.dumps(json_envelope("temporal-runs", {"runs": [
            {"run_id": r.run_id, "status": r.status, "machine": r.machine, "table_hash": r.table_hash,
             "task_queue": r.task_queue} for r in runs]}), indent=2))
        return EXIT_OK
    for r in runs:
        print(f"{r.run_id}  {r.machine}  {r.status}  table {r.table_hash[:12]}  queue {r.task_queue}")
    print(f"{len(runs)} run(s)")
    return EXIT_OK


QUERY_TIMEOUT = "no worker answered"


async def _look(args: argparse.Namespace) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    """A run's configuration, its open decisions and its journal; an agent run that plays each call or
    task as a unit of its own lists the open decisions of the unit under way too (each names its run)."""
    client = await _client(args)
    config, decisions, records = await _open(client, args.run_id)
    if config.get("unit"):
        decisions = decisions + (await _open(client, str(config["unit"])))[1]
    return config, decisions, records


async def _open(client: Any, run_id: str) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
    from agentfsm.impl.temporal.client import closed_result, pending
    from agentfsm.impl.temporal.messages import QUERY_CONFIG, QUERY_TRACE
    handle = client.get_workflow_handle(run_id)
    done = await closed_result(handle)
    if done is not None:
        return done, [], list(done["records"])
    try:
        config, decisions, records = await asyncio.wait_for(asyncio.gather(
            handle.query(QUERY_CONFIG), pending(handle), handle.query(QUERY_TRACE)), 20)
    except TimeoutError:
        raise BadInput(f"run {run_id}: {QUERY_TIMEOUT} (is `agentfsm temporal worker` running on its task "
                       "queue?)") from None
    return config, [{**d, "run": run_id} for d in decisions], records


def cmd_trace(args: argparse.Namespace) -> int:
    from agentfsm.impl.stores.journal import Record
    config, decisions, records = _run(_look(args), args)
    if args.json:
        print(json.dumps(json_envelope("temporal-trace", {"config": config, "pending": decisions,
                                                          "records": records}), indent=2, default=str))
        return EXIT_OK
    for r in records:
        record = Record(args.run_id, r["seq"], r["kind"], r["time"], r["body"], "")
        print(f"{r['seq']:>4}  {r['kind']:<16} {durable_commands.describe(record)}")
    print(f"state {config.get('state')} {json.dumps(config.get('vars'), sort_keys=True)}  "
          f"table {str(config.get('table_hash', ''))[:12]}")
    for d in decisions:
        print(f"decide {d['id']}: {d['message']}" + ("" if d["run"] == args.run_id else f" (run {d['run']})"))
    return EXIT_OK


def cmd_decide(args: argparse.Namespace) -> int:
    from agentfsm.impl.temporal.client import decide
    decisions = durable_commands.parse_decisions(args.decisions)

    async def main() -> None:
        _, open_ones, _ = await _look(args)
        runs = {d["id"]: d["run"] for d in open_ones}
        effects = {d["id"] for d in open_ones if d["kind"] == "unknown-effect"}
        for id, decision in decisions.items():
            if id not in runs:
                raise BadInput(f"run {args.run_id}: no open decision {id!r}"
                               + (f" (open: {', '.join(sorted(runs))})" if runs else " (none is open)"))
            if decision == "continue" and id in effects:
                raise BadInput(f"run {args.run_id}: {id!r} is an effect: decide completed, failed or rerun")
        client = await _client(args)
        for id, decision in decisions.items():   # each to the run that waits for it (a unit's, for an agent's call)
            await decide(client.get_workflow_handle(runs[id]), id, decision)
    _run(main(), args)
    print(f"run {args.run_id}: {len(decisions)} decision(s) sent")
    return EXIT_OK


def cmd_interrupt(args: argparse.Namespace) -> int:
    from agentfsm.impl.temporal.client import interrupt

    async def main() -> None:
        await interrupt((await _client(args)).get_workflow_handle(args.run_id), args.reason)
    _run(main(), args)
    print(f"run {args.run_id}: interrupt sent")
    return EXIT_OK


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "worker": cmd_worker, "start": cmd_start, "send": cmd_send, "list": cmd_list, "trace": cmd_trace,
    "decide": cmd_decide, "interrupt": cmd_interrupt}
