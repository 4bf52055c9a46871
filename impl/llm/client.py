"""The LLM client protocol the driver talks to, and a scripted client for tests and demos.

A client streams a reply as chunks (text deltas, tool-call fragments) and raises
``LlmError`` when the request fails; the driver turns chunks into the table's events
(TextDelta, ToolCallDelta, LlmCompleted, LlmError). Messages and tool schemas follow the
OpenAI chat-completions shapes, the lingua franca of compatible endpoints.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

Message = dict[str, Any]


class LlmError(Exception):
    """A failed LLM request; ``retryable`` errors (rate limits, 5xx, network) are worth a retry,
    not sooner than ``retry_after`` seconds when the server said so."""

    def __init__(self, message: str, retryable: bool = True, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.retryable = retryable
        self.retry_after = retry_after


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # JSON text, as the model streamed it

    def as_message(self) -> dict[str, Any]:
        return {"id": self.id, "type": "function", "function": {"name": self.name, "arguments": self.arguments}}


@dataclass(frozen=True)
class LlmRequest:
    messages: tuple[Message, ...]
    tools: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True)
class LlmResponse:
    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    finish_reason: str | None = None

    def as_message(self) -> Message:
        message: Message = {"role": "assistant", "content": self.text or None}
        if self.tool_calls:
            message["tool_calls"] = [call.as_message() for call in self.tool_calls]
        return message


@dataclass(frozen=True)
class TextChunk:
    text: str


@dataclass(frozen=True)
class ToolCallChunk:
    """A fragment of tool call number ``index``; ``call_id`` and ``name`` come with its first fragment."""

    index: int
    arguments: str
    call_id: str | None = None
    name: str | None = None


LlmChunk = TextChunk | ToolCallChunk


class LlmClient(Protocol):
    def stream(self, request: LlmRequest) -> AsyncIterator[LlmChunk]:
        """Stream one reply; raise ``LlmError`` on failure (also mid-stream)."""
        ...


@dataclass
class ResponseBuilder:
    """Accumulates streamed chunks into the complete response."""

    text: list[str] = field(default_factory=list)
    calls: dict[int, list[Any]] = field(default_factory=dict)  # index -> [id, name, [fragments]]

    def add(self, chunk: LlmChunk) -> None:
        if isinstance(chunk, TextChunk):
            self.text.append(chunk.text)
            return
        call = self.calls.setdefault(chunk.index, [None, None, []])
        if chunk.call_id:
            call[0] = chunk.call_id
        if chunk.name and not call[1]:
            call[1] = chunk.name
        call[2].append(chunk.arguments)

    def partial_text(self) -> str:
        return "".join(self.text)

    def response(self, finish_reason: str | None = None) -> LlmResponse:
        calls = []
        for index in sorted(self.calls):
            call_id, name, fragments = self.calls[index]
            if not name:
                raise LlmError(f"tool call {index} arrived without a function name", retryable=True)
            calls.append(ToolCall(call_id or f"call_{index}", name, "".join(fragments) or "{}"))
        return LlmResponse(self.partial_text(), tuple(calls), finish_reason)


async def complete(client: LlmClient, request: LlmRequest, builder: ResponseBuilder) -> LlmResponse:
    """Stream a whole reply into ``builder`` (the caller keeps it: an interrupt keeps its partial text).

    A transport failure (``OSError``, ``ValueError``) is raised as an ``LlmError``.
    """
    try:
        async for chunk in client.stream(request):
            builder.add(chunk)
        return builder.response()
    except (OSError, ValueError) as exc:
        raise LlmError(f"{type(exc).__name__}: {exc}") from exc


async def close_client(client: object) -> None:
    """Close the pooled connections of a client that keeps them (one with ``aclose``)."""
    close = getattr(client, "aclose", None)
    if close is not None:
        await close()


# -- the scripted client ---------------------------------------------------------------


@dataclass(frozen=True)
class Say:
    text: str


@dataclass(frozen=True)
class Call:
    name: str
    arguments: Mapping[str, Any]
    call_id: str | None = None


@dataclass(frozen=True)
class Fail:
    message: str
    retryable: bool = True


@dataclass(frozen=True)
class Wait:
    seconds: float


ReplyStep = Say | Call | Fail | Wait


class ScriptedLlm:
    """Replays scripted replies in order, one per request, recording every request it got.

    Tool-call arguments are streamed in two fragments so the driver's delta handling is
    exercised; text is streamed word by word.
    """

    def __init__(self, replies: Sequence[Sequence[ReplyStep]]) -> None:
        self.replies = [list(reply) for reply in replies]
        self.requests: list[LlmRequest] = []
        self._calls = 0
        self._next = 0

    @property
    def remaining(self) -> int:
        return len(self.replies) - self._next

    def skip(self, n: int) -> None:
        """Pass over ``n`` replies a previous process already used (a resumed durable run)."""
        for reply in self.replies[self._next:self._next + n]:
            self._calls += sum(isinstance(step, Call) for step in reply)
        self._next = min(len(self.replies), self._next + n)

    async def stream(self, request: LlmRequest) -> AsyncIterator[LlmChunk]:
        number = self._next
        self._next += 1
        self.requests.append(request)
        if number >= len(self.replies):
            raise LlmError(f"the script has no reply {number + 1} (it holds {len(self.replies)})", retryable=False)
        index = 0
        for step in self.replies[number]:
            if isinstance(step, Wait):
                await asyncio.sleep(step.seconds)
            elif isinstance(step, Fail):
                raise LlmError(step.message, step.retryable)
            elif isinstance(step, Say):
                words = step.text.split(" ")
                for i, word in enumerate(words):
                    yield TextChunk(word if i == len(words) - 1 else word + " ")
                    await asyncio.sleep(0)
            else:
                self._calls += 1
                arguments = json.dumps(dict(step.arguments))
                half = len(arguments) // 2
                yield ToolCallChunk(index, arguments[:half], step.call_id or f"call_{self._calls}", step.name)
                yield ToolCallChunk(index, arguments[half:])
                index += 1
