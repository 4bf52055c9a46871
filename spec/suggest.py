""""Did you mean": the one place that turns an unknown name into a suggestion.

Every message about an unknown field, state, event, action, variable or command-line
option ends with the same clause, so a newcomer's typo (``Respondng``, ``ToolOK``) and a
habit from another library (``source``/``trigger``/``dest`` from ``transitions``,
``guard`` from XState) get the fix, not only the place.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping

# Spellings from other state-machine libraries, mapped to the field of a transition row.
FOREIGN_FIELDS: Mapping[str, str] = {
    "source": "from", "src": "from", "trigger": "on", "event": "on", "dest": "to", "target": "to",
    "destination": "to", "guard": "when", "cond": "when", "condition": "when", "conditions": "when",
    "unless": "when", "before": "emit", "after": "emit", "actions": "emit", "action": "emit", "do": "emit",
    "effects": "emit", "assign": "set", "update": "set", "transition": "transitions",
}


def _words(name: str) -> list[str]:
    return [w.lower() for w in re.findall(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])", name)]


def _alike_after_shared_words(name: str, candidate: str) -> bool:
    """Whether the two are still alike once the whole words they start with are set aside:
    ``max_lookups`` and ``max_tools`` share ``max_`` and nothing else, so neither is a typo
    of the other (``max_retrys`` and ``max_retries`` are)."""
    a, b = _words(name), _words(candidate)
    shared = 0
    while shared < min(len(a), len(b)) - 1 and a[shared] == b[shared]:
        shared += 1
    if shared == 0:
        return True
    rest_a, rest_b = "".join(a[shared:]), "".join(b[shared:])
    return difflib.SequenceMatcher(None, rest_a, rest_b).ratio() >= 0.6


def closest(name: str, known: Iterable[str]) -> str | None:
    """The known name most like ``name`` (case-insensitive), or None when none is close."""
    choices = sorted(set(known))
    if not choices or name in choices:
        return None
    folded = {c.lower(): c for c in choices}
    if name.lower() in folded:
        return folded[name.lower()]
    match = difflib.get_close_matches(name.lower(), list(folded), n=1, cutoff=0.6)
    if match and _alike_after_shared_words(name, folded[match[0]]):
        return folded[match[0]]
    longer = [c for c in folded if c.startswith(name.lower())] if len(name) >= 3 else []
    return folded[longer[0]] if len(longer) == 1 else None


def did_you_mean(name: str, known: Iterable[str], foreign: Mapping[str, str] | None = None) -> str:
    """``"; did you mean 'X'?"`` for the closest known name, or ``""``; ``foreign`` maps
    another library's word to ours and wins over spelling when it names a known field."""
    choices = set(known)
    alias = (foreign or {}).get(name.lower())
    if alias is not None and alias in choices:
        return f"; did you mean {alias!r}?"
    best = closest(name, choices)
    return f"; did you mean {best!r}?" if best is not None else ""
