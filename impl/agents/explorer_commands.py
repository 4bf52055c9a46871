"""The explorer/evaluator's ``$(name argument)`` commands (seed 001): finding them in a reply, running them.

Replies are scanned for ``$(`` with balanced parentheses (an answer may mention
``support_for_extension()``); double-quoted text does not count parentheses. Exploration
commands (``view``, ``text-search``, ``run``) run confined to a work directory, and every
output is capped. ``view`` and ``text-search`` read in this process, never through a
symlink that leaves the work directory, and only regular files. ``run`` is the seed's
"shell command": a ``sh -c`` pipeline (``|``, ``&&``, ``||``, ``;``, globs) run in a
bubblewrap sandbox (``sandbox``: the work directory read-only, nothing outside it, no
network, limits, a timeout that kills the whole tree), and refused where no sandbox can
start. The model's text is untrusted, so confinement is the operating system's; the
lexical check before it is a first line with clear messages: every program is on an
allow list, every path-like word (also inside an option's value) stays inside the work
directory, nothing the shell would expand runs (no ``$``, backquotes, redirections,
subshells or background jobs), and no option that makes an allowed program run another,
take configuration from the command line or write a file passes (``git -c``, ``find
-exec``, ``--output``; git only with its reading subcommands). The evaluator may not
explore: a ``$(view ...)`` from it, or a command written as markdown (`` `view file.rs`
``, as the seed's models did), is a protocol violation.
"""

from __future__ import annotations

import asyncio
import os
import re
import shlex
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from agentfsm.impl.agents.sandbox import Limits, Sandbox
from agentfsm.impl.agents.tools import ToolError, Workspace

EXPLORE = ("view", "text-search", "run")
MEMORY = ("keep", "drop", "note")
CONCLUDE = ("answer", "done")
_BACKTICKED = re.compile(r"`(?:view|text-search|run)\s[^`\n]*`")
SHELL_SEPARATORS = frozenset({"|", "&&", "||", ";"})
# Options that make an allowed program run another program, take its configuration from the command
# line or write a file. A long option is refused by any prefix as well (git and GNU getopt take
# unambiguous abbreviations: ``--out=x`` is ``--output=x``); a short one also with its value attached.
FIND_ACTING = frozenset({"-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls"})
REFUSED_OPTIONS: dict[str, frozenset[str]] = {
    "find": FIND_ACTING,
    "git": frozenset({"--output", "--output-directory", "--upload-pack", "--receive-pack", "--exec", "--ext-diff",
                      "--open-files-in-pager", "-O", "--extcmd", "--tool", "--config-env"}),
    "sort": frozenset({"-o", "--output", "--compress-program", "-T", "--temporary-directory"}),
    "rg": frozenset({"--pre", "--pre-glob", "--search-zip", "-z"}),
    "tar": frozenset({"--to-command", "--use-compress-program", "-I", "--checkpoint-action", "--info-script",
                      "--new-volume-script", "-F", "--rsh-command"}),
}
# git's options before its subcommand that change where it reads its configuration, repository or programs.
GIT_GLOBAL_REFUSED = frozenset({"-c", "--config-env", "--exec-path", "--git-dir", "--work-tree", "--namespace",
                                "--super-prefix", "-p", "--paginate", "--html-path", "--man-path", "--info-path"})
# git's subcommands that only read (an alias, a hook-running or writing subcommand is refused).
GIT_READING = frozenset({"status", "log", "show", "diff", "grep", "blame", "annotate", "ls-files", "ls-tree",
                         "rev-parse", "rev-list", "describe", "shortlog", "cat-file", "branch", "tag", "name-rev",
                         "merge-base", "for-each-ref", "show-ref", "show-branch", "diff-tree", "diff-files",
                         "diff-index", "count-objects", "whatchanged", "cherry", "reflog", "range-diff",
                         "check-ignore", "check-attr", "version"})
