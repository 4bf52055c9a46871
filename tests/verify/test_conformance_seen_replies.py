"""Replies passed as seen: a vector whose reply lines all equal lines that passed the same
expectations before passes without a line parsed or judged (``ProcessTransport.take_if`` of ``Requests.passed_lines``).

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
from agentfsm.verify.conformance.conform import Runner
from agentfsm.verify.conformance.harness import AdapterFailure, ProcessTransport
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
    take_if = ProcessTransport.take_if
    fast = 0

    def counted(self: ProcessTransport, lines: list[bytes | None]) -> bool:
        nonlocal fast
        taken = take_if(self, lines)
        fast += taken
        return taken

    monkeypatch.setattr(ProcessTransport, "take_if", counted)
    quick = Runner(loom, lambda: ProcessTransport(argv, 10.0)).run(vectors)
    monkeypatch.setattr(ProcessTransport, "take_if", lambda *_: False)
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


class Watched(ProcessTransport):
    """A process transport that counts the waits begun after a wait for a reply timed out."""

    waits_after_timeout = 0

    def _pump(self, wait: float) -> bool:
        if self.overdue and wait > 0:
            Watched.waits_after_timeout += 1
        return super()._pump(wait)


@pytest.mark.parametrize("then", ["hang", "exit"])
def test_a_reply_missing_from_a_vector_passed_before_fails_at_its_step(loom: Table, vectors: list[Vector],
                                                                      then: str) -> None:
    """The same vector twice; the second time the adapter stops before its last reply. The failure
    names that step, as full judging does, and a timed-out wait is not waited again."""
    vector = next(v for v in vectors if len(v.steps) >= 3)
    stop = "import time; time.sleep(60)" if then == "hang" else "sys.exit(3)"
    script = "\n".join([
        "import json, subprocess, sys",
        f"inner = subprocess.Popen({semantics_adapter()!r}, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)",
        "for n, line in enumerate(sys.stdin):",
        f"    if n == 2 * {len(vector.steps) + 1} - 1:",
        f"        {stop}",
        "    inner.stdin.write(line); inner.stdin.flush()",
        "    print(inner.stdout.readline(), end='', flush=True)",
    ])
    Watched.waits_after_timeout = 0
    report = Runner(loom, lambda: Watched([sys.executable, "-c", script], 1.0)).run([vector, vector])
    assert [r.status for r in report.results] == ["pass", "fail"]
    kind = "timeout" if then == "hang" else "exited"
    assert report.results[1].message.startswith(f"step {len(vector.steps)} ")
    assert f": {kind}: " in report.results[1].message
    assert Watched.waits_after_timeout == 0


@pytest.mark.parametrize(("then", "kind"), [("sys.exit(3)", "exited"), ("import time; time.sleep(60)", "timeout")])
def test_take_if_leaves_the_lines_it_did_not_take_for_receive(then: str, kind: str) -> None:
    """Two replies of three come: ``take_if`` says False (never raises) and takes nothing; the two
    replies are then received, and the third fails the adapter as its absence does."""
    script = "\n".join([
        "import sys",
        "for n, line in enumerate(sys.stdin):",
        "    print('{\"ok\":true,\"n\":%d}' % n, flush=True)",
        "    if n == 1:",
        f"        {then}",
    ])
    transport = ProcessTransport([sys.executable, "-c", script], 1.0)
    try:
        transport.send([{"op": "a"}, {"op": "b"}, {"op": "c"}])
        first, second = b'{"ok":true,"n":0}', b'{"ok":true,"n":1}'
        assert transport.take_if([first, second, b'{"ok":true,"n":2}']) is False
        assert transport.take_if([first, b"other"]) is False
        assert [transport.receive()["n"], transport.receive()["n"]] == [0, 1]
        with pytest.raises(AdapterFailure) as failure:
            transport.receive()
        assert failure.value.kind == kind
    finally:
        transport.kill()


def test_take_if_takes_matching_lines_unparsed() -> None:
    script = ("import sys\nfor n, line in enumerate(sys.stdin):\n"
              "    print('{\"ok\": true, \"n\": %d}' % n, flush=True)\n")
    transport = ProcessTransport([sys.executable, "-c", script], 5.0)
    first, second = b'{"ok": true, "n": 0}', b'{"ok": true, "n": 1}'
    try:
        transport.send([{"op": "a"}, {"op": "b"}, {"op": "c"}])
        assert transport.take_if([None, second]) is False
        assert transport.take_if([first, second]) is True
        assert transport.last_line == second and transport.known == {}
        assert transport.receive() == {"ok": True, "n": 2}
    finally:
        transport.kill()
