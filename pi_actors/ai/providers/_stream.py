"""The request-and-read scaffolding the providers share, around ``_common.run_stream``'s body.

Each provider keeps what is its own (the request it builds, the client it makes, the mapping of
its events onto blocks, its error texts); what every one of them did the same way is here:

- :func:`require_api_key` — the call's key (options, else the provider's environment variable);
  ``ProviderError("No API key for provider: <provider>")`` when there is none;
- :func:`request_headers` / :func:`headers_key` — the model's headers under the call's (the
  call's win), and the same as a hashable key for ``sdk_client``;
- :func:`warm_model` — the placeholder model a throwaway warm-up client is built for;
- :func:`warm_up_functions` — a provider's ``prepare`` and ``warm_up`` from its warm-client
  factory (see ``_common.prepare_client`` / ``warm_up_client``);
- :func:`open_http` — a raw HTTP request (providers without an SDK) up to its headers, with an
  error status read and turned into the provider's own exception;
- :func:`open_sdk` — the same for an SDK's streaming response;
- :func:`read_response` — open the response, emit ``start``, read its body, close body stream
  then response in any case (the order ``_common`` requires);
- :func:`sse_reader` — the common body reader: SSE events into a handler (plain text deltas
  joined per read, for a provider that tells them apart), the abort flag checked, then the
  provider's end-of-stream checks;
- :func:`dispatch_json_event` — one SSE event of JSON data to the handler its ``type`` names;
- :func:`simple_base_options` / :func:`stream_simple_with_effort` — the start of every
  ``stream_simple`` (and all of it for the OpenAI APIs);
- :func:`base36_hash` — the short deterministic id fragments some APIs need.

Nothing here imports an SDK: a provider module imports its SDK itself, and is imported only
when its API is used.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any

from ..env_keys import get_env_api_key
from ..options import StreamOptions, build_base_options, clamp_reasoning, supports_xhigh
from ..types import Model
from ._common import ProviderError, StreamRun, close_quietly, prepare_client, warm_up_client
from ._sse import TextRuns, decode_json, read_sse

__all__ = [
    "require_api_key",
    "request_headers",
    "headers_key",
    "warm_model",
    "warm_up_functions",
    "open_http",
    "read_response",
    "open_sdk",
    "sse_reader",
    "dispatch_json_event",
    "simple_base_options",
    "stream_simple_with_effort",
    "base36_hash",
]


def require_api_key(model: Model, options: StreamOptions) -> str:
    """The call's API key: ``options.api_key``, else the provider's environment variable.

    Raises ProviderError naming the provider when neither is set (the call's error event)."""
    api_key = options.api_key or get_env_api_key(model.provider)
    if not api_key:
        raise ProviderError(f"No API key for provider: {model.provider}")
    return api_key


def request_headers(model: Model, options: StreamOptions) -> dict[str, str]:
    """The model's configured headers, overridden by the call's own."""
    return {**(model.headers or {}), **(options.headers or {})}


def headers_key(model: Model, options: StreamOptions) -> tuple[tuple[str, str], ...]:
    """:func:`request_headers` as a sorted tuple, for an ``sdk_client`` key."""
    return tuple(sorted(request_headers(model, options).items()))


def warm_model(api: str, base_url: str) -> Model:
    """The model a warm-up client is built for: nothing is ever sent to ``base_url``."""
    return Model(id="warm-up", api=api, provider="warm-up", base_url=base_url)


def warm_up_functions(make_client: Callable[[], Any]) -> tuple[Callable[[], None], Callable[[], Awaitable[None]]]:
    """A provider module's ``(prepare, warm_up)`` for a throwaway client from ``make_client``.

    ``prepare()`` pays the first call's one-time costs that need no event loop
    (``_common.prepare_client``), for a provider process started ahead of its configuration;
    ``await warm_up()`` pays them all, in the event loop (``_common.warm_up_client``)."""

    def prepare() -> None:
        prepare_client(make_client)

    async def warm_up() -> None:
        await warm_up_client(make_client)

    return prepare, warm_up


async def open_http(run: StreamRun, client: Any, url: str, content: bytes, headers: dict[str, str],
                    error: Callable[[Any, bytes], BaseException]) -> Any:
    """POST ``content`` to ``url`` with an httpx client; the streamed response once its
    headers are in (under the first-byte timeout).

    An HTTP error status (400 or more): the error body is read (abortable), the response
    closed, and ``error(response, body)`` raised — the provider's own exception, which keeps
    ``status_code``/``response`` for the shared Retry-After report."""
    request = client.build_request("POST", url, content=content, headers=headers)
    response = await run.open_response(lambda: client.send(request, stream=True))
    if response.status_code >= 400:
        try:
            raw = await run.io(response.aread)
        finally:
            await close_quietly(response)
        raise error(response, raw)
    return response


async def read_response(run: StreamRun, open_response: Callable[[], Awaitable[Any]],
                        read: Callable[[AsyncIterator[bytes]], Awaitable[None]], *, sdk: bool = True) -> None:
    """One response, from request to its body's end.

    ``open_response()`` sends the request and returns the response once its headers are in
    (through ``run.open_response``, so under the first-byte timeout and abortable: see
    :func:`open_sdk` and :func:`open_http`); then ``start`` is emitted (a no-op when the
    provider emitted it before the request) and ``read`` gets the body's byte stream — of the
    SDK's raw ``http_response`` when ``sdk``, else of the httpx response itself. The body
    stream, then the response, are closed whatever happens (never left to the GC)."""
    response = chunks = None
    try:
        response = await open_response()
        await run.start()
        chunks = (response.http_response if sdk else response).aiter_bytes()
        await read(chunks)
    finally:
        await close_quietly(chunks)
        await close_quietly(response)


def open_sdk(run: StreamRun, manager: Any) -> Callable[[], Awaitable[Any]]:
    """The ``open_response`` for :func:`read_response` of an SDK's streaming-response context
    manager (``client.<resource>.with_streaming_response.create(...)``, not yet entered)."""
    return lambda: run.open_response(manager.__aenter__)


def sse_reader(run: StreamRun, on_event: Callable[[str | None, bytes], Awaitable[None]],
               finish: Callable[[], Awaitable[None]] | None = None,
               runs: TextRuns | None = None) -> Callable[[AsyncIterator[bytes]], Awaitable[None]]:
    """The ``read`` for :func:`read_response` of an SSE body: every event into
    ``on_event(name, data)`` (with ``runs``, plain text deltas a run per read: see
    ``_sse.read_sse``), the abort flag checked at the end, then ``finish()`` (the
    provider's end-of-stream checks: raise ProviderError for a stream cut short)."""

    async def read(chunks: AsyncIterator[bytes]) -> None:
        await read_sse(run, chunks, on_event, runs)
        run.check_aborted()
        if finish is not None:
            await finish()

    return read


async def dispatch_json_event(handlers: Mapping[str, Callable[[dict[str, Any]], Awaitable[None]]],
                              name: str | None, data: bytes) -> None:
    """Apply one SSE event whose data is a JSON object: its ``type`` (else the SSE event
    name) picks the handler in ``handlers``; an event of any other type is ignored.

    Raises ProviderError for data that is not a JSON object (and what ``decode_json`` raises
    for data that is not JSON)."""
    ev = decode_json(data)
    if not isinstance(ev, dict):
        raise ProviderError(f"Malformed stream data (not an object): {data[:200]!r}")
    handler = handlers.get(ev.get("type") or name or "")
    if handler is not None:
        await handler(ev)


def simple_base_options(model: Model, options: StreamOptions | None) -> StreamOptions:
    """``build_base_options`` for a ``stream_simple`` call, with the key from the options or,
    failing that, the provider's environment variable."""
    api_key = (options.api_key if options else None) or get_env_api_key(model.provider)
    return build_base_options(model, options, api_key)


async def stream_simple_with_effort(stream: Any, model: Any, context: Any, options: Any, emit: Any) -> Any:
    """``stream_simple`` for the OpenAI APIs: base options plus ``reasoning_effort`` from the
    level (xhigh only where the model supports it, else clamped to high)."""
    base = simple_base_options(model, options)
    level = options.reasoning if options else None
    if level:
        base.extra["reasoning_effort"] = level if supports_xhigh(model) else clamp_reasoning(level)
    return await stream(model, context, base, emit)


def base36_hash(text: str, digest_size: int) -> str:
    """``text``'s BLAKE2b digest of ``digest_size`` bytes, in base 36 (``"0"`` for zero)."""
    n = int.from_bytes(hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=digest_size).digest(), "big")
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while n:
        n, r = divmod(n, 36)
        out = digits[r] + out
    return out or "0"
