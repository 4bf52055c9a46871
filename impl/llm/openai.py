"""An LLM client for OpenAI-compatible chat-completion endpoints, on the maintained ``openai`` SDK.

The SDK's async client (``base_url`` for compatible servers) speaks the protocol: requests,
authentication, pooled connections, the proxy variables of the environment, server-sent
events; its stream state (``ChatCompletionStreamState``) assembles the tool calls. What the
SDK does not do stays here: its own retries are off (``max_retries=0``), so the table's
retry bound is the only one; ``timeout`` bounds each wait for data and ``connect_timeout``
opening a connection; every failure becomes an ``LlmError`` whose message says what happened
in the project's words and whose ``retryable`` flag tells the agent whether asking again can
help: rate limits (429, with ``Retry-After``), timeouts, broken connections and 5xx can, a
bad request or key (400, 401, 403, 404), a reply cut at the output limit or filtered cannot.

Compatible servers differ from the API in ways the SDK does not smooth over, so each chunk
is normalised before the stream state sees it: only the first choice is read (a server that
sends several choices for one request would otherwise have them merged into one reply),
tool-call fragments without an ``index`` are numbered by their ``id`` (a new id starts a new
call), and arguments sent as a JSON object are turned into the JSON text the API sends back.
A reply counts as whole only when the stream says so (``finish_reason`` or ``[DONE]``); a server that
answers a streaming request with one plain JSON completion is read as well.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any, cast
from urllib.parse import urlsplit

import httpx2
import openai
from agentfsm.impl.llm.client import LlmChunk, LlmError, LlmRequest, TextChunk, ToolCallChunk
from openai import AsyncStream
from openai._streaming_cleanup import drain_response_async
from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types.chat import ChatCompletionChunk

MAX_ERROR_TEXT = 500
DONE: dict[str, Any] = {}  # stands for the stream's ``[DONE]`` among its events (compared by identity)
RETRYABLE = {408, 409, 425, 429}
# finish_reason values that end a reply the agent cannot use as it is, and why.
UNUSABLE = {"length": "the reply was cut off at the model's output limit (finish_reason 'length')",
            "content_filter": "the provider's content filter stopped the reply (finish_reason 'content_filter')"}


def retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds a ``Retry-After`` header asks to wait (delta-seconds or an HTTP date), or None."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


class OpenAIClient:
    """``stream(request)`` against ``{base_url}/chat/completions`` (e.g. ``https://api.openai.com/v1``)."""

    def __init__(self, base_url: str, model: str, api_key: str | None = None, *, timeout: float = 60.0,
                 connect_timeout: float = 10.0, extra_body: Mapping[str, Any] | None = None) -> None:
        parts = urlsplit(base_url.rstrip("/"))
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"base URL must be http(s)://HOST[:PORT][/PATH], got {base_url!r}")
        if timeout <= 0 or connect_timeout <= 0:
            raise ValueError("LLM timeouts must be positive")
        self.base_url = base_url.rstrip("/")
        self.where = f"{parts.hostname}:{parts.port or (443 if parts.scheme == 'https' else 80)}"
        self.model = model
        self.api_key = api_key
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.extra_body = dict(extra_body or {})
        self._sdk: openai.AsyncOpenAI | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _client(self) -> openai.AsyncOpenAI:
        """The SDK client of the running event loop (its pooled connections cannot outlive the loop)."""
        loop = asyncio.get_running_loop()
        if self._sdk is None or self._loop is not loop or self._sdk.is_closed():
            # The SDK wants a key even where a local server needs none: then no Authorization is sent.
            self._sdk = openai.AsyncOpenAI(
                base_url=self.base_url, api_key=self.api_key or "none", max_retries=0,
                timeout=httpx2.Timeout(self.timeout, connect=self.connect_timeout),
                default_headers={"User-Agent": "agentfsm"})
            self._loop = loop
        return self._sdk

    async def aclose(self) -> None:
        """Close the pooled connections (call it before the event loop ends)."""
        if self._sdk is not None and self._loop is asyncio.get_running_loop():
            await self._sdk.close()
        self._sdk = None

    async def __aenter__(self) -> OpenAIClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def stream(self, request: LlmRequest) -> AsyncIterator[LlmChunk]:
        options: dict[str, Any] = {"tools": list(request.tools)} if request.tools else {}
        if not self.api_key:
            options["extra_headers"] = {"Authorization": openai.omit}
        answered = False
        try:
            async with self._client().chat.completions.with_streaming_response.create(
                    model=self.model, messages=list(request.messages), stream=True,  # type: ignore[arg-type]
                    extra_body=self.extra_body or None, **options) as response:
                answered = True
                kind = response.headers.get("Content-Type", "").split(";")[0].strip().lower()
                if kind == "application/json":
                    completion = _object(await response.text(), "a reply")
                    chunks = [{**completion, "choices": [{**c, "delta": c.get("message")} for c in
                                                         _list(completion.get("choices")) if isinstance(c, dict)]}]
                    async for chunk in _assemble(_aiter(chunks)):
                        yield chunk
                    return
                if kind != "text/event-stream":
                    raise LlmError(f"{self.where} answered with {kind or 'no content type'}, not a stream of "
                                   "server-sent events (text/event-stream)", retryable=False)
                stream = cast("AsyncStream[ChatCompletionChunk]", await response.parse())
                async for chunk in _assemble(_events(stream)):
                    yield chunk
        except openai.APIStatusError as exc:
            raise _status_error(exc) from None
        except (openai.APIConnectionError, httpx2.TransportError) as exc:  # the SDK's timeouts are among them
            raise self._transport_error(exc, answered) from None
        except openai.APIError as exc:
            raise LlmError(f"the server reported an error mid-stream: {exc.message}") from None
        except json.JSONDecodeError as exc:
            raise LlmError(f"the server sent an event that is not JSON: {exc.doc[:80]!r}") from None

    def _transport_error(self, exc: Exception, answered: bool) -> LlmError:
        """A failure of the connection in the project's words, not the HTTP library's."""
        cause = exc.__cause__ if isinstance(exc, openai.APIConnectionError) else exc
        if isinstance(cause, httpx2.ConnectTimeout):
            return LlmError(f"cannot connect to {self.where}: no answer within {self.connect_timeout:g}s")
        if isinstance(cause, httpx2.TimeoutException):
            return LlmError(f"no data from {self.where} for {self.timeout:g}s (the LLM read timeout)")
        if isinstance(cause, httpx2.ConnectError | httpx2.ProxyError):
            return LlmError(f"cannot connect to {self.where}: {_os_reason(cause)}")
        if answered:
            return LlmError(f"{self.where} closed the connection before the reply was complete")
        if isinstance(cause, httpx2.RemoteProtocolError):
            return LlmError(f"{self.where} did not answer in HTTP")
        return LlmError(f"{self.where} closed the connection before answering")