_PARENT = re.compile(r"(?:^|/)\.\.(?:/|$)")


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
    limits: Limits = field(default_factory=Limits)
    bwrap: str | None = None  # the bubblewrap program (None: the one on PATH)
    max_file: int = 8 << 20  # bytes of the largest file view reads

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
        if path.is_dir():  # an entry is marked a directory only when it is one inside (no stat through a link out)
            entries = sorted(p.name + ("/" if p.is_dir() and _stays_inside(space, p) else "")
                             for p in path.iterdir() if p.name != ".git")
            return "\n".join(entries) or "(empty directory)"
        data = read_inside(space, path, self.max_file)
        if isinstance(data, str):
            raise ToolError(f"{given}: {data}")
        if b"\0" in data[:8192]:
            raise ToolError(f"{given}: a binary file ({len(data)} bytes), not shown")
        text = data.decode("utf-8", "replace").splitlines()
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
        for dirpath, dirnames, filenames in os.walk(root):  # symlinked directories are not entered
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            for name in sorted(filenames):
                path = Path(dirpath) / name
                data = read_inside(space, path, 1 << 20)
                if isinstance(data, str) or b"\0" in data[:8192] or pattern.encode() not in data:
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
            status, output = await Sandbox(space.root, self.limits, self.bwrap).run(["sh", "-c", argument],
                                                                                   self.timeout)
        except TimeoutError:
            raise ToolError(f"timed out after {self.timeout:g}s") from None
        return f"exit status {status}\n{output}"

    def check_shell(self, command: str, space: Workspace) -> None:
        """Refuse (``ToolError``) a shell command that names a place outside the work directory, runs an
        unlisted program or gives an allowed one an option that acts; what passes is a pipeline of
        allowed programs over paths inside it (then confined by the sandbox all the same)."""
        if "$" in command or "`" in command or "\\" in command:
            raise ToolError("no substitutions, variables or escapes in run: write the command plainly")
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        try:
            words = list(lexer)
        except ValueError as exc:
            raise ToolError(f"cannot split {command!r}: {exc}") from None
        segments: list[list[str]] = [[]]
        for word in words:
            if word in SHELL_SEPARATORS:
                segments.append([])
            elif word and set(word) <= set("|&;<>()"):
                raise ToolError(f"{word!r} is not allowed in run (pipes and ; && || only)")
            else:
                segments[-1].append(word)
        for program, *arguments in segments:
            self._check_program(program, arguments)
            for word in arguments:
                _check_paths(word, space)

    def _check_program(self, program: str | None, arguments: list[str]) -> None:
        if program is None:
            raise ToolError("usage: run PROGRAM [ARGUMENTS...] [| PROGRAM ...]")
        if "*" not in self.run_allowed and program not in self.run_allowed:
            raise ToolError(f"{program} is not allowed (allowed: {', '.join(self.run_allowed)})")
        refused = REFUSED_OPTIONS.get(program, frozenset())
        if program == "git":
            subcommand = _git_subcommand(arguments)
            if subcommand not in GIT_READING:
                raise ToolError(f"{'git ' + subcommand if subcommand else 'git without a subcommand'} is not allowed "
                                f"in run: exploration only reads (git's reading subcommands: "
                                f"{', '.join(sorted(GIT_READING))})")
        for word in arguments:
            option = _refused_option(word, refused)
            if option is not None:
                raise ToolError(f"{word} is not allowed in run: exploration only reads ({program} {option} can run a "
                                "program, take configuration from the command line or write a file)")


def _git_subcommand(arguments: Sequence[str]) -> str | None:
    """git's subcommand: the first word after its global options (refusing those that redirect it)."""
    words = iter(arguments)
    for word in words:
        option = _refused_option(word, GIT_GLOBAL_REFUSED)
        if option is not None:
            raise ToolError(f"{word} is not allowed in run: exploration only reads (git {option} changes where git "
                            "takes its configuration, repository or programs)")
        if word == "-C":
            next(words, None)
        elif not word.startswith("-"):
            return word
    return None


def _refused_option(word: str, options: frozenset[str]) -> str | None:
    """The option of ``options`` that ``word`` gives: a long one by any prefix (``--out=x``), a short
    one with its value attached (``-cX``), a single-dash long one (find's ``-fprint0``) exactly."""
    if word.startswith("--"):
        name = word.split("=", 1)[0]
        return next((o for o in sorted(options) if len(name) > 3 and o.startswith(name)), None) \
            if name != "--" else None
    if word.startswith("-"):
        return next((o for o in sorted(options) if (len(o) == 2 and word.startswith(o)) or o == word), None)
    return None


def _check_paths(word: str, space: Workspace) -> None:
    """Refuse a word that names a place outside the work directory: itself, the value after ``=`` or
    a short option's attached value, by ``~``, ``..``, an absolute path, a dot-glob, or a symlink."""
    values = [word, word.split("=", 1)[-1]]
    if re.match(r"-[A-Za-z]", word):
        values.append(word[2:])
    for value in dict.fromkeys(values):
        if value.startswith("~") or (value.startswith(".") and set(value) & set("*?[")):
            raise ToolError(f"{word!r} is not allowed in run: it could name a place outside the work directory")
        if value.startswith("/") or _PARENT.search(value) or os.path.lexists(space.root / value):
            space.path(value)


def _stays_inside(space: Workspace, path: Path) -> bool:
    try:
        return space.inside(path.resolve())
    except RuntimeError:  # a symlink loop
        return False


def read_inside(space: Workspace, path: Path, limit: int) -> bytes | str:
    """A regular file's bytes, read only when its real path is inside the work directory (no symlink
    out, no FIFO or device that would block or never end); otherwise why not."""
    try:
        real = path.resolve()
        if not space.inside(real):
            return "outside the work directory (a symlink leads out)"
        descriptor = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except RuntimeError:
        return "a symlink loop"
    except OSError as exc:
        return exc.strerror or str(exc)
    with os.fdopen(descriptor, "rb") as file:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            return "not a regular file"
        if info.st_size > limit:
            return f"{info.st_size} bytes, more than {limit} (run head or tail for parts of it)"
        return file.read(limit + 1)[:limit]


def _split(argument: str) -> list[str]:
    try:
        return shlex.split(argument)
    except ValueError as exc:
        raise ToolError(f"cannot split {argument!r}: {exc}") from None
