"""The session context kept on both ends of the coordinator–provider link, so that a turn
sends only the messages appended since the last request (PROTOCOL.md, "provider").

Why: without it every turn converts, encodes, decodes and validates the whole transcript twice
(coordinator, provider); with it the cost of a turn no longer grows with the session, except
the provider's own serialization of the request body.

* :class:`ContextSender` (coordinator side) remembers the message list it last sent and the
  version it was sent as. A new request whose messages start with exactly that list (C-level
  list equality: identity short-circuits per element, so the common case is pointer compares)
  goes as a delta; anything else — another session, compaction, a branch switch, a retry that
  dropped the last message — goes whole, never as a wrong delta.
* :class:`ContextCache` (provider side) keeps the last context of a few keys (LRU) and rebuilds
  a delta onto it, or refuses a base it does not hold exactly (``stale_context``): the
  coordinator then resends the whole context once.
* The system prompt and the tools' schemas (the "frame", ~5 kB with the default tools) are
  sent with the first request of a key and whenever they change; a delta whose frame is the
  base's says ``keepFrame`` and carries none (``plan`` compares them with what was sent: a
  string compare and a C-level compare of the tool Structs). A restarted provider holds nothing; a
  restarted coordinator picks a new key (a random nonce), so it never matches a stale entry.

* :class:`IncrementalConversion` (coordinator side) turns the transcript into the provider's
  messages (``convert_to_llm``) converting only what was appended since the last turn, and
  hands back the same output objects for the rest — which keeps the sender's prefix compare
  on its identity fast path too.

The contract both sides rely on: a message, once sent, is never edited in place (the agent
replaces messages, never mutates them) — otherwise the identity short-cut would miss the edit.
"""

from __future__ import annotations

import secrets
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from ..ai.types import Context
from ..protocol.provider import CachedContext
from ..runtime import RemoteError

__all__ = ["ContextSender", "ContextCache", "IncrementalConversion", "STALE_CONTEXT"]

#: The error code of a request whose base the provider does not hold.
STALE_CONTEXT = "stale_context"


class ContextSender:
    """The coordinator's half: which messages to send for a request, and how to label them.

    One instance per Coordinator; its key is ``<session>:<nonce>`` with a nonce random per
    instance. ``plan`` is O(len(previous)) pointer compares in C, plus the appended messages."""

    def __init__(self) -> None:
        self._nonce = secrets.token_hex(8)
        self._key: str | None = None
        self._version = 0
        #: The full message list of the last request, as sent (None: send the next one whole).
        self._sent: list[Any] | None = None
        #: The frame (system prompt, tools) of the last request.
        self._frame: Any = None

    def plan(self, session_id: str | None, messages: Sequence[Any], frame: Any = None) -> tuple[list[Any], CachedContext]:
        """The messages to put in the request and its ``cached`` label; remembers ``messages``
        (and ``frame``: the request's system prompt and tools, any value compared with ``==``)
        as sent (a refusal or a failed call must be followed by :meth:`forget`). The label says
        ``keep_frame`` when the request may leave the frame out (a delta whose frame is the
        base's)."""
        key = f"{session_id or 'nosession'}:{self._nonce}"
        self._version += 1
        previous, count = self._sent, len(self._sent) if self._sent is not None else 0
        self._sent = list(messages)
        previous_frame, self._frame = self._frame, frame
        if previous is not None and key == self._key and len(messages) >= count and messages[:count] == previous:
            label = CachedContext(
                key=key, version=self._version, base_version=self._version - 1, base_count=count,
                keep_frame=frame is not None and frame == previous_frame,
            )  # fmt: skip
            return self._sent[count:], label
        self._key = key
        return self._sent, CachedContext(key=key, version=self._version)

    def forget(self) -> None:
        """Send the next request whole (the provider may not hold what we last sent)."""
        self._sent = None


class ContextCache:
    """The provider's half: the last context of up to ``capacity`` keys, least recently used
    dropped first (one provider serves one coordinator, normally one key)."""

    def __init__(self, capacity: int = 4) -> None:
        self.capacity = capacity
        #: key -> (version, messages, frame: the context's system prompt and tools)
        self._entries: OrderedDict[str, tuple[int, list[Any], tuple[Any, Any]]] = OrderedDict()

    def resolve(self, label: CachedContext, messages: list[Any]) -> list[Any]:
        """The full message list of a request labelled ``label`` carrying ``messages`` (see
        :meth:`resolve_context`; the frame kept is none)."""
        return self.resolve_context(label, Context(messages=messages)).messages

    def resolve_context(self, label: CachedContext, context: Context) -> Context:
        """The full context of a request labelled ``label`` carrying ``context``: its messages
        after the base's, and with ``keep_frame`` the base's system prompt and tools; the
        result is kept as version ``label.version`` of ``label.key``.

        Raises ``RemoteError(stale_context)`` when the label names a base (``baseVersion``,
        ``baseCount``) this cache does not hold exactly, or keeps the frame without naming a
        base; nothing is kept then."""
        messages = context.messages
        frame = (context.system_prompt, context.tools)
        if label.base_version is None:
            if label.keep_frame:
                raise RemoteError(STALE_CONTEXT, "keepFrame without a base version; send the context whole")
            full = messages
        else:
            entry = self._entries.get(label.key)
            if entry is None:
                raise RemoteError(STALE_CONTEXT, f"no context is kept for key {label.key!r}; send it whole")
            version, held, held_frame = entry
            if version != label.base_version or len(held) != label.base_count:
                raise RemoteError(
                    STALE_CONTEXT,
                    f"the context kept for key {label.key!r} is version {version} with {len(held)} messages, "
                    f"not version {label.base_version} with {label.base_count}; send it whole",
                )
            full = held + messages  # a new list: the held one may still be read by a running stream
            if label.keep_frame:
                frame = held_frame
        self._entries[label.key] = (label.version, full, frame)
        self._entries.move_to_end(label.key)
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)
        return Context(system_prompt=frame[0], messages=full, tools=frame[1])


class IncrementalConversion:
    """``convert(messages)``, equal to ``fn(messages)``, converting only the messages appended
    since the previous call.

    ``fn`` must work message by message (each message's output does not depend on the others,
    as pi's ``convertToLlm``), so that the output for a prefix is a prefix of the output. When
    ``messages`` does not start with the previous input (compaction, a branch switch, a
    retry that dropped a reply: C-level list equality, identity first), the whole list is
    converted again. Why: the transcript is converted before every LLM request; converting
    it whole costs time in proportion to the session's length, per turn."""

    def __init__(self, fn: Callable[[list[Any]], list[Any]]) -> None:
        self._fn = fn
        self._seen: list[Any] | None = None
        self._out: list[Any] = []

    def __call__(self, messages: list[Any]) -> list[Any]:
        """The converted list (a new list each call: the caller may change it)."""
        seen, count = self._seen, len(self._seen) if self._seen is not None else 0
        current = list(messages)
        if seen is not None and len(current) >= count and current[:count] == seen:
            out = self._out + list(self._fn(current[count:]))
        else:
            out = list(self._fn(current))
        self._seen, self._out = current, out
        return list(out)
