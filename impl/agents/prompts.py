"""Asking the user: permission to run a tool, and answers to the model's questions.

Both are protocols so the agent never knows who answers: a scripted prompt (tests and
demos), a terminal on stdin/stdout (``agentfsm run``), or a UI. A prompt is awaited in
an activity, so an interrupt cancels it; an exception from a permission prompt is the
table's ``PermissionFailed``. Rules decide first: a tool whose name matches an allow
pattern never reaches the prompt (vibework's "no matching permission rule exists").
"""

from __future__ import annotations

import asyncio
import contextlib
import fnmatch
import json
import sys
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TextIO

Verdict = Literal["grant", "deny", "fail"]


@dataclass(frozen=True)
class PermissionRules:
    """Tool-name patterns (``fnmatch``: ``read_*``, ``*``) that are allowed without asking."""

    allow: tuple[str, ...] = ()

    def allows(self, tool_name: str) -> bool:
        return any(fnmatch.fnmatchcase(tool_name, pattern) for pattern in self.allow)


@dataclass(frozen=True)
class PermissionRequest:
    tool_name: str
    tool_use_id: str
    description: str
    arguments: str  # JSON text, as the model sent it


@dataclass(frozen=True)
class QuestionRequest:
    request_id: str
    questions: tuple[str, ...]


class PromptFailed(Exception):
    """The permission machinery itself failed (not a denial)."""


class PermissionPrompt(Protocol):
    async def ask(self, request: PermissionRequest) -> bool:
        """True to grant, False to deny; raise to report a failure of the prompt itself."""
        ...


class UserQuestionPrompt(Protocol):
    async def ask(self, request: QuestionRequest) -> tuple[str, ...]:
        """One answer per question."""
        ...


@dataclass(frozen=True)
class ScriptedVerdict:
    verdict: Verdict
    delay: float = 0.0


@dataclass(frozen=True)
class ScriptedAnswer:
    answers: tuple[str, ...]
    delay: float = 0.0


class ScriptedPermissions:
    """Answers permission requests from a list, in order; records every request."""

    def __init__(self, verdicts: Iterable[ScriptedVerdict | Verdict]) -> None:
        self.verdicts = deque(v if isinstance(v, ScriptedVerdict) else ScriptedVerdict(v) for v in verdicts)
        self.requests: list[PermissionRequest] = []

    def skip(self, count: int) -> None:
        """Drop the first ``count`` answers (a resumed run's journal already holds them)."""
        for _ in range(min(count, len(self.verdicts))):
            self.verdicts.popleft()

    async def ask(self, request: PermissionRequest) -> bool:
        self.requests.append(request)
        if not self.verdicts:
            raise PromptFailed(f"the script has no answer for permission request {len(self.requests)}")
        step = self.verdicts.popleft()
        await asyncio.sleep(step.delay)
        if step.verdict == "fail":
            raise PromptFailed("the permission prompt failed (scripted)")
        return step.verdict == "grant"


class FrontendQuestions:
    """Questions a frontend answers by id (seed 002: "request_id: ID to match request/response").

    ``ask`` publishes the request in ``open`` and waits; ``answer(request_id, answers)`` settles
    exactly that request. An answer to an id that is not open (withdrawn by an interrupt,
    already answered, never asked) is refused with ``KeyError``, so it can never answer a
    later request; one with the wrong number of answers with ``ValueError``."""

    def __init__(self) -> None:
        self.open: dict[str, tuple[QuestionRequest, asyncio.Future[tuple[str, ...]]]] = {}

    async def ask(self, request: QuestionRequest) -> tuple[str, ...]:
        waiter: asyncio.Future[tuple[str, ...]] = asyncio.get_running_loop().create_future()
        self.open[request.request_id] = (request, waiter)
        try:
            return await waiter
        finally:
            self.open.pop(request.request_id, None)

    def answer(self, request_id: str, answers: Sequence[str]) -> None:
        if request_id not in self.open:
            raise KeyError(f"no open question request {request_id!r}")
        request, waiter = self.open[request_id]
        if len(answers) != len(request.questions):
            raise ValueError(f"{request_id}: {len(request.questions)} questions, {len(answers)} answers")
        waiter.set_result(tuple(answers))


class ScriptedQuestions:
    """Answers question requests from a list, in order; records every request."""

    def __init__(self, answers: Iterable[ScriptedAnswer | Sequence[str]]) -> None:
        self.answers = deque(a if isinstance(a, ScriptedAnswer) else ScriptedAnswer(tuple(a)) for a in answers)
        self.requests: list[QuestionRequest] = []

    def skip(self, count: int) -> None:
        """Drop the first ``count`` answers (a resumed run's journal already holds them)."""
        for _ in range(min(count, len(self.answers))):
            self.answers.popleft()

    async def ask(self, request: QuestionRequest) -> tuple[str, ...]:
        self.requests.append(request)
        if not self.answers:
            raise RuntimeError(f"the script has no answers for question request {len(self.requests)}")
        step = self.answers.popleft()
        await asyncio.sleep(step.delay)
        return step.answers


async def read_line(stream: TextIO) -> str:
    """One line from ``stream`` without blocking the loop; cancelling stops the wait."""
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()
    fd = stream.fileno()

    def wake() -> None:
        if not ready.done():
            ready.set_result(None)
    loop.add_reader(fd, wake)
    try:
        await ready
    finally:
        loop.remove_reader(fd)
    line = stream.readline()
    if not line:
        raise EOFError("end of input")
    return line.rstrip("\n")


class TerminalPrompt:
    """Permission and question prompts on a terminal.

    When ``stdin`` is not a terminal nobody can answer: permission requests get ``policy``
    ("deny" or "grant") and questions are answered "(no answer: non-interactive)".
    """

    def __init__(self, stdin: TextIO | None = None, stdout: TextIO | None = None, *,
                 interactive: bool | None = None, policy: Literal["grant", "deny"] = "deny") -> None:
        self.stdin = stdin or sys.stdin
        self.stdout = stdout or sys.stdout
        self.interactive = self.stdin.isatty() if interactive is None else interactive
        self.policy = policy

    def _say(self, text: str) -> None:
        self.stdout.write(text)
        self.stdout.flush()

    async def ask(self, request: Any) -> Any:
        if isinstance(request, PermissionRequest):
            return await self.permission(request)
        return await self.questions(request)

    async def permission(self, request: PermissionRequest) -> bool:
        if not self.interactive:
            return self.policy == "grant"
        self._say(f"Allow {request.tool_name} {_brief(request.arguments)}? [y/N] ")
        try:
            answer = await read_line(self.stdin)
        except (EOFError, OSError) as exc:
            raise PromptFailed(f"cannot read the answer: {exc}") from None
        return answer.strip().lower() in ("y", "yes")

    async def questions(self, request: QuestionRequest) -> tuple[str, ...]:
        if not self.interactive:
            return tuple("(no answer: non-interactive)" for _ in request.questions)
        answers = []
        for question in request.questions:
            self._say(f"{question}\n> ")
            with contextlib.suppress(EOFError):
                answers.append(await read_line(self.stdin))
                continue
            answers.append("")
        return tuple(answers)


def _brief(arguments: str, limit: int = 120) -> str:
    with contextlib.suppress(json.JSONDecodeError):
        arguments = json.dumps(json.loads(arguments), ensure_ascii=False)
    return arguments if len(arguments) <= limit else arguments[:limit - 3] + "..."
