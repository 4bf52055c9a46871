"""Headless Chromium for the tests that look at pictures the way a reader's browser draws them.

A page computes its verdict and writes it, as JSON, into ``<pre id="result">``; Chromium
prints the DOM once the page's scripts have settled (``--dump-dom`` with a virtual time
budget), and the verdict is read from there. Every run gets a fresh profile directory and
the flags that keep Chromium off the network.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--allow-file-access-from-files", "--virtual-time-budget=60000"]
_RESULT = re.compile(r'<pre id="result">(.*?)</pre>', re.S)


def chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.skip("Chromium is not installed (scripts/setup.sh installs it as root)")
    return exe


def page_result(page: str) -> Any:
    """Load ``page`` (HTML text) in headless Chromium; the JSON its script left in ``#result``."""
    exe = chromium()
    with tempfile.TemporaryDirectory(prefix="agentfsm-chromium-") as tmp:
        path = Path(tmp) / "page.html"
        path.write_text(page, encoding="utf-8")
        proc = subprocess.run([exe, *FLAGS, f"--user-data-dir={Path(tmp) / 'profile'}", "--dump-dom",
                               path.as_uri()], capture_output=True, text=True, timeout=180, check=False)
    match = _RESULT.search(proc.stdout)
    assert proc.returncode == 0 and match, f"Chromium failed (exit {proc.returncode}): {proc.stderr[-2000:]}"
    text = html.unescape(match.group(1))
    assert text != "pending", "the page's script did not finish"
    return json.loads(text)
