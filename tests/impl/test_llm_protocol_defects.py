"""Defects of the former hand-written client, each reproduced against a server that shows it.

The shapes here are ones compatible servers send and the SDK's types do not promise (arguments
as a JSON object, tool-call fragments without an ``index``, several choices, a body cut
mid-chunk); each test failed on the aiohttp client this one replaced.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
from pathlib import Path
from typing import Any

from agentfsm.impl.llm.client import LlmError, LlmRequest
from agentfsm.impl.llm.openai import OpenAIClient
from agentfsm.spec import Table
from llm_mock_api.types.reply import ErrorReply, ReplyObject
from test_driver_openai import Server, ask_about_notes, chunked, collect, fetch, run, sse, text
from test_llm_mock_server import AGENTFSM, LOOM, always, converse, mock_server, run_cli


def event(*choices: dict[str, Any]) -> dict[str, Any]:
    return {"choices": list(choices)}


def call_delta(call: dict[str, Any], index: int = 0) -> dict[str, Any]:
    return {"index": index, "delta": {"tool_calls": [call]}}


def test_tool_arguments_sent_as_an_object_go_back_to_the_server_as_json_text(loom: Table, tmp_path: Path) -> None:
    read = {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": {"path": "notes.txt"}}}
    replies = [sse(event(call_delta({"index": 0, **read}))), sse(text("It says hello."))]
    server, display = ask_about_notes(loom, tmp_path, replies)
    [sent] = server.requests[1]["messages"][-2]["tool_calls"]
    assert sent["function"]["arguments"] == '{"path": "notes.txt"}'
    assert [t.content for t in display.tools] == ["hello from disk\n"]


def test_tool_call_fragments_without_an_index_are_told_apart_by_their_id() -> None:
    first = {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": '}}
    second = {"id": "c2", "type": "function", "function": {"name": "list_dir", "arguments": '{"path": "."}'}}
    blocks = sse(event(call_delta(first)), event(call_delta({"function": {"arguments": '"a"}'}})),
                 event(call_delta(second)))

    async def respond(body: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        await chunked(writer, blocks)
    response = fetch(respond).response()
    assert [(c.id, c.name, c.arguments) for c in response.tool_calls] == [
        ("c1", "read_file", '{"path": "a"}'), ("c2", "list_dir", '{"path": "."}')]


def test_only_the_first_choice_is_the_reply() -> None:
    blocks = sse(event({"index": 0, "delta": {"content": "Hello"}}, {"index": 1, "delta": {"content": "Bonjour"}}),
                 event({"index": 1, "delta": {"content": " le monde"}}),
                 event({"index": 0, "delta": {"content": " world"}, "finish_reason": "stop"}))

    async def respond(body: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        await chunked(writer, blocks)
    assert fetch(respond).response().text == "Hello world"


def test_a_stream_cut_mid_chunk_is_reported_in_plain_words() -> None:
    async def respond(body: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        await chunked(writer, sse(text("Half an ans"))[:1], close_early=True)
        writer.write(b"40\r\ndata: {\"cho")

    async def main() -> None:
        async with Server(respond) as url:
            await collect(OpenAIClient(url, "m"), LlmRequest(()))
    try:
        run(main())
    except LlmError as error:
        assert error.retryable
        assert error.message.endswith("closed the connection before the reply was complete"), error.message
        assert error.message.startswith("127.0.0.1:")
    else:
        raise AssertionError("a cut stream was taken for a whole reply")


def test_each_retry_of_the_llm_request_says_why(loom: Table, tmp_path: Path) -> None:
    def setup(server: Any) -> None:
        server.when(always).reply(ReplyObject(error=ErrorReply(503, "overloaded")))
    display, requests, _ = converse(loom, tmp_path, setup, "hi")
    assert len(requests) == 4  # the SDK's own retries are off: the table's bound is the only one
    assert display.retries == ["HTTP 503: overloaded"] * 3 and display.errors == ["HTTP 503: overloaded"]


def test_the_cli_shows_the_reason_of_each_retry(tmp_path: Path) -> None:
    def setup(server: Any) -> None:
        server.when(always).reply(ReplyObject(error=ErrorReply(503, "overloaded")))
    with mock_server(setup) as url:
        result = run_cli(url, tmp_path)
    retries = [line.strip() for line in result.stdout.splitlines() if line.strip().startswith("retry:")]
    assert len(retries) == 3 and all(line.endswith("after: HTTP 503: overloaded") for line in retries), result.stdout


def test_a_script_for_a_real_model_needs_no_replies(tmp_path: Path) -> None:
    def setup(server: Any) -> None:
        server.when(always).reply("Hi there.")
    with mock_server(setup) as url:
        result = run_cli(url, tmp_path, script_text="settings: {commit_hook: false}\ninputs: [hi]\n")
    assert result.returncode == 0, result.stdout + result.stderr
    texts = [json.loads(line.split("text: ", 1)[1]) for line in result.stdout.splitlines() if "text: " in line]
    assert "".join(texts) == "Hi there."


def test_without_a_model_a_script_still_needs_its_replies(tmp_path: Path) -> None:
    script = tmp_path / "script.yaml"
    script.write_text("inputs: [hi]\n")
    result = subprocess.run([AGENTFSM, "run", LOOM, "--script", str(script), "--workdir", str(tmp_path)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "'replies' must be a list" in result.stderr, result.stderr


def test_no_key_sends_no_authorization() -> None:
    async def respond(body: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        await chunked(writer, sse(text("hi")))
    server = Server(respond)

    async def main() -> None:
        async with server as url:
            await collect(OpenAIClient(url, "m"), LlmRequest(()))
    run(main())
    assert "authorization" not in server.headers[0] and server.requests[0]["model"] == "m"


def test_a_server_that_does_not_speak_http_is_named_in_plain_words() -> None:
    async def respond(body: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        writer.write(b"SSH-2.0-OpenSSH\r\n\r\n")
    try:
        fetch(respond)
    except LlmError as error:
        assert error.retryable and error.message.startswith("127.0.0.1:")
        assert error.message.endswith(" did not answer in HTTP"), error.message
    else:
        raise AssertionError("a server that does not speak HTTP gave a reply")


def test_tool_calls_numbered_from_one_are_read() -> None:
    call = {"index": 1, "id": "c1", "type": "function", "function": {"name": "list_dir", "arguments": "{}"}}

    async def respond(body: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        await chunked(writer, sse(event(call_delta(call))))
    assert [(c.id, c.name, c.arguments) for c in fetch(respond).response().tool_calls] == [("c1", "list_dir", "{}")]


def test_a_malformed_tool_call_is_an_llm_error() -> None:
    call = {"index": 0, "id": "c1", "function": "list_dir"}

    async def respond(body: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        await chunked(writer, sse(event(call_delta(call))))
    try:
        fetch(respond)
    except LlmError as error:
        assert error.message.startswith("the server sent a malformed tool call: "), error.message
    else:
        raise AssertionError("a tool call whose function is a string was read")
