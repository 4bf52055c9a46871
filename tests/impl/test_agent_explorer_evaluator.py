"""The explorer/evaluator agent (seed 001) end to end: the seed's test-query turn patterns
through the real agent with a scripted LLM, context visibility per action, command
execution and its confinement, memory commands and the evaluator's protocol violation."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from agent_runs import Watcher, run
from agentfsm.impl.agents.explorer_commands import Command, CommandRunner, parse_reply
from agentfsm.impl.agents.explorer_evaluator import ExplorerConfig, ExplorerEvaluatorAgent, Notes, WorkingMemory
from agentfsm.impl.llm.client import Fail, Say, ScriptedLlm
from agentfsm.spec import Table, load_table
from conftest import SPEC

LLM_RS = "use std::fmt;\n\n" + "\n" * 35 + "pub enum Provider {\n    Anthropic,\n    OpenAI,\n}\n"


@pytest.fixture(scope="module")
def explorer() -> Table:
    return load_table(SPEC / "explorer-evaluator.yaml")


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    tmp_path.chmod(0o755)  # readable by others: as root, the sandbox runs $(run) as nobody
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "llm.rs").write_text(LLM_RS)
    (tmp_path / "src" / "main.rs").write_text("// cli\n\n\n\n\n\n\n\n\n\n\n\nstruct Cli {}\nstruct Other;\n")
    return tmp_path


class Loop:
    def __init__(self, table: Table, replies: Sequence[str], workdir: Path, **config: Any) -> None:
        self.llm = ScriptedLlm([[Say(text)] for text in replies])
        self.notes = Notes()
        self.agent = ExplorerEvaluatorAgent(table, self.llm, config=ExplorerConfig(workdir=workdir, **config),
                                            narrator=self.notes)

    async def ask(self, task: str, plan: bool = False) -> list[str]:
        agent = self.agent
        agent.start()
        watcher = Watcher(agent)
        agent.ask(task, plan)
        await agent.wait_done()
        await watcher.stop()
        assert all(c.accepted for c in watcher.changes) and not agent.failures
        assert self.llm.remaining == 0
        return watcher.states("Idle")

    def shown(self) -> list[tuple[str, str]]:
        """(action, user message) of every LLM call, in order."""
        return [(action, str(request.messages[1]["content"])) for action, request in self.agent.requests]


def test_simple_query_two_turns(explorer: Table, repo: Path) -> None:
    loop = Loop(explorer, ['$(text-search "struct")',
                           "The first struct is Cli.\n$(note main.rs:13 struct Cli)\n$(answer Cli at line 13)"], repo)
    assert run(loop.ask("What is the first struct in main.rs?")) == [
        "Idle", "Exploring", "ExecutingCommands", "Evaluating", "Answered"]
    agent = loop.agent
    assert agent.answer == "Cli at line 13" and agent.engine.vars["turns"] == 2
    assert agent.memory.notes == ["main.rs:13 struct Cli"]
    assert "src/main.rs:13: struct Cli {}" in agent.memory.items[0].output
    assert [a for a, _ in loop.shown()] == ["CallExplorerLlm_LastOutputs", "CallEvaluatorLlm_WorkingMemory"]


def test_complex_query_four_turns_and_context_visibility(explorer: Table, repo: Path) -> None:
    replies = ['$(text-search "enum Provider")',
               "Found location but not definition. Need to view file.",
               "$(view src/llm.rs:38-41)",
               "$(note Provider enum has 2 variants: Anthropic, OpenAI)\n$(done 2)"]
    loop = Loop(explorer, replies, repo)
    assert run(loop.ask("How many Provider variants in llm.rs?")) == [
        "Idle", "Exploring", "ExecutingCommands", "Evaluating", "Exploring", "ExecutingCommands", "Evaluating",
        "Answered"]
    assert loop.agent.answer == "2"
    (_, explore1), (_, evaluate1), (_, explore2), (_, evaluate2) = loop.shown()
    hit, view = "src/llm.rs:38: pub enum Provider {", "39:     Anthropic,"
    assert "(none yet)" in explore1
    assert hit in evaluate1
    # the explorer sees only the last outputs (and the evaluator's remark); the evaluator sees everything
    assert "Need to view file." in explore2 and hit in explore2 and view not in explore2
    assert hit in evaluate2 and view in evaluate2
    assert evaluate2.index("Turn 1 (explorer):") < evaluate2.index("Turn 3 (explorer):")
    # The seed's "Accumulated Context Format": **Task:**, **History:** turn by turn (each
    # command numbered for $(keep)/$(drop)), then **Your job:**.
    assert evaluate2 == (
        "**Task:** How many Provider variants in llm.rs?\n\n**History:**\n\n"
        'Turn 1 (explorer):\n\n[1] `text-search "enum Provider"`\n\nsrc/llm.rs:38: pub enum Provider {\n\n'
        "Turn 3 (explorer):\n\n[2] `view src/llm.rs:38-41`\n\n38: pub enum Provider {\n39:     Anthropic,\n"
        "40:     OpenAI,\n41: }\n\n"
        "**Your job:** Note important findings, then $(answer ANSWER) or explain what's missing.")


# The seed's prompt rules ("Actual MACHINE Config", "Key Learnings"), line by line.
EXPLORER_RULES = (
    "You are an EXPLORER. Suggest commands to gather information.",
    "$(view path) - file structure/symbols", "$(view path:start-end) - specific lines",
    '$(text-search "pattern") - search codebase', "$(run cmd) - shell command",
    "Output commands directly. Do NOT answer the question - that's the evaluator's job.",
    'Example: $(view src/main.rs) $(text-search "config")')
EVALUATOR_RULES = (
    "You are an EVALUATOR, not an explorer. Your ONLY job is to judge what we found.",
    "1. NEVER output commands (not even in backticks like `view` or `text-search`)",
    '2. NEVER say "I need to", "Let me", or "I will" - those are explorer phrases',
    "3. You MUST either $(answer) or explain what specific info is missing",
    "Do NOT explore more",
    "If results contain the answer: $(answer The complete answer here)",
    "If results are partial: $(note what we found) then explain what's still needed",
    "If results are irrelevant: explain what went wrong",
    "Memory commands: $(keep 1 3), $(keep), $(drop 2), $(note finding)",
    'Example good response:\n"The search found `support_for_extension` in registry.rs.\n'
    "$(note Language detection uses support_for_extension())\n"
    '$(answer normalize detects language by file extension via support_for_extension())"')


def test_each_role_is_called_with_the_seeds_prompt_rules(explorer: Table, repo: Path) -> None:
    loop = Loop(explorer, ['$(text-search "struct")', "$(answer Cli)"], repo)
    run(loop.ask("What is the first struct in main.rs?"))
    (explore, explore_request), (evaluate, evaluate_request) = loop.agent.requests
    assert (explore, evaluate) == ("CallExplorerLlm_LastOutputs", "CallEvaluatorLlm_WorkingMemory")
    for request, rules in ((explore_request, EXPLORER_RULES), (evaluate_request, EVALUATOR_RULES)):
        system = request.messages[0]
        assert system["role"] == "system"
        assert [rule for rule in rules if rule not in str(system["content"])] == []


@pytest.mark.parametrize("max_turns", [4, 6])
def test_out_of_turns(max_turns: int, repo: Path) -> None:
    table = load_table(SPEC / "explorer-evaluator.yaml", {"max_turns": max_turns})
    replies = ["$(view src)", "not enough", '$(text-search "x")', "still missing", "$(run ls)", "I cannot tell"]
    loop = Loop(table, replies[:max_turns], repo)
    assert run(loop.ask("What is the first struct in main.rs?")) == [
        "Idle"] + ["Exploring", "ExecutingCommands", "Evaluating"] * (max_turns // 2) + ["OutOfTurns"]
    assert loop.agent.answer is None and ("out-of-turns", f"no answer within {max_turns} turns") in loop.notes.notes


def test_a_failed_llm_call_is_retried(explorer: Table, repo: Path) -> None:
    loop = Loop(explorer, [], repo, retry_delay=0.0)
    loop.llm = ScriptedLlm([[Fail("503")], [Say("no commands")], [Say("$(done nothing)")]])
    loop.agent.llm = loop.llm
    assert run(loop.ask("q")) == ["Idle", "Exploring", "Evaluating", "Answered"]
    assert ("retry", "503; retrying") in loop.notes.notes


def test_planner_runs_first_and_once_and_its_plan_reaches_the_explorer(explorer: Table, repo: Path) -> None:
    replies = ["1. Find main.rs\n2. Read its structs", "$(view src/main.rs:13)", "$(answer Cli)"]
    loop = Loop(explorer, replies, repo)
    assert run(loop.ask("first struct?", plan=True)) == [
        "Idle", "Planning", "Exploring", "ExecutingCommands", "Evaluating", "Answered"]
    (planner, task_only), (explorer_action, explore), (_, evaluate) = loop.shown()
    assert (planner, explorer_action) == ("CallPlannerLlm_TaskOnly", "CallExplorerLlm_PlanAndLastOutputs")
    assert task_only == "**Task:** first struct?"
    assert "2. Read its structs" in explore and "2. Read its structs" not in evaluate
    assert loop.agent.engine.vars["turns"] == 3


def test_explorer_cannot_conclude(explorer: Table, repo: Path) -> None:
    loop = Loop(explorer, ["$(answer 13) $(view src/llm.rs:38)", "$(answer the enum starts at 38)"], repo)
    assert run(loop.ask("where?")) == ["Idle", "Exploring", "ExecutingCommands", "Evaluating", "Answered"]
    assert loop.agent.answer == "the enum starts at 38"
    assert ("discarded", "the explorer cannot conclude: answer 13") in loop.notes.notes


def test_explorer_without_commands_goes_straight_to_the_evaluator(explorer: Table, repo: Path) -> None:
    loop = Loop(explorer, ["I think it is in llm.rs", "$(done unknown)"], repo)
    assert run(loop.ask("q")) == ["Idle", "Exploring", "Evaluating", "Answered"]


def test_evaluator_commands_are_a_violation_and_never_run(explorer: Table, repo: Path) -> None:
    replies = ["$(view src/main.rs:13)", "Let me look: `view src/llm.rs` and $(run touch pwned)",
               "$(view src/main.rs:14)", "$(answer Cli) $(view src/llm.rs)"]
    loop = Loop(explorer, replies, repo, run_allowed=("touch",))
    assert run(loop.ask("q")) == ["Idle", "Exploring", "ExecutingCommands", "Evaluating", "Exploring",
                                  "ExecutingCommands", "Evaluating", "Answered"]
    assert not (repo / "pwned").exists()
    assert loop.agent.violations == ["$(run touch pwned), `view src/llm.rs`", "the evaluator said 'Let me'",
                                     "$(view src/llm.rs)"]
    assert loop.agent.answer == "Cli"
    assert next(c.actions for c in loop.agent.history if c.event.startswith("Evaluator")) == (
        "RejectEvaluatorCommands", "ApplyMemoryCommands", "CallExplorerLlm_LastOutputs")


def test_memory_keep_drop_note_and_shortening() -> None:
    memory = WorkingMemory()
    for n in range(1, 4):
        memory.add(n, Command("view", f"f{n}"), f"first line {n}\n" + "x" * 100)
    assert memory.apply(parse_reply("$(keep 3) $(drop 2) $(note seen) $(drop 9)").commands) == ["drop 9: no item 9"]
    assert [(i.number, i.kept) for i in memory.items] == [(1, False), (3, True)]
    assert memory.notes == ["seen"]
    shown = memory.render(limit=150)
    assert "first line 1 [... shortened]" in shown and "[3] (kept) `view f3`" in shown and "x" * 100 in shown
    memory.add(4, Command("run", "ls"), "out")
    assert [i.number for i in memory.items] == [1, 3, 4]  # numbers are not reused
    memory.apply(parse_reply("$(keep)").commands)
    assert all(i.kept for i in memory.items)


def test_parse_reply_balances_parentheses_and_quotes() -> None:
    reply = parse_reply('The search found `support_for_extension` in registry.rs.\n$(note uses f())\n'
                        '$(answer detects language via support_for_extension()) $(text-search "a)b")')
    assert reply.commands == (Command("note", "uses f()"),
                              Command("answer", "detects language via support_for_extension()"),
                              Command("text-search", '"a)b"'))
    assert reply.prose == "The search found `support_for_extension` in registry.rs."
    assert not reply.markdown_commands and parse_reply("try `text-search foo`").markdown_commands
    assert parse_reply("unbalanced $(view x").commands == ()


def test_commands_are_confined_to_the_work_directory(repo: Path) -> None:
    runner = CommandRunner(repo, timeout=0.5, run_allowed=("sleep", "ls"))

    async def main() -> list[str]:
        return [await runner.run(Command(name, argument)) for name, argument in [
            ("view", "../outside"), ("view", "src/main.rs:13"), ("view", "src"), ("text-search", '"struct Cli"'),
            ("run", "rm -rf ."), ("run", "sleep 5"), ("run", "ls src"), ("run", "ls 'unterminated"),
            ("view", "src/llm.rs:9-3")]]
    outside, line, listing, search, rm, slow, ls, bad_quote, bad_range = run(main())
    assert outside == "error: path '../outside' is outside the work directory"
    assert line == "13: struct Cli {}" and listing == "llm.rs\nmain.rs"
    assert search == "src/main.rs:13: struct Cli {}"
    assert rm.startswith("error: rm is not allowed") and slow == "error: timed out after 0.5s"
    assert ls == "exit status 0\nllm.rs\nmain.rs\n"
    assert bad_quote.startswith("error: cannot split") and bad_range == "error: bad line range 9-3"
