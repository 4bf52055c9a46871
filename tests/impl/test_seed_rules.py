"""The seed rules issue 14 corrected, one test each (the seed ledger, docs/seeds.md, names them).

Loom (seed 000): invalid transitions log a warning and the run goes on, durable or not; the
runtime serves any number of tool calls per response while the verifier explores the
bundled bound; ToolProgress is fed and every call has its own status, so a second
completion of one call id is not another call. Vibework (seed 002): an invalid state
transition is an internal error (Error); new input takes Done and Error to Idle; a
shutdown reaches Done from any state; non-interactive mode never waits for permission.
Explorer/evaluator (seed 001): the runtime's turn budget is the recommended 12. The table
format's `unhandled.anomaly`/`feed` and `runtime:` fields are checked like every field.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import json
import threading
from pathlib import Path

import pytest
from agentfsm.impl.agents.explorer_commands import Command, CommandRunner
from agentfsm.impl.agents.explorer_evaluator import ExplorerConfig, ExplorerEvaluatorAgent, Notes, plan_steps
from agentfsm.impl.agents.loom import LoomAgent, LoomConfig, Transcript
from agentfsm.impl.agents.prompts import FrontendQuestions, ScriptedPermissions, ScriptedQuestions
from agentfsm.impl.agents.tools import ToolResult
from agentfsm.impl.agents.vibework import VibeworkAgent, VibeworkConfig
from agentfsm.impl.driver import Envelope
from agentfsm.impl.durable.driver import DurableLink
from agentfsm.impl.engine import Engine, Outcome
from agentfsm.impl.llm.client import Call, ReplyStep, Say, ScriptedLlm, Wait
from agentfsm.impl.stores.journal import JournalError
from agentfsm.impl.stores.memory import MemoryStore
from agentfsm.impl.stores.sqlite import SqliteStore
from agentfsm.spec import Table, TableError, load_table
from agentfsm.spec.build import load_table_bytes
from agentfsm.spec.semantics import step
from agentfsm.verify.table.explore import labels_of
from conftest import ROOT, run_cli
from hypothesis import given, settings
from hypothesis import strategies as st
from table_runs import configs
from test_driver_loom import run

SPEC = ROOT / "spec"
FAST = {"retry_base": 0.001, "retry_max": 0.01, "commit_hook": False}


@pytest.fixture(scope="module")
def vibework() -> Table:
    return load_table(SPEC / "vibework-agent.yaml")


def loom_agent(table: Table, replies: list[list[ReplyStep]], workdir: Path) -> LoomAgent:
    return LoomAgent(table, ScriptedLlm(replies), config=LoomConfig(workdir=workdir, **FAST),  # type: ignore[arg-type]
                     display=Transcript())


def vibework_agent(table: Table, replies: list[list[ReplyStep]], workdir: Path, **config: object) -> VibeworkAgent:
    return VibeworkAgent(table, ScriptedLlm(replies), config=VibeworkConfig(workdir=workdir, **config),  # type: ignore[arg-type]
                         permissions=ScriptedPermissions([]), questions=ScriptedQuestions([]), display=Transcript())


def listings(n: int) -> list[list[ReplyStep]]:
    return [[Call("list_dir", {"path": "."}, f"c{k}") for k in range(n)], [Say("listed")]]


# -- Loom (seed 000) ------------------------------------------------------------------------


def test_loom_durable_run_logs_an_invalid_transition_and_goes_on(loom: Table, tmp_path: Path) -> None:
    """'Invalid transitions log a warning and return WaitForInput': a UserInput while the model
    streams is rejected and journaled as an anomaly, and the durable run does not halt."""
    agent = loom_agent(loom, [[Wait(0.2), Say("hello")]], tmp_path)
    store = MemoryStore()
    link = DurableLink.create(agent, agent, store, "r")

    async def main() -> None:
        async with agent:
            agent.send_input("first", event_id="input-1")
            await agent.wait_until(lambda: agent.state() == "CallingLlm")
            agent.send_input("second", event_id="input-2")
            await agent.wait_idle()
    run(main())
    rejected = [c for c in agent.history if not c.accepted]
    assert [(c.event, c.previous, c.actions) for c in rejected] == [("UserInput", "CallingLlm", ("WaitForInput",))]
    assert "anomaly" in [r.kind for r in store.records("r")]
    assert link.run.decisions() == [] and link.run.st.halted is None
    assert agent.state() == "ShuttingDown" and agent.display.texts == ["hello"]  # type: ignore[attr-defined]


def test_loom_in_memory_run_halts_only_under_a_halt_policy(loom: Table, tmp_path: Path) -> None:
    halting = dataclasses.replace(loom, unhandled=dataclasses.replace(loom.unhandled, anomaly="halt"))
    agent = loom_agent(halting, [[Wait(0.2), Say("hello")]], tmp_path)

    async def main() -> None:
        async with agent:
            agent.send_input("first")
            await agent.wait_until(lambda: agent.state() == "CallingLlm")
            agent.send_input("second")
            await agent.wait_done()  # the pump stopped at the anomaly
    run(main())
    assert agent.state() == "CallingLlm" and not agent.history[-1].accepted


def test_loom_runtime_serves_more_tool_calls_than_the_verification_bound(loom: Table, tmp_path: Path) -> None:
    assert loom.constants["max_tools"] == 2 and loom.runtime["max_tools"] > 2
    served = load_table(SPEC / "loom-agent.yaml", loom.runtime)
    agent = loom_agent(served, listings(4), tmp_path)

    async def main() -> None:
        async with agent:
            agent.send_input("list four times")
            await agent.wait_idle()
    run(main())
    tools = agent.display.tools  # type: ignore[attr-defined]
    assert [t.call_id for t in tools] == ["c0", "c1", "c2", "c3"] and not any(t.is_error for t in tools)


def test_agentfsm_run_uses_the_runtime_limit_and_set_still_wins(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "four.yaml"
    script.write_text(json.dumps({"inputs": ["go"], "replies": [
        [{"tool_call": {"name": "list_dir", "arguments": {"path": "."}}}] * 4, "done"]}))
    args = ["run", str(SPEC / "loom-agent.yaml"), "--script", str(script), "--workdir", str(tmp_path), "--json"]
    code, out, _ = run_cli(args, capsys)
    assert code == 0 and '"tool_calls": 4' in out and "not run" not in out
    code, out, _ = run_cli([*args, "--set", "max_tools=3"], capsys)
    assert code == 0 and '"tool_calls": 3' in out and "not run: at most 3 tool calls" in out


def test_loom_feeds_tool_progress_and_tracks_each_call(loom: Table, tmp_path: Path) -> None:
    """Each execution goes Pending -> Running -> Completed, per call id, step by step."""
    agent = loom_agent(loom, listings(2), tmp_path)
    seen: list[dict[str, str]] = []
    apply = agent.apply

    def recorded(envelope: Envelope) -> Outcome | None:
        outcome = apply(envelope)
        seen.append(dict(agent.executions))
        return outcome

    agent.apply = recorded  # type: ignore[method-assign]

    async def main() -> None:
        async with agent:
            agent.send_input("list twice")
            await agent.wait_until(lambda: agent.state() == "ExecutingTools")
            assert set(agent.executions) == {"c0", "c1"}
            await agent.wait_idle()
    run(main())
    progress = [c for c in agent.history if c.event == "ToolProgress"]
    assert len(progress) == 2 and all(c.accepted and c.state == "ExecutingTools" for c in progress)
    for call in ("c0", "c1"):
        statuses = [snapshot[call] for snapshot in seen if call in snapshot]
        assert [s for k, s in enumerate(statuses) if k == 0 or statuses[k - 1] != s] == [
            "Pending", "Running", "Completed"], call


def loom_events(table: Table) -> list[tuple[str, dict[str, int]]]:
    """Every event of the table with every value of its parameters."""
    return [(e.name, dict(zip([p.name for p in e.params], values, strict=True)))
            for e in table.events for values in itertools.product(*(p.domain for p in e.params))]


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_loom_engine_keeps_no_event_for_later_and_starts_nothing(loom: Table, data: st.DataObject) -> None:
    """Backpressure: "the caller controls the pace of event delivery. No internal queues or
    background tasks". Each step handles the one event it is given, ends where its outcome
    says, and returns: an engine that lived through any history answers the next event as a
    fresh one restored to its state and variables does (nothing held back for later), and no
    task or thread appears."""
    walk = data.draw(st.lists(st.sampled_from(loom_events(loom)), max_size=30))

    async def main() -> None:
        tasks, threads = asyncio.all_tasks(), threading.active_count()
        engine = Engine(loom)
        for event, params in walk:
            twin = Engine(loom, engine.state, engine.values)
            outcome = engine.step(event, **params)
            assert outcome == twin.step(event, **params), (event, params)
            assert (engine.state, engine.vars) == (outcome.state, outcome.vars), (event, params)
            assert asyncio.all_tasks() == tasks and threading.active_count() == threads
    asyncio.run(main())


def test_loom_every_event_answers_one_action_but_a_hook_given_up(loom: Table) -> None:
    """The seed's handle_event returns one AgentAction per event. Every event, accepted or not,
    in every reachable state but the final one, answers exactly one action, except the row
    that gives up on a failing post-tools hook: it shows the error and sends the next LLM
    request (DisplayError, SendLlmRequest), a departure docs/seeds.md records."""
    several = set()
    for config in configs(loom):
        if loom.states[config[0]].final:
            continue
        for name, params in labels_of(loom):
            result = step(loom, config[0], config[1], name, params)
            if len(result.actions) != 1:
                several.add((loom.states[config[0]].name, name, result.actions))
    assert several == {("PostToolsHook", "PostToolsHookFailed", ("DisplayError", "SendLlmRequest"))}


@settings(max_examples=25, deadline=None)
@given(max_retries=st.integers(0, 12), max_tools=st.integers(1, 8), rounds=st.integers(1, 40),
       concurrency=st.integers(1, 16), commit=st.booleans(), retry_base=st.floats(0.0, 5.0))
def test_loom_agent_always_starts_in_waiting_whatever_its_configuration(
        max_retries: int, max_tools: int, rounds: int, concurrency: int, commit: bool, retry_base: float) -> None:
    """The seed's property test quantifies over every AgentConfig: here the table's constants
    (--set) and the runtime's LoomConfig."""
    table = load_table(SPEC / "loom-agent.yaml", {"max_retries": max_retries, "max_tools": max_tools})
    config = LoomConfig(max_tool_rounds=rounds, tool_concurrency=concurrency, commit_hook=commit,
                        retry_base=retry_base)
    agent = LoomAgent(table, ScriptedLlm([]), config=config, display=Transcript())
    assert agent.state() == agent.engine.state == "WaitingForUserInput"
    assert (agent.engine.vars["retries"], agent.engine.vars["pending"]) == (0, 0)


