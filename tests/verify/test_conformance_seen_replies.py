"""Replies passed as seen: a vector whose reply lines all equal lines that passed the same
expectations before passes without a line parsed or judged (``Requests.passed_before``).

The report must be the one full judging gives, for a faithful adapter and for planted
faults, the one that shows only after some history included (the same expectation then
gets a line it passed with before, and later another one). A reply line that differs
from the one remembered is judged in full, so a fault right after a run of passes is
still caught at its step.
"""

from __future__ import annotations

import sys
from itertools import islice

import pytest
from agentfsm.spec import Table
from agentfsm.spec.vectorfile import Vector
from agentfsm.verify.conformance import conform
from agentfsm.verify.conformance.conform import Runner
from agentfsm.verify.conformance.harness import ProcessTransport
from agentfsm.verify.conformance.vectors import generate_extended
from conformance_helpers import semantics_adapter
from test_conformance_parallel import summary

FAULTS = [None, "stream-history", "retry-kept", "silent-text"]


@pytest.fixture(scope="module")
def vectors(loom: Table) -> list[Vector]:
    """The default vectors, then extension vectors (one extra state), which share their steps."""
    made = generate_extended(loom, extra_states=1)[1]
    return [*made.made[:1500], *islice(iter(made), len(made.made), len(made.made) + 1500)]


@pytest.mark.parametrize("fault", FAULTS)
def test_passing_as_seen_reports_what_full_judging_does(loom: Table, vectors: list[Vector], fault: str | None,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    argv = semantics_adapter(*(("--fault", fault) if fault else ()))
    seen = conform.Requests.passed_before
    fast = 0

    def counted(self: conform.Requests, transport: ProcessTransport, vector: Vector) -> bool:
        nonlocal fast
        passed = seen(self, transport, vector)
        fast += passed
        return passed

    monkeypatch.setattr(conform.Requests, "passed_before", counted)
    quick = Runner(loom, lambda: ProcessTransport(argv, 10.0)).run(vectors)
    monkeypatch.setattr(conform.Requests, "passed_before", lambda *_: False)
    full = Runner(loom, lambda: ProcessTransport(argv, 10.0)).run(vectors)
    assert summary(quick) == summary(full)
    assert quick.ok == (fault is None)
    assert fast > len(vectors) // 2   # most vectors were passed as seen


def test_a_line_that_differs_from_the_one_that_passed_is_judged(loom: Table, vectors: list[Vector]) -> None:
    """The same vector twice, on an adapter that answers its last step differently the second time."""
    vector = next(v for v in vectors if len(v.steps) >= 3)
    script = "\n".join([
        "import json, subprocess, sys",
        f"inner = subprocess.Popen({semantics_adapter()!r}, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)",
        "for n, line in enumerate(sys.stdin):",
        "    inner.stdin.write(line); inner.stdin.flush()",
        "    reply = json.loads(inner.stdout.readline())",
        f"    if n == 2 * {len(vector.steps) + 1} - 1:",
        "        reply['state'] = 'Elsewhere'",
        "    print(json.dumps(reply), flush=True)",
    ])
    report = Runner(loom, lambda: ProcessTransport([sys.executable, "-c", script], 10.0)).run([vector, vector])
    assert [r.status for r in report.results] == ["pass", "fail"]
    assert report.results[1].message.startswith(f"step {len(vector.steps)} ")
    assert "state: expected" in report.results[1].message
