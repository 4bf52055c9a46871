"""``agentfsm run`` (play a conversation script) and ``agentfsm adapter`` (the reference engine on stdio)."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import sys
from pathlib import Path

from agentfsm.cli import durable as durable_commands
from agentfsm.cli.exits import EXIT_BAD_INPUT, EXIT_FAILED, BadInput
from agentfsm.cli.util import add_set_option, load_tables, parse_overrides, reporting, split_systems
from agentfsm.impl.adapter import serve
from agentfsm.impl.agents.play import ASKS_PERMISSION, PLAYERS, SCRIPTED_ONLY, SETTINGS_OF, Run
from agentfsm.impl.llm.client import close_client
from agentfsm.impl.play import PlayRefused, Reporter, play_agent, play_events
from agentfsm.impl.script import EventScript, ScriptError, load_script
from agentfsm.impl.system_run import RunDiverged, run_trace
from agentfsm.spec import load_table
from agentfsm.spec.errors import TableError
from agentfsm.spec.files import Parsed, parsed_document
from agentfsm.spec.system_load import load_system
from agentfsm.spec.system_trace import SystemTraceError, describe_config, load_system_trace


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    run = sub.add_parser(
        "run", help="run a scripted conversation end to end",
        description="Play a script against a table and print every state change and action. An agent script "
                    "('inputs' and 'replies') drives the Loom agent with a scripted LLM and real tools in the "
                    "work directory; an event script ('events') feeds any table's engine directly. Exit 0 when "
                    "the run completed, 1 on a failure, 2 on bad input.")
    run.add_argument("table", metavar="TABLE", help="a table, or a system file (then --script is an interleaved "
                     "trace, e.g. a counterexample from verify --trace-out, played one engine per instance)")
    run.add_argument("--script", required=True, metavar="FILE", help="the conversation script (YAML), or a "
                     "system's trace (JSON)")
    run.add_argument("--workdir", metavar="DIR",
                     help="directory the tools work in (default: the script's 'workdir', relative to the "
                          "script, else the current directory)")
    run.add_argument("--json", action="store_true", help="print JSON Lines instead of text")
    run.add_argument("--timeout", type=float, default=300.0, metavar="SECONDS",
                     help="give up on the whole run after this long (default 300)")
    run.add_argument("--openai", metavar="URL",
                     help="answer with a real model at an OpenAI-compatible endpoint instead of the scripted "
                          "replies, which the script may then leave out (e.g. http://localhost:11434/v1); the key "
                          "comes from $OPENAI_API_KEY")
    run.add_argument("--model", metavar="NAME", help="the model name for --openai")
    run.add_argument("--llm-timeout", type=float, metavar="SECONDS",
                     help="with --openai: give up on a request when the server sends nothing for this long "
                          "(default 60); the table's retries then apply")
    run.add_argument("--max-tool-rounds", type=int, metavar="N",
                     help="Loom agent: end a turn with an error after N tool batches (default: the script's "
                          "max_tool_rounds setting, else 25), so a model that keeps calling tools cannot run forever")
    run.add_argument("--permission-policy", choices=("grant", "deny"),
                     help="vibework and tool-call agents: answer to permission requests the script does not "
                          "script, when stdin is not a terminal (on a terminal you are asked); default deny")
    add_set_option(run)
    durable_commands.add_run_options(run)
    run.set_defaults(func=reporting(run_run, PlayRefused))

    adapter = sub.add_parser(
        "adapter", help="serve the reference engine over the adapter protocol (JSON Lines on stdio)",
        description="Answer reset/event/quit requests on stdin with one JSON reply per line on stdout, as the "
                    "conformance harness expects. Bad requests get {\"ok\": false, \"error\": ...}. Exit 0 at "
                    "end of input or after quit, 2 when the table does not load.")
    adapter.add_argument("table", metavar="TABLE")
    add_set_option(adapter)
    adapter.set_defaults(func=run_adapter)


def run_run(args: argparse.Namespace) -> int:
    _, systems, parsed = split_systems([args.table])
    if systems:
        return run_system(args, parsed)
    [table] = load_tables([args.table], args.overrides, parsed)
    try:
        script = load_script(args.script, replies=args.openai is None)
    except ScriptError as exc:
        raise BadInput(str(exc)) from None
    reporter = Reporter(lambda line: print(line, flush=True), args.json)
    durable_commands.check_run_options(args)
    if args.permission_policy is not None and (isinstance(script, EventScript) or table.machine not in ASKS_PERMISSION):
        raise BadInput(f"--permission-policy applies to the agents that ask permission "
                       f"({', '.join(sorted(ASKS_PERMISSION))}) playing an agent script, not to this run of "
                       f"{table.machine}")
    args.permission_policy = args.permission_policy or "deny"
    if isinstance(script, EventScript):
        durable_commands.check_script(table, script, args.script)
        if args.store is not None:
            return durable_commands.run_durable(table, script, args, reporter)
        return play_events(table, script, reporter)
    if table.runtime:  # an agent serves the table's runtime limits, not its verification bounds
        table = load_table(args.table, {**table.runtime, **parse_overrides(args.overrides)},
                           parsed_document(parsed, args.table))
    if args.workdir is not None:
        workdir = Path(args.workdir)
    elif script.workdir is not None:
        workdir = Path(args.script).parent / script.workdir
    else:
        workdir = Path.cwd()
    if not workdir.is_dir():
        raise BadInput(f"work directory {workdir} does not exist")
    if args.timeout <= 0:
        raise BadInput("--timeout must be positive")
    if args.openai is None and (args.model or args.llm_timeout is not None):
        raise BadInput(f"{'--model' if args.model else '--llm-timeout'} applies to --openai, which is not given")
    args.llm_timeout = 60.0 if args.llm_timeout is None else args.llm_timeout
    if args.llm_timeout <= 0:
        raise BadInput("--llm-timeout must be positive")
    if args.max_tool_rounds is not None:
        if args.max_tool_rounds < 1:
            raise BadInput("--max-tool-rounds must be at least 1")
        if table.machine in PLAYERS:
            raise BadInput(f"--max-tool-rounds applies to the Loom agent, not to {table.machine}")
        script = dataclasses.replace(script, settings={**script.settings, "max_tool_rounds": args.max_tool_rounds})
    model = None
    if args.openai is not None:
        if not args.model:
            raise BadInput("--openai needs --model NAME")
        # Imported here: the SDK is about a second of imports that a scripted run skips.
        from agentfsm.impl.llm.openai import OpenAIClient
        try:
            model = OpenAIClient(args.openai, args.model, os.environ.get("OPENAI_API_KEY"), timeout=args.llm_timeout)
        except ValueError as exc:
            raise BadInput(str(exc)) from None
    player = PLAYERS.get(table.machine)
    if model is not None and table.machine in SCRIPTED_ONLY:
        raise BadInput(f"--openai: the {table.machine} agent calls no model (it plays the script's tool calls)")
    if player is not None:
        unknown = sorted(set(script.settings) - SETTINGS_OF[table.machine])
        if unknown:
            raise BadInput(f"{args.script}: setting {unknown[0]!r} does not apply to {table.machine} (it takes "
                           f"{', '.join(sorted(SETTINGS_OF[table.machine]))})")
        run = Run(table, script, workdir, reporter, args.timeout, model, args.permission_policy)
        if args.store is not None:
            play = player
            return durable_commands.run_durable_agent(table, script, args, reporter, workdir, model,
                                                      lambda durable: play(dataclasses.replace(run, durable=durable)))

        async def play_closing() -> int:
            try:
                return await player(run)
            finally:
                await close_client(model)
        return asyncio.run(play_closing())
    try:
        if args.store is not None:
            return durable_commands.run_durable_agent(table, script, args, reporter, workdir, model)
        return asyncio.run(play_agent(table, script, workdir, reporter, args.timeout, model))
    except (ValueError, TypeError) as exc:  # the table lacks what the Loom driver maps (events, actions)
        raise BadInput(f"{args.table}: cannot drive this table as a Loom agent: {exc}") from None


def run_system(args: argparse.Namespace, parsed: Parsed) -> int:
    """``run SYSTEM --script TRACE``: the engines play an interleaved trace; exit 1 if a step cannot happen."""
    try:
        system = load_system(args.table, parsed_document(parsed, args.table))
    except TableError as exc:
        for diagnostic in exc.diagnostics:
            print(diagnostic, file=sys.stderr)
        return EXIT_BAD_INPUT
    try:
        trace = load_system_trace(system, Path(args.script).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"cannot read {args.script}: {exc}") from None
    except SystemTraceError as exc:
        raise BadInput(f"{args.script}: {exc}") from None
    print(f"{system.name}: running {len(trace.steps)} steps, one engine per instance", flush=True)
    try:
        config = asyncio.run(run_trace(system, trace.steps, lambda line: print(line, flush=True)))
    except RunDiverged as exc:
        print(f"agentfsm: the run diverged from the script: {exc}", file=sys.stderr)
        return EXIT_FAILED
    print("  reached:")
    print("\n".join(describe_config(system, config)))
    if args.json:
        print(json.dumps({"kind": "configuration", "system": system.name, "configuration": config}))
    return 0


def run_adapter(args: argparse.Namespace) -> int:
    [table] = load_tables([args.table], args.overrides)
    serve(table, sys.stdin.buffer, sys.stdout)
    return 0
