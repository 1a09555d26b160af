"""The ``google-generative-ai`` API: Gemini's ``streamGenerateContent`` through Google's
``google-genai`` SDK (an optional extra: ``pip install 'pi-actors[google]'``).

Contract: ``stream`` / ``stream_simple`` follow the skeleton of ``_common.run_stream`` (never
raise, exactly one terminal event). Specific to this API:
- the SDK is imported when this module is; without it the import fails with one line naming
  the extra, which the registry's lazy loader turns into an ``error`` event;
- the SDK runs on trio through an ``httpx2`` client we hand it (its own clients are per
  asyncio loop); its retries are off (the caller's retry policy retries);
- ``model.base_url`` includes the API version (``.../v1beta``), as pi keys it;
- ``start`` is emitted once the HTTP request has been accepted (HTTP errors, a refused
  connection or a missing key give ``error`` with no ``start``);
- parts map to blocks: ``thought: true`` text → thinking, other text → text (a run of parts of
  one kind is one block), ``functionCall`` → a tool call, whole (start, one delta with its JSON,
  end). A part's ``thoughtSignature`` (bytes on the SDK side) is kept base64 as the block's
  ``thinkingSignature`` / ``textSignature`` / ``thoughtSignature``; the last non-empty one of a
  block wins. A call without an id, or with one already used, gets ``<name>_<ms>_<n>``;
- usage: ``input`` = prompt − cached, ``output`` = candidates + thoughts, ``cacheRead`` =
  cached, ``totalTokens`` as reported; ``responseId`` / ``responseModel`` from the chunks;
- ``finishReason`` STOP → stop (toolUse when the message has tool calls), MAX_TOKENS →
  length, any other → error (safety, recitation, malformed call...: pi's mapping); a stream
  that ends with no ``finishReason`` is an error (cut short), where pi would report success;
- replay: thinking and signatures are sent back only to the same provider and model, and only
  valid base64 signatures; other models' thinking becomes plain text (``transform``); tool
  results go as ``functionResponse`` (``output`` or ``error``), consecutive ones in one user
  turn; call ids are sent only to models that need them (``claude-*``, ``gpt-oss-*``);
- ``stream_simple`` maps ``reasoning`` to ``thinkingConfig`` as pi does (Gemini 3 / Gemma 4:
  ``thinkingLevel``; 2.5: ``thinkingBudget`` from pi's per-model table; no level: thinking off).
"""

from __future__ import annotations

from typing import Any

try:
    import httpx2
    from google import genai
    from google.genai import errors as genai_errors
    from google.genai import types as genai_types
except ImportError as exc:  # pragma: no cover - exercised in a process without the extra
    raise ImportError(
        f"The google-generative-ai API needs the google-genai SDK ({exc.name or exc} is missing): "
        "pip install 'pi-actors[google]'"
    ) from None

from ..env_keys import get_env_api_key
from ..options import StreamOptions, build_base_options, clamp_reasoning
from ..types import AssistantMessage, Context, Model
from ._common import (
    ProviderError,
    StreamRun,
    apply_on_payload,
    close_quietly,
    describe_error,
    prepare_client,
    run_stream,
    sdk_client,
    shared_ssl_context,
    warm_up_client,
)
from ._google_shared import (  # the request/response conversion, shared with gemini-cli and vertex
    _is_gemini3_flash,
    _is_gemini3_pro,
    _is_gemma4,
    _Mapper,
    _thinking_budget,
    _thinking_level,
    build_params,
    convert_messages,
)

__all__ = ["API", "stream", "stream_simple", "convert_messages", "build_params", "describe_google_error",
           "GeminiAPIError",
           "prepare", "warm_up"]

API = "google-generative-ai"

# ---------------------------------------------------------------------------------------------
# Entry points


class GeminiAPIError(Exception):
    """The SDK's ``APIError`` (an HTTP error, or an error event mid-stream) with the
    ``status_code`` and ``response`` the shared skeleton reads to report a ``Retry-After``."""

    def __init__(self, error: Any) -> None:
        message = str(error.message or "").strip()
        super().__init__(f"{error.code} {message}" if message else f"{error.code} status code (no body)")
        self.status_code = error.code if isinstance(error.code, int) else 0
        self.response = error.response


