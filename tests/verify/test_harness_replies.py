"""Each reply check of the conformance harness, on its own: a reply that is not JSON, not an
object, has no boolean ``ok``, or lacks a field the protocol requires for its request
(docs/conformance.md) is named exactly, with an excerpt of the reply. The in-process
transports and ``WithoutVars`` pass requests, replies and ``quit`` through unchanged."""

from __future__ import annotations

import json
from typing import Any

import pytest
from agentfsm.verify.conformance import harness
from agentfsm.verify.conformance.harness import (
    MAX_LINE,
    AdapterDidNotStart,
    AdapterFailure,
    FunctionTransport,
    Message,
    Observation,
    Session,
    Unsupported,
    WithoutVars,
    parse_many,
    parse_reply,
)
from conftest import ROOT


def failing(kind: str, message: str) -> AdapterFailure:
    return AdapterFailure(kind, message)


def garbled(line: bytes) -> str:
    with pytest.raises(AdapterFailure) as caught:
        parse_reply(line, failing)
    assert caught.value.kind == "garbled"
    return caught.value.message


def test_parse_reply_names_each_fault_with_an_excerpt() -> None:
    assert garbled(b"<html>\n") == "reply is not JSON: '<html>'"
    assert garbled(b"[1, 2]\n") == "reply is not a JSON object: '[1, 2]'"
    assert garbled(b'{"state": "S"}\n') == "reply has no boolean 'ok': '{\"state\": \"S\"}'"
    assert garbled(b'{"ok": 1}') == "reply has no boolean 'ok': '{\"ok\": 1}'"
    assert parse_reply(b'{"ok": false, "error": "no"}\n', failing) == {"ok": False, "error": "no"}


def test_an_excerpt_keeps_120_characters() -> None:
    assert garbled(b"x" * 120) == f"reply is not JSON: '{'x' * 120}'"
    assert garbled(b"y" * 121) == f"reply is not JSON: '{'y' * 120}...'"


def test_parse_many_keeps_a_line_that_is_not_one_json_object_raw() -> None:
    two_on_one_line = b'{"ok": true},{"ok": true}'
    assert parse_many([two_on_one_line, b'{"ok": false}']) == [two_on_one_line, {"ok": False}]
    assert parse_many([b'{"ok": true}', b"[1]", b"oops"]) == [{"ok": True}, b"[1]", b"oops"]
    assert parse_many([b'{"ok": true}', b'{"ok": false}']) == [{"ok": True}, {"ok": False}]
    assert parse_many([b"1"]) == [b"1"]


def test_parse_many_takes_each_line_for_itself() -> None:
    # Joined with a comma, these two lines read as two objects; neither is one on its own line.
    first, second = b'{"ok":true,"state":"A"},{"ok":true', b'"state":"B"}'
    assert parse_many([first, second]) == [first, second]
    assert parse_many([b'{"ok":true', b'"state":"B"}', b'{"ok":false}']) == [b'{"ok":true', b'"state":"B"}',
                                                                           {"ok": False}]
    assert parse_many([b'{"ok":true}']) == [{"ok": True}]
    assert parse_many([b'{"ok":true}x', b'{"ok":true}{"ok":true}']) == [b'{"ok":true}x', b'{"ok":true}{"ok":true}']


def test_parse_many_remembers_the_objects_of_lines_it_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    known: dict[bytes, Message] = {}
    first = parse_many([b'{"ok":true}', b"oops", b'{"ok":true}'], known)
    assert first == [{"ok": True}, b"oops", {"ok": True}] and first[0] is first[2]
    assert known == {b'{"ok":true}': {"ok": True}}
    assert parse_many([b'{"ok":true}'], known)[0] is first[0]
    monkeypatch.setattr(harness, "MEMO_LINES", 2)
    assert parse_many([b'{"ok":false}', b'{"ok":true,"n":1}'], known) == [{"ok": False}, {"ok": True, "n": 1}]
    assert list(known) == [b'{"ok":true}', b'{"ok":false}']


def test_parse_many_allows_json_whitespace_around_the_object() -> None:
    assert parse_many([b'{"ok":true}\r', b' \t{"ok":false} ']) == [{"ok": True}, {"ok": False}]
    assert parse_reply(b' {"ok": true}\r\n', failing) == {"ok": True}


