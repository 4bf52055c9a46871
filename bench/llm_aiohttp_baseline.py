"""The project's former LLM client, on ``aiohttp`` (with its own server-sent-event parser): the
baseline ``bench_llm.py`` measures the SDK client of ``agentfsm.impl.llm.openai`` against.

Kept here as it was when it was replaced, for the time-to-first-token comparison only.
"""

from __future__ import annotations

import asyncio
import json
import urllib.request
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from agentfsm.impl.llm.client import LlmChunk, LlmError, LlmRequest, TextChunk, ToolCallChunk
from agentfsm.impl.llm.openai import RETRYABLE, UNUSABLE, OpenAIClient, _object, retry_after

MAX_ERROR_BODY = 16 * 1024


class AiohttpClient(OpenAIClient):
    """``stream(request)`` against ``{base_url}/chat/completions`` on ``aiohttp``; the base URL,
    model, key and timeouts are taken as the SDK client takes them.

    ``timeout`` bounds each wait for data (the headers, then every read of the stream);
    ``connect_timeout`` bounds opening a connection.
    """

    def __init__(self, base_url: str, model: str, api_key: str | None = None, **options: Any) -> None:
        super().__init__(base_url, model, api_key, **options)
        parts = urlsplit(self.base_url)
        self.url = self.base_url + "/chat/completions"
        self.proxy = None if urllib.request.proxy_bypass(parts.hostname or "") else \
            urllib.request.getproxies().get(parts.scheme)
        self._http: aiohttp.ClientSession | None = None

    def body(self, request: LlmRequest) -> dict[str, Any]:
        payload: dict[str, Any] = {"model": self.model, "messages": list(request.messages), "stream": True,
                                   **self.extra_body}
        if request.tools:
            payload["tools"] = list(request.tools)
        return payload

    def _session(self) -> aiohttp.ClientSession:
        """The pooled session of the running event loop (a session cannot outlive its loop)."""
        loop = asyncio.get_running_loop()
        if self._http is None or self._loop is not loop or self._http.closed:
            headers = {"Accept": "text/event-stream", "User-Agent": "agentfsm"}
            if self.api_key:
                headers["Authorization"] = f"Bearer {self.api_key}"
            self._http = aiohttp.ClientSession(headers=headers, timeout=aiohttp.ClientTimeout(
                total=None, sock_connect=self.connect_timeout, sock_read=self.timeout))
            self._loop = loop
        return self._http

    async def aclose(self) -> None:
        """Close the pooled connections (call it before the event loop ends)."""
        if self._http is not None and self._loop is asyncio.get_running_loop():
            await self._http.close()
        self._http = None

    async def stream(self, request: LlmRequest) -> AsyncIterator[LlmChunk]:
        try:
            async with self._session().post(self.url, json=self.body(request), proxy=self.proxy) as response:
                if response.status != 200:
                    raise await self._http_error(response)
                kind = response.headers.get("Content-Type", "").split(";")[0].strip().lower()
                if kind == "application/json":
                    for chunk in _completion(await response.read()):
                        yield chunk
                    return
                if kind != "text/event-stream":
                    raise LlmError(f"{self.where} answered with {kind or 'no content type'}, not a stream of "
                                   "server-sent events (text/event-stream)", retryable=False)
                async for chunk in _events(_lines(response.content.iter_any())):
                    yield chunk
        except aiohttp.ConnectionTimeoutError:
            raise LlmError(f"cannot connect to {self.where}: no answer within {self.connect_timeout:g}s") from None
        except TimeoutError:
            raise LlmError(f"no data from {self.where} for {self.timeout:g}s (the LLM read timeout)") from None
        except aiohttp.ClientConnectorError as exc:
            raise LlmError(f"cannot connect to {self.where}: {_reason(exc)}") from None
        except aiohttp.ClientError as exc:
            raise LlmError(f"connection to {self.where} failed: {_reason(exc)}") from None

    async def _http_error(self, response: aiohttp.ClientResponse) -> LlmError:
        body = b""
        try:
            async for data in response.content.iter_any():
                body += data
                if len(body) > MAX_ERROR_BODY:
                    break
        except (aiohttp.ClientError, TimeoutError):
            pass
        message = body[:MAX_ERROR_BODY].decode("utf-8", "replace").strip()
        try:
            error = json.loads(message).get("error")
            message = error.get("message", message) if isinstance(error, dict) else str(error or message)
        except (ValueError, AttributeError):
            pass
        status = response.status
        return LlmError(f"HTTP {status}: {message[:500] or response.reason or 'no reason given'}",
                        retryable=status in RETRYABLE or status >= 500,
                        retry_after=retry_after(response.headers.get("retry-after")))


