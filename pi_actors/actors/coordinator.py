r"""The loop coordinator actor: one session's agent — context, run lifecycle, event fan-out.

It runs the stateless agent loop (``pi_actors.agent``) with three remote capabilities (the
first two in ``_coordinator_remote``):

* the stream function is a ``stream`` call to the provider actor (events rebuilt from the
  wire, see ``pi_actors.protocol.events``); an abort cancels that call cooperatively, so the aborted
  message still arrives with its partial content;
* every tool's ``execute`` is a ``run_tool`` call to the tool pool; the loop starts all calls
  of a message together and collects their results in call order;
* every ``message_end`` is appended to the session store and acknowledged (durable) before
  the loop goes on, so no LLM request is sent before the previous message is on disk;
* with extensions (a ``links["extensions"]``), their tools and event hooks are calls to the
  extension-host actor, each hook bounded by a timeout (``_extension_hooks``).

Calls served (from a UI, or the server on a client's behalf): every method of
:data:`pi_actors.protocol.coordinator.COORDINATOR`, which declares each one's arguments,
chunks, result and error codes. A :class:`~pi_actors.runtime.Router` built by
:meth:`Coordinator.router` dispatches them and checks their arguments: the runs
(``prompt``/``continue`` stream every AgentEvent in the wire shape of
:mod:`pi_actors.protocol.events`), reading methods and ``subscribe`` are served here, the
session tree and settings by :class:`~._session_commands.SessionCommands`, retries and
compaction by :class:`~._upkeep.Upkeep`. The run lifecycle (``_coordinator_run``) and the
publication of events to the UI call, subscribers and extensions (``_coordinator_events``)
are mixins of :class:`Coordinator`.

The session's state lives in an ``Agent`` (``pi_actors.agent``): the transcript, the
steering and follow-up queues, one run at a time.

Supervision (``pi_actors.actors.local``): with a ``control`` link, the provider and tool-pool
links are :class:`~._relink.PeerSlot`\ s that the supervisor re-links after restarting the
actor behind them; a call in flight when one died fails with "the provider process was killed
by SIGKILL; the outcome of the request is unknown" (not retried: nothing is replayed), and
the next call goes to the restarted actor. The path of the session file is reported on the
control link whenever it changes, so that a restarted coordinator reopens it.
"""

from __future__ import annotations

import os
from contextlib import AsyncExitStack
from typing import Any

import msgspec
import trio

from ..agent import Agent
from ..ai import types as T
from ..coding.compaction import CompactionSettings
from ..coding.messages import convert_to_llm, from_session_messages, interrupted_tool_results
from ..coding.retry import RetrySettings
from ..protocol import coordinator as P
from ..protocol import extension_host as X
from ..protocol.config import CoordinatorConfig, read_part, set_fields
from ..runtime import (
    Empty,
    FdChannel,
    IncomingCall,
    Interface,
    JsonLog,
    Peer,
    RemoteError,
    Router,
    TypedCall,
    implements,
    open_peer,
)
from ..runtime.protocol import SIBLING_HANDSHAKE_TIMEOUT
from ._context_cache import IncrementalConversion
from ._coordinator_events import EventFanOut
from ._coordinator_publish import BackgroundAppender, OrderedPublisher
from ._coordinator_remote import ProviderStream, make_pool_tool
from ._coordinator_run import RunLifecycle, _text_of
from ._extension_hooks import ExtensionHooks
from ._local_store import LocalStore
from ._relink import PeerSlot, serve_control
from ._session_commands import SessionCommands
from ._upkeep import Upkeep

__all__ = ["run_coordinator", "Coordinator"]

#: At most this many queued updates of a subscription go out in one write.
_SUBSCRIPTION_BATCH = 64

#: The methods the Coordinator serves itself; the rest are its SessionCommands'.
_RUN_METHODS = Interface(
    "coordinator runs",
    [m for m in P.COORDINATOR if m.name not in SessionCommands.INTERFACE],
)