def test_a_reply_nested_too_deep_to_parse_is_not_json() -> None:
    deep = b"[" * 100000
    assert parse_many([deep, b'{"ok":true}']) == [deep, {"ok": True}]
    assert garbled(deep) == f"reply is not JSON: '{'[' * 120}...'"


def test_parse_many_leaves_a_line_over_max_line_raw_and_takes_one_at_the_limit() -> None:
    head = b'{"ok":true,"pad":"'
    at_limit = head + b"x" * (MAX_LINE - len(head) - 2) + b'"}'
    over = head + b"x" * (MAX_LINE - len(head) - 1) + b'"}'
    assert (len(at_limit), len(over)) == (MAX_LINE, MAX_LINE + 1)
    [parsed, raw] = parse_many([at_limit, over])
    assert isinstance(parsed, dict) and len(parsed["pad"]) == MAX_LINE - len(head) - 2
    assert raw is over


class Scripted:
    """An in-process implementation answering with canned replies; records the requests it got."""

    def __init__(self, *replies: Message) -> None:
        self.replies = list(replies)
        self.requests: list[Message] = []

    def __call__(self, request: Message) -> Message:
        self.requests.append(request)
        return self.replies.pop(0) if request["op"] != "quit" else {"ok": True}


def protocol_failure(op: str, reply: Message) -> str:
    session = Session(FunctionTransport(Scripted(reply)))
    with pytest.raises(AdapterFailure) as caught:
        if op == "reset":
            session.reset("m")
        else:
            session.event("Go", {})
    assert (caught.value.kind, caught.value.stderr) == ("protocol", "")
    return caught.value.message


VARS = "has 'vars' that is not an object of integers and booleans"
EVENT = {"ok": True, "state": "S", "accepted": True, "actions": ["A"]}


@pytest.mark.parametrize(("op", "reply", "what"), [
    ("reset", {"ok": True}, "has no string 'state'"),
    ("event", {**EVENT, "state": 3}, "has no string 'state'"),
    ("reset", {"ok": True, "state": "S", "vars": {"n": "1"}}, VARS),
    ("reset", {"ok": True, "state": "S", "vars": [1]}, VARS),
    ("event", {**EVENT, "vars": {"n": 1.5}}, VARS),
    ("reset", {"ok": True, "state": "S", "accepted": True}, "looks like a reply to an event (a reply out of order?)"),
    ("reset", {"ok": True, "state": "S", "actions": []}, "looks like a reply to an event (a reply out of order?)"),
    ("event", {"ok": True, "state": "S", "actions": []}, "has no boolean 'accepted' (a reply out of order?)"),
    ("event", {**EVENT, "accepted": "yes"}, "has no boolean 'accepted' (a reply out of order?)"),
    ("event", {**EVENT, "actions": "A"}, "has no 'actions' list of strings"),
    ("event", {**EVENT, "actions": ["A", 1]}, "has no 'actions' list of strings"),
])
def test_each_reply_shape_fault_is_named(op: str, reply: Message, what: str) -> None:
    assert protocol_failure(op, reply) == f"reply to {op!r} {what}: {json.dumps(reply)}"


def test_a_long_reply_is_cut_to_200_characters_in_the_failure() -> None:
    reply = {**EVENT, "actions": "A" * 300}
    assert protocol_failure("event", reply) == \
        f"reply to 'event' has no 'actions' list of strings: {json.dumps(reply)[:200]}"


def test_well_formed_replies_become_observations() -> None:
    handler = Scripted({"ok": True, "state": "Idle", "vars": {"n": 0, "b": True}},
                       {"ok": True, "state": "Busy", "accepted": False, "actions": ["A", "B"]},
                       {"ok": False, "error": "no such event"})
    session = Session(FunctionTransport(handler))
    assert session.reset("m") == Observation("Idle", vars={"n": 0, "b": True})
    assert session.event("Go", {"x": 1}) == Observation("Busy", False, ("A", "B"))
    assert session.event("Nope", {}) == Unsupported("no such event")
    session.close()
    assert handler.requests == [{"op": "reset", "machine": "m"}, {"op": "event", "event": "Go", "params": {"x": 1}},
                                {"op": "event", "event": "Nope", "params": {}}, {"op": "quit"}]


