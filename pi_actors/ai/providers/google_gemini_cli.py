"""The ``google-gemini-cli`` API: Gemini (and, for Antigravity, Claude and GPT-OSS) through
Google's Cloud Code Assist, the backend of Gemini CLI, with the bearer token of a Google login
(``pi-actors login google-gemini-cli`` / ``google-antigravity``). Plain HTTP/SSE on ``httpx2``:
no SDK and no extra.

Contract: ``stream`` / ``stream_simple`` follow ``_common.run_stream`` (never raise, exactly one
terminal event). Specific to this API (as pi's provider before 0.73):
- the key is a Google login's ``{"token", "projectId"}`` JSON (``ai.oauth``); without one the
  call fails with pi's ``... requires OAuth authentication. Use /login to authenticate.``;
- ``POST <base>/v1internal:streamGenerateContent?alt=sse`` (base: the model's ``baseUrl``,
  default ``https://cloudcode-pa.googleapis.com``) with ``{"project", "model", "request",
  "userAgent", "requestId"}``: ``request`` is the Gemini ``generateContent`` request that
  ``_google_shared`` builds for the other Gemini APIs (``contents``, ``systemInstruction`` as
  ``{"parts": [{"text"}]}``, ``generationConfig``, ``tools``, ``toolConfig``);
- each SSE event is ``{"response": <GenerateContentResponse>, "traceId"?}``, mapped by the
  shared mapper (thinking, text, signatures, whole function calls, usage, finish reasons); an
  ``{"error": {...}}`` event ends the call with its message; a stream without a finish reason
  is cut short (an error, where pi reports success);
- Antigravity (provider ``google-antigravity``, or a ``sandbox.googleapis.com`` base URL) sends
  its own ``User-Agent`` / ``X-Goog-Api-Client`` headers, ``requestType: "agent"``,
  ``userAgent: "antigravity"`` and its system instruction with ``role: "user"``. pi also put
  Antigravity's own identity prompt in front of the system prompt; that text is not sent here;
- an HTTP error is ``Cloud Code Assist API error (<status>): <body>``; the delay Google names in
  the body ("reset after 1h2m3s", "Please retry in 5s", ``"retryDelay": "34s"``, plus a second,
  as pi) is reported like a ``Retry-After`` header, so ``max_retry_delay_ms`` (pi's
  ``maxRetryDelayMs``) caps it. The ai layer does not retry by itself (``ai.retry_after``).
"""

from __future__ import annotations

import itertools
import json
import math
import re
import secrets
import time
from typing import Any

import httpx2
import msgspec

from ..oauth import OAuthError, code_assist_credentials
from ..options import StreamOptions, build_base_options, clamp_reasoning
from ..sanitize import sanitize_surrogates
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
from ._google_shared import (
    _is_gemini3_flash,
    _is_gemini3_pro,
    _is_gemma4,
    _Mapper,
    _thinking_budget,
    _thinking_level,
    build_params,
)
from ._sse import decode_json, read_sse

__all__ = ["API", "stream", "stream_simple", "build_request", "body_retry_delay_ms", "CodeAssistHTTPError",
           "prepare", "warm_up"]

API = "google-gemini-cli"
DEFAULT_ENDPOINT = "https://cloudcode-pa.googleapis.com"
_CLIENT_METADATA = json.dumps({"ideType": "IDE_UNSPECIFIED", "platform": "PLATFORM_UNSPECIFIED",
                               "pluginType": "GEMINI"}, separators=(",", ":"))
_GEMINI_CLI_HEADERS = {"User-Agent": "google-cloud-sdk vscode_cloudshelleditor/0.1",
                       "X-Goog-Api-Client": "gl-node/22.17.0", "Client-Metadata": _CLIENT_METADATA}
_ANTIGRAVITY_HEADERS = {"User-Agent": "antigravity/1.11.5 darwin/arm64",
                        "X-Goog-Api-Client": "google-cloud-sdk vscode_cloudshelleditor/0.1",
                        "Client-Metadata": _CLIENT_METADATA}
