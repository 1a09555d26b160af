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
  coordinator then resends the whole context once. A restarted provider holds nothing; a
  restarted coordinator picks a new key (a random nonce), so it never matches a stale entry.

* :class:`IncrementalConversion` (coordinator side) turns the transcript into the provider's
  messages (``convert_to_llm``) converting only what was appended since the last turn, and
  hands back the same output objects for the rest — which keeps the sender's prefix compare
  on its identity fast path too. Its output list is what the sender keeps as sent (the agent
  loop passes it on without a copy): one list of the transcript between them.

The contract both sides rely on: a message, once sent, is never edited in place (the agent
replaces messages, never mutates them) — otherwise the identity short-cut would miss the edit.
"""

from __future__ import annotations

import secrets
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from ..protocol.provider import CachedContext
from ..runtime import RemoteError

__all__ = ["ContextSender", "ContextCache", "IncrementalConversion", "STALE_CONTEXT"]

#: The error code of a request whose base the provider does not hold.
STALE_CONTEXT = "stale_context"


class ContextSender:
    """The coordinator's half: which messages to send for a request, and how to label them.

    One instance per Coordinator; its key is ``<session>:<nonce>`` with a nonce random per
    instance. ``plan`` is O(len(previous)) pointer compares in C, plus the appended messages.

    The list given to :meth:`plan` is kept as it is, not copied (a long session's transcript
    is held once, not once more here): the caller must not change it afterwards — the agent
    loop makes a new list for every request."""

    def __init__(self) -> None:
        self._nonce = secrets.token_hex(8)
        self._key: str | None = None
        self._version = 0
        #: The full message list of the last request, as sent (None: send the next one whole).
        self._sent: list[Any] | None = None

    def plan(self, session_id: str | None, messages: Sequence[Any]) -> tuple[list[Any], CachedContext]:
        """The messages to put in the request and its ``cached`` label; remembers ``messages``
        as sent (a refusal or a failed call must be followed by :meth:`forget`)."""
        key = f"{session_id or 'nosession'}:{self._nonce}"
        self._version += 1
        previous, count = self._sent, len(self._sent) if self._sent is not None else 0
        sent = self._sent = messages if type(messages) is list else list(messages)
        if (
            previous is not None
            and key == self._key
            and len(sent) >= count
            and (sent is previous or sent[:count] == previous)
        ):
            label = CachedContext(key=key, version=self._version, base_version=self._version - 1, base_count=count)
            return sent[count:], label
        self._key = key
        return sent, CachedContext(key=key, version=self._version)

    def forget(self) -> None:
        """Send the next request whole (the provider may not hold what we last sent)."""
        self._sent = None


class ContextCache:
    """The provider's half: the last context of up to ``capacity`` keys, least recently used
    dropped first (one provider serves one coordinator, normally one key)."""

    def __init__(self, capacity: int = 4) -> None:
        self.capacity = capacity
        self._entries: OrderedDict[str, tuple[int, list[Any]]] = OrderedDict()

    def resolve(self, label: CachedContext, messages: list[Any]) -> list[Any]:
        """The full message list of a request labelled ``label`` carrying ``messages``; the
        result is kept as version ``label.version`` of ``label.key``.

        Raises ``RemoteError(stale_context)`` when the label names a base (``baseVersion``,
        ``baseCount``) this cache does not hold exactly; nothing is kept then."""
        if label.base_version is None:
            full = messages
        else:
            entry = self._entries.get(label.key)
            if entry is None:
                raise RemoteError(STALE_CONTEXT, f"no context is kept for key {label.key!r}; send it whole")
            version, held = entry
            if version != label.base_version or len(held) != label.base_count:
                raise RemoteError(
                    STALE_CONTEXT,
                    f"the context kept for key {label.key!r} is version {version} with {len(held)} messages, "
                    f"not version {label.base_version} with {label.base_count}; send it whole",
                )
            full = held + messages  # a new list: the held one may still be read by a running stream
        self._entries[label.key] = (label.version, full)
        self._entries.move_to_end(label.key)
        while len(self._entries) > self.capacity:
            self._entries.popitem(last=False)
        return full


class IncrementalConversion:
    """``convert(messages)``, equal to ``fn(messages)``, converting only the messages appended
    since the previous call.

    ``fn`` must work message by message (each message's output does not depend on the others,
    as pi's ``convertToLlm``), so that the output for a prefix is a prefix of the output. When
    ``messages`` does not start with the previous input (compaction, a branch switch, a
    retry that dropped a reply: C-level list equality, identity first), the whole list is
    converted again. Why: the transcript is converted before every LLM request; converting
    it whole costs time in proportion to the session's length, per turn.

    Memory: while every message converts to itself (user, assistant and tool-result messages
    do), the output list is also the record of the input, so a long transcript is held in one
    list here (and the same list goes on to :class:`ContextSender`), not in a copy per holder."""

    def __init__(self, fn: Callable[[list[Any]], list[Any]]) -> None:
        self._fn = fn
        #: The previous input: ``_out`` itself while every message converted to itself, else a
        #: copy (None before the first call).
        self._seen: list[Any] | None = None
        self._out: list[Any] = []

    def __call__(self, messages: list[Any]) -> list[Any]:
        """The converted list. It is kept for the next call: the caller must not change it
        (``messages`` may change after the call; it is not kept)."""
        seen = self._seen
        count = len(seen) if seen is not None else 0
        if seen is not None and len(messages) >= count and messages[:count] == seen:
            tail = messages[count:]
            converted = list(self._fn(tail))
            out = self._out + converted if converted else self._out
            itself = seen is self._out and _converts_to_itself(tail, converted)
        else:
            tail = list(messages)
            out = list(self._fn(tail))
            itself = _converts_to_itself(tail, out)
        self._out = out
        self._seen = out if itself else list(messages)
        return out


def _converts_to_itself(inputs: list[Any], outputs: list[Any]) -> bool:
    """Whether ``fn`` gave back every input message itself, in order (nothing dropped,
    nothing made anew)."""
    return len(inputs) == len(outputs) and all(a is b for a, b in zip(inputs, outputs, strict=True))
