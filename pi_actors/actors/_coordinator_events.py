"""The coordinator's event publishing: a run's events and the session events, numbered, to
the run's UI call, every subscriber and the extension hooks; and the subscribers' snapshot.

:class:`EventFanOut` is a mixin of :class:`~.coordinator.Coordinator` (its state — ``_seq``,
``_subscribers``, ``_sink``, ``_published`` … — lives on the coordinator, where the
extension hooks read it too; these are its methods). Contract:

* every event published gets the next ``seq``; what subscribers have been told (the
  messages, the streaming message) is updated together with it, so :meth:`snapshot`
  always matches its ``seq`` and a subscriber sees N+1, N+2, … without gaps;
* the wire form of an event is built only when someone reads it (the UI call with its
  ``types``, a subscriber, the extensions);
* a subscriber that cannot keep up is dropped (its ``subscribe`` call fails ``overflow``),
  never waited for: no subscriber slows the run down;
* session events (``_emit_session_event``) are published after the events handed in before
  them (``_coordinator_publish.OrderedPublisher``).

Why apart from the run lifecycle: who hears of an event, and in which order, is one job;
when an event may be told (after its append) is the run's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import trio

from ..ai import types as T
from ..protocol.events import strip_agent_event

if TYPE_CHECKING:
    from ..agent import Agent
    from ..runtime import IncomingCall
    from ._coordinator_publish import OrderedPublisher
    from ._extension_hooks import ExtensionHooks

__all__ = ["EventFanOut"]


class EventFanOut:
    """The event publishing of a :class:`~.coordinator.Coordinator` (module docstring)."""

    # The coordinator's state these methods read and write (set in Coordinator.__init__).
    agent: Agent
    extensions: ExtensionHooks | None
    _sink: IncomingCall | None
    _sink_quiet: bool
    _sink_types: frozenset[str] | None
    _seq: int
    _subscribers: list[trio.MemorySendChannel[dict[str, Any]]]
    _published: list[Any]
    _published_stream: Any
    _publisher: OrderedPublisher

    if TYPE_CHECKING:

        @property
        def session(self) -> dict[str, Any] | None: ...

    async def _extension_event(self, event: Any, data: dict[str, Any]) -> None:
        """``turn_end`` / ``agent_end`` to the extensions that handle them."""
        if self.extensions is None or event.type not in ("turn_end", "agent_end"):
            return
        payload = {"messages": data.get("messages")} if event.type == "agent_end" else {
            "message": data.get("message"), "toolResults": data.get("toolResults")}  # fmt: skip
        await self.extensions.emit(event.type, payload)

    def wants_tool_updates(self) -> bool:
        """Whether anyone reads a tool's partial results now (the run's UI call, a subscriber):
        with ``-p`` nobody does, and the pool is asked for none (``run_tool``'s ``updates``)."""
        kinds = self._sink_types
        sink = self._sink is not None and not self._sink_quiet and (kinds is None or "tool_execution_update" in kinds)
        return sink or bool(self._subscribers)

    async def _publish_event(self, event: Any, messages: list[Any] | None, follow: dict[str, Any] | None) -> None:
        """Tell the UI call, subscribers and extensions of ``event`` (with its ``seq``)."""
        kind = event.type
        to_sink = self._sink is not None and not self._sink_quiet and (self._sink_types is None or kind in self._sink_types)
        # The wire form is built only when someone reads it: with ``-p`` and no subscriber, no
        # delta of a reply is converted (a whole partial message's tree per delta).
        data = strip_agent_event(event) if to_sink or self._subscribers or self.extensions is not None else None
        # What subscribers have been told, updated together with the sequence number so a
        # snapshot always matches its ``seq``. The Agent replaces its message list on every
        # change and never mutates it, so holding the list is a snapshot: no copy of the
        # transcript per event or per run.
        if messages is not None:
            self._published = messages
            if kind == "message_end":
                self._published_stream = None
        elif kind in ("message_start", "message_update"):
            self._published_stream = event.message
        self._seq += 1
        if data is not None:
            self._fan_out({"seq": self._seq, "event": data})
            if to_sink:
                assert self._sink is not None
                await self._sink.send_chunk(data)
            if self.extensions is not None:
                await self._extension_event(event, data)
        if follow is not None:
            await self._publish_session_event(follow)

    async def _emit_session_event(self, event: dict[str, Any]) -> None:
        """A session event (auto_retry_*, compaction_*, queue_update, session_info_changed):
        to subscribers and the run's UI, after the events handed in before it."""

        async def publish() -> None:
            await self._publish_session_event(event)

        await self._publisher.publish(publish)

    async def _publish_session_event(self, event: dict[str, Any]) -> None:
        self._seq += 1
        self._fan_out({"seq": self._seq, "event": event})
        if self._sink is not None and not self._sink_quiet and (self._sink_types is None or event.get("type") in self._sink_types):
            await self._sink.send_chunk(event)

    # -- subscriptions ---------------------------------------------------------------------

    def _fan_out(self, update: dict[str, Any]) -> None:
        """Queue an update for every subscriber; one that cannot keep up is dropped."""
        for channel in list(self._subscribers):
            try:
                channel.send_nowait(update)
            except trio.WouldBlock:
                self._subscribers.remove(channel)
                channel.close()  # its subscribe call ends with "overflow"
            except trio.ClosedResourceError:
                self._subscribers.remove(channel)

    def snapshot(self) -> dict[str, Any]:
        """The session as of ``seq``: what a subscriber starts from."""
        state = self.agent.state
        running = self._sink is not None
        messages = self._published if running else state.messages
        stream = self._published_stream if running else None
        return {
            "seq": self._seq,
            "messages": [T.to_plain(m) for m in messages],
            "streamMessage": T.to_plain(stream) if stream is not None else None,
            "isStreaming": running,
            "pendingToolCalls": sorted(state.pending_tool_calls),
            "model": T.to_plain(state.model),
            "thinkingLevel": state.thinking_level,
            "session": self.session,
            "extensionStatus": dict(self.extensions.statuses) if self.extensions is not None else {},
        }