def test_loom_a_second_completion_of_one_call_is_not_another_call(loom: Table, tmp_path: Path) -> None:
    agent = loom_agent(loom, [], tmp_path)
    agent.engine.restore("ExecutingTools", (0, 2, 0, False, 0))
    agent.executions = {"a": "Completed", "b": "Running"}
    duplicate = Envelope("ToolCompleted", {"mutating": False}, payload=ToolResult("a", "list_dir", "again"))
    assert agent.apply(duplicate) is None
    assert agent.engine.state == "ExecutingTools" and agent.engine.vars["pending"] == 2 and not agent.history


# -- Vibework (seed 002) --------------------------------------------------------------------


def test_vibework_a_session_save_that_fails_halts_the_run_instead_of_entering_error(
        vibework: Table, tmp_path: Path) -> None:
    """Seed 002 lists "Session save failed" among the internal errors that enter Error. A durable
    run departs from it: a step whose journal write fails is not taken, the agent stops where
    the journal is (entering Error would be one more step to journal, on the store that just
    failed), and the same run resumed once the store works again takes the input."""
    failing = [False]

    def boundary(phase: str, label: str) -> None:
        if failing[0] and phase == "before":
            raise JournalError("disk full")

    store = MemoryStore(on_boundary=boundary)
    agent = vibework_agent(vibework, [[Say("hi")]], tmp_path)
    link = DurableLink.create(agent, agent, store, "r")
    failing[0] = True

    async def main() -> None:
        async with agent:
            agent.send_input("hello", event_id="input-1")
            await agent.wait_until(lambda: bool(agent.failures))
    run(main())
    assert [str(f) for f in agent.failures] == ["disk full"] and not agent.history
    assert agent.state() == link.run.state == "Idle" and [r.kind for r in store.records("r")] == ["created"]
    failing[0] = False
    again = vibework_agent(vibework, [[Say("hi")]], tmp_path)

    async def resumed() -> None:
        async with again:
            DurableLink.open(again, again, store, "r", resume=True).resume()
            again.send_input("hello", event_id="input-1")
            await again.wait_until(lambda: again.state() == "Idle" and bool(again.history))
    run(resumed())
    assert [(c.event, c.state) for c in again.history][:2] == [("UserInput", "Processing"), ("TextResponse", "Idle")]
    assert not again.failures


