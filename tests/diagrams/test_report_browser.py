"""The HTML report in a real browser: each counterexample of a failing table, a failing system and a
failing conformance run stepped by the buttons and the keyboard, checking at every step that the
highlighted state, the fired rows and the variables are the step's; and that no request leaves the page.

The expected values are the page's own data, which tests/diagrams/test_report_page.py holds to the reference
replay; here the question is whether the page shows them."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from report_browser import chromium_driver, requests_made
from report_pages import page_data, shared_pages, stepped

SHOT_DIR = os.environ.get("AGENTFSM_REPORT_SCREENSHOTS")
"""Where ``make report-screenshots`` has these tests save one picture of each kind (docs/report/)."""

READ = (Path(__file__).parent.parent / "browser" / "report-read.js").read_text(encoding="utf-8")
SNAPSHOT = READ + "return read();"
WALK = READ + """
const snapshots = [read()];
for (let s = 0; s < arguments[0]; s++) {
  document.dispatchEvent(new KeyboardEvent('keydown', {key: 'ArrowRight', bubbles: true}));
  snapshots.push(read());
}
return snapshots;
"""


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    with chromium_driver() as driver:
        yield driver


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return shared_pages(tmp_path_factory)


def _open(browser: Any, page: Path, e: int, c: int) -> None:
    browser.get("about:blank")
    requests_made(browser)
    browser.get(f"{page.as_uri()}#e{e}-c{c}-s0")
    assert browser.execute_script("return document.body.getAttribute('data-ready')") == "true"


def _key(browser: Any, key: str) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys
    ActionChains(browser).send_keys(getattr(Keys, key)).perform()


def _check_table_step(shown: dict[str, Any], entry: dict[str, Any], trace: dict[str, Any], s: int) -> None:
    now = trace["initial"] if s == 0 else trace["steps"][s - 1]
    before = None if s == 0 else (trace["initial"] if s == 1 else trace["steps"][s - 2])
    rows = [] if s == 0 else now["rows"]
    assert shown["current"] == [now["state"]] and shown["label"] == 1
    assert f"Current state: {now['state']}." in shown["status"]
    assert shown["tableRows"] == sorted(rows) and shown["firedText"] == ["◀ fired at this step"] * len(rows)
    assert set(rows) <= set(shown["svgRows"])
    names = ["state", *entry["variables"]]
    values = [now["state"], *now["vars"]]
    assert [(n, v) for n, v, _ in shown["vars"]] == list(zip(names, values, strict=True))
    if before is not None:
        was = [before["state"], *before["vars"]]
        assert [c for _, _, c in shown["vars"]] == [f"changed (was {w})" if w != v else ""
                                                    for v, w in zip(values, was, strict=True)]


def _step_through(browser: Any, page: Path, check: Any, e: int, c: int, entry: dict[str, Any]) -> None:
    trace = check["trace"]
    count = len(trace["steps"])
    _open(browser, page, e, c)
    # One call walks the whole trace (a keydown per step, as the arrow key sends); the real keys follow.
    for s, shown in enumerate(browser.execute_script(WALK, count)):
        assert shown["hash"] == f"#e{e}-c{c}-s{s}" and shown["position"] == f"step {s} of {count}"
        if trace["kind"] == "system":
            _check_system_step(shown, trace, s)
        else:
            _check_table_step(shown, entry, trace, s)
        if trace["kind"] == "vector" and s == count:
            assert any("✗ differs" in row[2] for row in shown["compare"])
    _key(browser, "ARROW_RIGHT")
    assert browser.execute_script(SNAPSHOT)["position"] == f"step {count} of {count}"  # the end holds
    _key(browser, "ARROW_LEFT")
    assert browser.execute_script(SNAPSHOT)["hash"] == f"#e{e}-c{c}-s{count - 1}"
    _key(browser, "HOME")
    assert browser.execute_script(SNAPSHOT)["hash"] == f"#e{e}-c{c}-s0"
    _key(browser, "END")
    assert browser.execute_script(SNAPSHOT)["hash"] == f"#e{e}-c{c}-s{count}"
    browser.find_element("id", "back").click()
    assert browser.execute_script(SNAPSHOT)["position"] == f"step {count - 1} of {count}"
    browser.find_element("id", "first").click()
    assert browser.execute_script(SNAPSHOT)["position"] == f"step 0 of {count}"
    assert [url for url in requests_made(browser) if url != page.as_uri()] == []


def _check_system_step(shown: dict[str, Any], trace: dict[str, Any], s: int) -> None:
    insts = trace["initial"] if s == 0 else trace["steps"][s - 1]["instances"]
    was = insts if s == 0 else (trace["initial"] if s == 1 else trace["steps"][s - 2]["instances"])
    for column, name, inst, old in zip(shown["instances"], trace["lifelines"], insts, was, strict=True):
        assert column["name"] == name
        assert column["state"] == inst["state"] + (" (stalled)" if inst["stalled"] else "")
        assert column["mailbox"] == (", ".join(inst["mailbox"]) or "empty")
        assert column["vars"] == inst["vars"]
        assert column["changes"] == [f"changed (was {w})" if w != v else "" for v, w in zip(inst["vars"], old["vars"],
                                                                                              strict=True)]
    if s == 0:
        assert shown["now"] == [] and shown["status"].startswith("Initial configuration.")
        return
    step = trace["steps"][s - 1]
    assert set(shown["now"]) == {s} and len(shown["now"]) == len(step["items"])
    assert shown["later"] == sum(len(t["items"]) for t in trace["steps"][s:])
    acting = [column["acting"] for column in shown["instances"] if column["acting"]]
    assert acting == (["⚠ fault at this step"] if step["fault"] else ["▶ acts at this step"])
    assert ("⚠ FAULT: " in shown["status"]) == step["fault"]


@pytest.mark.parametrize("kind", ["table", "system", "conform"])
def test_every_counterexample_steps_as_its_trace(browser: Any, pages: dict[str, Path], kind: str) -> None:
    page = pages[kind]
    data = page_data(page)
    found = stepped(data)
    assert found, f"the {kind} page has no counterexample"
    for e, c in found:
        entry = data["entries"][e]
        _step_through(browser, page, entry["checks"][c], e, c, entry)
    if kind == "system":
        assert any(step["fault"] for e, c in found for step in data["entries"][e]["checks"][c]["trace"]["steps"])
    if SHOT_DIR:
        _screenshot(browser, page, found[0], Path(SHOT_DIR) / f"report-{kind}.png")


def test_summary_lists_failures_first_with_links(browser: Any, pages: dict[str, Path]) -> None:
    browser.get(pages["table"].as_uri())
    marks = browser.execute_script(
        "return [...document.querySelectorAll('.checks li .mark')].map((m) => m.textContent)")
    assert marks[:2] == ["✗ FAIL", "✗ FAIL"] and set(marks[2:]) == {"✓ ok"}
    assert browser.find_element("id", "viewer").get_attribute("hidden") is not None
    browser.find_element("css selector", "a.open").click()
    assert browser.execute_script("return location.hash") == "#e0-c0-s0"
    assert not browser.find_element("id", "viewer").get_attribute("hidden")
    if SHOT_DIR:
        browser.get(pages["table"].as_uri())
        browser.save_screenshot(str(Path(SHOT_DIR) / "report-summary.png"))


def test_coverage_overlay_switches_on_and_off(browser: Any, pages: dict[str, Path]) -> None:
    data = page_data(pages["table"])
    [(e, c), *_] = stepped(data)
    coverage = data["entries"][e]["coverage"]
    _open(browser, pages["table"], e, c)
    visible = "return [...document.querySelectorAll('#rows td.cover')].map((td) => td.offsetParent !== null)"
    assert not any(browser.execute_script(visible))
    browser.find_element("id", "coverage").click()
    assert all(browser.execute_script(visible))
    texts = browser.execute_script("return [...document.querySelectorAll('#rows tbody td.cover')]"
                                   ".map((td) => td.textContent)")
    assert texts == [f"fired ×{n}" if n else "never fired" for n in coverage.values()]
    browser.find_element("id", "coverage").click()
    assert not any(browser.execute_script(visible))


def _screenshot(browser: Any, page: Path, where: tuple[int, int], path: Path) -> None:
    e, c = where
    count = len(page_data(page)["entries"][e]["checks"][c]["trace"]["steps"])
    _open(browser, page, e, c)
    browser.get(f"{page.as_uri()}#e{e}-c{c}-s{count if 'conform' in path.name else min(count, 3)}")
    browser.set_window_size(1400, 1500)
    browser.execute_script("document.getElementById('viewer').scrollIntoView()")
    path.parent.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(path))
    browser.set_window_size(1400, 1000)
