"""The bundled agents as ``agentfsm chaos`` plays them: each one's table and a script whose every
tool execution appends one line (``tK``) to a ledger file outside the store, and the line an
effect's journaled call appends.

The Loom agent, vibework and the tool-call runner run ``sh -c "echo tK >> ../ledger; sleep S"``
with their ``run_command`` tool. The explorer's ``$(run ...)`` runs in a read-only sandbox, so
its ledger is kept by a ``bwrap`` first on the run's ``PATH`` that appends the command's last
word (``tK``) and then runs the real one."""

from __future__ import annotations

import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINE = re.compile(r"\bt\d+\b")
BWRAP = """#!/bin/sh
for a; do last=$a; done
case "$last" in *" t"[0-9]*) echo "${{last##* }}" >> {ledger};; esac
exec {bwrap} "$@"
"""


@dataclass(frozen=True)
class ChaosAgent:
    """One bundled agent: its table and how its script is written."""

    name: str

    @property
    def table(self) -> Path:
        return ROOT / "spec" / f"{self.name}.yaml"

    def script(self, tools: int, sleep: float, pad: int = 0) -> str:
        """A script of ``tools`` tool executions, each appending ``tK`` to ``../ledger`` then
        sleeping ``sleep`` seconds (a fault lands mid-tool), in the work folder ``work``. ``pad``
        characters more in each call (in the explorer's notes and answer) make the writes that journal them
        span several pages of the store."""
        filler = f" {'x' * pad}" if pad else ""
        if self.name == "explorer-evaluator":
            turns = "".join(f"  - \"$(run sleep {sleep:g}; ls t{k})\"\n  - \"$(note t{k} ran{filler})\"\n"
                            for k in range(1, tools))
            return (f"workdir: work\nsettings: {{run_allowed: [ls, sleep]}}\ninputs: [input 1]\nreplies:\n"
                    f"{turns}  - \"$(run sleep {sleep:g}; ls t{tools})\"\n  - \"$(answer done{filler})\"\n")
        tail = f"; :{filler}" if pad else ""
        calls = [f"{{tool_call: {{name: run_command, arguments: {{argv: "
                 f"{json.dumps(['sh', '-c', f'echo t{k} >> ../ledger; sleep {sleep:g}{tail}'])}}}}}}}"
                 for k in range(1, tools + 1)]
        if self.name == "tool-call":  # one response; each call is a run of its own
            return "workdir: work\nallow: [run_command]\ninputs: []\nreplies:\n  - " + \
                "\n    ".join(f"- {c}" for c in calls) + "\n"
        head = "settings: {commit_hook: false}" if self.name == "loom-agent" else "allow: [run_command]"
        replies = "".join(f"  - - {c}\n  - - {{text: reply {k}}}\n" for k, c in enumerate(calls, 1))
        inputs = ", ".join(f"input {k}" for k in range(1, tools + 1))
        return f"workdir: work\n{head}\ninputs: [{inputs}]\nreplies:\n{replies}"

    def env(self, folder: Path) -> dict[str, str] | None:
        """The run's environment: the explorer's ledger-keeping ``bwrap`` first on its ``PATH``."""
        if self.name != "explorer-evaluator":
            return None
        real = shutil.which("bwrap") or "bwrap"
        wrapper = folder / "bin" / "bwrap"
        wrapper.parent.mkdir(parents=True, exist_ok=True)
        wrapper.write_text(BWRAP.format(ledger=folder / "ledger", bwrap=real))
        wrapper.chmod(0o755)
        return {**os.environ, "PATH": f"{wrapper.parent}{os.pathsep}{os.environ.get('PATH', '')}"}


AGENTS = tuple(ChaosAgent(name) for name in ("loom-agent", "vibework-agent", "tool-call", "explorer-evaluator"))


def ledger_line(effect: dict[str, object]) -> str | None:
    """The ledger line a journaled effect's call appends (None: not one of the script's tools)."""
    found = LINE.findall(json.dumps(effect.get("args")))
    return found[0] if found and (effect.get("tool") == "run_command" or effect.get("action") == "RunCommands") \
        else None
