"""The job summary (``--summary-md``): the report's verdicts in Markdown for ``$GITHUB_STEP_SUMMARY``,
pointing at the HTML page for the counterexamples."""

from __future__ import annotations

from typing import Any


def _cell(text: str) -> str:
    return " ".join(text.replace("|", "\\|").split())


def summary_markdown(data: dict[str, Any], html_name: str | None) -> str:
    """One table row per check, failing entries and checks first (the data's order)."""
    word = "ok" if data["ok"] else "FAILED"
    lines = [f"### agentfsm {data['command']}: {word}", ""]
    if html_name:
        lines += [f"Counterexamples step by step: [{_cell(html_name)}]({html_name.replace(' ', '%20')}) "
                  "(in this job's artifacts).", ""]
    lines += ["| | what | check | result |", "|---|---|---|---|"]
    for entry in data["entries"]:
        for check in entry["checks"]:
            mark = "✅" if check["ok"] else "❌"
            steps = f" ({len(check['trace']['steps'])} steps)" if check.get("trace") else ""
            lines.append(f"| {mark} | {entry['kind']} {_cell(entry['title'])} | {_cell(check['title'])} | "
                         f"{_cell(check['message'])[:200]}{steps} |")
    return "\n".join(lines) + "\n"