def test_vibework_invalid_state_transition_is_an_internal_error(vibework: Table, tmp_path: Path) -> None:
    """Error 'When: ... Internal errors: ... Invalid state transition'."""
    assert vibework.unhandled.feed == "InternalError"
    agent = vibework_agent(vibework, [], tmp_path)

    async def main() -> None:
        async with agent:
            agent.feed("PermissionGranted")  # nothing asked for permission: invalid in Idle
            await agent.wait_until(lambda: agent.state() == "Error")
    run(main())
    assert [(c.event, c.accepted, c.state) for c in list(agent.history)[:2]] == [
        ("PermissionGranted", False, "Idle"), ("InternalError", True, "Error")]


def test_vibework_shutdown_while_processing_reaches_done(vibework: Table, tmp_path: Path) -> None:
    """Done 'When: ... Shutdown requested', from whatever state the agent is in."""
    agent = vibework_agent(vibework, [[Wait(5), Say("too late")]], tmp_path)

    async def main() -> None:
        async with agent:
            agent.send_input("think")
            await agent.wait_until(lambda: agent.state() == "Processing")
            await agent.shutdown()
    run(main())
    assert agent.state() == "Done" and agent.history[-1].event == "Shutdown"


def test_vibework_non_interactive_mode_never_waits_for_permission(vibework: Table, tmp_path: Path) -> None:
    """WaitingForPermission 'When: ... Interactive mode enabled'; non-interactive runs auto-allow."""
    replies: list[list[ReplyStep]] = [[Call("write_file", {"path": "out.txt", "content": "x"})], [Say("written")]]
    agent = vibework_agent(vibework, replies, tmp_path, interactive=False)

    async def main() -> None:
        async with agent:
            agent.send_input("write")
            await agent.wait_settled()
    run(main())
    assert "WaitingForPermission" not in [c.state for c in agent.history]
    assert (tmp_path / "out.txt").read_text() == "x" and agent.state() == "Done"
    assert not agent.permissions.requests  # type: ignore[attr-defined]