def test_function_transport_pipelines_and_checks_ok() -> None:
    transport = FunctionTransport(Scripted({"ok": True, "state": "A"}, {"ok": True, "state": "B"}, {"state": "C"}))
    transport.send([{"op": "reset", "machine": "m"}, {"op": "reset", "machine": "m"}])
    assert [transport.receive(), transport.receive()] == [{"ok": True, "state": "A"}, {"ok": True, "state": "B"}]
    with pytest.raises(AdapterFailure) as caught:
        transport.request({"op": "reset", "machine": "m"})
    assert (caught.value.kind, caught.value.message) == ("garbled", "reply has no boolean 'ok': '{\"state\": \"C\"}'")
    assert transport.stray(1.0) is None


class Pending:
    """A transport with one reply nobody asked for waiting; records what reaches it."""

    def __init__(self) -> None:
        self.sent: list[Any] = []
        self.closed = False

    def send(self, messages: Any, lines: Any = None) -> None:
        self.sent.append((messages, lines))

    def receive(self) -> Message:
        return {"ok": True, "state": "S", "vars": {"n": 1}}

    def request(self, message: Message) -> Message:
        raise AssertionError("WithoutVars sends and receives itself")

    def stray(self, wait: float) -> str | None:
        return f"late reply (waited {wait})"

    def close(self) -> None:
        self.closed = True


def test_without_vars_drops_vars_and_passes_the_rest_through() -> None:
    inner = Pending()
    transport = WithoutVars(inner)
    transport.send([{"op": "reset"}], [b"line\n"])
    assert inner.sent == [([{"op": "reset"}], [b"line\n"])]
    assert transport.receive() == {"ok": True, "state": "S"}
    assert transport.request({"op": "reset", "machine": "m"}) == {"ok": True, "state": "S"}
    assert inner.sent[-1] == ([{"op": "reset", "machine": "m"}], None)
    assert transport.stray(0.5) == "late reply (waited 0.5)"
    transport.close()
    assert inner.closed


def test_without_vars_leaves_the_inner_reply_as_it_was() -> None:
    reply: Message = {"ok": True, "state": "S", "vars": {"n": 1}}

    class Remembered(Pending):
        def receive(self) -> Message:
            return reply
    assert WithoutVars(Remembered()).receive() == {"ok": True, "state": "S"}
    assert reply == {"ok": True, "state": "S", "vars": {"n": 1}}


def test_without_vars_over_an_in_process_implementation() -> None:
    handler = Scripted({"ok": True, "state": "S", "vars": {"n": 2}})
    session = Session(WithoutVars(FunctionTransport(handler)))
    assert session.reset("m") == Observation("S")
    session.close()
    assert handler.requests[-1] == {"op": "quit"}


def test_a_failure_reads_as_its_message() -> None:
    failure = AdapterFailure("timeout", "no reply within 1 s", "last words")
    assert str(failure) == "no reply within 1 s"
    assert failure.describe() == "timeout: no reply within 1 s\n  adapter stderr (last lines):\n    last words"


@pytest.mark.parametrize(("kind", "how"), [("start", "could not be started"), ("exited", "exited")])
def test_an_adapter_that_did_not_start_says_how_and_carries_its_failure(kind: str, how: str) -> None:
    failure = AdapterFailure(kind, "no such file: nosuch", "last words")
    error = AdapterDidNotStart(failure)
    assert error.args == ("no such file: nosuch",) and error.failure is failure
    assert error.describe() == (f"the adapter never answered its first reset (it {how}), so no vector was judged: "
                                f"check the command and what it needs\n  {kind}: no such file: nosuch\n"
                                "  adapter stderr (last lines):\n    last words")


def test_the_docs_say_how_many_reply_lines_a_transport_remembers() -> None:
    text = " ".join((ROOT / "docs" / "conformance.md").read_text(encoding="utf-8").split())
    assert f"remembers up to {harness.MEMO_LINES:,} lines" in text