_MAX_ERROR_BODY = 2000
_request_counter = itertools.count(1)


def _is_antigravity(model: Model) -> bool:
    return model.provider == "google-antigravity" or "sandbox.googleapis.com" in (model.base_url or "")


def build_request(model: Model, context: Context, options: StreamOptions, project: str) -> dict[str, Any]:
    """The Code Assist request body (module docstring)."""
    params = build_params(model, context, options)
    config: dict[str, Any] = params["config"]
    request: dict[str, Any] = {"contents": params["contents"]}
    system = config.pop("systemInstruction", None)
    antigravity = _is_antigravity(model)
    if system or antigravity:
        request["systemInstruction"] = {"parts": [{"text": sanitize_surrogates(system or "")}]}
        if antigravity:
            request["systemInstruction"]["role"] = "user"
    for key in ("tools", "toolConfig"):
        if key in config:
            request[key] = config.pop(key)
    if config:
        request["generationConfig"] = config  # temperature, maxOutputTokens, thinkingConfig
    body: dict[str, Any] = {"project": project, "model": model.id, "request": request}
    if antigravity:
        body["requestType"] = "agent"
    body["userAgent"] = "antigravity" if antigravity else "pi-coding-agent"
    body["requestId"] = f"{'agent' if antigravity else 'pi'}-{int(time.time() * 1000)}-{secrets.token_hex(5)}"
    return body


_RESET_AFTER = re.compile(r"reset after (?:(\d+)h)?(?:(\d+)m)?(\d+(?:\.\d+)?)s", re.IGNORECASE)
_RETRY_IN = re.compile(r"Please retry in ([0-9.]+)(ms|s)\b", re.IGNORECASE)
_RETRY_DELAY = re.compile(r'"retryDelay":\s*"([0-9.]+)(ms|s)"', re.IGNORECASE)


def body_retry_delay_ms(text: str) -> int | None:
    """The delay (ms, one second added, as pi) an error body asks for, or None."""
    found = _RESET_AFTER.search(text)
    if found:
        try:
            total = ((int(found.group(1) or 0) * 60 + int(found.group(2) or 0)) * 60 + float(found.group(3))) * 1000
        except ValueError:
            total = 0
        if 0 < total < math.inf:
            return math.ceil(total + 1000)
    for pattern in (_RETRY_IN, _RETRY_DELAY):
        found = pattern.search(text)
        if found:
            try:
                value = float(found.group(1))
            except ValueError:
                continue
            if 0 < value < math.inf:
                return math.ceil((value if found.group(2).lower() == "ms" else value * 1000) + 1000)
    return None


class _Response:
    """What ``_common``'s Retry-After reading looks at: the response's headers, with the delay
    the body names added as ``retry-after-ms`` when the headers name none."""

    def __init__(self, headers: Any, body: str) -> None:
        self.headers = dict(headers.items()) if headers is not None else {}
        named = {k.lower() for k in self.headers}
        delay = body_retry_delay_ms(body)
        if delay is not None and not named & {"retry-after", "retry-after-ms"}:
            self.headers["retry-after-ms"] = str(delay)


class CodeAssistHTTPError(Exception):
    """An HTTP error answer; ``status_code`` and ``response`` for the Retry-After reading."""

    def __init__(self, status: int, body: str, headers: Any) -> None:
        text = body.strip()
        if len(text) > _MAX_ERROR_BODY:
            text = f"{text[:_MAX_ERROR_BODY]}... [truncated {len(text) - _MAX_ERROR_BODY} chars]"
        super().__init__(f"Cloud Code Assist API error ({status}): {text or 'status code (no body)'}")
        self.status_code = status
        self.response = _Response(headers, body)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, CodeAssistHTTPError):
        return str(exc)
    return describe_error(exc)


def _make_client() -> httpx2.AsyncClient:
    return httpx2.AsyncClient(verify=shared_ssl_context(), timeout=None, follow_redirects=True)


def prepare() -> None:
    """The first call's one-time costs that need no event loop (``_common.prepare_client``)."""
    prepare_client(_make_client)