class Coordinator(RunLifecycle, EventFanOut):
    def __init__(self, config: CoordinatorConfig, provider: Peer | PeerSlot, tools: Peer | PeerSlot, store: Peer | LocalStore) -> None:
        from ..coding.tools import TOOL_SPECS

        self.config = config
        settings = config.settings
        self.provider = provider
        self.tools_peer = tools
        self.store = store
        self.cwd: str = config.cwd or os.getcwd()
        #: Called with the session file's path (None: not saved) whenever it changes.
        self.on_session_path: Any = None
        self._session: dict[str, Any] | None = None
        self._resources: tuple[list[Any], list[Any]] | None = None
        tools_list = [make_pool_tool(self, TOOL_SPECS[n]) for n in config.tools if n in TOOL_SPECS]
        #: The agent loop's stream function: a ``stream`` call to the provider actor.
        self.stream_fn = ProviderStream(self).stream_fn
        self._incremental_conversion = IncrementalConversion(convert_to_llm)
        self.agent = Agent(
            initial_state={
                "system_prompt": config.system_prompt,
                "model": config.model,
                "thinking_level": config.thinking_level,
                "tools": tools_list,
            },
            stream_fn=self.stream_fn,
            # Only the messages appended since the last request are converted (per turn).
            convert_to_llm=self._convert_to_llm,
            steering_mode=settings.steering_mode,
            follow_up_mode=settings.follow_up_mode,
            tool_execution=settings.tool_execution,
            thinking_budgets=set_fields(settings.thinking_budgets) if settings.thinking_budgets else None,
        )
        self.agent.subscribe(self._on_event)
        #: The UI call that started the current run: it receives the run's events.
        self._sink: IncomingCall | None = None
        self._run_nursery: trio.Nursery | None = None
        self._store_error: str | None = None
        self._tools_warmed = False
        #: Sequence number of the last event fanned out to subscribers.
        self._seq = 0
        self._subscribers: list[trio.MemorySendChannel[dict[str, Any]]] = []
        self._published: list[Any] = []
        self._published_stream: Any = None
        self._sink_quiet = False
        self._sink_types: frozenset[str] | None = None  # None: every event to the sink
        #: Publishes events in order, some after a background append (_coordinator_publish).
        self._publisher = OrderedPublisher()
        #: Appends tool results in the background, batched (_coordinator_publish).
        self._appender = BackgroundAppender(self._persist_all)
        #: The queues as the last queue_update told them.
        self._queue_told: tuple[list[str], list[str]] = ([], [])
        self.log = JsonLog(config.log_file, "coordinator")
        self.commands = SessionCommands(self)
        #: The extension host's hooks (None: the session has no extensions).
        self.extensions: ExtensionHooks | None = None
        self.upkeep = Upkeep(
            self,
            compaction=CompactionSettings(**set_fields(settings.compaction)),
            retry=RetrySettings(**{k: v for k, v in set_fields(settings.retry).items() if k != "provider"}),
        )

    def _convert_to_llm(self, messages: list[Any]) -> list[Any]:
        """The session's messages as the model gets them; with the ``images.blockImages``
        setting, no image (pi's "Image reading is disabled." instead)."""
        converted = self._incremental_conversion(messages)
        if self.config.settings.images.block_images:
            from ..coding.images import block_images

            return block_images(converted)
        return converted

    @property
    def session(self) -> dict[str, Any] | None:
        return self._session

    @session.setter
    def session(self, value: dict[str, Any] | None) -> None:
        old = (self._session or {}).get("path")
        self._session = value
        new = (value or {}).get("path")
        if self.on_session_path is not None and new != old:
            self.on_session_path(new)

    # -- skills and prompt templates (pi_actors.coding.resources) ---------------------------

    def expand_resources(self, text: str) -> str:
        """``/skill:name args`` and ``/template args`` expanded with the session's skills and
        templates (``config.resources``), in every mode; other text unchanged. A skill whose
        file cannot be read any more leaves the text as typed (as pi) and is logged."""
        if not text.startswith("/"):
            return text
        from ..coding.resources import PromptTemplate, Skill, SkillError, expand_input

        if self._resources is None:
            found = self.config.resources
            self._resources = (
                [Skill(**msgspec.structs.asdict(s)) for s in found.skills],
                [PromptTemplate(**msgspec.structs.asdict(t)) for t in found.templates],
            )
        try:
            return expand_input(text, *self._resources)
        except SkillError as exc:
            self.log.event("skill_expansion_failed", session=self.session_id, error=str(exc))
            return text

    @property
    def session_id(self) -> str | None:
        return ((self.session or {}).get("header") or {}).get("id")

    # -- serving the UI ----------------------------------------------------------------------

    def router(self) -> Router:
        """The ``Handler`` serving :data:`~pi_actors.protocol.coordinator.COORDINATOR`: the
        runs and reading methods here, the session commands on :class:`SessionCommands`.
        Raises ValueError if a declared method has no handler."""
        commands = Router.serving(self.commands, SessionCommands.INTERFACE, name="coordinator")
        return Router.serving(self, _RUN_METHODS, name="coordinator", fallback=commands)

    @implements(P.SESSION)
    async def serve_session(self, args: Empty, call: TypedCall[Empty, None]) -> P.SessionDescription:
        return msgspec.convert(self.session, P.SessionDescription)

    @implements(P.PROMPT)
    async def serve_prompt(self, args: P.PromptArgs, call: TypedCall[P.PromptArgs, P.WireEvent]) -> None:
        await self._run(call.incoming, _user_message(self.expand_resources(args.text), args.images), quiet=not args.events,
                        types=frozenset(args.types) if args.types else None)

    @implements(P.CONTINUE)
    async def serve_continue(self, args: P.ContinueArgs, call: TypedCall[P.ContinueArgs, P.WireEvent]) -> None:
        await self._run(call.incoming, None, quiet=not args.events)

    @implements(P.STEER)
    async def serve_steer(self, args: P.TextArgs, call: TypedCall[P.TextArgs, None]) -> None:
        self.agent.steer(_user_message(self.expand_resources(args.text), args.images))
        await self._emit_queue_update()

    @implements(P.FOLLOW_UP)
    async def serve_follow_up(self, args: P.TextArgs, call: TypedCall[P.TextArgs, None]) -> None:
        self.agent.follow_up(_user_message(self.expand_resources(args.text), args.images))
        await self._emit_queue_update()

    @implements(P.CLEAR_QUEUE)
    async def serve_clear_queue(self, args: Empty, call: TypedCall[Empty, None]) -> P.QueuedTexts:
        """Take every waiting steering and follow-up message out of the agent's queues (none
        of them is delivered afterwards) and answer their texts, oldest first."""
        steering, follow_ups = self.agent._steering, self.agent._follow_ups
        self.agent.clear_all_queues()
        await self._emit_queue_update()
        return P.QueuedTexts(steering=[_text_of(m) for m in steering], follow_up=[_text_of(m) for m in follow_ups])

    @implements(P.ABORT)
    async def serve_abort(self, args: Empty, call: TypedCall[Empty, None]) -> None:
        self.upkeep.cancel()
        self.agent.abort()
        await self.agent.wait_for_idle()

    @implements(P.ABORT_RETRY)
    async def serve_abort_retry(self, args: Empty, call: TypedCall[Empty, None]) -> None:
        self.upkeep.retry.cancel()

    @implements(P.COMPACT)
    async def serve_compact(self, args: P.CompactArgs, call: TypedCall[P.CompactArgs, None]) -> P.CompactResult:
        if self.agent.state.is_streaming:
            self.agent.abort()
            await self.agent.wait_for_idle()
        return await self.upkeep.compact(args.custom_instructions or None, self._emit_session_event)

    @implements(P.GET_STATE)
    async def serve_get_state(self, args: Empty, call: TypedCall[Empty, None]) -> P.State:
        state = self.agent.state
        return P.State(
            model=state.model,
            thinking_level=state.thinking_level,
            is_streaming=state.is_streaming,
            message_count=len(state.messages),
            pending_message_count=len(self.agent._steering) + len(self.agent._follow_ups),
            steering_mode=self.agent.steering_mode,
            follow_up_mode=self.agent.follow_up_mode,
            session_file=(self.session or {}).get("path"),
            session_id=self.session_id,
            auto_compaction_enabled=self.upkeep.compaction_settings.enabled,
            auto_retry_enabled=self.upkeep.retry.settings.enabled,
            session_name=self.commands.session_name,
            is_compacting=self.upkeep.is_compacting or self.commands.summarizing,
            seq=self._seq,
        )

    @implements(P.EXTENSION_UI_RESPONSE)
    async def serve_extension_ui_response(self, args: P.ExtensionUiResponseArgs, call: TypedCall[P.ExtensionUiResponseArgs, None]) -> None:
        if self.extensions is None:
            raise RemoteError("not_found", "this session has no extensions")
        self.extensions.answer(args.id, X.UiAnswer(value=args.value, confirmed=args.confirmed, cancelled=args.cancelled))

    @implements(P.EXTENSION_COMMANDS)
    async def serve_extension_commands(self, args: Empty, call: TypedCall[Empty, None]) -> P.ExtensionCommands:
        if self.extensions is None:
            return P.ExtensionCommands()
        registry = self.extensions.registry
        return P.ExtensionCommands(commands=list(registry.commands), shortcuts=list(registry.shortcuts), renderers=list(registry.renderers))

    @implements(P.EXTENSION_SHORTCUT)
    async def serve_extension_shortcut(self, args: P.ExtensionShortcutArgs, call: TypedCall[P.ExtensionShortcutArgs, None]) -> P.ExtensionShortcutResult:
        if self.extensions is None:
            raise RemoteError("not_found", "this session has no extensions")
        return P.ExtensionShortcutResult(error=await self.extensions.run_shortcut(args.key))

    @implements(P.EXTENSION_RENDER)
    async def serve_extension_render(self, args: P.ExtensionRenderArgs, call: TypedCall[P.ExtensionRenderArgs, None]) -> X.Rendered:
        if self.extensions is None:
            return X.Rendered()
        return await self.extensions.render(args.message, args.expanded, args.width)

    @implements(P.GET_MESSAGES)
    async def serve_get_messages(self, args: Empty, call: TypedCall[Empty, None]) -> P.Messages:
        return P.Messages(messages=[T.to_plain(m) for m in self.agent.state.messages])

    # -- subscriptions ---------------------------------------------------------------------

    @implements(P.SUBSCRIBE)
    async def serve_subscribe(self, args: P.SubscribeArgs, call: TypedCall[P.SubscribeArgs, P.SubscriptionUpdate]) -> None:
        """``subscribe {maxQueue?}``: first chunk ``{snapshot}`` (sequence N), then every
        event as ``{seq, event}`` with N+1, N+2, ... without gaps, until the caller cancels.
        A subscriber whose queue of undelivered updates overflows is dropped: the call fails
        ``overflow`` and the client resubscribes (others are never slowed down). Updates are
        sent as the plain trees they are built as (the shape of ``SubscriptionUpdate``)."""
        if args.max_queue < 0:
            raise RemoteError("invalid_args", f"subscribe: maxQueue must be positive, not {args.max_queue}")
        send, receive = trio.open_memory_channel[dict[str, Any]](args.max_queue or 1024)
        # Snapshot and registration happen without a checkpoint between them: no event can
        # fall in the gap.
        first = self.snapshot()
        self._subscribers.append(send)
        try:
            await call.incoming.send_chunk({"snapshot": first})
            async for update in receive:
                # Every update already queued goes in the same write (up to a bound): a run
                # publishes its events in bursts (a reply's start, deltas and end from one
                # read), and one write wakes the subscriber once for the burst, not per event.
                batch = [update]
                while len(batch) < _SUBSCRIPTION_BATCH:
                    try:
                        batch.append(receive.receive_nowait())
                    except trio.WouldBlock:
                        break
                if args.types:
                    batch = [u for u in batch if u["event"].get("type") in args.types]
                if batch:
                    await call.incoming.send_chunks(batch)
        finally:
            if send in self._subscribers:
                self._subscribers.remove(send)
        raise RemoteError("overflow", "subscriber fell behind by more than its queue; resubscribe for a new snapshot")

    async def open_session(self, args: dict[str, Any]) -> None:
        """Open (create, resume or fork) the session and load its transcript into the agent.

        A resumed transcript whose last tool calls have no results (the previous process died
        mid-call) gets error results, appended to the file too, so the next request is valid.
        """
        self.session = await self.store.call("open", args)
        self.agent.session_id = self.session_id
        self.load_context(self.session)
        repairs = interrupted_tool_results(self.agent.state.messages)
        for result in repairs:
            await self.store.call("append", {"message": T.to_plain(result)})
            self.agent.append_message(result)
        await self.commands.after_open(new=not (args.get("resume") or args.get("forkFrom")))

    def load_context(self, described: dict[str, Any]) -> None:
        context = described.get("context") or {}
        self.agent.replace_messages(from_session_messages(context.get("messages") or []))


