"""The coordinator's run lifecycle: one ``prompt`` / ``continue`` from its call to its end.

:class:`RunLifecycle` is a mixin of :class:`~.coordinator.Coordinator` (its state lives on
the coordinator; these are its methods, kept apart so that ``coordinator.py`` holds the
served surface). Contract:

* ``_run`` runs one prompt (or continues) at a time: ``busy`` while a run is under way; the
  run's UI call receives its events (all, none with ``quiet``, or those of ``types``); a
  cancel of that call aborts the run; the call fails ``invalid_state`` when the agent
  refuses to start, ``write_failed`` when a message could not be saved.
* ``_on_event`` sees every AgentEvent of a run, in the loop's order: a finished message is
  appended to the session before anyone hears of its end (a tool result's in the
  background, see ``_coordinator_publish``), then the event is handed to the publication
  (``_coordinator_events``); a failed append stops the run (:class:`SessionNotSaved`).
  An assistant message that calls tools is saved before its tools start (a tool's effects
  are never unrecorded), but its ``message_end`` is told while they run: the loop does not
  wait for the UI to take it (one frame of the whole reply to each listener) before it
  hands the calls to the pool.
* The queue helpers tell ``queue_update`` whenever the steering / follow-up queues change.

Why here and not in the agent: persistence, the UI's call and the session's upkeep are the
actor's business; the agent loop only awaits each event's subscriber.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import trio

from ..ai import types as T
from ..runtime import IncomingCall, RemoteError
from ._coordinator_events import EventFanOut
from ._coordinator_publish import Gate
from .memory import release_free_memory

if TYPE_CHECKING:
    from ..runtime import JsonLog, Peer
    from ._coordinator_publish import BackgroundAppender
    from ._local_store import LocalStore
    from ._relink import PeerSlot
    from ._session_commands import SessionCommands
    from ._upkeep import Upkeep

__all__ = ["RunLifecycle", "SessionNotSaved"]


class SessionNotSaved(Exception):
    """A finished message could not be written to the session: the run must stop."""


class RunLifecycle(EventFanOut):
    """The run lifecycle of a :class:`~.coordinator.Coordinator` (module docstring); it publishes through
    :class:`~._coordinator_events.EventFanOut`."""

    # The coordinator's state these methods read and write (set in Coordinator.__init__).
    upkeep: Upkeep
    commands: SessionCommands
    store: Peer | LocalStore
    tools_peer: Peer | PeerSlot
    log: JsonLog
    _run_nursery: trio.Nursery | None
    _store_error: str | None
    _tools_warmed: bool
    _appender: BackgroundAppender
    _queue_told: tuple[list[str], list[str]]

    if TYPE_CHECKING:

        @property
        def session_id(self) -> str | None: ...

    async def _run(self, call: IncomingCall, prompt: T.UserMessage | None, *, quiet: bool,
                   types: frozenset[str] | None = None) -> None:
        """Run ``prompt`` (None: ``continue``) to its end, streaming its events to ``call``
        (none with ``quiet``: a UI that reads a subscription instead; with ``types``, only the
        events of those types: a frame to the UI per event is most of a turn's relay cost).

        The events are already the wire's plain trees (:func:`strip_agent_event`), so they
        go to ``call.send_chunk`` as they are. The call is cooperative (declared on the
        method): a cancel aborts the run, which then ends with its aborted reply."""
        if self.agent.state.is_streaming:
            raise RemoteError("busy", "Agent is already processing a prompt. Use steer or follow_up, or wait.")
        if prompt is None:
            messages = self.agent.state.messages
            if messages and isinstance(messages[-1], T.AssistantMessage) and messages[-1].stop_reason in ("error", "aborted"):
                # Continuing after a failed reply retries it, as pi's retry does: the failed
                # message stays in the session file but leaves the working transcript.
                self.agent.replace_messages(messages[:-1])
        self._store_error = None
        refused: str | None = None
        try:
            async with trio.open_nursery() as nursery:
                self._sink, self._run_nursery = call, nursery
                self._publisher.start(nursery)
                self._appender.reset()
                self._sink_quiet = quiet
                self._sink_types = types
                self._published, self._published_stream = self.agent.state.messages, None

                async def pass_cancel() -> None:
                    await call.cancel_requested.wait()
                    self.agent.abort()

                nursery.start_soon(pass_cancel)
                try:
                    if prompt is not None and self.extensions is not None:
                        await self._run_with_extensions(prompt)
                    elif prompt is not None:
                        await self.upkeep.before_prompt(self._emit_session_event)
                        await self.agent.prompt(prompt)
                    else:
                        await self.agent.continue_()
                    if self._store_error is None:
                        await self.upkeep.after_run(self._emit_session_event, self.agent.continue_)
                except RuntimeError as exc:  # nothing to continue from, no model, ...
                    refused = str(exc)
                await self._appended(check=False)
                nursery.cancel_scope.cancel()
        finally:
            self._sink = self._run_nursery = None
            self._publisher.reset()
        if refused is not None:
            raise RemoteError("invalid_state", refused)
        if self._store_error:
            raise RemoteError("write_failed", self._store_error)

    # -- extensions (the hooks themselves: _extension_hooks.ExtensionHooks) ----------------------

    async def _run_with_extensions(self, prompt: T.UserMessage) -> None:
        """A prompt's run with extensions: a ``/command`` of theirs, ``input`` and
        ``before_agent_start`` first (which may handle the prompt: no run); a system prompt
        set by ``before_agent_start`` holds for this run only."""
        assert self.extensions is not None
        system_prompt = self.agent.state.system_prompt
        try:
            ready = await self.extensions.before_prompt(prompt)
            if ready is not None:
                await self.upkeep.before_prompt(self._emit_session_event)
                await self.agent.prompt(ready)
        finally:
            self.agent.set_system_prompt(system_prompt)

    async def _on_event(self, event: Any) -> None:
        """Every AgentEvent of a run: persist finished messages, then publish it (UI call,
        subscribers, extension hooks) in the loop's order.

        A tool result's entry is appended in the background (no extensions loaded): the
        loop goes on to the next request while the fsync is in flight, and the result's
        ``message_end`` — and every event after it — is published only once the store has
        acknowledged the entry (``_coordinator_publish``). Every other message is appended
        before the loop goes on (an assistant message before its tools run), after the
        earlier background appends, so the file keeps the loop's order."""
        kind = event.type
        if self._store_error is not None and kind != "agent_end":
            raise SessionNotSaved(self._store_error)  # a background append failed: stop the run
        if kind == "agent_end":
            release_free_memory()  # once per run, before the end is told (memory.py)
        if kind == "message_start" and isinstance(event.message, T.UserMessage) and self._queue_texts() != self._queue_told:
            await self._emit_queue_update()  # a queued message leaves the queue (pi's order)
        gate: Gate | None = None
        defer = False
        if kind == "message_end":
            if isinstance(event.message, T.ToolResultMessage) and self.extensions is None and self._run_nursery is not None:
                gate = self._appender.append(event.message, self._run_nursery)
            else:
                await self._appended()
                await self._persist(event.message)
                # Saved, so it may be told: from the publisher's drain task, so that the loop
                # goes on to the tool calls at once (module docstring).
                defer = self.extensions is None and self._run_nursery is not None and _calls_tools(event.message)
        elif (
            kind == "message_start"
            and not self._tools_warmed
            and self.agent.state.tools
            and isinstance(event.message, T.AssistantMessage)
            and self._run_nursery is not None
        ):
            # The model has started answering, so the provider's start-up is over: a good
            # moment for the pool to start its warm workers, before the first tool call.
            self._tools_warmed = True
            self._run_nursery.start_soon(self._warm_tools)
        elif kind == "agent_end":
            await self._appended(check=False)  # published even when an append failed
        # What subscribers are told with this event, taken now: agent.state runs one event
        # ahead of the publication, and more when a publication waits for an append.
        messages = self.agent.state.messages if kind in ("agent_start", "message_end") else None
        follow = self.upkeep.on_event(event)

        async def publish() -> None:
            await self._publish_event(event, messages, follow)

        await self._publisher.publish(publish, gate, defer=defer)
        if kind == "agent_end":
            await self.commands.flush_pending_bash()

    async def _appended(self, *, check: bool = True) -> None:
        """Wait for the background appends and the publications queued behind them; with
        ``check``, raise SessionNotSaved if an append failed."""
        await self._appender.wait()
        await self._publisher.settle()
        if check and self._store_error is not None:
            raise SessionNotSaved(self._store_error)

    def _queue_texts(self) -> tuple[list[str], list[str]]:
        """The texts of the queued steering and follow-up messages (pi's ``queue_update``)."""
        return [_text_of(m) for m in self.agent._steering], [_text_of(m) for m in self.agent._follow_ups]

    async def _emit_queue_update(self) -> None:
        """pi's ``queue_update`` after the queues changed: every queued message's text."""
        steering, follow_up = self._queue_told = self._queue_texts()
        await self._emit_session_event({"type": "queue_update", "steering": steering, "followUp": follow_up})

    async def _warm_tools(self) -> None:
        """Ask the pool to start its warm workers (idempotent; errors show on first use)."""
        try:
            await self.tools_peer.call("warm")
        except RemoteError:
            pass

    async def _persist(self, message: Any) -> None:
        """Append a finished message to the session before anyone hears of its end.

        A failure stops the run loudly: it raises, so the message's ``message_end`` is never
        forwarded (every ``message_end`` a UI sees is on disk), and the agent ends the run
        with an error message and ``agent_end``; the UI's call then fails ``write_failed``.
        """
        await self._persist_all([message])

    async def _persist_all(self, messages: list[Any]) -> None:
        """:meth:`_persist` for several messages in one store call (one fsync) when there are
        several: all saved or the run stops."""
        if self._store_error is not None:
            raise SessionNotSaved(self._store_error)
        try:
            if len(messages) == 1:
                stored = await self.store.call("append", {"message": T.to_plain(messages[0])})
                ids = [(stored or {}).get("id")]
            else:
                stored = await self.store.call("append_messages", {"messages": [T.to_plain(m) for m in messages]})
                ids = (stored or {}).get("ids") or []
            for message, entry in zip(messages, ids, strict=False):
                self.log.event("entry_saved", session=self.session_id, entry=entry, role=getattr(message, "role", None))
        except RemoteError as exc:
            self.log.event("entry_save_failed", session=self.session_id, error=exc.message)
            self._store_error = f"session not saved: {exc.message}"
            self.agent.abort()
            raise SessionNotSaved(self._store_error) from None


def _calls_tools(message: Any) -> bool:
    """Whether ``message`` is an assistant message with a tool call (its tools run next)."""
    return isinstance(message, T.AssistantMessage) and any(isinstance(b, T.ToolCall) for b in message.content)


def _text_of(message: Any) -> str:
    """The text of a queued user message (its text parts, joined)."""
    content = getattr(message, "content", "")
    if isinstance(content, str):
        return content
    return "".join(b.text for b in content if isinstance(b, T.TextContent))
