"""The OpenAI-compatible client against a local HTTP server the test starts on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from agentfsm.impl.agents.loom import LoomAgent, LoomConfig, Transcript
from agentfsm.impl.llm.client import LlmError, LlmRequest, ResponseBuilder
from agentfsm.impl.llm.openai import OpenAIClient
from agentfsm.spec import Table

Respond = Callable[[dict[str, Any], asyncio.StreamWriter], Awaitable[None]]


def sse(*events: dict[str, Any]) -> list[bytes]:
    return [f"data: {json.dumps(e)}\n\n".encode() for e in events] + [b"data: [DONE]\n\n"]


def text(content: str) -> dict[str, Any]:
    return {"choices": [{"index": 0, "delta": {"content": content}}]}


def tool(index: int, arguments: str, call_id: str | None = None, name: str | None = None) -> dict[str, Any]:
    call: dict[str, Any] = {"index": index, "function": {"arguments": arguments}}
    if call_id:
        call["id"], call["type"], call["function"]["name"] = call_id, "function", name
    return {"choices": [{"index": 0, "delta": {"tool_calls": [call]}}]}


async def chunked(writer: asyncio.StreamWriter, blocks: list[bytes], close_early: bool = False) -> None:
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
    for block in blocks:
        # split each event across two chunks: the parser must not care where chunks end
        for part in (block[:7], block[7:]):
            writer.write(f"{len(part):x}\r\n".encode() + part + b"\r\n")
            await writer.drain()
    if not close_early:
        writer.write(b"0\r\n\r\n")


class Server:
    """A one-response-per-connection HTTP server; records each request body it got."""

    def __init__(self, respond: Respond) -> None:
        self.respond = respond
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode()
        headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in head.split("\r\n")[1:] if line)}
        body = json.loads(await reader.readexactly(int(headers["content-length"])))
        self.requests.append(body)
        self.headers.append(headers)
        try:
            await self.respond(body, writer)
        finally:
            writer.close()

    async def __aenter__(self) -> str:
        self.server = await asyncio.start_server(self.handle, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/v1"

    async def __aexit__(self, *exc: object) -> None:
        self.server.close()


async def collect(client: OpenAIClient, request: LlmRequest) -> ResponseBuilder:
    builder = ResponseBuilder()
    async for chunk in client.stream(request):
        builder.add(chunk)
    return builder


def run(coro: Awaitable[Any]) -> Any:
    async def bounded() -> Any:
        async with asyncio.timeout(20):
            return await coro
    return asyncio.run(bounded())


def test_streams_text_and_tool_call_deltas() -> None:
    async def respond(body: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        await chunked(writer, sse(text("Hel"), text("lo"), tool(0, '{"pa', "call_a", "read_file"),
                                  tool(1, "{}", "call_b", "list_dir"), tool(0, 'th": "x"}')))
    server = Server(respond)

    async def main() -> ResponseBuilder:
        async with server as url:
            client = OpenAIClient(url, "test-model", api_key="sk-test")
            return await collect(client, LlmRequest(({"role": "user", "content": "hi"},),
                                                    ({"type": "function", "function": {"name": "f"}},)))
    response = run(main()).response()
    assert response.text == "Hello"
    assert [(c.id, c.name, c.arguments) for c in response.tool_calls] == [
        ("call_a", "read_file", '{"path": "x"}'), ("call_b", "list_dir", "{}")]
    assert server.requests[0]["model"] == "test-model" and server.requests[0]["stream"] is True
    assert server.requests[0]["tools"] and server.headers[0]["authorization"] == "Bearer sk-test"


@pytest.mark.parametrize(("status", "retryable"), [(429, True), (503, True), (400, False), (401, False)])
def test_http_errors_become_llm_errors(status: int, retryable: bool) -> None:
    async def respond(body: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        payload = json.dumps({"error": {"message": "nope"}}).encode()
        writer.write(f"HTTP/1.1 {status} Whatever\r\nContent-Length: {len(payload)}\r\n\r\n".encode() + payload)

    async def main() -> None:
        async with Server(respond) as url:
            await collect(OpenAIClient(url, "m"), LlmRequest(()))
    with pytest.raises(LlmError) as caught:
        run(main())
    assert caught.value.message == f"HTTP {status}: nope" and caught.value.retryable is retryable


@pytest.mark.parametrize("fault", ["close-early", "garbage-event", "mid-stream-error", "silence", "not-http"])
def test_broken_servers_are_errors_not_hangs(fault: str) -> None:
    async def respond(body: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        if fault == "close-early":
            await chunked(writer, sse(text("par"))[:1], close_early=True)
            writer.write(b"5\r\nab")
        elif fault == "garbage-event":
            await chunked(writer, [b"data: {not json\n\n"])
        elif fault == "mid-stream-error":
            await chunked(writer, [*sse(text("a"))[:1], b'data: {"error": {"message": "overloaded"}}\n\n'])
        elif fault == "silence":
            await asyncio.sleep(5)
        else:
            writer.write(b"SSH-2.0-OpenSSH\r\n\r\n")

    async def main() -> None:
        async with Server(respond) as url:
            await collect(OpenAIClient(url, "m", timeout=0.3), LlmRequest(()))
    with pytest.raises(LlmError):
        run(main())


def test_unreachable_server_is_a_retryable_error() -> None:
    async def main() -> None:
        server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        server.close()
        await server.wait_closed()
        await collect(OpenAIClient(f"http://127.0.0.1:{port}", "m"), LlmRequest(()))
    with pytest.raises(LlmError) as caught:
        run(main())
    assert caught.value.retryable


def test_bad_base_url() -> None:
    with pytest.raises(ValueError, match="base URL"):
        OpenAIClient("ftp://x", "m")


def test_loom_agent_runs_on_the_http_client(loom: Table, tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello from disk\n")
    replies = [sse(tool(0, '{"path": "notes.txt"}', "c1", "read_file")), sse(text("It says hello."))]

    async def respond(body: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        await chunked(writer, replies[len(server.requests) - 1])
    server = Server(respond)
    display = Transcript()

    async def main() -> None:
        async with server as url:
            agent = LoomAgent(loom, OpenAIClient(url, "m"), config=LoomConfig(workdir=tmp_path), display=display)
            async with agent:
                agent.send_input("what is in notes.txt?")
                await agent.wait_idle()
    run(main())
    assert "".join(display.texts) == "It says hello."
    tool_message = server.requests[1]["messages"][-1]
    assert tool_message == {"role": "tool", "tool_call_id": "c1", "content": "hello from disk\n"}