def _user_message(text: str, images: list[T.ImageContent] | None = None) -> T.UserMessage:
    """A user's prompt as pi writes it: content is an array of parts (the text, then the
    images attached to it)."""
    content: list[T.UserContent] = [T.TextContent(text=text), *(images or ())]
    return T.UserMessage(content=content, timestamp=T.now_ms())


async def run_coordinator(links: dict[str, trio.SocketStream], config: Any, *, store: LocalStore | None = None) -> None:
    """Actor entry: answer the UI's hello at once, connect to provider, tool pool and store,
    then serve the UI until it disconnects. A start-up failure is reported to every UI call.
    ``store``: the session store in this process (a ``_local_store.LocalStore``), called
    directly instead of over ``links["store"]``.

    ``links["control"]`` (optional): the supervisor's control channel (module docstring);
    ``config``: a ``protocol.config.CoordinatorConfig`` (or its dict form); its ``relink``
    names the links it re-links after a restart."""
    part = read_part(config, CoordinatorConfig)
    ready = trio.Event()
    state: dict[str, Any] = {}

    async def handle(call: IncomingCall) -> Any:
        await ready.wait()
        if "error" in state:
            raise RemoteError("startup_failed", state["error"])
        router: Router = state["router"]
        return await router(call)

    control = links.get("control")
    relink = set(part.relink) if control is not None else set()
    slots = {
        "provider": PeerSlot("provider", "provider", "request", supervised="provider" in relink),
        "tools": PeerSlot("tools", "tool pool", "tool call", supervised="tools" in relink),
    }
    hooks = _extension_slot(links, part, slots, relink)
    outbox_send, outbox = trio.open_memory_channel[dict[str, Any]](64)
    async with open_peer(links["ui"], side="server", role="coordinator", name="ui", handler=handle, handshake_timeout=SIBLING_HANDSHAKE_TIMEOUT) as ui:
        async with trio.open_nursery() as nursery, AsyncExitStack() as stack:
            log = JsonLog(part.log_file, "coordinator")
            if control is not None:
                nursery.start_soon(serve_control, FdChannel.from_stream(control), slots, nursery, outbox, log.event)
            try:
                # The three children start in parallel; each answers its hello once running.
                store_link: Peer | LocalStore = store if store is not None else await stack.enter_async_context(
                    open_peer(links["store"], side="client", role="coordinator", name="store", handshake_timeout=SIBLING_HANDSHAKE_TIMEOUT)
                )
                for name in ("provider", "tools"):
                    await slots[name].hold(nursery, links[name])
                if hooks is not None:
                    if control is not None:  # the supervisor starts the host now (local.py)
                        outbox_send.send_nowait({"start": "extensions"})
                    await slots["extensions"].hold(nursery, links["extensions"])
                coord = Coordinator(part, slots["provider"], slots["tools"], store_link)
                if control is not None:

                    def report(path: str | None) -> None:
                        try:
                            outbox_send.send_nowait({"session": path})
                        except (trio.WouldBlock, trio.ClosedResourceError):
                            pass

                    coord.on_session_path = report
                chosen = part.session
                await coord.open_session(
                    {
                        "cwd": coord.cwd,
                        "sessionDir": chosen.session_dir,
                        "agentDir": chosen.agent_dir,
                        "noSession": chosen.no_session,
                        "resume": chosen.resume,
                        "forkFrom": chosen.fork_from,
                    }
                )
                if hooks is not None:
                    coord.extensions = hooks
                    await hooks.attach(coord)
                state["router"] = coord.router()
            except RemoteError as exc:
                state["error"] = exc.message
            finally:
                ready.set()
            await ui.closed_event.wait()
            if hooks is not None and hooks.coordinator is not None:
                with trio.move_on_after(hooks.config.hook_timeout):
                    await hooks.shutdown()
            nursery.cancel_scope.cancel()


def _extension_slot(links: dict[str, Any], part: CoordinatorConfig, slots: dict[str, PeerSlot], relink: set[str]) -> ExtensionHooks | None:
    """The extension host's link (added to ``slots``) and its hooks, if the session has
    extensions (a ``links["extensions"]``); else None."""
    if "extensions" not in links:
        return None
    hooks = ExtensionHooks(None, part.extensions or X.ExtensionHostConfig())
    slots["extensions"] = hooks.slot = PeerSlot(
        "extensions", "extension host", "extension call", supervised="extensions" in relink,
        interface=X.EXTENSION_HOST, handler=hooks.handler(),
    )  # fmt: skip
    return hooks