def _os_reason(exc: BaseException) -> str:
    """The operating system's words for a failed connection (``Connection refused``), if it gave any."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, OSError) and seen.strerror:
            return seen.strerror
        seen = seen.__cause__ or seen.__context__
    return str(exc) or type(exc).__name__


def _status_error(exc: openai.APIStatusError) -> LlmError:
    """An HTTP error status as the API's own message (the ``error.message`` of its body), or its text."""
    body = exc.body
    message = body.get("message") if isinstance(body, dict) else body
    if not isinstance(message, str) or not message.strip():
        message = exc.response.reason_phrase or "no reason given"
    status = exc.status_code
    return LlmError(f"HTTP {status}: {message.strip()[:MAX_ERROR_TEXT]}",
                    retryable=status in RETRYABLE or status >= 500,
                    retry_after=retry_after(exc.response.headers.get("retry-after")))


async def _aiter(items: list[dict[str, Any]]) -> AsyncIterator[dict[str, Any]]:
    for item in items:
        yield item


async def _events(stream: AsyncStream[ChatCompletionChunk]) -> AsyncIterator[dict[str, Any]]:
    """The stream's events up to ``[DONE]``, which counts as the reply's end (a ``finish_reason`` does too).

    Read through the SDK's event decoder rather than its chunk iterator, which ends the same
    way on ``[DONE]`` and on a connection closed mid-reply and so cannot tell a whole reply
    from a cut one.
    """
    try:
        async for event in stream._iter_events():
            if event.data.startswith("[DONE]"):
                await drain_response_async(stream.response)  # the rest of the body, so the connection is reused
                yield DONE
                return
            data = event.json()
            if not isinstance(data, dict):
                raise LlmError("the server sent an event that is not a JSON object")
            yield data
    finally:
        await stream.close()


def _object(payload: str, what: str) -> dict[str, Any]:
    try:
        value = json.loads(payload)
    except json.JSONDecodeError:
        raise LlmError(f"the server sent {what} that is not JSON: {payload[:80]!r}") from None
    if not isinstance(value, dict):
        raise LlmError(f"the server sent {what} that is not a JSON object")
    return value


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


