"""The OpenAI-compatible client and the Loom agent against a third-party mock server.

``llm-mock-api`` (a dev dependency) is an OpenAI-compatible server written by others: its
streams, tool-call deltas and error bodies are not shaped by this project's expectations.
Each test starts it in-process on a free port.
"""

from __future__ import annotations

import asyncio
import subprocess
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from agentfsm.impl.agents.loom import LoomAgent, LoomConfig, Transcript
from agentfsm.impl.llm.openai import OpenAIClient
from agentfsm.spec import Table
from conftest import ROOT
from llm_mock_api import MockServer
from llm_mock_api.mock_server import MockServerOptions
from llm_mock_api.types.reply import ErrorReply, ReplyObject, ToolCall

AGENTFSM = str(ROOT / ".venv" / "bin" / "agentfsm")
LOOM = str(ROOT / "spec" / "loom-agent.yaml")
Setup = Callable[[Any], None]


def no_tool_result(request: Any) -> bool:
    return request.last_tool_call_id is None


def always(request: Any) -> bool:
    return True


def tool_reply(name: str, **args: Any) -> ReplyObject:
    return ReplyObject(tools=[ToolCall(name=name, args=args)])


def converse(loom: Table, workdir: Path, setup: Setup, text: str, **config: Any) -> tuple[Transcript, list[Any],
                                                                                          LoomAgent]:
    """One turn of the Loom agent against the mock server; (display, the requests it got, agent)."""
    display = Transcript()

    async def main() -> tuple[list[Any], LoomAgent]:
        async with MockServer(MockServerOptions(default_latency=0)) as server:
            setup(server)
            client = OpenAIClient(server.url + "/v1", "mock-model", api_key="sk-test")
            agent = LoomAgent(loom, client, display=display,
                              config=LoomConfig(workdir=workdir, retry_base=0.01, commit_hook=False, **config))
            async with agent:
                agent.send_input(text)
                await agent.wait_idle()
            await client.aclose()
            return list(server.history.all), agent

    async def bounded() -> tuple[list[Any], LoomAgent]:
        async with asyncio.timeout(30):
            return await main()
    requests, agent = asyncio.run(bounded())
    return display, requests, agent


def test_text_and_a_tool_round_trip(loom: Table, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello from disk\n")

    def setup(server: Any) -> None:
        server.when(no_tool_result).reply(tool_reply("read_file", path="notes.txt"))
        server.when(always).reply("The file says hello from disk.")
    display, requests, _ = converse(loom, tmp_path, setup, "what is in notes.txt?")
    assert "".join(display.texts) == "The file says hello from disk."
    assert [t.content for t in display.tools] == ["hello from disk\n"] and not display.errors
    assert len(requests) == 2 and requests[1].request.messages[-1].role == "tool"
    assert requests[0].request.headers["authorization"] == "Bearer sk-test"


@pytest.mark.parametrize("status", [400, 401])
def test_a_bad_request_or_key_is_not_retried(loom: Table, tmp_path: Path, status: int) -> None:
    def setup(server: Any) -> None:
        server.when(always).reply(ReplyObject(error=ErrorReply(status, "invalid key")))
    display, requests, agent = converse(loom, tmp_path, setup, "hi")
    assert len(requests) == 1  # the table still counts its retries, but none calls the model again
    assert display.errors == [f"HTTP {status}: invalid key"]
    assert agent.history[-2].state == "WaitingForUserInput" and [s.state for s in agent.history].count("Error") == 3


def test_a_server_error_is_retried_within_the_tables_bound(loom: Table, tmp_path: Path) -> None:
    def setup(server: Any) -> None:
        server.when(always).reply(ReplyObject(error=ErrorReply(503, "overloaded")))
    display, requests, _ = converse(loom, tmp_path, setup, "hi")
    assert len(requests) == 4 and display.errors == ["HTTP 503: overloaded"]


def test_tool_rounds_of_one_turn_are_bounded(loom: Table, tmp_path: Path) -> None:
    def setup(server: Any) -> None:
        server.when(always).reply(tool_reply("list_dir", path="."))
    display, requests, agent = converse(loom, tmp_path, setup, "look forever", max_tool_rounds=3)
    assert len(requests) == 3 and len(display.tools) == 3
    assert display.errors == ["stopped after 3 tool rounds in one turn (max_tool_rounds 3)"]
    assert agent.history[-2].state == "WaitingForUserInput"


@contextmanager
def mock_server(setup: Setup) -> Iterator[str]:
    """The mock server on a thread of its own (for the CLI in a subprocess); yields its base URL."""
    ready: list[str] = []
    started = threading.Event()
    stop: list[Callable[[], object]] = []

    async def serve() -> None:
        done = asyncio.Event()
        loop = asyncio.get_running_loop()
        stop.append(lambda: loop.call_soon_threadsafe(done.set))
        async with MockServer(MockServerOptions(default_latency=0)) as server:
            setup(server)
            ready.append(server.url + "/v1")
            started.set()
            await done.wait()

    thread = threading.Thread(target=asyncio.run, args=(serve(),))
    thread.start()
    try:
        assert started.wait(30), "the mock server did not start"
        yield ready[0]
    finally:
        if stop:
            stop[0]()
        thread.join(30)


SCRIPT = "settings: {retry_base: 0.01, commit_hook: false}\ninputs: [hi]\nreplies: []\n"


def run_cli(url: str, tmp_path: Path, *options: str, script_text: str = SCRIPT) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "script.yaml"
    script.write_text(script_text)
    return subprocess.run([AGENTFSM, "run", LOOM, "--script", str(script), "--workdir", str(tmp_path),
                           "--openai", url, "--model", "mock-model", *options],
                          capture_output=True, text=True, timeout=120)


def test_run_exits_1_when_a_turn_ended_in_an_error(tmp_path: Path) -> None:
    def setup(server: Any) -> None:
        server.when(always).reply(ReplyObject(error=ErrorReply(401, "invalid key")))
    with mock_server(setup) as url:
        result = run_cli(url, tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "error: HTTP 401: invalid key" in result.stdout and "1 turn(s) ended in an error" in result.stdout


def test_run_bounds_tool_rounds_from_the_command_line(tmp_path: Path) -> None:
    def setup(server: Any) -> None:
        server.when(always).reply(tool_reply("list_dir", path="."))
    with mock_server(setup) as url:
        result = run_cli(url, tmp_path, "--max-tool-rounds", "2")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "stopped after 2 tool rounds in one turn (max_tool_rounds 2)" in result.stdout
    assert result.stdout.count("list_dir ok") == 2


def test_run_gives_up_on_a_silent_server_after_the_llm_timeout(tmp_path: Path) -> None:
    async def silent(request: Any) -> Awaitable[str]:
        await asyncio.sleep(5)
        raise AssertionError("the client should have given up")

    def setup(server: Any) -> None:
        server.when(always).reply(silent)
    with mock_server(setup) as url:
        result = run_cli(url, tmp_path, "--llm-timeout", "0.3")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "no data from 127.0.0.1:" in result.stdout and "for 0.3s (the LLM read timeout)" in result.stdout


@pytest.mark.parametrize(("option", "value"), [("--llm-timeout", "0"), ("--max-tool-rounds", "0")])
def test_bad_llm_options_are_bad_input(tmp_path: Path, option: str, value: str) -> None:
    result = run_cli("http://127.0.0.1:9/v1", tmp_path, option, value)
    assert result.returncode == 2 and option in result.stderr
