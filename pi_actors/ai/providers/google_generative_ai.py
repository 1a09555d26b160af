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
- requests: a session's history is converted once (``_google_shared._Conversion``: each request
  converts only the messages appended since) and each content is put in the SDK's wire form once
  (``_genai._WireContents``); the request is still the SDK's public ``generate_content_stream``
  (its config conversion, auth, URL, automatic continuation, errors, chunk parsing), with those
  wire dicts swapped in for a placeholder content at ``async_request_streamed``: the same bytes;
- ``stream_simple`` maps ``reasoning`` to ``thinkingConfig`` as pi does (Gemini 3 / Gemma 4:
  ``thinkingLevel``; 2.5: ``thinkingBudget`` from pi's per-model table; no level: thinking off).
"""

from __future__ import annotations

from typing import Any

try:
    from google import genai
    from google.genai import errors as genai_errors

    from ._genai import GeminiAPIError, GenaiHandle, stream_content
except ImportError as exc:  # pragma: no cover - exercised in a process without the extra
    raise ImportError(
        f"The google-generative-ai API needs the google-genai SDK ({exc.name or exc} is missing): "
        "pip install 'pi-actors[google]'"
    ) from None

from ..options import StreamOptions, clamp_reasoning
from ..types import AssistantMessage, Context, Model
from ._common import StreamRun, apply_on_payload, describe_error, run_stream
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
from ._stream import headers_key, require_api_key, simple_base_options, warm_model, warm_up_functions

__all__ = ["API", "stream", "stream_simple", "convert_messages", "build_params", "describe_google_error",
           "GeminiAPIError",
           "prepare", "warm_up"]

API = "google-generative-ai"

# ---------------------------------------------------------------------------------------------
# Entry points


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


def _client_handle(model: Model, options: StreamOptions, api_key: str) -> GenaiHandle:
    http: dict[str, Any] = {}
    if model.base_url:
        http["base_url"] = model.base_url.rstrip("/")
        http["api_version"] = ""  # the base URL names the version (pi's convention)
    return GenaiHandle(model, options, lambda http_options: genai.Client(api_key=api_key, http_options=http_options),
                       **http)


def _warm_client() -> GenaiHandle:
    """A throwaway client (imports the SDK's request machinery; never connects)."""
    handle = _client_handle(warm_model(API, "http://127.0.0.1/v1beta"), StreamOptions(), "warm-up")
    handle.client.aio.models  # noqa: B018 - builds the async resource
    return handle


prepare, warm_up = warm_up_functions(_warm_client)


async def _body(run: StreamRun, context: Context) -> None:
    model, options = run.model, run.options
    api_key = require_api_key(model, options)
    params = await apply_on_payload(build_params(model, context, options), model, options)
    key = (API, api_key, model.base_url, headers_key(model, options))
    await stream_content(run, key, lambda: _client_handle(model, options, api_key), params, _Mapper(run))


async def stream(model: Model, context: Context, options: StreamOptions | None, emit: Any) -> AssistantMessage:
    return await run_stream(model, options, emit, lambda run: _body(run, context), describe_google_error)


async def stream_simple(model: Model, context: Context, options: StreamOptions | None, emit: Any) -> AssistantMessage:
    base = simple_base_options(model, options)
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