def test_vibework_runtime_serves_every_tool_call_of_a_response(vibework: Table, tmp_path: Path) -> None:
    served = load_table(SPEC / "vibework-agent.yaml", vibework.runtime)
    agent = vibework_agent(served, listings(5), tmp_path)

    async def main() -> None:
        async with agent:
            agent.send_input("list")
            await agent.wait_settled()
    run(main())
    results = [m for m in agent.conversation if m["role"] == "tool"]
    assert len(results) == 5 and not any("not run" in str(m["content"]) for m in results)


def test_vibework_answers_are_matched_to_their_request_id(vibework: Table, tmp_path: Path) -> None:
    """WaitingForUserInput's 'request_id: ID to match request/response': a frontend answers by id;
    a withdrawn request's id answers nothing."""
    replies: list[list[ReplyStep]] = [[Call("AskUserQuestion", {"questions": ["Which?"]})], [Say("ok")],
                                      [Call("AskUserQuestion", {"questions": ["Again?"]})]]
    frontend = FrontendQuestions()
    agent = VibeworkAgent(vibework, ScriptedLlm(replies), config=VibeworkConfig(workdir=tmp_path),
                          permissions=ScriptedPermissions([]), questions=frontend, display=Transcript())

    async def main() -> tuple[str, str]:
        async with agent:
            agent.send_input("ask me")
            while not frontend.open:  # published by the activity, after the step
                await asyncio.sleep(0.01)
            first = agent.detail().request_id
            assert first is not None and list(frontend.open) == [first]
            with pytest.raises(KeyError):
                frontend.answer("session-1/q99", ["no"])
            with pytest.raises(ValueError):
                frontend.answer(first, ["a", "b"])
            frontend.answer(first, ["this one"])
            await agent.wait_settled()
            agent.send_input("ask again")
            while not frontend.open:  # published by the activity, after the step
                await asyncio.sleep(0.01)
            second = agent.detail().request_id
            assert second is not None
            await agent.interrupt()  # the questions are withdrawn
            with pytest.raises(KeyError):
                frontend.answer(second, ["too late"])
            return first, second
    first, second = run(main())
    assert first != second and agent.state() == "Done"
    assert "Q: Which?\nA: this one" in [m["content"] for m in agent.conversation if m["role"] == "tool"]


