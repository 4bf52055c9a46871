"""The docs' performance figures are the benches' recorded results (bench/figures.py).

Every ``<!-- bench:NAME -->`` block in README.md and docs/ must be exactly what
bench/results/NAME.json renders, and no doc may state a performance figure outside such a
block: a hand-typed or stale figure fails here, and ``make bench`` renders the blocks again.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import ROOT

FIGURES = ROOT / "bench" / "figures.py"
RESULT = {"bench": "speed", "script": "bench/bench_x.py", "date": "2026-12-02", "load": 3.5, "cpus": 2,
          "table": "spec/loom-agent.yaml", "columns": ["contender", "events/s", "× baseline"],
          "rows": [{"contender": "engine", "events/s": 41234, "× baseline": 12.34},
                   {"contender": "baseline", "events/s": 33410, "× baseline": 1.0}],
          "note": "Best of 5 rounds."}
RENDERED = """| contender | events/s | × baseline |
|---|---|---|
| engine | 41,234 | 12.3 |
| baseline | 33,410 | 1.00 |

`make bench` (`bench/bench_x.py`) on spec/loom-agent.yaml, 2026-12-02, load 3.5 on 2 CPUs. Best of 5 rounds.
"""


def figures(root: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(FIGURES), "--root", str(root), *flags], capture_output=True,
                          text=True, timeout=60)


def project(tmp_path: Path, doc: str) -> Path:
    (tmp_path / "docs").mkdir(parents=True)
    (tmp_path / "bench" / "results").mkdir(parents=True)
    (tmp_path / "README.md").write_text("# x\n", encoding="utf-8")
    (tmp_path / "docs" / "speed.md").write_text(doc, encoding="utf-8")
    (tmp_path / "bench" / "results" / "speed.json").write_text(json.dumps(RESULT), encoding="utf-8")
    return tmp_path


def test_the_docs_show_exactly_the_recorded_results() -> None:
    done = figures(ROOT, "--check")
    assert done.returncode == 0, done.stderr


def test_a_block_is_rendered_from_its_result_and_then_checks(tmp_path: Path) -> None:
    root = project(tmp_path, "Intro.\n\n<!-- bench:speed -->\nold\n<!-- /bench:speed -->\n\nAfter.\n")
    assert figures(root, "--check").returncode == 1
    assert figures(root).returncode == 0
    text = (root / "docs" / "speed.md").read_text(encoding="utf-8")
    assert text == f"Intro.\n\n<!-- bench:speed -->\n{RENDERED}<!-- /bench:speed -->\n\nAfter.\n"
    assert figures(root, "--check").returncode == 0


def test_a_hand_edit_inside_a_block_fails(tmp_path: Path) -> None:
    edited = RENDERED.replace("12.3", "12.5")
    root = project(tmp_path, f"<!-- bench:speed -->\n{edited}<!-- /bench:speed -->\n")
    done = figures(root, "--check")
    assert done.returncode == 1
    assert "docs/speed.md:1: bench:speed is not what its result renders" in done.stderr


def test_a_block_without_a_recorded_result_fails(tmp_path: Path) -> None:
    root = project(tmp_path, "<!-- bench:nothing -->\n<!-- /bench:nothing -->\n")
    assert "bench:nothing has no recorded result" in figures(root, "--check").stderr


def test_a_figure_outside_a_block_fails(tmp_path: Path) -> None:
    for prose, figure in [("The engine runs at 0.99x the bare rate.", "0.99x"),
                          ("About 130k events/s on this machine.", "130k events/s"),
                          ("It takes 3–5× less.", "3–5×"), ("It costs 12.5 CPU-s.", "12.5 CPU-s"),
                          ("About 40 runs per second.", "40 runs per second")]:
        root = project(tmp_path / figure.replace("/", "_"), f"<!-- bench:speed -->\n{RENDERED}"
                       f"<!-- /bench:speed -->\n\n{prose}\n")
        done = figures(root, "--check")
        assert done.returncode == 1, prose
        assert f"docs/speed.md:10: performance figure {figure!r} outside a bench block" in done.stderr


def test_sizes_and_counts_are_not_figures(tmp_path: Path) -> None:
    root = project(tmp_path, "A 2810×1903 picture, (`×40`) uses, 512 unanswered requests, a 3x3 grid.\n")
    done = figures(root, "--check")
    assert done.returncode == 0, done.stderr
