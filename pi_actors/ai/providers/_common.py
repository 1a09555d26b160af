"""The skeleton every provider shares (pi's packages/ai, docs/architecture.md §7): one call from request to the
terminal event, with errors and aborts turned into ``error`` events.

Contract of ``run_stream(model, options, emit, body)``:
- builds the live output message and a :class:`StreamRun` around it, then awaits
  ``body(run)``; the body requests, calls ``run.start()`` when it has a response stream (per
  provider timing) and maps the SDK stream through the block helpers;
- never raises at its caller except for a cancellation from an outer cancel scope (or
  KeyboardInterrupt): every exception, including one raised by ``emit``, becomes exactly one
  ``error`` event;
- ends with exactly one terminal event: ``done`` when the body returns with stop reason
  stop/length/toolUse, otherwise ``error``. If the signal is aborted when the call fails or
  finishes, the reason is ``aborted`` (the abort flag wins, as in pi) and the content so far is
  kept; an already-aborted signal gives ``error``/aborted with no ``start``;
- an abort interrupts whatever SDK await is in progress (``run.io``) at once, never an ``emit``
  in progress; the body must close its body stream (the ``aiter_bytes`` generator) and then
  its HTTP response in a ``finally`` (``close_quietly``), so that a failure never leaves an
  open async generator to be finalized at some later garbage collection;
- returns the final AssistantMessage (the one carried by the terminal event).

Stalls: the body opens its response with ``run.open_response`` (the request up to the
response headers, under the *first-byte timeout*) and reads the body with ``run.read_chunk``
(each read under the *idle timeout*), so a server that accepts and never answers, or goes
silent mid-stream, ends the call with ``Provider stalled: no data for N s …`` — a transient
error the caller's retry policy retries (``coding.retry``). Both default to 120 s and come
from the options' ``extra`` (``first_byte_timeout_ms``, ``idle_timeout_ms``; 0 turns one
off); the provider actor fills them in from settings.json's ``provider`` block.

Retry-After: an HTTP error whose response carries ``retry-after-ms`` / ``retry-after`` gets
the delay the server asked for added to its message, or, above the maximum
(``extra["max_retry_delay_ms"]``, pi's ``retry.maxDelayMs``, default 60 s, 0 = none), is
reported as a request the server wants delayed too long (see :mod:`..retry_after`).

Block helpers keep the tool-call JSON buffers beside the message (never inside the blocks), so
nothing internal ever leaks into a message. With ``options.live_partial`` False they also keep
the text of a run of deltas beside the message and apply it (``sync``) before any other event,
before the terminal event and whenever a mapper reads a block, so a long reply costs linear
time instead of re-copying the block's text at every delta.
"""

from __future__ import annotations

import copy
import inspect
import json
import logging
import platform
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from contextvars import ContextVar
from typing import Any

import trio

from ..abort import AbortSignal
from ..catalog import calculate_cost
from ..options import DEFAULT_FIRST_BYTE_TIMEOUT_MS, DEFAULT_IDLE_TIMEOUT_MS, Emit, StreamOptions, extra_option
from ..partial_json import parse_tool_arguments
from ..retry_after import DEFAULT_MAX_RETRY_DELAY_MS, describe_retry_after, parse_retry_after
from ..types import (
    AssistantMessage,
    DoneEvent,
    ErrorEvent,
    Model,
    StartEvent,
    TextContent,
    TextDeltaEvent,
    TextEndEvent,
    TextStartEvent,
    ThinkingContent,
    ThinkingDeltaEvent,
    ThinkingEndEvent,
    ThinkingStartEvent,
    ToolCall,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
    UsageCost,
    new_assistant_message,
)

__all__ = [
    "ProviderError",
    "StreamRun",
    "run_stream",
    "describe_error",
    "close_quietly",
    "delta_text",
    "note_response",
    "error_message_for",
    "apply_on_payload",
    "reuse_clients",
    "sdk_client",
    "sdk_request_args",
    "warm_up_client",
    "prepare_client",
    "shared_ssl_context",
]

_log = logging.getLogger(__name__)

ABORTED_MESSAGE = "Request was aborted"
_CLOSE_TIMEOUT = 2.0


class ProviderError(Exception):
    """A failure whose message is already what the user should read."""


class _Aborted(Exception):
    pass


