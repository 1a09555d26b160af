"""What the two APIs on Google's ``google-genai`` SDK share (``google-generative-ai`` and
``google-vertex``): the client built on HTTP clients of ours, the request with its history
converted to the wire once (:class:`_WireContents`, :class:`_SplicedContents`), and the reading
of a ``generate_content_stream`` response into a mapper.

Imported only by those two provider modules, so the SDK is imported only when one of their
APIs is used (``ImportError`` here is reported by them with the extra to install).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx2
from google import genai
from google.genai import _common as genai_common
from google.genai import _transformers as genai_transformers
from google.genai import errors as genai_errors
from google.genai import models as genai_models
from google.genai import types as genai_types

from ..options import StreamOptions
from ..types import Model
from ._common import ProviderError, StreamRun, close_quietly, sdk_client, shared_ssl_context
from ._stream import request_headers

__all__ = ["GeminiAPIError", "GenaiHandle", "stream_content"]


class GeminiAPIError(Exception):
    """The SDK's ``APIError`` (an HTTP error, or an error event mid-stream) with the
    ``status_code`` and ``response`` the shared skeleton reads to report a ``Retry-After``."""

    def __init__(self, error: Any) -> None:
        message = str(error.message or "").strip()
        super().__init__(f"{error.code} {message}" if message else f"{error.code} status code (no body)")
        self.status_code = error.code if isinstance(error.code, int) else 0
        self.response = error.response


class GenaiHandle:
    """A genai client built on HTTP clients of ours and the process's shared TLS context
    (given none, the SDK reads the CA bundle for each of the three it would make: ~70 ms a
    call), with a ``close`` for the shared client helpers that closes those HTTP clients.

    ``make(http_options)`` builds the ``genai.Client``; ``http`` adds to (or overrides) the
    HTTP options (base URL, API version); the request headers are the model's and the call's."""

    def __init__(self, model: Model, options: StreamOptions, make: Callable[[genai_types.HttpOptions], genai.Client],
                 **http: Any) -> None:
        context = shared_ssl_context()
        self.http = httpx2.AsyncClient(verify=context, timeout=None)
        self.sync_http = httpx2.Client(verify=context, timeout=None)  # never used; the SDK wants one
        settings: dict[str, Any] = {
            "httpx_async_client": self.http, "httpx_client": self.sync_http,
            "async_client_args": {"ssl": context},  # its WebSocket context (Live API), unused here
            "headers": request_headers(model, options) or None,
            **http,
        }
        self.client = make(genai_types.HttpOptions(**settings))

    async def close(self) -> None:
        self.sync_http.close()
        await self.http.aclose()


# ---------------------------------------------------------------------------------------------
# The history converted to the wire once
#
# The SDK's ``generate_content_stream`` validates the whole ``contents`` into pydantic models
# and converts them back to the wire on every request (and every continuation hop): at 300
# turns of ~1 kB tool output that was 130-200 ms of CPU a request, nearly all of the provider's.
# Here each content is converted once, by the SDK's own steps, and the SDK's public call is
# made with a one-part placeholder that the client below swaps for those wire dicts when the
# request goes out. Everything else stays the SDK's: the config's conversion, URL, auth,
# headers, automatic continuation (each hop's request goes through the same swap), error
# mapping and the parsing of each chunk.


def _content_wire(content: Any, vertex: bool) -> list[dict[str, Any]]:
    """``content`` as the SDK puts it in a request body: the steps of its
    ``_GenerateContentParameters_to_mldev`` / ``_to_vertex`` (``t_contents``, then
    ``_Content_to_*``) and of ``_generate_content_stream`` (``convert_to_dict``, then
    ``encode_unserializable_types``: a signature or image data as URL-safe base64). Each step
    maps a content on its own, so the whole body's ``contents`` is these, one after another
    (``tests/test_ai_google_requests.py`` checks the bytes against the SDK's own request)."""
    to_wire = genai_models._Content_to_vertex if vertex else genai_models._Content_to_mldev
    return [genai_common.encode_unserializable_types(genai_common.convert_to_dict(to_wire(item, None, None)))
            for item in genai_transformers.t_contents([content])]


class _WireContents:
    """The wire form of the last request's contents, continued with the contents appended
    since. Why: a session's ``contents`` (``_google_shared.convert_messages``) repeats the very
    dicts of the last request and adds a few, so only those few are converted. The test is
    identity (a dict held here cannot be confused with another: it stays alive); a new dict at
    position k (the open tool results, an edit by an ``on_payload`` hook, a branch switch)
    converts from k on. The dicts are never edited in place (the conversion's contract)."""

    def __init__(self, vertex: bool) -> None:
        self.vertex = vertex
        self.source: list[Any] = []
        self.wire: list[list[dict[str, Any]]] = []

    def of(self, contents: list[Any]) -> list[dict[str, Any]] | None:
        """The wire dicts of ``contents`` (a new list; its dicts are shared, not to be edited),
        or None when an item is not a content dict (:func:`_is_content`): the SDK then gets
        ``contents`` as they are. A content the SDK refuses raises its error, and the cache is
        then emptied."""
        source, wire = self.source, self.wire
        n = 0
        for old, new in zip(source, contents, strict=False):
            if old is not new:
                break
            n += 1
        del source[n:], wire[n:]
        if not all(_is_content(c) for c in contents[n:]):
            return None
        try:
            for content in contents[n:]:
                wire.append(_content_wire(content, self.vertex))
                source.append(content)
        except Exception:
            self.source, self.wire = [], []
            raise
        return [item for items in wire for item in items]


def _is_content(item: Any) -> bool:
    """Whether ``_content_wire`` converts ``item`` as the SDK converts it within the whole
    list: a content dict (with ``parts``, never taken for a part, which the SDK would group
    with the parts next to it). Anything else (a hook's string, say) goes to the SDK as is."""
    return type(item) is dict and "parts" in item


_WIRE = {False: _WireContents(False), True: _WireContents(True)}
_PLACEHOLDER_TEXT = "pi-actors: contents converted to the wire already"
_PLACEHOLDER = [{"role": "user", "parts": [{"text": _PLACEHOLDER_TEXT}]}]


class _SplicedContents:
    """The client's ``BaseApiClient`` seen by one request, with the placeholder contents of
    the body swapped for the wire dicts at ``async_request_streamed`` (the SDK's last step
    before the HTTP request, after its conversion). Every other attribute is the client's."""

    def __init__(self, api_client: Any, wire: list[dict[str, Any]]) -> None:
        self._api_client = api_client
        self._wire = wire

    def __getattr__(self, name: str) -> Any:
        return getattr(self._api_client, name)

    async def async_request_streamed(self, http_method: str, path: str, request_dict: dict[str, Any],
                                     http_options: Any = None) -> Any:
        contents = request_dict.get("contents")
        if not (isinstance(contents, list) and len(contents) == 1
                and contents[0].get("parts") == [{"text": _PLACEHOLDER_TEXT}]):
            raise RuntimeError("google-genai no longer passes the request contents through as before; "
                               "pi-actors' _genai._SplicedContents needs updating for this SDK version")
        request_dict = {**request_dict, "contents": self._wire}  # same key order: only the value changes
        return await self._api_client.async_request_streamed(http_method, path, request_dict, http_options)


def _generate(client: genai.Client, params: dict[str, Any]) -> Any:
    """``generate_content_stream(**params)``'s awaitable: the SDK's public call, its contents
    converted through :class:`_WireContents` and spliced in (module comment above) when they
    are a list of content dicts, else as they are."""
    models = client.aio.models
    contents = params.get("contents")
    api_client = models._api_client
    wire = _WIRE[bool(api_client.vertexai)].of(contents) if isinstance(contents, list) and contents else None
    if wire is None:
        return models.generate_content_stream(**params)
    spliced = genai_models.AsyncModels(_SplicedContents(api_client, wire))  # type: ignore[arg-type]
    return spliced.generate_content_stream(**{**params, "contents": _PLACEHOLDER})


async def stream_content(run: StreamRun, key: tuple, make_handle: Callable[[], GenaiHandle],
                         params: dict[str, Any], mapper: Any) -> None:
    """Request ``generate_content_stream(**params)`` (:func:`_generate`) with the client kept for ``key``
    (``sdk_client``) and feed every chunk to ``mapper`` (``chunk``, ``end_open``,
    ``finished``: ``google_generative_ai``'s mapper).

    ``start`` is emitted once the first chunk is in (the SDK sends the request on the
    generator's first step); an SDK ``APIError`` is raised as :class:`GeminiAPIError`; a
    stream that ends with no finish reason, or one that finished with an error, raises
    ProviderError. The SDK's generator is closed in any case."""
    opened: list[Any] = []  # the SDK's chunk generator, once made (closed in any case)

    async def first_chunk() -> Any:
        # The SDK sends the request on the generator's first step: the response is open (its
        # headers in, an HTTP error raised) only once the first chunk is.
        gen = await _generate(handle.client, params)
        opened.append(gen)
        try:
            return await gen.__anext__()
        except StopAsyncIteration:
            return None

    async with sdk_client(key, make_handle) as handle:
        try:
            chunk = await run.open_response(first_chunk)
            await run.start()
            next_chunk = opened[0].__anext__
            while chunk is not None:
                await mapper.chunk(chunk)
                run.check_aborted()
                try:
                    chunk = await run.read_chunk(next_chunk)
                except StopAsyncIteration:
                    chunk = None
            await mapper.end_open()
            if not mapper.finished:
                raise ProviderError("Stream ended without a finish reason (the response was cut short)")
            if run.output.stop_reason == "error":
                raise ProviderError(run.output.error_message or "Gemini stopped with an error")
        except genai_errors.APIError as exc:
            raise GeminiAPIError(exc) from exc
        finally:
            for gen in opened:
                await close_quietly(gen)
