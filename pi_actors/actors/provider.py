"""The provider streamer actor: owns API keys and SDK clients; one LLM stream per call.

It serves :data:`pi_actors.protocol.provider.PROVIDER` (``stream``) to the coordinator: every
AssistantMessageEvent goes out as a chunk (deltas without ``partial``; queued deltas of one
block merged while the link is busy, see ``protocol.events.CoalescingSender``); the result is the
final AssistantMessage. It never fails as a call for provider trouble: an HTTP error, a
refused connection, a missing key or an abort arrive as the terminal ``error`` event and an
AssistantMessage with ``stopReason`` error/aborted. A ``cancel`` of the call aborts the stream
cooperatively, so the partial content still comes back. Malformed arguments are refused by
the router (``invalid_request`` naming the field) before any stream starts.

Each session's context is kept here (``_context_cache.ContextCache``, a few keys): a request
labelled ``cached`` may carry only the messages appended since the kept version; one naming a
base this process does not hold (it was restarted, say) is refused with ``stale_context``
before anything streams. The log's ``stream_start`` says how many messages came with the
request (``received``), how many were taken from the kept context (``reused``) and how many
bytes the request took on the link (``bytes``: flat from turn to turn while the kept context
serves, however long the session).

API keys live only in this process: the configuration carries the runtime key given with
``--api-key`` and the unresolved ``apiKey`` values of models.json (env-var names or
``!command``), resolved here on first use. Keys are looked up in pi's order: the runtime
key, then ``auth.json`` (a subscription login, refreshed in a thread under its file lock when
expired, or a stored key), then the environment, then models.json. A login that cannot be
refreshed, or a malformed auth.json, is the stream's ``error`` event (one line).

The configuration's ``limits`` (``firstByteTimeoutMs``, ``idleTimeoutMs``, ``maxRetryDelayMs``,
from settings.json) apply to every stream whose options do not set them: a stream that gets no
data for that long ends as ``Provider stalled``, and a server asking for a longer retry delay
than the maximum fails the request (see ``ai.providers._common``).
"""

from __future__ import annotations

import importlib
from typing import Any

import msgspec
import trio

from .. import _ready
from ..ai import types as T
from ..ai.abort import AbortSignal
from ..ai.registry import BUILTIN_PROVIDER_MODULES
from ..protocol.config import ProviderConfig, read_part
from ..protocol.events import CoalescingSender
from ..protocol.provider import PROVIDER, STREAM, StreamArgs
from ..runtime import JsonLog, RemoteError, Router, TypedCall, implements
from ._context_cache import ContextCache

__all__ = ["run_provider", "ProviderActor"]


class _Unread:
    """The type of :data:`_UNREAD`: auth.json has not been read for this key yet."""


_UNREAD = _Unread()


