"""Conversation scripts: YAML files that drive a run end to end without a real model.

Two kinds, told apart by their keys:

- an **agent script** (``inputs`` and ``replies``) plays a user and a scripted LLM against
  the table's agent (chosen by machine name; the Loom driver otherwise): each input is
  sent once the agent is idle again, the model answers from ``replies`` in order;
  ``settings`` tune the agent (retry delays, tool limits); ``interrupt_after`` interrupts
  a turn after that many seconds. The vibework agent also reads ``permissions`` (the
  user's verdicts: grant, deny, fail), ``answers`` (to the model's questions) and
  ``allow`` (permission rules); the explorer/evaluator reads ``plan`` (``--plan``).
- an **event script** (``events``) feeds the engine of any table directly, one event with
  its parameters per entry, and shows what the table decides.

Read with the project's YAML 1.2 reader (``on``/``yes``/``no`` stay strings).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentfsm.impl.agents.prompts import ScriptedAnswer, ScriptedVerdict
from agentfsm.impl.llm.client import Call, Fail, ReplyStep, Say, Wait
from agentfsm.spec.errors import TableError
from agentfsm.spec.expr import Value
from agentfsm.spec.yamlio import MAX_BYTES, load_document

SETTINGS: dict[str, type] = {
    "retry_base": float, "retry_factor": float, "retry_max": float, "tool_concurrency": int, "tool_timeout": float,
    "command_timeout": float, "commit_hook": bool, "system_prompt": str, "max_tool_rounds": int,
    "tool_errors_fatal": bool, "max_depth": int,                           # vibework
    "run_allowed": tuple, "max_output": int, "memory_limit": int,          # explorer/evaluator
    "llm_retries": int, "retry_delay": float,
    "call_timeout": float}                                                 # tool-call
AGENT_KEYS = {"inputs", "replies", "settings", "workdir", "description", "permissions", "answers", "allow", "plan"}


VERDICTS = ("grant", "deny", "fail")


class ScriptError(ValueError):
    """A script that cannot be used; the message names the file and the entry."""


@dataclass(frozen=True)
class Turn:
    text: str
    interrupt_after: float | None = None


@dataclass(frozen=True)
class AgentScript:
    inputs: tuple[Turn, ...]
    replies: tuple[tuple[ReplyStep, ...], ...]
    settings: Mapping[str, Any] = field(default_factory=dict)
    workdir: str | None = None
    permissions: tuple[ScriptedVerdict, ...] | None = None  # None: nobody scripted them (ask the terminal)
    answers: tuple[ScriptedAnswer, ...] | None = None
    allow: tuple[str, ...] | None = None
    plan: bool = False


@dataclass(frozen=True)
class EventScript:
    events: tuple[tuple[str, Mapping[str, Value]], ...]


Script = AgentScript | EventScript


def load_script(path: Path | str, *, replies: bool = True) -> Script:
    """The script at ``path``; ``replies=False`` when a real model answers (``--openai``): then
    the script need not hold ``replies``."""
    file = str(path)
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise ScriptError(f"{file}: cannot read: {exc.strerror}") from None
    if len(raw) > MAX_BYTES:  # the loader's own words are about tables
        raise ScriptError(f"{file}: larger than {MAX_BYTES // 1024} KiB: too large for a script")
    if not raw.strip():
        raise ScriptError(f"{file}: empty: a script is a mapping with 'inputs' and 'replies', or with 'events'")
    try:
        data = load_document(raw, file).data
    except TableError as exc:
        raise ScriptError(str(exc)) from None
    return parse_script(data, file, replies=replies)


def parse_script(data: Any, file: str = "<script>", *, replies: bool = True) -> Script:
    def fail(message: str) -> ScriptError:
        return ScriptError(f"{file}: {message}")

    if not isinstance(data, dict):
        raise fail("a script is a mapping with 'inputs' and 'replies', or with 'events'")
    if "events" in data:
        extra = set(data) - {"events", "description"}
        if extra:
            raise fail(f"unknown key {sorted(extra)[0]!r} in an event script")
        return EventScript(tuple(_event(entry, i, fail) for i, entry in enumerate(_list(data, "events", fail), 1)))
    extra = set(data) - AGENT_KEYS
    if extra:
        raise fail(f"unknown key {sorted(extra)[0]!r} (expected {', '.join(sorted(AGENT_KEYS))})")
    inputs = tuple(_turn(entry, i, fail) for i, entry in enumerate(_list(data, "inputs", fail), 1))
    scripted = [] if not replies and data.get("replies") is None else _list(data, "replies", fail)
    steps = tuple(_reply(entry, i, fail) for i, entry in enumerate(scripted, 1))
    settings = data.get("settings") or {}
    if not isinstance(settings, dict):
        raise fail("'settings' must be a mapping")
    for key, value in settings.items():
        want = SETTINGS.get(key)
        if want is None:
            raise fail(f"unknown setting {key!r} (known: {', '.join(SETTINGS)})")
        ok = isinstance(value, want) and not (want is not bool and isinstance(value, bool))
        if want is tuple:
            ok = isinstance(value, list) and all(isinstance(v, str) for v in value)
            settings[key] = tuple(value) if ok else value
        elif want is float:
            ok = isinstance(value, int | float) and not isinstance(value, bool) and value >= 0
        if not ok:
            raise fail(f"setting {key!r} must be {want.__name__}")
    workdir = data.get("workdir")
    if workdir is not None and not isinstance(workdir, str):
        raise fail("'workdir' must be a path")
    permissions = None if data.get("permissions") is None else tuple(
        _verdict(entry, i, fail) for i, entry in enumerate(_list(data, "permissions", fail), 1))
    answers = None if data.get("answers") is None else tuple(
        _answer(entry, i, fail) for i, entry in enumerate(_list(data, "answers", fail), 1))
    allow = data.get("allow")
    if allow is not None and not (isinstance(allow, list) and all(isinstance(a, str) for a in allow)):
        raise fail("'allow' must be a list of tool-name patterns")
    plan = data.get("plan", False)
    if not isinstance(plan, bool):
        raise fail("'plan' must be true or false")
    return AgentScript(inputs, steps, settings, workdir, permissions, answers,
                       None if allow is None else tuple(allow), plan)


def _verdict(entry: Any, i: int, fail: Any) -> ScriptedVerdict:
    if entry in VERDICTS:
        return ScriptedVerdict(entry)
    if isinstance(entry, dict) and entry.get("verdict") in VERDICTS and set(entry) <= {"verdict", "delay"} \
            and _number(entry.get("delay", 0)):
        return ScriptedVerdict(entry["verdict"], float(entry.get("delay", 0)))
    raise fail(f"permission {i}: expected grant, deny, fail or {{verdict: ..., delay: SECONDS}}")


def _answer(entry: Any, i: int, fail: Any) -> ScriptedAnswer:
    if isinstance(entry, str):
        return ScriptedAnswer((entry,))
    if isinstance(entry, list) and all(isinstance(a, str) for a in entry):
        return ScriptedAnswer(tuple(entry))
    if isinstance(entry, dict) and set(entry) <= {"answers", "delay"} and _number(entry.get("delay", 0)) \
            and isinstance(entry.get("answers"), list) and all(isinstance(a, str) for a in entry["answers"]):
        return ScriptedAnswer(tuple(entry["answers"]), float(entry.get("delay", 0)))
    raise fail(f"answer {i}: expected a string, a list of strings or {{answers: [...], delay: SECONDS}}")


def _list(data: dict[str, Any], key: str, fail: Any) -> list[Any]:
    value = data.get(key)
    if not isinstance(value, list):
        raise fail(f"'{key}' must be a list")
    return value


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and value >= 0


def _turn(entry: Any, i: int, fail: Any) -> Turn:
    if isinstance(entry, str):
        return Turn(entry)
    if isinstance(entry, dict) and isinstance(entry.get("text"), str) and set(entry) <= {"text", "interrupt_after"}:
        after = entry.get("interrupt_after")
        if after is not None and not _number(after):
            raise fail(f"input {i}: 'interrupt_after' must be a number of seconds")
        return Turn(entry["text"], None if after is None else float(after))
    raise fail(f"input {i}: expected a string or {{text: ..., interrupt_after: SECONDS}}")


def _reply(entry: Any, i: int, fail: Any) -> tuple[ReplyStep, ...]:
    if isinstance(entry, str):
        return (Say(entry),)
    if not isinstance(entry, list):
        raise fail(f"reply {i}: expected a list of steps (text, tool_call, error, delay)")
    steps: list[ReplyStep] = []
    for j, step in enumerate(entry, 1):
        where = f"reply {i}, step {j}"
        if not isinstance(step, dict) or len(step) != 1:
            raise fail(f"{where}: a step is a mapping with one key: text, tool_call, error or delay")
        [(kind, value)] = step.items()
        if kind == "text" and isinstance(value, str):
            steps.append(Say(value))
        elif kind == "delay" and _number(value):
            steps.append(Wait(float(value)))
        elif kind == "error" and isinstance(value, str):
            steps.append(Fail(value))
        elif kind == "error" and isinstance(value, dict) and isinstance(value.get("message"), str) \
                and isinstance(value.get("retryable", True), bool) and set(value) <= {"message", "retryable"}:
            steps.append(Fail(value["message"], value.get("retryable", True)))
        elif kind == "tool_call" and isinstance(value, dict) and isinstance(value.get("name"), str) \
                and isinstance(value.get("arguments", {}), dict) and set(value) <= {"name", "arguments", "id"}:
            steps.append(Call(value["name"], value.get("arguments", {}), value.get("id")))
        else:
            raise fail(f"{where}: bad {kind!r} step (text: STRING, delay: SECONDS, error: STRING, "
                       "tool_call: {name: STRING, arguments: MAPPING})")
    return tuple(steps)


def _event(entry: Any, i: int, fail: Any) -> tuple[str, Mapping[str, Value]]:
    if isinstance(entry, str):
        return entry, {}
    if isinstance(entry, dict) and len(entry) == 1:
        [(name, params)] = entry.items()
        params = params or {}
        if isinstance(params, dict):
            for key, value in params.items():
                if not isinstance(value, int):
                    raise fail(f"event {i}: {name}: parameter {key!r} is {value!r}: a parameter's value is an "
                               "integer or a boolean")
            return str(name), params
    raise fail(f"event {i}: expected NAME or {{NAME: {{param: value}}}}")