class _Numbering:
    """Numbers a reply's tool calls 0, 1, 2, ... in the order they start, as the stream state
    expects: by their ``index`` when the server gives one (whatever its numbers), else by their
    ``id`` (a new id starts the next call); a fragment with neither continues the last call."""

    def __init__(self) -> None:
        self.calls: dict[tuple[str, object], int] = {}
        self.last = 0

    def index(self, call: Mapping[str, Any]) -> int:
        given, call_id = call.get("index"), call.get("id")
        if isinstance(given, int) and not isinstance(given, bool):
            key: tuple[str, object] = ("index", given)
        elif isinstance(call_id, str) and call_id:
            key = ("id", call_id)
        else:
            return self.last
        self.last = self.calls.setdefault(key, len(self.calls))
        return self.last


def _normal(chunk: Mapping[str, Any], numbering: _Numbering) -> dict[str, Any] | None:
    """The chunk as the API shapes it: its first choice only, every tool call numbered and typed,
    arguments as JSON text; None for a chunk without that choice."""
    choice = next((c for c in _list(chunk.get("choices")) if isinstance(c, dict) and c.get("index", 0) == 0), None)
    if choice is None:
        return None
    delta = choice.get("delta")
    delta = dict(delta) if isinstance(delta, dict) else {}
    if not isinstance(delta.get("content"), str | None):
        raise LlmError(f"the server sent content that is not text: {delta['content']!r:.80}")
    calls = []
    for call in _list(delta.get("tool_calls")):
        function = (call.get("function") or {}) if isinstance(call, dict) else None
        if not isinstance(function, dict):
            raise LlmError(f"the server sent a malformed tool call: {json.dumps(call)[:80]!r}")
        function = dict(function)
        arguments = function.get("arguments")
        if arguments is not None and not isinstance(arguments, str):
            function["arguments"] = json.dumps(arguments)
        calls.append({**call, "index": numbering.index(call), "type": "function", "function": function})
    if calls:
        delta["tool_calls"] = calls
    else:
        delta.pop("tool_calls", None)
    return {"id": "", "object": "chat.completion.chunk", "created": 0, "model": "", **chunk,
            "choices": [{**choice, "index": 0, "delta": delta}]}


async def _assemble(chunks: AsyncIterator[dict[str, Any]]) -> AsyncIterator[LlmChunk]:
    """The reply's text and tool-call fragments, as the SDK's stream state assembles them."""
    state: ChatCompletionStreamState[None] = ChatCompletionStreamState()
    numbering = _Numbering()
    started: set[int] = set()
    finish: str | None = None
    async for raw in chunks:
        if raw is DONE:
            finish = finish or "[DONE]"
            break
        error = raw.get("error")
        if error:
            message = error.get("message") if isinstance(error, dict) else error
            raise LlmError(f"the server reported an error mid-stream: {message}")
        chunk = _normal(raw, numbering)
        if chunk is None:
            continue
        choice = chunk["choices"][0]
        if choice["delta"].get("content"):
            yield TextChunk(choice["delta"]["content"])
        if choice["delta"].get("tool_calls"):
            # Only tool-call chunks go through the stream state: it re-reads its whole snapshot on
            # every chunk, which on text would cost more than the rest of the reply (bench_llm.py).
            calls = {**chunk, "choices": [{**choice, "delta": {"tool_calls": choice["delta"]["tool_calls"]}}]}
            try:
                events = list(state.handle_chunk(ChatCompletionChunk.construct(**calls)))
            except (AssertionError, IndexError, KeyError, TypeError, ValueError):
                raise LlmError(f"the server sent a malformed tool call: {json.dumps(raw)[:80]!r}") from None
            for event in events:
                if event.type == "tool_calls.function.arguments.delta":
                    first = event.index not in started
                    started.add(event.index)
                    call = (state.current_completion_snapshot.choices[0].message.tool_calls or [])[event.index]
                    yield ToolCallChunk(event.index, event.arguments_delta, call.id if first else None,
                                        event.name if first and event.name else None)
        finish = chunk["choices"][0].get("finish_reason") or finish
    if finish in UNUSABLE:
        raise LlmError(UNUSABLE[finish], retryable=False)
    if finish is None:
        raise LlmError("the stream ended before the reply was complete (no finish_reason, no [DONE])")
