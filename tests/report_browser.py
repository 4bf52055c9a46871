"""One headless Chromium driven by Selenium (Debian's chromium-driver, no browser download), kept
off the network, with its requests logged so a test can say that none left the page."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--window-size=1400,1000"]


@contextmanager
def chromium_driver() -> Iterator[Any]:
    """A Selenium WebDriver on headless Chromium with a fresh profile; skips where either is missing."""
    selenium = pytest.importorskip("selenium.webdriver")
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver_exe = shutil.which("chromedriver")
    if browser is None or driver_exe is None:
        pytest.skip("Chromium or chromedriver is not installed (scripts/setup.sh installs both as root)")
    with tempfile.TemporaryDirectory(prefix="agentfsm-selenium-") as profile:
        options = selenium.ChromeOptions()
        options.binary_location = browser
        for flag in [*FLAGS, f"--user-data-dir={profile}"]:
            options.add_argument(flag)
        options.set_capability("goog:loggingPrefs", {"performance": "ALL"})
        service = selenium.ChromeService(executable_path=driver_exe)
        driver = selenium.Chrome(options=options, service=service)
        try:
            yield driver
        finally:
            driver.quit()


def requests_made(driver: Any) -> list[str]:
    """The URLs of every request the browser sent since the last call (the performance log)."""
    urls = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message.get("method") == "Network.requestWillBeSent":
            urls.append(str(message["params"]["request"]["url"]))
    return urls
