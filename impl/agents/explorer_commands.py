"""The explorer/evaluator's ``$(name argument)`` commands (seed 001): finding them in a reply, running them.

Replies are scanned for ``$(`` with balanced parentheses (an answer may mention
``support_for_extension()``); double-quoted text does not count parentheses. Exploration
commands (``view``, ``text-search``, ``run``) run confined to a work directory: paths
must stay inside it, and every output is capped. ``run`` is the seed's "shell command": a
``sh -c`` pipeline (``|``, ``&&``, ``||``, ``;``, globs) in the work directory, with a
timeout that kills the whole pipeline; it is checked before the shell sees it: every
program is on an allow list, every path-like word stays inside the work directory, and
nothing the shell would expand into another command or file runs (no ``$``, backquotes,
redirections, subshells or background jobs; no ``find -exec``). The evaluator
may not explore: a ``$(view ...)`` from it, or a command written as markdown
(`` `view file.rs` ``, as the seed's models did), is a protocol violation.
"""

from __future__ import annotations

import asyncio
import os
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from agentfsm.impl.agents.tools import ToolError, Workspace, run_process

EXPLORE = ("view", "text-search", "run")
MEMORY = ("keep", "drop", "note")
CONCLUDE = ("answer", "done")
_BACKTICKED = re.compile(r"`(?:view|text-search|run)\s[^`\n]*`")
SHELL_SEPARATORS = frozenset({"|", "&&", "||", ";"})
ACTING_OPTIONS = frozenset({"-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprintf", "-fls"})


@dataclass(frozen=True)
class Command:
    name: str
    argument: str

    def __str__(self) -> str:
        return f"{self.name} {self.argument}".strip()


@dataclass(frozen=True)
class Reply:
    """One LLM reply, parsed: its commands by kind, and the prose left when they are removed."""

    text: str
    commands: tuple[Command, ...]
    prose: str

    def of(self, names: Sequence[str]) -> list[Command]:
        return [c for c in self.commands if c.name in names]

    @property
    def explores(self) -> bool:
        return bool(self.of(EXPLORE))

    @property
    def conclusion(self) -> Command | None:
        found = self.of(CONCLUDE)
        return found[0] if found else None

    @property
    def markdown_commands(self) -> list[str]:
        return _BACKTICKED.findall(self.text)


def parse_reply(text: str) -> Reply:
    commands: list[Command] = []
    prose: list[str] = []
    i = 0
    while True:
        start = text.find("$(", i)
        if start < 0:
            prose.append(text[i:])
            break
        end = _closing(text, start + 2)
        if end < 0:  # unbalanced: the rest is prose
            prose.append(text[i:])
            break
        prose.append(text[i:start])
        body = text[start + 2:end].strip()
        name, _, argument = body.partition(" ")
        commands.append(Command(name.strip().lower(), argument.strip()))
        i = end + 1
    return Reply(text, tuple(commands), re.sub(r"[ \t]+\n", "\n", "".join(prose)).strip())


def _closing(text: str, i: int) -> int:
    depth, quoted = 1, False
    while i < len(text):
        ch = text[i]
        if ch == '"':
            quoted = not quoted
        elif not quoted and ch == "(":
            depth += 1
        elif not quoted and ch == ")":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


# A definition line in the common languages (and a markdown heading): what $(view path) outlines.
SYMBOL = re.compile(r"^\s*(?:(?:pub(?:\([\w:]+\))?|export|async|static|public|private|protected|abstract|"
                    r"final|unsafe|extern|default)\s+)*(?:def|class|fn|struct|enum|trait|impl|interface|type|"
                    r"function|func|mod|module|namespace|macro_rules!)\s+[\w<(]|^#{1,6}\s+\S")