# -- Explorer/evaluator (seed 001) ------------------------------------------------------------


def test_explorer_runtime_turn_budget_is_the_recommended_twelve(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """'Recommendation: Use max_turns = 12-16 for V2'; the verifier keeps exploring 6."""
    table = load_table(SPEC / "explorer-evaluator.yaml")
    assert table.constants["max_turns"] == 6 and table.runtime["max_turns"] == 12
    script = tmp_path / "endless.yaml"
    script.write_text(json.dumps({"inputs": ["what?"], "replies": ["nothing to run", "still missing"] * 6}))
    code, out, _ = run_cli(["run", str(SPEC / "explorer-evaluator.yaml"), "--script", str(script),
                            "--workdir", str(tmp_path), "--json"], capsys)
    lines = [json.loads(line) for line in out.splitlines()]
    calls = [line for line in lines if line["kind"] == "step" and line["actions"]
             and line["actions"][-1].startswith("Call")]
    assert code == 0 and len(calls) == 12
    assert [line["text"] for line in lines if line["kind"] == "result"] == ["task 1: OutOfTurns: no answer"]


def test_explorer_view_shows_a_files_structure_and_symbols(tmp_path: Path) -> None:
    """'$(view path) - file structure/symbols'; '$(view path:start-end) - specific lines'."""
    (tmp_path / "llm.rs").write_text("use std::fmt;\n\npub enum Provider {\n    Anthropic,\n    OpenAI,\n}\n\n"
                                     "impl Provider {\n    pub fn name(&self) -> &str { \"x\" }\n}\n")
    (tmp_path / "notes.txt").write_text("one\ntwo\n")
    runner = CommandRunner(tmp_path)
    outline = run(runner.run(Command("view", "llm.rs")))
    assert outline.splitlines() == ["llm.rs: 10 lines, 3 symbols (view llm.rs:START-END for lines)",
                                    "3: pub enum Provider {", "8: impl Provider {",
                                    "9:     pub fn name(&self) -> &str { \"x\" }"]
    assert run(runner.run(Command("view", "llm.rs:4-5"))) == "4:     Anthropic,\n5:     OpenAI,"
    assert run(runner.run(Command("view", "notes.txt"))) == "1: one\n2: two"  # no symbols: its text


@pytest.mark.parametrize(("command", "expected"), [
    ("grep -c o notes.txt | wc -l", "exit status 0\n1\n"),
    ("cat *.txt && ls sub", "exit status 0\none\ntwo\nx.txt\n"),
    ("ls sub; wc -l notes.txt", "exit status 0\nx.txt\n2 notes.txt\n"),
    ("sleep 5 | cat", "error: timed out after 0.5s"),
    ("cat notes.txt > copy", "error: '>' is not allowed in run (pipes and ; && || only)"),
    ("cat /etc/passwd", "error: path '/etc/passwd' is outside the work directory"),
    ("grep --file=../secret x", "error: path '../secret' is outside the work directory"),
    ("ls .*", "error: '.*' is not allowed in run: it could name a place outside the work directory"),
    ("cat ~/x", "error: '~/x' is not allowed in run: it could name a place outside the work directory"),
    ("echo $HOME", "error: no substitutions, variables or escapes in run: write the command plainly"),
    ("ls | rm notes.txt", "error: rm is not allowed (allowed: ls, cat, grep, wc, sleep, find)"),
    ("find . -delete", "error: -delete is not allowed in run: exploration only reads (find -delete can run a "
                       "program, take configuration from the command line or write a file)"),
    ("(ls)", "error: '(' is not allowed in run (pipes and ; && || only)")])
def test_explorer_run_is_a_confined_shell_command(command: str, expected: str, tmp_path: Path) -> None:
    """'$(run cmd) - shell command': pipelines of allowed programs in the work directory, with a timeout."""
    (tmp_path / "notes.txt").write_text("one\ntwo\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "x.txt").write_text("")
    tmp_path.chmod(0o755)  # readable by others: as root, the sandbox runs the command as nobody
    runner = CommandRunner(tmp_path, timeout=0.5, run_allowed=("ls", "cat", "grep", "wc", "sleep", "find"))
    assert run(runner.run(Command("run", command))) == expected
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt", "sub"], "nothing was written"


@pytest.mark.parametrize(("plan", "reported"), [("1. Find main.rs\n2. Read its structs", False),
                                                ("- a\n- b\n- c\n- d", False),
                                                ("Just look around.", True),
                                                ("1. a\n2. b\n3. c\n4. d\n5. e", True)])
def test_explorer_plan_of_two_to_four_steps_is_checked(plan: str, reported: bool, tmp_path: Path) -> None:
    """The planner 'Creates a 2-4 step plan': another plan is kept and reported as a violation."""
    table = load_table(SPEC / "explorer-evaluator.yaml")
    agent = ExplorerEvaluatorAgent(table, ScriptedLlm([[Say(plan)], [Say("nothing")], [Say("$(answer x)")]]),
                                   config=ExplorerConfig(workdir=tmp_path))

    async def main() -> None:
        async with agent:
            agent.ask("q", plan=True)
            await agent.wait_done()
    run(main())
    assert agent.plan == plan and agent.answer == "x"
    assert bool(agent.violations) == reported and plan_steps(plan) == len(
        [line for line in plan.splitlines() if line[:1] in "-123456789"])


@pytest.mark.parametrize(("evaluation", "said"), [("$(answer x)", []), ("Let me think. $(answer x)", ["Let me"]),
                                                  ("I need to see more; I will wait.", ["I need to", "I will"])])
def test_explorer_evaluator_phrases_the_seed_forbids_are_reported(evaluation: str, said: list[str],
                                                                   tmp_path: Path) -> None:
    """The evaluator 'NEVER say[s] "I need to", "Let me", or "I will"': the reply stands, the slip is reported."""
    table = load_table(SPEC / "explorer-evaluator.yaml", {"max_turns": 4})
    notes = Notes()
    agent = ExplorerEvaluatorAgent(table, ScriptedLlm([[Say("$(view a)")], [Say(evaluation)],
                                                       [Say("$(view a)")], [Say("$(answer x)")]]),
                                   config=ExplorerConfig(workdir=tmp_path), narrator=notes)

    async def main() -> None:
        async with agent:
            agent.ask("q")
            await agent.wait_done()
    run(main())
    assert agent.answer == "x" and agent.violations == ([f"the evaluator said {', '.join(map(repr, said))}"]
                                                        if said else [])
    labels = [text.split(":")[0] for kind, text in notes.notes if kind in ("explorer", "evaluator")]
    assert labels[:2] == ["[agent-v2] Turn 1/4 (explorer)", "[agent-v2] Turn 2/4 (evaluator)"]


# -- the options every agent must honour --------------------------------------------------------


AGENTS = ["loom-agent", "vibework-agent", "explorer-evaluator", "tool-call"]
WITHOUT_STORE = [["--resume"], ["--decide", "k=failed"], ["--run-id", "x"], ["--lease", "5"]]


def _run_agent(machine: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], *options: str) -> tuple[int, str]:
    script = tmp_path / "s.yaml"
    listing = [{"tool_call": {"name": "list_dir", "arguments": {"path": "."}}}]  # the tool-call runner's one call
    script.write_text(json.dumps({"inputs": ["go"], "replies": [listing] if machine == "tool-call" else ["ok"]}))
    code, _, err = run_cli(["run", str(SPEC / f"{machine}.yaml"), "--script", str(script), "--workdir",
                            str(tmp_path), *options], capsys)
    return code, err


@pytest.mark.parametrize("machine", AGENTS)
def test_store_is_never_silently_ignored(machine: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every agent honours --store: its run is in the journal."""
    code, err = _run_agent(machine, tmp_path, capsys, "--store", str(tmp_path / "j.db"))
    assert code in (0, 1) and "Traceback" not in err, err
    store = SqliteStore(tmp_path / "j.db")
    try:
        assert store.runs(), "the run was journaled"
    finally:
        store.close()


@pytest.mark.parametrize("machine", AGENTS)
@pytest.mark.parametrize("option", WITHOUT_STORE, ids=lambda o: o[0])
def test_durable_options_without_store_are_bad_input(machine: str, option: list[str], tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _run_agent(machine, tmp_path, capsys, *option)
    assert code == 2 and f"{option[0]} needs --store" in err and "Traceback" not in err


@pytest.mark.parametrize("lease", ["0", "-1", "nan", "inf"])
def test_a_lease_that_cannot_hold_or_never_ends_is_bad_input(lease: str, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """0 or less lets another process take the run while this one acts on it; NaN failed in the
    store's schema; an endless lease crashed the renewing thread and would hold a dead run for ever."""
    code, err = _run_agent("loom-agent", tmp_path, capsys, "--store", str(tmp_path / "j.db"), "--lease", lease)
    assert code == 2 and "--lease must be positive and finite" in err and "Traceback" not in err, err
    assert not (tmp_path / "j.db").exists()


@pytest.mark.parametrize("option", [["--model", "m"], ["--llm-timeout", "5"]], ids=lambda o: o[0])
def test_model_options_without_openai_are_bad_input(option: list[str], tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _run_agent("loom-agent", tmp_path, capsys, *option)
    assert code == 2 and f"{option[0]} applies to --openai" in err


@pytest.mark.parametrize("machine", AGENTS)
def test_permission_policy_only_where_permission_is_asked(machine: str, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """--permission-policy was accepted silently by the agents that ask no permission."""
    code, err = _run_agent(machine, tmp_path, capsys, "--permission-policy", "grant")
    if machine in ("vibework-agent", "tool-call"):
        assert code in (0, 1) and "Traceback" not in err, err
    else:
        assert code == 2 and "--permission-policy applies to the agents that ask permission" in err


def test_a_model_is_refused_by_the_agent_that_calls_none(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = _run_agent("tool-call", tmp_path, capsys, "--openai", "http://localhost:9/v1", "--model", "m")
    assert code == 2 and "calls no model" in err


# -- the table format -----------------------------------------------------------------------------


BASE = """format: 1
machine: m
constants: {n: 2}
states: {A: {initial: true}, B: {}}
events: {Go: {}, Oops: {}, Take: {params: {k: {type: bool}}}}
transitions:
  - {from: A, on: Go, to: B}
  - {from: "*", on: Oops, to: A}
"""


@pytest.mark.parametrize(("tail", "message"), [
    ("unhandled: {policy: reject, feed: Nope}\n", "unknown event 'Nope'"),
    ("unhandled: {policy: reject, feed: Take}\n", "must take no parameters"),
    ("unhandled: {policy: ignore, feed: Oops}\n", "feed needs policy reject"),
    ("unhandled: {policy: reject, anomaly: stop}\n", "anomaly"),
    ("runtime: {m: 3}\n", "no constant 'm'"),
    ("runtime: {n: true}\n", "expected an integer"),
])
def test_anomaly_and_runtime_fields_are_checked(tail: str, message: str) -> None:
    with pytest.raises(TableError) as caught:
        load_table_bytes((BASE + tail).encode(), "t.yaml")
    assert message in str(caught.value) and "t.yaml:" in str(caught.value)


def test_anomaly_and_runtime_fields_load() -> None:
    table = load_table_bytes((BASE + "unhandled: {policy: reject, anomaly: log, feed: Oops}\nruntime: {n: 9}\n")
                             .encode(), "t.yaml")
    assert (table.unhandled.anomaly, table.unhandled.feed, dict(table.runtime)) == ("log", "Oops", {"n": 9})
    assert load_table_bytes(BASE.encode(), "t.yaml").unhandled.anomaly == "halt"  # the default


def test_bundled_tables_say_which_anomaly_policy_they_follow() -> None:
    policies = {load_table(p).machine: (load_table(p).unhandled.anomaly, load_table(p).unhandled.feed)
                for p in sorted(SPEC.glob("*.yaml"))}
    assert policies == {"loom-agent": ("log", None), "vibework-agent": ("log", "InternalError"),
                        "explorer-evaluator": ("log", None), "tool-call": ("log", None)}


def test_the_runtime_limit_does_not_reach_the_verifier(capsys: pytest.CaptureFixture[str]) -> None:
    def configurations(*extra: str) -> int:
        code, out, _ = run_cli(["verify", str(SPEC / "loom-agent.yaml"), "--json", *extra], capsys)
        assert code == 0
        return int(json.loads(out)["tables"][0]["configurations"])
    assert configurations() == configurations("--set", "max_tools=2") < configurations("--set", "max_tools=3")
