"""The HTML report as one self-contained file: the data as JSON, the script and style inline.

Nothing is fetched: a Content-Security-Policy of ``default-src 'none'`` lets the page run only
its own script (by hash) and styles, so it opens the same from a CI artifact or ``file://`` and
cannot reach the network even through a picture's markup. The page's script draws everything
from the JSON (``<script type="application/json">``), so a long counterexample costs its data,
not its markup.
"""

from __future__ import annotations

import base64
import hashlib
import json
from html import escape
from importlib import resources
from typing import Any

from agentfsm.diagrams.dot import to_dot
from agentfsm.diagrams.model import build
from agentfsm.diagrams.render import svg
from agentfsm.diagrams.report_svg import tag_svg
from agentfsm.spec.model import Table


def _asset(name: str) -> str:
    return resources.files("agentfsm.diagrams").joinpath(name).read_text(encoding="utf-8")


def table_picture(table: Table) -> str:
    """The compact picture of ``table`` (row numbers on the arrows), drawn by Graphviz and tagged."""
    diagram = build(table)
    return tag_svg(svg(to_dot(diagram, "TB", compact=True), table.machine).decode(), diagram)


def embedded_json(data: Any) -> str:
    """``data`` as JSON that cannot end its ``<script>`` element (every ``<`` escaped)."""
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False).replace("<", "\\u003c")


def policy(script: str) -> str:
    digest = base64.b64encode(hashlib.sha256(script.encode()).digest()).decode()
    return f"default-src 'none'; script-src 'sha256-{digest}'; style-src 'unsafe-inline'; img-src data:"


def html_page(data: dict[str, Any]) -> bytes:
    """The page of one run (``data`` from :func:`agentfsm.diagrams.report_data.page_data`)."""
    script = _asset("report.js")
    title = f"agentfsm {data['command']}: {'ok' if data['ok'] else 'FAILED'}"
    page = f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{escape(policy(script), quote=False)}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>{escape(title)}</title>
<style>
{_asset("report.css")}</style>
</head>
<body>
<header><h1>{escape(title)}</h1><p id="verdict"></p>
<noscript><p>This report draws its contents with JavaScript; the command's --json output holds the same results.</p>
</noscript>
</header>
<main id="summary"></main>
<section id="viewer" hidden aria-label="counterexample"></section>
<script type="application/json" id="report-data">{embedded_json(data)}</script>
<script>{script}</script>
</body>
</html>
"""
    return page.encode()