@dataclass
class CommandRunner:
    """Runs exploration commands in ``workdir``; a failure is the command's output, never an exception."""

    workdir: Path
    timeout: float = 30.0
    run_allowed: tuple[str, ...] = ("ls", "cat", "grep", "wc", "head", "tail", "find", "git")
    max_output: int = 8000
    max_hits: int = 100

    async def run(self, command: Command) -> str:
        try:
            if command.name == "view":
                output = await asyncio.to_thread(self._view, command.argument)
            elif command.name == "text-search":
                output = await asyncio.to_thread(self._search, command.argument)
            elif command.name == "run":
                output = await self._run(command.argument)
            else:
                raise ToolError(f"unknown command {command.name!r} (view, text-search, run)")
        except ToolError as exc:
            output = f"error: {exc}"
        except OSError as exc:
            output = f"error: {exc.strerror or exc}"
        if len(output) > self.max_output:
            output = output[:self.max_output] + f"\n[... {len(output) - self.max_output} more characters]"
        return output

    def _view(self, argument: str) -> str:
        space = Workspace(self.workdir)
        given, lines = argument.strip().strip('"'), None
        match = re.fullmatch(r"(.+?):(\d+)(?:-(\d+))?", given)
        if match:
            given, first = match[1], int(match[2])
            lines = (first, int(match[3]) if match[3] else first)
        path = space.path(given)
        if path.is_dir():
            entries = sorted(p.name + ("/" if p.is_dir() else "") for p in path.iterdir() if p.name != ".git")
            return "\n".join(entries) or "(empty directory)"
        if not path.is_file():
            raise ToolError(f"{given}: no such file or directory")
        text = path.read_text(encoding="utf-8", errors="replace").splitlines()
        if lines is None:
            symbols = [f"{n}: {line.rstrip()}" for n, line in enumerate(text, 1) if SYMBOL.match(line)]
            if symbols:  # the seed's "$(view path) - file structure/symbols"
                return f"{given}: {len(text)} lines, {len(symbols)} symbols (view {given}:START-END for lines)\n" \
                    + "\n".join(symbols)
        first, last = lines or (1, len(text))
        if first < 1 or last < first:
            raise ToolError(f"bad line range {first}-{last}")
        return "\n".join(f"{n}: {line}" for n, line in enumerate(text[first - 1:last], first)) or "(empty)"

    def _search(self, argument: str) -> str:
        words = _split(argument)
        if not words or len(words) > 2:
            raise ToolError('usage: text-search "PATTERN" [PATH]')
        space = Workspace(self.workdir)
        pattern, root = words[0], space.path(words[1] if len(words) == 2 else ".")
        hits: list[str] = []
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            for name in sorted(filenames):
                path = Path(dirpath) / name
                try:
                    data = path.read_bytes() if path.stat().st_size <= 1 << 20 else b""
                except OSError:
                    continue
                if b"\0" in data[:8192] or pattern.encode() not in data:
                    continue
                for n, line in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
                    if pattern in line:
                        hits.append(f"{space.relative(path)}:{n}: {line.strip()}")
                        if len(hits) >= self.max_hits:
                            return "\n".join(hits) + f"\n[stopped at {self.max_hits} matches]"
        return "\n".join(hits) or f"no matches for {pattern!r}"

    async def _run(self, argument: str) -> str:
        space = Workspace(self.workdir)
        self.check_shell(argument, space)
        try:
            status, output = await run_process(["sh", "-c", argument], space.root, self.timeout)
        except TimeoutError:
            raise ToolError(f"timed out after {self.timeout:g}s") from None
        return f"exit status {status}\n{output}"

    def check_shell(self, command: str, space: Workspace) -> None:
        """Refuse (``ToolError``) a shell command that could leave the work directory or run an
        unlisted program; what passes is a pipeline of allowed programs over paths inside it."""
        if "$" in command or "`" in command or "\\" in command:
            raise ToolError("no substitutions, variables or escapes in run: write the command plainly")
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        try:
            words = list(lexer)
        except ValueError as exc:
            raise ToolError(f"cannot split {command!r}: {exc}") from None
        program = True
        for word in words:
            if word in SHELL_SEPARATORS:
                program = True
                continue
            if word and set(word) <= set("|&;<>()"):
                raise ToolError(f"{word!r} is not allowed in run (pipes and ; && || only)")
            if program:
                if "*" not in self.run_allowed and word not in self.run_allowed:
                    raise ToolError(f"{word} is not allowed (allowed: {', '.join(self.run_allowed)})")
                program = False
            elif word in ACTING_OPTIONS:
                raise ToolError(f"{word} is not allowed in run: exploration only reads")
            else:
                value = word.split("=", 1)[-1]
                if value.startswith("~") or (value.startswith(".") and set(value) & set("*?[")):
                    raise ToolError(f"{word!r} is not allowed in run: it could name a place outside the work "
                                    "directory")
                if "/" in value or value.startswith(".."):
                    space.path(value)
        if program:
            raise ToolError("usage: run PROGRAM [ARGUMENTS...] [| PROGRAM ...]")


def _split(argument: str) -> list[str]:
    try:
        return shlex.split(argument)
    except ValueError as exc:
        raise ToolError(f"cannot split {argument!r}: {exc}") from None
