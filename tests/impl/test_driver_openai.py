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


def ask_about_notes(loom: Table, tmp_path: Path, replies: list[list[bytes]]) -> tuple[Server, Transcript]:
    """The Loom agent asks "what is in notes.txt?" of a local server that answers ``replies``
    in turn; the server (with the requests it got) and what the agent showed."""
    (tmp_path / "notes.txt").write_text("hello from disk\n")

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
    return server, display


def test_loom_agent_runs_on_the_http_client(loom: Table, tmp_path: Path) -> None:
    replies = [sse(tool(0, '{"path": "notes.txt"}', "c1", "read_file")), sse(text("It says hello."))]
    server, display = ask_about_notes(loom, tmp_path, replies)
    assert "".join(display.texts) == "It says hello."
    tool_message = server.requests[1]["messages"][-1]
    assert tool_message == {"role": "tool", "tool_call_id": "c1", "content": "hello from disk\n"}


def plain(writer: asyncio.StreamWriter, status: str, body: bytes, *headers: str) -> None:
    """A response whose body ends when the server closes (no chunked encoding, no length)."""
    head = "".join(f"{h}\r\n" for h in headers)
    writer.write(f"HTTP/1.1 {status}\r\n{head}Connection: close\r\n\r\n".encode() + body)


def fetch(respond: Respond, **options: Any) -> ResponseBuilder:
    async def main() -> ResponseBuilder:
        async with Server(respond) as url:
            return await collect(OpenAIClient(url, "m", **options), LlmRequest(()))
    result: ResponseBuilder = run(main())
    return result


def test_a_stall_after_the_headers_is_a_timeout_that_says_so() -> None:
    async def respond(body: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n")
        await writer.drain()
        await asyncio.sleep(3)
    with pytest.raises(LlmError) as caught:
        fetch(respond, timeout=0.3)
    assert caught.value.retryable
    assert caught.value.message.startswith("no data from 127.0.0.1:") and "for 0.3s" in caught.value.message


def test_a_stream_closed_before_its_end_is_an_error_not_a_whole_reply() -> None:
    async def respond(body: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        plain(writer, "200 OK", sse(text("Half an ans"))[0], "Content-Type: text/event-stream")
    with pytest.raises(LlmError, match="ended before the reply was complete") as caught:
        fetch(respond)
    assert caught.value.retryable


@pytest.mark.parametrize("ending", ["finish_reason", "done"])
def test_a_stream_that_says_it_is_complete_is_a_whole_reply(ending: str) -> None:
    finish = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    blocks = sse(text("All of it."), finish)[:-1] if ending == "finish_reason" else sse(text("All of it."))

    async def respond(body: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        plain(writer, "200 OK", b"".join(blocks), "Content-Type: text/event-stream; charset=utf-8")
    assert fetch(respond).response().text == "All of it."


def test_a_plain_json_reply_to_a_streaming_request_is_read() -> None:
    completion = {"id": "x", "object": "chat.completion", "choices": [{"index": 0, "finish_reason": "tool_calls",
        "message": {"role": "assistant", "content": "Looking.", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a"}'}}]}}]}

    async def respond(body: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        payload = json.dumps(completion).encode()
        writer.write(f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(payload)}\r\n\r\n"
                     .encode() + payload)
    response = fetch(respond).response()
    assert response.text == "Looking."
    assert [(c.id, c.name, c.arguments) for c in response.tool_calls] == [("c1", "read_file", '{"path": "a"}')]


def test_a_reply_that_is_neither_a_stream_nor_json_is_an_error() -> None:
    async def respond(body: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        plain(writer, "200 OK", b"<html>login</html>", "Content-Type: text/html")
    with pytest.raises(LlmError, match="answered with text/html"):
        fetch(respond)


@pytest.mark.parametrize("reason", ["length", "content_filter"])
def test_a_cut_or_filtered_reply_is_surfaced(reason: str) -> None:
    async def respond(body: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        await chunked(writer, sse(text("Once upon"), {"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]}))
    with pytest.raises(LlmError, match=f"finish_reason '{reason}'") as caught:
        fetch(respond)
    assert not caught.value.retryable


@pytest.mark.parametrize(("header", "seconds"), [("7", 7.0), ("Wed, 21 Oct 2015 07:28:00 GMT", 0.0), ("soon", None)])
def test_retry_after_is_read(header: str, seconds: float | None) -> None:
    async def respond(body: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        plain(writer, "429 Too Many Requests", b'{"error": {"message": "slow down"}}', f"Retry-After: {header}")
    with pytest.raises(LlmError) as caught:
        fetch(respond)
    assert caught.value.message == "HTTP 429: slow down" and caught.value.retry_after == seconds


def test_loom_waits_as_long_as_retry_after_asks(loom: Table, tmp_path: Path) -> None:
    async def respond(body: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        if len(server.requests) == 1:
            plain(writer, "429 Too Many Requests", b"{}", "Retry-After: 0.4")
        else:
            await chunked(writer, sse(text("ok")))
    server = Server(respond)
    display = Transcript()

    async def main() -> float:
        async with server as url:
            agent = LoomAgent(loom, OpenAIClient(url, "m"), display=display,
                              config=LoomConfig(workdir=tmp_path, retry_base=0.01))
            async with agent:
                start = asyncio.get_running_loop().time()
                agent.send_input("hi")
                await agent.wait_idle()
                return asyncio.get_running_loop().time() - start
    assert run(main()) >= 0.4
    assert "".join(display.texts) == "ok" and len(server.requests) == 2


def test_one_client_reuses_its_connection() -> None:
    connections: list[int] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        connections.append(1)
        while True:
            try:
                head = (await reader.readuntil(b"\r\n\r\n")).decode()
            except asyncio.IncompleteReadError:
                break
            length = next(int(line.split(":")[1]) for line in head.split("\r\n")
                          if line.lower().startswith("content-length"))
            await reader.readexactly(length)
            body = b"".join(sse(text("hi")))
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                         + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
            await writer.drain()
        writer.close()

    async def main() -> None:
        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        client = OpenAIClient(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1", "m")
        for _ in range(3):
            assert (await collect(client, LlmRequest(()))).response().text == "hi"
        await client.aclose()
        server.close()
    run(main())
    assert len(connections) == 1


def test_the_proxy_of_the_environment_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    async def respond(body: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        await chunked(writer, sse(text("via the proxy")))
    proxy = Server(respond)

    async def main() -> ResponseBuilder:
        async with proxy as url:
            monkeypatch.setenv("HTTP_PROXY", url.removesuffix("/v1"))
            monkeypatch.delenv("NO_PROXY", raising=False)
            monkeypatch.delenv("no_proxy", raising=False)
            return await collect(OpenAIClient("http://llm.example/v1", "m"), LlmRequest(()))
    assert run(main()).response().text == "via the proxy"
    assert proxy.requests[0]["model"] == "m" and proxy.headers[0]["host"] == "llm.example"
