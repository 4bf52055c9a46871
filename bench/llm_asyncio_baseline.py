"""The project's former LLM client (standard library only, raw asyncio sockets): the baseline
``bench_llm.py`` measures the ``httpx`` client of ``agentfsm.impl.llm.openai`` against.

Speaks HTTP/1.1 over asyncio streams (TLS for https), posts a streaming request and
parses the server-sent events into text and tool-call deltas. Every read has a timeout,
so a silent server is an ``LlmError``, not a hang; cancelling the stream closes the
connection. Rate limits (429), timeouts and 5xx are retryable; other HTTP errors are not.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import AsyncIterator, Mapping
from typing import Any
from urllib.parse import urlsplit

from agentfsm.impl.llm.client import LlmChunk, LlmError, LlmRequest, TextChunk, ToolCallChunk

MAX_HEADER = 64 * 1024
MAX_ERROR_BODY = 16 * 1024
RETRYABLE = {408, 409, 425, 429}


class AsyncioClient:
    """``stream(request)`` against ``{base_url}/chat/completions`` (e.g. ``https://api.openai.com/v1``)."""

    def __init__(self, base_url: str, model: str, api_key: str | None = None, *, timeout: float = 60.0,
                 connect_timeout: float = 10.0, extra_body: Mapping[str, Any] | None = None) -> None:
        parts = urlsplit(base_url.rstrip("/"))
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"base URL must be http(s)://HOST[:PORT][/PATH], got {base_url!r}")
        self.tls = parts.scheme == "https"
        self.host = parts.hostname
        self.port = parts.port or (443 if self.tls else 80)
        self.path = (parts.path or "") + "/chat/completions"
        self.model = model
        self.api_key = api_key
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.extra_body = dict(extra_body or {})

    def body(self, request: LlmRequest) -> bytes:
        payload: dict[str, Any] = {"model": self.model, "messages": list(request.messages), "stream": True,
                                   **self.extra_body}
        if request.tools:
            payload["tools"] = list(request.tools)
        return json.dumps(payload).encode()

    async def stream(self, request: LlmRequest) -> AsyncIterator[LlmChunk]:
        body = self.body(request)
        try:
            async with asyncio.timeout(self.connect_timeout):
                reader, writer = await asyncio.open_connection(
                    self.host, self.port, ssl=ssl.create_default_context() if self.tls else None)
        except (OSError, TimeoutError) as exc:
            raise LlmError(f"cannot connect to {self.host}:{self.port}: {exc or 'timed out'}") from None
        try:
            host = self.host if self.port in (80, 443) else f"{self.host}:{self.port}"
            head = [f"POST {self.path} HTTP/1.1", f"Host: {host}", "Content-Type: application/json",
                    "Accept: text/event-stream", f"Content-Length: {len(body)}", "Connection: close",
                    "User-Agent: agentfsm"]
            if self.api_key:
                head.append(f"Authorization: Bearer {self.api_key}")
            writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + body)
            await writer.drain()
            status, headers = await self._head(reader)
            chunks = self._body(reader, headers)
            if status != 200:
                raise await self._http_error(status, chunks)
            async for chunk in self._events(chunks):
                yield chunk
        except (OSError, asyncio.IncompleteReadError) as exc:
            raise LlmError(f"connection to {self.host}:{self.port} failed: {exc}") from None
        except TimeoutError:
            raise LlmError(f"no data from {self.host}:{self.port} for {self.timeout:g}s") from None
        finally:
            writer.close()

    async def _line(self, reader: asyncio.StreamReader) -> bytes:
        async with asyncio.timeout(self.timeout):
            try:
                return await reader.readuntil(b"\n")
            except asyncio.LimitOverrunError:
                raise LlmError("the server sent a line too long to read") from None
            except asyncio.IncompleteReadError as exc:
                return exc.partial

    async def _head(self, reader: asyncio.StreamReader) -> tuple[int, dict[str, str]]:
        line = await self._line(reader)
        parts = line.decode("latin-1").split(None, 2)
        if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
            raise LlmError(f"not an HTTP response: {line[:80]!r}")
        headers: dict[str, str] = {}
        size = 0
        while True:
            line = await self._line(reader)
            size += len(line)
            if size > MAX_HEADER:
                raise LlmError("response headers too large")
            if line in (b"\r\n", b"\n", b""):
                return int(parts[1]), headers
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()

    async def _body(self, reader: asyncio.StreamReader, headers: Mapping[str, str]) -> AsyncIterator[bytes]:
        """The body's bytes as they arrive: chunked, sized, or until the server closes."""
        if "chunked" in headers.get("transfer-encoding", "").lower():
            while True:
                size_line = await self._line(reader)
                try:
                    size = int(size_line.split(b";")[0].strip(), 16)
                except ValueError:
                    raise LlmError(f"bad chunk size {size_line[:40]!r}") from None
                if size == 0:
                    return
                async with asyncio.timeout(self.timeout):
                    data = await reader.readexactly(size)
                    await reader.readexactly(2)
                yield data
        remaining = int(headers["content-length"]) if headers.get("content-length", "").isdigit() else None
        while remaining is None or remaining > 0:
            async with asyncio.timeout(self.timeout):
                data = await reader.read(65536 if remaining is None else min(65536, remaining))
            if not data:
                if remaining:
                    raise LlmError("the server closed the connection mid-response")
                return
            if remaining is not None:
                remaining -= len(data)
            yield data

    async def _http_error(self, status: int, chunks: AsyncIterator[bytes]) -> LlmError:
        body = b""
        try:
            async for data in chunks:
                body += data
                if len(body) > MAX_ERROR_BODY:
                    break
        except (LlmError, OSError, TimeoutError, asyncio.IncompleteReadError):
            pass
        message = body[:MAX_ERROR_BODY].decode("utf-8", "replace").strip()
        try:
            error = json.loads(message).get("error")
            message = error.get("message", message) if isinstance(error, dict) else str(error or message)
        except (ValueError, AttributeError):
            pass
        return LlmError(f"HTTP {status}: {message[:500]}", retryable=status in RETRYABLE or status >= 500)

    async def _events(self, chunks: AsyncIterator[bytes]) -> AsyncIterator[LlmChunk]:
        """Server-sent events: ``data:`` lines, blank line ends an event, ``[DONE]`` ends the stream."""
        buffer = b""
        data: list[str] = []
        async for block in chunks:
            buffer += block
            *lines, buffer = buffer.split(b"\n")
            for raw in lines:
                line = raw.rstrip(b"\r").decode("utf-8", "replace")
                if line:
                    if line.startswith("data:"):
                        data.append(line[5:].removeprefix(" "))
                    continue
                if not data:
                    continue
                payload, data = "\n".join(data), []
                if payload.strip() == "[DONE]":
                    return
                for chunk in self._deltas(payload):
                    yield chunk
        if data and "\n".join(data).strip() != "[DONE]":
            for chunk in self._deltas("\n".join(data)):
                yield chunk

    @staticmethod
    def _deltas(payload: str) -> list[LlmChunk]:
        try:
            event = json.loads(payload)
        except json.JSONDecodeError:
            raise LlmError(f"the server sent an event that is not JSON: {payload[:80]!r}") from None
        if not isinstance(event, dict):
            raise LlmError("the server sent an event that is not a JSON object")
        if event.get("error"):
            error = event["error"]
            message = error.get("message") if isinstance(error, dict) else str(error)
            raise LlmError(f"the server reported an error mid-stream: {message}")
        result: list[LlmChunk] = []
        try:
            for choice in event.get("choices") or ():
                delta = choice.get("delta") or {}
                if delta.get("content"):
                    result.append(TextChunk(str(delta["content"])))
                for call in delta.get("tool_calls") or ():
                    function = call.get("function") or {}
                    name = function.get("name")
                    result.append(ToolCallChunk(int(call.get("index", 0)), str(function.get("arguments") or ""),
                                                str(call["id"]) if call.get("id") else None,
                                                str(name) if name else None))
        except (AttributeError, TypeError, ValueError):
            raise LlmError(f"the server sent a malformed chunk: {payload[:80]!r}") from None
        return result