class ProviderActor:
    def __init__(self, config: ProviderConfig | dict[str, Any] | None) -> None:
        config = read_part(config, ProviderConfig)
        self._runtime_keys: dict[str, str] = dict(config.runtime_api_keys)
        self._key_sources: dict[str, str] = dict(config.api_key_sources)
        self._resolved: dict[str, str | None] = {}
        self.log = JsonLog(config.log_file, "provider")
        #: The stream options every call gets unless it sets them (snake_case ``extra`` keys).
        self._limits: dict[str, Any] = msgspec.structs.asdict(config.limits)
        #: Set once the start-up warm-up of the expected SDK is over (see ``warm_up``); streams
        #: wait for it so two threads never import the same provider module at once.
        self.warmed = trio.Event()
        #: The last context of each session (key) that asked for caching.
        self.contexts = ContextCache()

    async def warm_up(self, api: str | None) -> None:
        """Import the provider module of ``api`` (in a thread) and pay its first call's one-time
        costs (its ``warm_up``), then let streams proceed. A failure here is left to the
        registry's own import on first use, which reports it as the call's error event; it is
        logged here."""
        path = BUILTIN_PROVIDER_MODULES.get(api or "")
        try:
            if path:
                module = await trio.to_thread.run_sync(importlib.import_module, path, abandon_on_cancel=True)
                await module.warm_up()
        except Exception as exc:
            self.log.event("warm_up_failed", api=api, error=f"{type(exc).__name__}: {exc}")
        finally:
            self.warmed.set()

    def api_key_for(self, provider: str, stored: str | None | _Unread = _UNREAD) -> str | None:
        """Runtime key, then auth.json, then the environment, then models.json's apiKey
        (resolved once). ``stored``: auth.json's key for ``provider`` when the caller has it
        from its own read of the file (:meth:`key_for`), else the file is read here. May block
        refreshing a login (``key_for`` runs that in a thread); raises AuthFileError /
        LoginExpiredError."""
        from ..ai import get_env_api_key, resolve_config_value
        from ..ai.oauth import auth_api_key

        if provider in self._runtime_keys:
            return self._runtime_keys[provider]
        if isinstance(stored, _Unread):
            stored = auth_api_key(provider)
        if stored:
            return stored
        env_key = get_env_api_key(provider)
        if env_key:
            return env_key
        if provider not in self._resolved:
            source = self._key_sources.get(provider)
            self._resolved[provider] = resolve_config_value(source) if source else None
        return self._resolved[provider]

    async def key_for(self, provider: str) -> str | None:
        """``api_key_for`` with auth.json read once per request; in a worker thread only when
        a login must be refreshed first (the refresh reads the file again, under its lock)."""
        from ..ai.oauth import AuthStore, is_expired_login

        if provider in self._runtime_keys:
            return self._runtime_keys[provider]
        store = AuthStore()
        entry = store.get(provider)
        if is_expired_login(entry):
            return await trio.to_thread.run_sync(self.api_key_for, provider)
        return self.api_key_for(provider, store.key_of(provider, entry))

    @implements(STREAM)
    async def stream(self, args: StreamArgs, call: TypedCall[StreamArgs, T.AssistantMessageEvent]) -> T.AssistantMessage:
        """Serve one ``stream`` call (see the module docstring)."""
        from ..ai import StreamOptions, stream, stream_simple

        model, context = args.model, args.context
        received, reused = len(context.messages), 0
        if args.cached is not None:
            try:
                context = self.contexts.resolve_context(args.cached, context)
            except RemoteError as exc:
                self.log.event("stream_refused", request=args.request_id, code=exc.code, error=exc.message)
                raise
            reused = len(context.messages) - received
        await _ready.wait(self.warmed)
        wire = args.options
        options = StreamOptions(
            max_tokens=wire.max_tokens, temperature=wire.temperature, headers=wire.headers,
            session_id=wire.session_id, reasoning=wire.reasoning, thinking_budgets=wire.thinking_budgets,
            cache_retention=wire.cache_retention, extra=dict(wire.extra),
        )  # fmt: skip
        provider = model.split("/", 1)[0] if isinstance(model, str) else model.provider
        signal = AbortSignal()
        options.signal = signal
        from ..ai.oauth import AuthFileError, LoginExpiredError

        key_error: str | None = None
        try:
            options.api_key = await self.key_for(provider)
        except (AuthFileError, LoginExpiredError) as exc:
            key_error = str(exc)
        if provider == "github-copilot" and not isinstance(model, str):
            model, options.headers = _copilot(model, options.api_key, context, options.headers)
        options.live_partial = False  # deltas are forwarded without their partial message
        if self._limits:
            options.extra = {**self._limits, **options.extra}
        # The events go out in their wire form straight from the sender (already the declared
        # chunk shape), merged while the link is busy: no Struct round trip per delta; those
        # ready together (one network read's) go in one write.
        sender = CoalescingSender(call.incoming.send_chunk, send_many=call.incoming.send_chunks)

        # A cancel from the caller aborts the stream (cooperatively: the partial reply is kept).
        take_back = call.cancel_requested.on_set(lambda: signal.abort("cancelled by the caller"))
        async with trio.open_nursery() as nursery:
            nursery.start_soon(sender.run)
            lost: RemoteError | None = None
            ids = {"session": options.session_id, "request": args.request_id, "provider": provider,
                   "model": model if isinstance(model, str) else model.id}  # fmt: skip
            self.log.event("stream_start", **ids, received=received, reused=reused, bytes=call.incoming.size)
            try:
                if key_error is not None:
                    final = await _fail_stream(model, key_error, sender.push)
                else:
                    final = await (stream_simple if args.simple else stream)(model, context, options, sender.push)
                self.log.event(
                    "stream_end", **ids, stopReason=final.stop_reason, error=final.error_message,
                    inputTokens=final.usage.input, outputTokens=final.usage.output,
                )  # fmt: skip
                # The last events go out with the result, in one write (one wake-up of the caller).
                rest = await sender.finish()  # (raises a send failure: the link is gone)
                call.incoming.send_with_result(rest)
            except RemoteError as exc:  # the link broke (ConnectionLost): nobody to answer
                lost = exc
            finally:
                nursery.cancel_scope.cancel()
                take_back()
        if lost is not None:
            raise lost
        return final


def _copilot(model: T.Model, token: str | None, context: T.Context,
             headers: dict[str, str] | None) -> tuple[T.Model, dict[str, str]]:
    """A Copilot request as pi makes it: the per-request headers (``copilot_request_headers``)
    under the caller's own, and, for a Copilot-hosted model, the API host the token names
    (pi's ``modifyModels``; a models.json baseUrl elsewhere, a proxy, is kept)."""
    from ..ai.oauth import copilot_base_url, copilot_request_headers

    if token and "proxy-ep=" in token and "githubcopilot.com" in model.base_url:
        model = msgspec.structs.replace(model, base_url=copilot_base_url(token))
    return model, {**copilot_request_headers(context.messages), **(headers or {})}


async def _fail_stream(model: T.Model | str, text: str, emit: Any) -> T.AssistantMessage:
    """The one ``error`` event of a stream that could not start (no usable credentials)."""
    from ..ai.catalog import find_model
    from ..ai.registry import error_message

    found = find_model(model) if isinstance(model, str) else model
    if found is None:
        found = T.Model(id=str(model), name=str(model), api="", provider=str(model).split("/", 1)[0])
    msg = error_message(found, text)
    await emit(T.ErrorEvent(reason="error", error=msg))
    return msg


async def run_provider(links: dict[str, trio.SocketStream], config: Any) -> None:
    """Actor entry: serve the coordinator link until it closes.

    The SDK of the expected API (``warm_api``) is imported and warmed up from the start, while
    the coordinator is still starting and preparing the first request: in a fresh process the
    SDK import is the longest step before the first request can leave. SDK clients (and their
    open connections) are kept across calls for the actor's lifetime (``reuse_clients``)."""
    from ..ai.providers._common import reuse_clients
    from ._serve_link import serve_coordinator_link

    part = read_part(config, ProviderConfig)
    actor = ProviderActor(part)
    async with reuse_clients(), trio.open_nursery() as nursery:
        nursery.start_soon(actor.warm_up, part.warm_api)
        # A supervisor's spare (standby) waits for its coordinator: see _serve_link.
        await serve_coordinator_link(links["coordinator"], role="provider", handler=Router.serving(actor, PROVIDER), standby=part.standby)
        nursery.cancel_scope.cancel()