def _reason(exc: Exception) -> str:
    return str(exc) or type(exc).__name__


async def _lines(blocks: AsyncIterator[bytes]) -> AsyncIterator[str]:
    """The body's lines as they arrive, however long (server-sent events are UTF-8, lines end at LF or CRLF)."""
    buffer = b""
    async for block in blocks:
        buffer += block
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            yield line.rstrip(b"\r").decode("utf-8", "replace")
    if buffer:
        yield buffer.decode("utf-8", "replace")


async def _events(lines: AsyncIterator[str]) -> AsyncIterator[LlmChunk]:
    """Server-sent events: ``data:`` lines, a blank line ends an event, ``[DONE]`` ends the stream."""
    data: list[str] = []
    finished = False
    async for line in lines:
        if line:
            if line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))
            continue
        if not data:
            continue
        payload, data = "\n".join(data), []
        if payload.strip() == "[DONE]":
            return
        chunks, reason = _deltas(payload)
        for chunk in chunks:
            yield chunk
        finished = finished or reason is not None
    tail = "\n".join(data)
    if tail.strip() == "[DONE]":
        return
    if tail:
        chunks, reason = _deltas(tail)
        for chunk in chunks:
            yield chunk
        finished = finished or reason is not None
    if not finished:
        raise LlmError("the stream ended before the reply was complete (no finish_reason, no [DONE])")


def _deltas(payload: str) -> tuple[list[LlmChunk], str | None]:
    """One event's chunks and its ``finish_reason``."""
    event = _object(payload, "an event")
    if event.get("error"):
        error = event["error"]
        message = error.get("message") if isinstance(error, dict) else str(error)
        raise LlmError(f"the server reported an error mid-stream: {message}")
    try:
        return _choices(event, "delta")
    except (AttributeError, TypeError, ValueError, KeyError):
        raise LlmError(f"the server sent a malformed chunk: {payload[:80]!r}") from None


def _completion(body: bytes) -> list[LlmChunk]:
    """A whole ``chat.completion`` object (a server that does not stream), as the chunks it holds."""
    payload = body.decode("utf-8", "replace")
    try:
        chunks, reason = _choices(_object(payload, "a reply"), "message")
    except (AttributeError, TypeError, ValueError, KeyError):
        raise LlmError(f"the server sent a malformed completion: {payload[:80]!r}") from None
    if reason is None:
        raise LlmError(f"the server's JSON reply holds no finished choice: {payload[:80]!r}")
    return chunks


def _choices(event: Mapping[str, Any], key: str) -> tuple[list[LlmChunk], str | None]:
    """Text and tool-call chunks of the first choice's ``delta`` (streamed) or ``message`` (whole)."""
    result: list[LlmChunk] = []
    reason: str | None = None
    choices: Iterable[Any] = event.get("choices") or ()
    for choice in choices:
        part = choice.get(key) or {}
        if part.get("content"):
            result.append(TextChunk(str(part["content"])))
        for position, call in enumerate(part.get("tool_calls") or ()):
            function = call.get("function") or {}
            name = function.get("name")
            result.append(ToolCallChunk(int(call.get("index", position)), str(function.get("arguments") or ""),
                                        str(call["id"]) if call.get("id") else None, str(name) if name else None))
        if choice.get("finish_reason"):
            reason = str(choice["finish_reason"])
    if reason in UNUSABLE:
        raise LlmError(UNUSABLE[reason], retryable=False)
    return result, reason
