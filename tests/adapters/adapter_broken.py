"""Test-only adapters that break the protocol in one way each, after a correct reset.

Usage: adapter_broken.py MODE. MODE is one of: hang, hang-child (hangs with a child
process holding stdout), crash (stderr message, exit 3), garbage (non-JSON reply),
no-ok (JSON without "ok"), twice (answers each event twice: replies fall out of order),
late (answers a reset with an event-shaped reply), exit-at-start, unsupported (every
event answered {"ok": false}).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time


def reply(message: dict[str, object]) -> None:
    print(json.dumps(message), flush=True)


def main(mode: str) -> int:
    if mode == "exit-at-start":
        print("adapter: cannot open model file", file=sys.stderr, flush=True)
        return 4
    event_reply = {"ok": True, "accepted": True, "state": "CallingLlm", "actions": ["SendLlmRequest"]}
    for line in sys.stdin:
        request = json.loads(line)
        op = request["op"]
        if op == "quit":
            return 0
        if op == "reset":
            if mode == "late":
                reply(event_reply)
            else:
                reply({"ok": True, "state": "WaitingForUserInput"})
            continue
        if mode == "hang":
            time.sleep(3600)
        elif mode == "hang-child":
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(3600)"])
            print(f"child {child.pid}", file=sys.stderr, flush=True)
            time.sleep(3600)
        elif mode == "crash":
            print("panic: index out of range in step()", file=sys.stderr, flush=True)
            return 3
        elif mode == "garbage":
            print("<html>502 Bad Gateway</html>", flush=True)
        elif mode == "no-ok":
            reply({"state": "CallingLlm"})
        elif mode == "twice":
            reply(event_reply)
            reply(event_reply)
        elif mode == "unsupported":
            reply({"ok": False, "error": f"event {request['event']} is not supported"})
        else:
            reply(event_reply)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