async def warm_up() -> None:
    """Pay the first call's one-time costs now (``_common.warm_up_client``)."""
    await warm_up_client(_make_client)


class _Events:
    """Unwraps each Code Assist event (``{"response": ...}``) for the shared mapper."""

    def __init__(self, run: StreamRun) -> None:
        self.mapper = _Mapper(run)

    async def sse(self, _event: str | None, data: bytes) -> None:
        if not data.strip():
            return
        chunk = decode_json(data)
        if not isinstance(chunk, dict):
            raise ProviderError(f"Malformed stream data: expected a JSON object, got {type(chunk).__name__}")
        error = chunk.get("error")
        if error is not None:
            message = error.get("message") if isinstance(error, dict) else None
            code = error.get("code") if isinstance(error, dict) else None
            raise ProviderError(f"Cloud Code Assist API error ({code}): {message}" if message else
                                f"Cloud Code Assist API error: {json.dumps(error)[:500]}")
        response = chunk.get("response")
        if isinstance(response, dict):
            await self.mapper.chunk(response)


async def _body(run: StreamRun, context: Context) -> None:
    model, options = run.model, run.options
    if not options.api_key:
        raise ProviderError("Google Cloud Code Assist requires OAuth authentication. Use /login to authenticate.")
    try:
        token, project = code_assist_credentials(options.api_key)
    except OAuthError as exc:
        raise ProviderError(str(exc)) from None
    body = await apply_on_payload(build_request(model, context, options, project), model, options)
    base = (model.base_url or DEFAULT_ENDPOINT).rstrip("/")
    headers = {"authorization": f"Bearer {token}", "content-type": "application/json", "accept": "text/event-stream",
               **(_ANTIGRAVITY_HEADERS if _is_antigravity(model) else _GEMINI_CLI_HEADERS),
               **(model.headers or {}), **(options.headers or {})}
    url = f"{base}/v1internal:streamGenerateContent?alt=sse"
    # Compact UTF-8 JSON, as pi's JSON.stringify sends it; msgspec: ~5x quicker than json on the
    # ~400 kB body of a long session, the one serialization a request cannot avoid.
    content = msgspec.json.encode(body)
    response = chunks = None
    async with sdk_client((API,), _make_client) as client:
        try:
            request = client.build_request("POST", url, content=content, headers=headers)
            response = await run.open_response(lambda: client.send(request, stream=True))
            if response.status_code >= 400:
                text = (await run.io(response.aread)).decode("utf-8", "replace")
                raise CodeAssistHTTPError(response.status_code, text, response.headers)
            await run.start()
            events = _Events(run)
            chunks = response.aiter_bytes()
            await read_sse(run, chunks, events.sse)
            run.check_aborted()
            await events.mapper.end_open()
            if not events.mapper.finished:
                raise ProviderError("Stream ended without a finish reason (the response was cut short)")
            if run.output.stop_reason == "error":
                raise ProviderError(run.output.error_message or "Gemini stopped with an error")
        finally:
            await close_quietly(chunks)
            await close_quietly(response)


async def stream(model: Model, context: Context, options: StreamOptions | None, emit: Any) -> AssistantMessage:
    return await run_stream(model, options, emit, lambda run: _body(run, context), _describe)


async def stream_simple(model: Model, context: Context, options: StreamOptions | None, emit: Any) -> AssistantMessage:
    """``reasoning`` to ``thinkingConfig`` as the Gemini API does (Gemini 3: ``thinkingLevel``;
    2.5: ``thinkingBudget``); no level: thinking left to the model's default, as pi did here."""
    base = build_base_options(model, options, options.api_key if options else None)
    level = clamp_reasoning(options.reasoning if options else None)
    if level and model.reasoning:
        base.extra["thinking_enabled"] = True
        if _is_gemini3_pro(model) or _is_gemini3_flash(model) or _is_gemma4(model):
            base.extra["thinking_level"] = _thinking_level(level, model)
        else:
            base.extra["thinking_budget_tokens"] = _thinking_budget(model, level,
                                                                    options.thinking_budgets if options else None)
    return await stream(model, context, base, emit)
