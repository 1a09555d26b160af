"""Front ends for a run's AgentEvents (plain dicts in pi's shapes).

* ``JsonRenderer``  — ``--mode json``: one JSON object per line, exactly the event.
* ``PrintRenderer`` — ``-p``: nothing while running; at the end the last assistant
  message's text (or its error on stderr, exit code 1), as pi's print mode.
* ``LiveRenderer``  — the demo and the plain interactive loop: assistant text as it streams,
  one line per tool call start and end, errors in red.
"""

from __future__ import annotations

import json
import sys
from typing import Any, TextIO

import msgspec

__all__ = ["JsonRenderer", "PrintRenderer", "LiveRenderer", "extension_line"]


def extension_line(event: dict) -> str:
    """An ``extension_error`` or a notify ``extension_ui_request`` as one line for people."""
    if event.get("type") == "extension_error":
        where = event.get("extensionPath") or "extension host"
        return f"Extension error ({where}, {event.get('event')}): {event.get('error')}"
    return f"[{event.get('notifyType') or 'info'}] {event.get('message', '')}"

_encoder = msgspec.json.Encoder()


class JsonRenderer:
    def __init__(self, out: TextIO = sys.stdout) -> None:
        self.out = out
        self.last_assistant: dict | None = None

    def header(self, header: dict) -> None:
        self._line(header)

    def event(self, event: dict) -> None:
        if event.get("type") == "message_end" and (event.get("message") or {}).get("role") == "assistant":
            self.last_assistant = event["message"]
        self._line(event)

    def _line(self, obj: Any) -> None:
        self.out.write(_encoder.encode(obj).decode() + "\n")
        self.out.flush()

    def finish(self) -> int:
        return 0


class PrintRenderer:
    #: The only events :meth:`event` looks at: the prompt call streams no others.
    event_types = frozenset({"message_end", "extension_error", "extension_ui_request"})

    def __init__(self, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> None:
        self.out, self.err = out, err
        self.last_assistant: dict | None = None

    def header(self, header: dict) -> None:
        pass

    def event(self, event: dict) -> None:
        if event.get("type") == "message_end" and (event.get("message") or {}).get("role") == "assistant":
            self.last_assistant = event["message"]
        elif event.get("type") == "extension_error" or (
            event.get("type") == "extension_ui_request" and event.get("method") == "notify"
        ):
            # An extension's failure, or its notification: one line on stderr (stdout is the answer).
            self.err.write(extension_line(event) + "\n")
            self.err.flush()

    def finish(self) -> int:
        msg = self.last_assistant
        if msg is None:
            return 0
        if msg.get("stopReason") in ("error", "aborted"):
            self.err.write((msg.get("errorMessage") or f"Request {msg.get('stopReason')}") + "\n")
            self.err.flush()
            return 1
        for block in msg.get("content") or []:
            if block.get("type") == "text":
                self.out.write(block["text"] + "\n")
        self.out.flush()
        return 0


class LiveRenderer:
    """Readable, streaming view of a run for a person at a terminal."""

    def __init__(self, out: TextIO = sys.stdout, color: bool | None = None) -> None:
        self.out = out
        self.color = out.isatty() if color is None else color
        self.last_assistant: dict | None = None
        self._in_text = False

    def _c(self, code: str, text: str) -> str:
        return f"\x1b[{code}m{text}\x1b[0m" if self.color else text

    def header(self, header: dict) -> None:
        pass

    def _end_text(self) -> None:
        if self._in_text:
            self.out.write("\n")
            self._in_text = False

    def event(self, event: dict) -> None:
        kind = event.get("type")
        if kind == "message_update":
            ame = event.get("assistantMessageEvent") or {}
            if ame.get("type") == "text_delta":
                self.out.write(ame["delta"])
                self._in_text = True
            elif ame.get("type") == "thinking_delta":
                self.out.write(self._c("2", ame["delta"]))
                self._in_text = True
        elif kind == "message_end":
            msg = event.get("message") or {}
            if msg.get("role") == "assistant":
                self.last_assistant = msg
                self._end_text()
                if msg.get("stopReason") in ("error", "aborted"):
                    self.out.write(self._c("31", f"✗ {msg.get('errorMessage') or msg.get('stopReason')}") + "\n")
        elif kind == "tool_execution_start":
            self._end_text()
            args = json.dumps(event.get("args"), ensure_ascii=False)
            if len(args) > 120:
                args = args[:117] + "..."
            self.out.write(self._c("36", f"▶ {event.get('toolName')} {args}") + "\n")
        elif kind == "tool_execution_end":
            result = event.get("result") or {}
            text = "".join(b.get("text", "") for b in result.get("content") or [] if b.get("type") == "text")
            lines = text.strip().splitlines()
            summary = lines[0] if lines else "(no output)"
            if len(lines) > 1:
                summary += f"  (+{len(lines) - 1} lines)"
            mark = self._c("31", "✗") if event.get("isError") else self._c("32", "✓")
            self.out.write(f"{mark} {event.get('toolName')} [{event.get('toolCallId')}]: {summary}\n")
        elif kind == "agent_end":
            self._end_text()
        self.out.flush()

    def finish(self) -> int:
        msg = self.last_assistant
        if msg is not None and msg.get("stopReason") in ("error", "aborted"):
            return 1
        return 0
