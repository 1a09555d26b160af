"""Reading a headless session's JSON-lines events (``pi-actors --mode json``, pi's shapes)
into the pieces of a :class:`SessionOutcome`, and telling an infrastructure error from the
agent's own.

Pure logic, no I/O: :class:`EventFold` takes one decoded event at a time and never raises
for an event it does not know (newer CLIs may add kinds); a malformed *line* is the
caller's to judge.
"""

from __future__ import annotations

import re
from typing import Any

from ._api import ErrorKind

__all__ = ["EventFold", "classify_model_error"]

#: Model errors that are the infrastructure's, not the agent's: the server could not be
#: reached or dropped the connection, timed out, rate-limited us, or failed (5xx).
_INFRA_ERROR = re.compile(
    r"^(connection error|connection (refused|reset)|request timed out|timed? ?out|"
    r"(429|500|502|503|504|529)\b|overloaded|rate limit|server error|network error|terminated)",
    re.IGNORECASE,
)

_USAGE_KEYS = ("input", "output", "cacheRead", "cacheWrite", "totalTokens")


def classify_model_error(message: str) -> ErrorKind:
    """``infra`` for a model error the infrastructure caused (``_INFRA_ERROR``: connection
    failures, timeouts, 429, 5xx, overload), else ``agent`` (the model refused or answered
    with a client error such as 400: running it again would fail the same way)."""
    return "infra" if _INFRA_ERROR.search(message.strip()) else "agent"


class EventFold:
    """What the events of one session said so far.

    ``session_id``: from the ``session`` header; ``turns``: ``turn_start`` events;
    ``runs_ended``: ``agent_end`` events (one per prompt); ``usage``/``cost``: summed over
    every assistant ``message_end``; ``last``: the last assistant message."""

    def __init__(self) -> None:
        self.session_id: str | None = None
        self.turns = 0
        self.runs_ended = 0
        self.usage: dict[str, int] = dict.fromkeys(_USAGE_KEYS, 0)
        self.cost = 0.0
        self.last: dict[str, Any] | None = None

    def feed(self, event: Any) -> None:
        """Take one decoded event (anything: a non-object or unknown kind is ignored)."""
        if not isinstance(event, dict):
            return
        kind = event.get("type")
        if kind == "session" and isinstance(event.get("id"), str):
            self.session_id = event["id"]
        elif kind == "turn_start":
            self.turns += 1
        elif kind == "agent_end":
            self.runs_ended += 1
        elif kind == "message_end":
            message = event.get("message")
            if isinstance(message, dict) and message.get("role") == "assistant":
                self.last = message
                self._add_usage(message.get("usage"))

    def _add_usage(self, usage: Any) -> None:
        if not isinstance(usage, dict):
            return
        for key in _USAGE_KEYS:
            value = usage.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                self.usage[key] += value
        cost = usage.get("cost")
        total = cost.get("total") if isinstance(cost, dict) else None
        if isinstance(total, (int, float)) and not isinstance(total, bool):
            self.cost += float(total)

    @property
    def text(self) -> str:
        """The text parts of the last assistant message, joined."""
        content = (self.last or {}).get("content")
        if not isinstance(content, list):
            return ""
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text")

    def model_error(self) -> tuple[ErrorKind, str] | None:
        """The last reply's error (kind and message) if it ended in error or was aborted."""
        if self.last is None:
            return None
        reason = self.last.get("stopReason")
        if reason == "error":
            message = str(self.last.get("errorMessage") or "the model request failed")
            return classify_model_error(message), message
        if reason == "aborted":
            return "agent", str(self.last.get("errorMessage") or "the run was aborted")
        return None
