"""The docs' performance figures, recorded by the benches and rendered into marked blocks.

A bench records each table it measures with ``record(NAME, rows)``: bench/results/NAME.json
holds the rows (a list of dicts, one per line of the table), the column order, the bench
table it ran on, the machine's load and CPU count, and the date. A doc shows it between
``<!-- bench:NAME -->`` and ``<!-- /bench:NAME -->``; ``make bench`` ends with
``bench/figures.py`` (rewrite every marked block from the recorded results) and
``bench/figures.py --check`` (tests/project/test_bench_figures.py runs it) fails when a block
differs from what its results render (a hand edit, a stale render, a result missing) or
when a doc states a performance figure (a ratio such as ``0.8x``, a rate such as ``130k
events/s``, CPU seconds) outside a marked block. So a figure in the docs is always one a
bench printed, with the conditions it was measured in.

    .venv/bin/python bench/figures.py [--check] [--root DIR]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = "bench/results"
BLOCK = re.compile(r"<!-- bench:(?P<name>[\w-]+) -->\n(?P<body>.*?)<!-- /bench:(?P=name) -->", re.S)
# What counts as a performance figure in prose: a ratio (0.8x, 3–5×), a rate (130k events/s,
# 1.4 runs/s, 130,724/s), CPU seconds, "N ... per second".
FIGURE = re.compile(r"\b\d[\d.,]*(?:[–-]\d[\d.,]*)?\s?[x×](?=[\s).,;:]|$)"
                    r"|\b\d[\d.,]*k?\s?(?:[a-z]+)?/s\b"
                    r"|\b\d[\d.,]*\s?CPU[- ]s\b"
                    r"|\b\d[\d.,]*k?\s+\w+ per second", re.M)
# Files whose figures come from benches that do not record yet (they keep their prose for
# now), and words that look like a figure but quote something else.
PENDING = {"docs/verifier.md": "bench/explore_vs_spin.py and bench/bench_systems.py",
           "docs/systems.md": "bench/bench_systems.py"}
NOT_FIGURES = {"docs/seeds.md": ("2x turns",)}  # a seed's own words, quoted


def record(name: str, rows: Sequence[Mapping[str, Any]], *, table: str, columns: Sequence[str] | None = None,
           note: str = "", root: Path = ROOT, command: str = "make bench") -> Path:
    """Write bench/results/NAME.json: the rows of one measured table and how they were measured
    (``command``: the make target that runs the script, when it is not ``make bench``)."""
    if not rows:
        raise ValueError(f"bench {name}: no rows to record")
    script = Path(sys.argv[0]).resolve()
    data = {
        "bench": name,
        "script": script.relative_to(ROOT).as_posix() if script.is_relative_to(ROOT) else script.name,
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d"),
        "load": round(os.getloadavg()[0], 1),
        "cpus": os.cpu_count(),
        "table": table,
        "columns": list(columns or rows[0]),
        "rows": [dict(row) for row in rows],
        "note": note,
        **({} if command == "make bench" else {"command": command}),
    }
    path = root / RESULTS / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def cell(value: object) -> str:
    """A table cell: thousands separated, two decimals below 10, one below 100, none above; text as it is."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if isinstance(value, int) or abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.1f}" if abs(value) >= 10 else f"{value:.2f}"


def render(result: Mapping[str, Any]) -> str:
    """The markdown a block shows for one recorded result."""
    columns = result["columns"]
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(row.get(column, "")) for column in columns) + " |" for row in result["rows"]]
    source = (f"`{result.get('command', 'make bench')}` (`{result['script']}`) on {result['table']}, {result['date']}, "
              f"load {result['load']} on {result['cpus']} CPUs.")
    return "\n".join([*lines, "", source + (" " + result["note"] if result["note"] else ""), ""])


def results(root: Path) -> dict[str, dict[str, Any]]:
    return {path.stem: json.loads(path.read_text(encoding="utf-8"))
            for path in sorted((root / RESULTS).glob("*.json"))}


def docs(root: Path) -> list[Path]:
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def rewrite(text: str, found: Mapping[str, Mapping[str, Any]]) -> str:
    """``text`` with every marked block rendered from its result (a block without one is kept)."""
    def block(match: re.Match[str]) -> str:
        name = match["name"]
        body = render(found[name]) if name in found else match["body"]
        return f"<!-- bench:{name} -->\n{body}<!-- /bench:{name} -->"
    return BLOCK.sub(block, text)


def problems(root: Path) -> list[str]:
    """What makes the docs disagree with the recorded results: stale blocks, stray figures."""
    found = results(root)
    out = []
    for path in docs(root):
        text = path.read_text(encoding="utf-8")
        where = path.relative_to(root).as_posix()
        for match in BLOCK.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            if match["name"] not in found:
                out.append(f"{where}:{line}: bench:{match['name']} has no recorded result in {RESULTS}/")
            elif match["body"] != render(found[match["name"]]):
                out.append(f"{where}:{line}: bench:{match['name']} is not what its result renders "
                           "(run bench/figures.py)")
        if where in PENDING:
            continue
        prose = BLOCK.sub(lambda m: "\n" * m[0].count("\n"), text)
        for match in FIGURE.finditer(prose):
            line_start = prose.rfind("\n", 0, match.start()) + 1
            line_text = prose[line_start:prose.find("\n", match.end())]
            if any(quoted in line_text for quoted in NOT_FIGURES.get(where, ())):
                continue
            line = prose.count("\n", 0, match.start()) + 1
            out.append(f"{where}:{line}: performance figure {match[0]!r} outside a bench block")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="report, do not rewrite (exit 1 on a problem)")
    parser.add_argument("--root", type=Path, default=ROOT, help="the project's root (default: this checkout)")
    args = parser.parse_args()
    if not args.check:
        found = results(args.root)
        for path in docs(args.root):
            text = path.read_text(encoding="utf-8")
            if (new := rewrite(text, found)) != text:
                path.write_text(new, encoding="utf-8")
                print(f"figures: rewrote {path.relative_to(args.root)}")
    found_problems = problems(args.root)
    for problem in found_problems:
        print(problem, file=sys.stderr)
    return 1 if found_problems else 0


if __name__ == "__main__":
    sys.exit(main())