def _milliseconds(options: StreamOptions, name: str, default: int) -> int:
    value = extra_option(options, name, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise ProviderError(f"Bad option {name}: {value!r} (expected a number of milliseconds, 0 or more)")
    return int(value) if value != float("inf") else 0


def _seconds_text(ms: int) -> str:
    return f"{ms // 1000} s" if ms % 1000 == 0 else f"{ms / 1000:g} s"


class StreamRun:
    """One provider call in progress: the live message, event emission and abort wiring."""

    def __init__(self, model: Model, options: StreamOptions | None, emit: Emit) -> None:
        self.model = model
        self.options = options or StreamOptions()
        self.output: AssistantMessage = new_assistant_message(model)
        self.signal: AbortSignal | None = self.options.signal
        self.started = False
        self._emit = emit
        self._io_scope: trio.CancelScope | None = None
        self.live = self.options.live_partial
        self._json: dict[int, list[str]] = {}  # tool-call argument fragments, by block index
        self._lag: dict[int, list[str]] = {}
        self._stale: set[int] = set()
        self._limits: tuple[int, int, int] | None = None

    def limits(self) -> tuple[int, int, int]:
        """(first-byte timeout, idle timeout, maximum retry delay), in ms; raises ProviderError
        for a bad value (read when first needed, so the error is the call's error event)."""
        if self._limits is None:
            self._limits = (
                _milliseconds(self.options, "first_byte_timeout_ms", DEFAULT_FIRST_BYTE_TIMEOUT_MS),
                _milliseconds(self.options, "idle_timeout_ms", DEFAULT_IDLE_TIMEOUT_MS),
                _milliseconds(self.options, "max_retry_delay_ms", DEFAULT_MAX_RETRY_DELAY_MS),
            )
        return self._limits

    @property
    def aborted(self) -> bool:
        return self.signal is not None and self.signal.aborted

    async def io(self, fn: Callable[..., Awaitable[Any]], *args: Any, **kwargs: Any) -> Any:
        """Await ``fn(*args, **kwargs)`` (an SDK request or read); an abort interrupts it at once."""
        if self.signal is None:
            return await fn(*args, **kwargs)
        if self.signal.aborted:
            raise _Aborted()
        with trio.CancelScope() as scope:
            self._io_scope = scope
            try:
                return await fn(*args, **kwargs)
            finally:
                self._io_scope = None
        raise _Aborted()

    async def open_response(self, enter: Callable[[], Awaitable[Any]]) -> Any:
        """``await enter()`` — the SDK call that sends the request and returns the response
        once its headers are in — through ``io``, under the first-byte timeout."""
        limit = self.limits()[0]
        if not limit:
            return await self.io(enter)
        with trio.move_on_after(limit / 1000):
            return await self.io(enter)
        raise ProviderError(
            f"Provider stalled: no data for {_seconds_text(limit)} waiting for the response "
            "(provider.firstByteTimeoutMs)"
        )

    async def read_chunk(self, next_chunk: Callable[[], Awaitable[Any]]) -> Any:
        """``await next_chunk()`` (the next piece of the response body) through ``io``, under the
        idle timeout."""
        limit = self.limits()[1]
        if not limit:
            return await self.io(next_chunk)
        with trio.move_on_after(limit / 1000):
            return await self.io(next_chunk)
        raise ProviderError(
            f"Provider stalled: no data for {_seconds_text(limit)} mid-stream (provider.idleTimeoutMs)"
        )

    def _abort_io(self) -> None:
        """The signal's callback: interrupt the SDK call in progress (``io``), if any."""
        if self._io_scope is not None:
            self._io_scope.cancel()

    def check_aborted(self) -> None:
        if self.aborted:
            raise _Aborted()

    # -- events -------------------------------------------------------------------------------
    #
    # Each helper changes the live message, then emits the matching event. With
    # ``options.live_partial`` False, deltas are kept aside (``_lag``: text and thinking
    # pieces; ``_stale``: tool calls whose arguments were not re-parsed) and applied by
    # ``sync`` before any other event is emitted and before the message is handed out.

    def sync(self) -> None:
        """Bring every lagging block of the live message up to date (lazy mode)."""
        content = self.output.content
        if self._lag:
            for i, parts in self._lag.items():
                block = content[i]
                if isinstance(block, TextContent):
                    block.text += "".join(parts)
                elif isinstance(block, ThinkingContent):
                    block.thinking += "".join(parts)
            self._lag.clear()
        if self._stale:
            for i in self._stale:
                block = content[i]
                if isinstance(block, ToolCall) and i in self._json:
                    block.arguments = parse_tool_arguments("".join(self._json[i]))
            self._stale.clear()

    async def _emit_synced(self, event: Any) -> None:
        if self._lag or self._stale:
            self.sync()
        await self._emit(event)

    async def start(self) -> None:
        if not self.started:
            self.started = True
            await self._emit(StartEvent(partial=self.output))

    def update_cost(self) -> UsageCost:
        return calculate_cost(self.model, self.output.usage)

    async def text_start(self, text: str = "", signature: str | None = None) -> int:
        self.output.content.append(TextContent(text=text, text_signature=signature))
        i = len(self.output.content) - 1
        await self._emit_synced(TextStartEvent(content_index=i, partial=self.output))
        return i

    def _append(self, i: int, delta: str, field: str) -> None:
        """Add ``delta`` to block ``i``'s ``field`` now (live partial) or at the next sync."""
        if self.live:
            block = self.output.content[i]
            setattr(block, field, getattr(block, field) + delta)
        else:
            self._lag.setdefault(i, []).append(delta)

    async def text_delta(self, i: int, delta: str) -> None:
        self._append(i, delta, "text")
        await self._emit(TextDeltaEvent(content_index=i, delta=delta, partial=self.output))

    async def text_end(self, i: int) -> None:
        self.sync()
        block = self.output.content[i]
        assert isinstance(block, TextContent)
        await self._emit(TextEndEvent(content_index=i, content=block.text, partial=self.output))

    async def thinking_start(self, signature: str | None = None, text: str = "",
                             redacted: bool | None = None) -> int:
        self.output.content.append(ThinkingContent(thinking=text, thinking_signature=signature, redacted=redacted))
        i = len(self.output.content) - 1
        await self._emit_synced(ThinkingStartEvent(content_index=i, partial=self.output))
        return i

    async def thinking_delta(self, i: int, delta: str) -> None:
        self._append(i, delta, "thinking")
        await self._emit(ThinkingDeltaEvent(content_index=i, delta=delta, partial=self.output))

    async def thinking_end(self, i: int) -> None:
        self.sync()
        block = self.output.content[i]
        assert isinstance(block, ThinkingContent)
        await self._emit(ThinkingEndEvent(content_index=i, content=block.thinking, partial=self.output))

    async def toolcall_start(self, id: str, name: str, arguments: dict[str, Any] | None = None,
                             initial_json: str = "") -> int:
        self.output.content.append(ToolCall(id=id, name=name, arguments=dict(arguments or {})))
        i = len(self.output.content) - 1
        self._json[i] = [initial_json] if initial_json else []
        if initial_json:
            self.output.content[i].arguments = parse_tool_arguments(initial_json)  # type: ignore[union-attr]
        await self._emit_synced(ToolCallStartEvent(content_index=i, partial=self.output))
        return i

    async def toolcall_delta(self, i: int, fragment: str) -> None:
        parts = self._json.setdefault(i, [])
        if fragment:
            parts.append(fragment)
        if self.live:
            if parts:
                block = self.output.content[i]
                assert isinstance(block, ToolCall)
                block.arguments = parse_tool_arguments("".join(parts))
        elif fragment:
            self._stale.add(i)
        await self._emit(ToolCallDeltaEvent(content_index=i, delta=fragment, partial=self.output))

    def set_tool_json(self, i: int, text: str) -> None:
        """Replace the buffered argument JSON of tool call ``i`` and re-parse it (no event)."""
        self._json[i] = [text] if text else []
        self._stale.discard(i)
        block = self.output.content[i]
        if isinstance(block, ToolCall) and text.strip():
            block.arguments = parse_tool_arguments(text)

    async def toolcall_end(self, i: int, emit_block: ToolCall | None = None) -> None:
        """Final parse of tool call ``i``, then ``toolcall_end`` carrying ``emit_block`` (a fresh
        copy, as openai-responses does) or the block itself."""
        self.sync()
        block = self.output.content[i]
        assert isinstance(block, ToolCall)
        buffered = "".join(self._json.pop(i, ()))
        if buffered.strip():
            block.arguments = parse_tool_arguments(buffered)
        out = emit_block if emit_block is not None else block
        if emit_block is not None:
            emit_block.arguments = dict(block.arguments)
        await self._emit(ToolCallEndEvent(content_index=i, tool_call=out, partial=self.output))

    def tool_json(self, i: int) -> str:
        return "".join(self._json.get(i, ()))

    async def end_block(self, i: int) -> None:
        """Emit the ``X_end`` matching the block at ``i``."""
        block = self.output.content[i]
        if isinstance(block, TextContent):
            await self.text_end(i)
        elif isinstance(block, ThinkingContent):
            await self.thinking_end(i)
        else:
            await self.toolcall_end(i)

    # -- terminal -----------------------------------------------------------------------------

    def _with_retry_after(self, exc: BaseException, message: str) -> str:
        """``message`` with the delay an HTTP error's response asks for (module docstring)."""
        status = getattr(exc, "status_code", None)
        response = getattr(exc, "response", None)
        if not isinstance(status, int) or status < 400 or response is None:
            return message
        delay = parse_retry_after(getattr(response, "headers", None))
        if delay is None:
            return message
        try:
            maximum = self.limits()[2]
        except ProviderError:
            maximum = DEFAULT_MAX_RETRY_DELAY_MS
        return describe_retry_after(message, delay, maximum)

    async def _finish(self) -> AssistantMessage:
        self.sync()
        reason = self.output.stop_reason
        assert reason in ("stop", "length", "toolUse")
        try:
            await self._emit(DoneEvent(reason=reason, message=self.output))
        except Exception:  # the terminal event was handed over; nothing may follow it
            _log.warning("emit raised on the done event", exc_info=True)
        return self.output

    async def _fail(self, exc: BaseException, describe: Callable[[BaseException], str]) -> AssistantMessage:
        self.sync()
        self._json.clear()
        self.output.stop_reason = "aborted" if self.aborted or isinstance(exc, _Aborted) else "error"
        self.output.error_message = error_message_for(exc, describe)
        if self.output.stop_reason == "error":
            self.output.error_message = self._with_retry_after(exc, self.output.error_message)
        try:
            await self._emit(ErrorEvent(reason=self.output.stop_reason, error=self.output))
        except Exception:
            _log.warning("emit raised on the error event (%s)", self.output.error_message, exc_info=True)
        return self.output


def error_message_for(exc: BaseException, describe: Callable[[BaseException], str] | None = None) -> str:
    if isinstance(exc, _Aborted):
        return ABORTED_MESSAGE
    if isinstance(exc, ProviderError):
        return str(exc)
    try:
        msg = (describe or describe_error)(exc)
    except Exception:
        msg = ""
    return msg or str(exc) or type(exc).__name__


def _body_message(body: Any) -> str | None:
    if isinstance(body, dict):
        inner = body.get("error", body)
        if isinstance(inner, dict) and isinstance(inner.get("message"), str):
            return inner["message"]
        if isinstance(body.get("message"), str):
            return body["message"]
        return json.dumps(body)[:4000]
    if isinstance(body, str):
        return body.strip()[:4000] or None
    return None


def describe_error(exc: BaseException) -> str:
    """A user-facing message for SDK and transport errors, in pi's shapes where it has one:
    ``"<status> <provider message>"`` for HTTP errors (``"<status> status code (no body)"`` when
    empty), ``"Connection error: <cause>"`` for transport failures, the JSON error for bad data."""
    status = getattr(exc, "status_code", None)
    if isinstance(status, int) and hasattr(exc, "response"):
        msg = _body_message(getattr(exc, "body", None))
        if msg is None:
            try:
                msg = exc.response.text.strip()[:4000] or None
            except Exception:
                msg = None
        if status < 400:  # an error event inside a 200 stream (Anthropic): no status to report
            return msg or f"{type(exc).__name__}: {exc}"
        return f"{status} {msg}" if msg else f"{status} status code (no body)"
    name = type(exc).__name__
    module = type(exc).__module__ or ""
    if name in ("APIConnectionError", "APITimeoutError"):
        cause = exc.__cause__ or exc.__context__
        base = "Request timed out" if name == "APITimeoutError" else "Connection error"
        return f"{base}: {_transport_text(cause)}" if cause is not None else f"{base}."
    if module.startswith(("httpx", "httpcore", "anyio", "h11")) or isinstance(exc, (ConnectionError,
                                                                                    trio.BrokenResourceError)):
        return f"Connection error: {_transport_text(exc)}"
    if isinstance(exc, json.JSONDecodeError):
        return f"Malformed stream data (not JSON): {exc}"
    return str(exc) or name


def _transport_text(exc: BaseException) -> str:
    text = str(exc)
    inner = exc.__cause__ or exc.__context__
    while not text and inner is not None:
        text, inner = str(inner), inner.__cause__ or inner.__context__
    return text or type(exc).__name__


_ssl_context: Any = None
_ssl_lock = threading.Lock()


def shared_ssl_context() -> Any:
    """One TLS context for every SDK client of the process. Building one reads the system CA
    bundle (about 20 ms), which would otherwise be paid on every call as each call makes its
    own client. ``ssl.SSLContext`` is safe to share between clients and threads."""
    global _ssl_context
    with _ssl_lock:
        if _ssl_context is None:
            import httpx2

            _ssl_context = httpx2.create_ssl_context()
        return _ssl_context


def note_response(run: StreamRun, response_id: str, model: Any) -> None:
    """Record the provider's id for the response, and the model it says answered when that
    is not the model asked for, on the run's message."""
    run.output.response_id = response_id
    if isinstance(model, str) and model and model != run.output.model:
        run.output.response_model = model


def delta_text(value: Any, field: str) -> str:
    """An event's delta ``field``: a string, absent or null (no text), else malformed data
    (ProviderError: a number added to a text would fail later, and not as a stream error)."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    raise ProviderError(f"Malformed stream data: {field} is {json.dumps(value)[:100]} (expected a string)")


async def close_quietly(resource: Any) -> None:
    """Close an SDK stream or client, bounded in time and shielded from cancellation."""
    if resource is None:
        return
    with trio.CancelScope(shield=True) as scope:
        scope.deadline = trio.current_time() + _CLOSE_TIMEOUT
        try:
            # ``aclose`` first: an httpx response has both, and its sync ``close`` refuses an
            # async stream (the SDKs' streams and clients have an async ``close`` only).
            close = getattr(resource, "aclose", None) or resource.close
            result = close()
            if hasattr(result, "__await__"):
                await result
        except Exception:
            pass


async def run_stream(
    model: Model,
    options: StreamOptions | None,
    emit: Emit,
    body: Callable[[StreamRun], Awaitable[None]],
    describe: Callable[[BaseException], str] = describe_error,
) -> AssistantMessage:
    run = StreamRun(model, options, emit)
    failure: BaseException | None = None
    if run.aborted:
        return await run._fail(_Aborted(), describe)
    # An abort interrupts the SDK call in progress at once, from the signal's own callback (no
    # watcher task per request). Cancelled from an outer scope and KeyboardInterrupt pass.
    take_back = run.signal.on_set(run._abort_io) if run.signal is not None else None
    try:
        run.limits()  # a bad timeout option fails the call before any request is built
        await body(run)
        if run.aborted:
            raise _Aborted()
        if run.output.stop_reason in ("error", "aborted"):
            raise ProviderError("An unknown error occurred")
    except Exception as exc:
        failure = exc
    finally:
        if take_back is not None:
            take_back()
    if failure is not None:
        return await run._fail(failure, describe)
    return await run._finish()


#: The SDK clients kept by the innermost ``reuse_clients`` block, or None outside one.
_reused_clients: ContextVar[dict[tuple, Any] | None] = ContextVar("pi_actors_reused_sdk_clients", default=None)


@asynccontextmanager
async def reuse_clients() -> AsyncIterator[None]:
    """Within this block (in this task and the tasks started from it), the providers keep one
    SDK client per (API, key, base URL, headers) and reuse it for later calls, with its pool of
    open HTTP connections, instead of building and closing a client per call (~1 ms per call
    and a new connection). Leaving the block closes every kept client. Outside any block each
    call has a client of its own, as before: the ``ai`` layer keeps no state of its own; the
    caller that owns the clients (the provider actor) scopes them.

    Reuse is safe for what a call needs: a response aborted or cut short is closed, and its
    connection with it (it is never handed back to the pool half-read); an idle connection the
    server has closed is noticed by the HTTP layer before reuse (it expires after 5 s idle)."""
    clients: dict[tuple, Any] = {}
    token = _reused_clients.set(clients)
    try:
        yield
    finally:
        _reused_clients.reset(token)
        for client in clients.values():
            await close_quietly(client)


@asynccontextmanager
async def sdk_client(key: tuple, make: Callable[[], Any]) -> AsyncIterator[Any]:
    """The SDK client for one call: inside ``reuse_clients``, the one kept for ``key`` (made on
    first use); otherwise a fresh one from ``make``, closed when the call ends. ``key`` must
    name everything ``make`` builds the client from."""
    clients = _reused_clients.get()
    if clients is None:
        client = make()
        try:
            yield client
        finally:
            await close_quietly(client)
        return
    client = clients.get(key)
    if client is None:
        client = clients[key] = make()
    yield client


def prepare_client(make_client: Callable[[], Any]) -> None:
    """The part of :func:`warm_up_client` that needs no event loop, for a process that has
    none yet (a provider started ahead of its configuration imports its SDK while it waits):
    the platform description, a client built by ``make_client`` (the imports of the request
    machinery, the CA bundle) and anyio's trio backend imported. The client is dropped without
    closing: it never opened a connection. ``warm_up_client`` still runs later, cheaply."""
    import importlib

    platform.platform()
    make_client()
    importlib.import_module("anyio._backends._trio")


async def warm_up_client(make_client: Callable[[], Any]) -> None:
    """Pay a provider's first-call costs ahead of the first call, without any network.

    ``make_client`` (run in a thread) builds a throwaway SDK client with the shared TLS context
    and touches the resource the provider calls: that imports the request machinery the SDKs
    load lazily (HTTP transport, resource classes) and reads the CA bundle; the platform
    description the SDKs put in their headers is computed too. Then, in the event loop, anyio
    loads its trio backend, which the SDKs' HTTP stack runs on. Together ~60 ms of
    a first call, paid here instead while the process waits for its first request.
    """
    import anyio

    def make() -> Any:
        # The SDKs describe the platform in their request headers, computed on a client's first
        # request; platform.platform() runs `uname -p` once per process (cached after that).
        platform.platform()
        return make_client()

    client = await trio.to_thread.run_sync(make, abandon_on_cancel=True)
    try:
        anyio.get_cancelled_exc_class()  # loads anyio's backend for the running trio loop
    finally:
        # The SDKs' clients close with ``close()``; a bare httpx client with ``aclose()``.
        aclose = getattr(client, "aclose", None)
        await (aclose() if aclose is not None else client.close())


def sdk_request_args(params: dict[str, Any], bulk: str, required: tuple[str, ...] = ("model",)) -> dict[str, Any]:
    """Keyword arguments for an SDK ``create(..., stream=True)`` that send exactly ``params``.

    The SDKs walk their named arguments through a TypedDict transform on every request, which
    costs time in proportion to the context (tens of ms for a hundred messages) and changes
    nothing for the shapes we build. So the named arguments get only what the SDK requires
    (``required``, taken from ``params``), with an empty list for ``bulk`` (``messages`` or
    ``input``), and everything else, ``bulk`` included, goes in ``extra_body``, which the SDK
    merges over the transformed body untouched. A key keeps its place in the merged dict, so
    the JSON on the wire is byte for byte what passing it all as named arguments gave.
    """
    args: dict[str, Any] = {key: params[key] for key in required}
    args[bulk] = []
    args["stream"] = True
    args["extra_body"] = {k: v for k, v in params.items() if k not in required and k != "stream"}
    return args


async def apply_on_payload(params: dict[str, Any], model: Model, options: StreamOptions) -> dict[str, Any]:
    """``params`` as the ``on_payload`` hook leaves or replaces them (``params`` when there is
    none). The hook gets a deep copy, which it may edit in place: the messages a request is
    built from may be shared with the next request's (the providers that convert a history
    once and continue it)."""
    hook = extra_option(options, "on_payload")
    if hook is None:
        return params
    params = copy.deepcopy(params)
    result = hook(params, model)
    if inspect.isawaitable(result):
        result = await result
    return params if result is None else result
