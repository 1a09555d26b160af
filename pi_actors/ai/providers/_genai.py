"""What the two APIs on Google's ``google-genai`` SDK share (``google-generative-ai`` and
``google-vertex``): the client built on HTTP clients of ours, and the reading of a
``generate_content_stream`` response into a mapper.

Imported only by those two provider modules, so the SDK is imported only when one of their
APIs is used (``ImportError`` here is reported by them with the extra to install).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx2
from google import genai
from google.genai import errors as genai_errors
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


async def stream_content(run: StreamRun, key: tuple, make_handle: Callable[[], GenaiHandle],
                         params: dict[str, Any], mapper: Any) -> None:
    """Request ``generate_content_stream(**params)`` with the client kept for ``key``
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
        gen = await handle.client.aio.models.generate_content_stream(**params)
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
