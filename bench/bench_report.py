"""How the HTML report scales: a 1,000-step counterexample on a 40-state table, and one report of
every bundled table and system, each opened in headless Chromium (Selenium, as the tests drive it).

Figures: the file's size; the time from navigation to the page's script having drawn it (the
``report-ready`` performance mark; the counterexample's viewer opened by the URL fragment, so it
counts); and stepping: the mean time of one arrow key over the whole counterexample, and of End.
The goal is under a second to open and a few milliseconds a step. Times are the median of 3 loads.

    .venv/bin/python bench/bench_report.py
"""

from __future__ import annotations

import contextlib
import io
import itertools
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from figures import record
from report_browser import chromium_driver, requests_made
from report_pages import page_data, stepped

from agentfsm.cli import main

ROOT = Path(__file__).resolve().parent.parent
STATES = 40
LAPS = 25
SYSTEMS = ["loom-with-tools", "vibework-with-user", "durable-run-fixed", "durable-run-as-it-was-pool",
           "durable-run-as-it-was-sqlite"]
STEP = """
const keys = (key, n) => { const t = performance.now();
  for (let k = 0; k < n; k++) document.dispatchEvent(new KeyboardEvent('keydown', {key, bubbles: true}));
  return performance.now() - t; };
const forward = keys('ArrowRight', arguments[0]);
keys('Home', 1);
return [forward / arguments[0], keys('End', 1), document.getElementById('position').textContent];
"""


def ring_table(states: int = STATES, laps: int = LAPS) -> str:
    """A ring of ``states`` states whose lap counter may not reach ``laps``: the shortest
    counterexample goes round ``laps`` times, ``states * laps`` steps."""
    names = [f"S{k:02d}" for k in range(states)]
    rows = [f"  - {{from: {a}, on: Next, to: {b}}}" for a, b in itertools.pairwise(names)]
    rows.append(f"  - {{from: {names[-1]}, on: Next, when: lap < {laps}, to: {names[0]}, set: {{lap: lap + 1}}}}")
    rows.append(f"  - {{from: {names[-1]}, on: Next, when: lap == {laps}, to: {names[-1]}}}")
    rows += [f"  - {{from: {name}, on: Poke, to: {name}, set: {{pokes: 1 - pokes}}}}" for name in names[::8]]
    return "\n".join([
        "format: 1", "machine: ring", "title: A ring of 40 states", "variables:",
        f"  lap: {{type: int, min: 0, max: {laps}, init: 0}}", "  pokes: {type: int, min: 0, max: 1, init: 0}",
        "states:", *(f"  {name}: {{initial: true}}" if k == 0 else f"  {name}: {{}}" for k, name in enumerate(names)),
        "events: {Next: {}, Poke: {}}", "transitions:", *rows,
        "invariants:", f"  - {{name: few-laps, expr: lap < {laps}}}", ""])


def measure(driver: Any, page: Path, fragment: str = "") -> tuple[float, int]:
    """Median milliseconds from navigation to the ``report-ready`` mark; requests other than the page's."""
    times = []
    stray = 0
    for _ in range(3):
        driver.get("about:blank")
        requests_made(driver)
        driver.get(page.as_uri() + fragment)
        times.append(driver.execute_script("return performance.getEntriesByName('report-ready')[0].startTime"))
        stray += len([url for url in requests_made(driver) if not url.startswith(page.as_uri())])
    return statistics.median(times), stray


def main_bench() -> int:
    with tempfile.TemporaryDirectory(prefix="agentfsm-report-bench-") as tmp:
        folder = Path(tmp)
        ring = folder / "ring.yaml"
        ring.write_text(ring_table())
        pages = {"ring": folder / "ring.html", "bundled": folder / "bundled.html"}
        with contextlib.redirect_stdout(io.StringIO()):  # the reports are in the pages
            assert main(["verify", str(ring), "--html", str(pages["ring"])]) == 1
            bundled = [*sorted(map(str, (ROOT / "spec").glob("*.yaml"))),
                       *(str(ROOT / "spec" / "systems" / f"{name}.yaml") for name in SYSTEMS)]
            assert main(["verify", *bundled, "--html", str(pages["bundled"])]) == 1
        data = page_data(pages["ring"])
        [(e, c)] = stepped(data)
        steps = len(data["entries"][e]["checks"][c]["trace"]["steps"])
        assert steps == STATES * LAPS, steps
        everything = page_data(pages["bundled"])
        checks = sum(len(entry["checks"]) for entry in everything["entries"])
        rows = []
        with chromium_driver() as driver:
            opened, stray = measure(driver, pages["ring"], f"#e{e}-c{c}-s0")
            per_step, end, where = driver.execute_script(STEP, steps)
            assert where == f"step {steps} of {steps}", where
            rows.append((f"ring: {STATES} states, a {steps:,}-step counterexample (viewer open)", pages["ring"],
                         opened, stray, f"{per_step:.2f} ms a step, End {end:.1f} ms"))
            opened, stray = measure(driver, pages["bundled"])
            rows.append((f"every bundled table and system: {len(everything['entries'])} entries, {checks} checks",
                         pages["bundled"], opened, stray, ""))
            e, c = max(stepped(everything),
                       key=lambda ec: len(everything["entries"][ec[0]]["checks"][ec[1]]["trace"]["steps"]))
            count = len(everything["entries"][e]["checks"][c]["trace"]["steps"])
            opened, stray = measure(driver, pages["bundled"], f"#e{e}-c{c}-s0")
            per_step, end, _ = driver.execute_script(STEP, count)
            rows.append((f"  the same, its longest counterexample open ({count} steps)", pages["bundled"], opened,
                         stray, f"{per_step:.2f} ms a step, End {end:.1f} ms"))
        sizes = [page.stat().st_size for _, page, _, _, _ in rows]
    print("| page | size | open (median of 3) | requests leaving | stepping |")
    print("|---|---|---|---|---|")
    recorded = []
    for (what, _, opened, stray, stepping), size in zip(rows, sizes, strict=True):
        print(f"| {what} | {size / 1024:,.0f} KiB | {opened:.0f} ms | {stray} | {stepping} |")
        recorded.append({"page": what.strip(), "size": f"{size / 1024:,.0f} KiB",
                         "open (median of 3)": f"{opened:.0f} ms", "requests leaving": stray, "stepping": stepping})
    record("report-pages", recorded, table="a 40-state ring and every bundled table and system",
           note="Headless Chromium; open is navigation to the report-ready mark.")
    return 0 if all(opened < 1000 and stray == 0 for _, _, opened, stray, _ in rows) else 1


if __name__ == "__main__":
    sys.exit(main_bench())