def describe_google_error(exc: BaseException) -> str:
    """``"<code> <message>"`` for the SDK's API errors (as the other providers put HTTP
    errors), else the shared description; a chunk the SDK could not validate is malformed
    stream data, in one line."""
    if isinstance(exc, GeminiAPIError):
        return str(exc)
    if isinstance(exc, genai_errors.APIError):
        return str(GeminiAPIError(exc))
    if type(exc).__name__ == "ValidationError":
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        return f"Malformed stream data: {first}"
    return describe_error(exc)


class _ClientHandle:
    """A genai client built on HTTP clients of ours and the process's shared TLS context
    (given none, the SDK reads the CA bundle for each of the three it would make: ~70 ms a
    call), with a ``close`` for the shared client helpers that closes those HTTP clients."""

    def __init__(self, model: Model, options: StreamOptions, api_key: str) -> None:
        context = shared_ssl_context()
        self.http = httpx2.AsyncClient(verify=context, timeout=None)
        self.sync_http = httpx2.Client(verify=context, timeout=None)  # never used; the SDK wants one
        http: dict[str, Any] = {
            "httpx_async_client": self.http, "httpx_client": self.sync_http,
            "async_client_args": {"ssl": context},  # its WebSocket context (Live API), unused here
            "headers": {**(model.headers or {}), **(options.headers or {})} or None,
        }
        if model.base_url:
            http["base_url"] = model.base_url.rstrip("/")
            http["api_version"] = ""  # the base URL names the version (pi's convention)
        self.client = genai.Client(api_key=api_key, http_options=genai_types.HttpOptions(**http))

    async def close(self) -> None:
        self.sync_http.close()
        await self.http.aclose()


def _client_handle(model: Model, options: StreamOptions, api_key: str) -> _ClientHandle:
    return _ClientHandle(model, options, api_key)


def _warm_client() -> _ClientHandle:
    """A throwaway client (imports the SDK's request machinery; never connects)."""
    model = Model(id="warm-up", api=API, provider="warm-up", base_url="http://127.0.0.1/v1beta")
    handle = _client_handle(model, StreamOptions(), "warm-up")
    handle.client.aio.models  # noqa: B018 - builds the async resource
    return handle


def prepare() -> None:
    """The first call's one-time costs that need no event loop (``_common.prepare_client``)."""
    prepare_client(_warm_client)


async def warm_up() -> None:
    """Pay the first call's one-time costs now (``_common.warm_up_client``)."""
    await warm_up_client(_warm_client)


async def _body(run: StreamRun, context: Context) -> None:
    model, options = run.model, run.options
    api_key = options.api_key or get_env_api_key(model.provider)
    if not api_key:
        raise ProviderError(f"No API key for provider: {model.provider}")
    params = await apply_on_payload(build_params(model, context, options), model, options)
    headers = tuple(sorted({**(model.headers or {}), **(options.headers or {})}.items()))
    key = (API, api_key, model.base_url, headers)
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

    async with sdk_client(key, lambda: _client_handle(model, options, api_key)) as handle:
        try:
            chunk = await run.open_response(first_chunk)
            await run.start()
            mapper = _Mapper(run)
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


async def stream(model: Model, context: Context, options: StreamOptions | None, emit: Any) -> AssistantMessage:
    return await run_stream(model, options, emit, lambda run: _body(run, context), describe_google_error)


async def stream_simple(model: Model, context: Context, options: StreamOptions | None, emit: Any) -> AssistantMessage:
    api_key = (options.api_key if options else None) or get_env_api_key(model.provider)
    base = build_base_options(model, options, api_key)
    level = clamp_reasoning(options.reasoning if options else None)
    if not level:
        base.extra["thinking_enabled"] = False
    else:
        base.extra["thinking_enabled"] = True
        if _is_gemini3_pro(model) or _is_gemini3_flash(model) or _is_gemma4(model):
            base.extra["thinking_level"] = _thinking_level(level, model)
        else:
            base.extra["thinking_budget_tokens"] = _thinking_budget(model, level,
                                                                    options.thinking_budgets if options else None)
    return await stream(model, context, base, emit)
