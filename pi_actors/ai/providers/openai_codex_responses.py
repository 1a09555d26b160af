"""The ``openai-codex-responses`` API: the Responses stream of ChatGPT's Codex backend
(``<base>/codex/responses``), used with a ChatGPT subscription's OAuth access token.

There is no SDK for this backend (pi talks to it with plain ``fetch``): the request goes out
on an ``httpx2`` client and the SSE is mapped by ``openai_responses``'s mapper, so the blocks,
signatures, usage and stop reasons are those of openai-responses.

Contract: ``stream`` / ``stream_simple`` follow the skeleton of ``_common.run_stream`` (never
raise, exactly one terminal event). Specific to this API, as pi has it:
- the key is the OAuth access token (a JWT): its ``https://api.openai.com/auth`` claim's
  ``chatgpt_account_id`` goes in ``chatgpt-account-id``; a token without one fails with
  ``Failed to extract accountId from token`` before any request;
- headers: ``Authorization: Bearer``, ``originator: pi``, ``OpenAI-Beta:
  responses=experimental``, and with a session id ``session_id`` / ``x-client-request-id``;
- the URL: ``model.base_url`` (default ``https://chatgpt.com/backend-api``) + ``/codex/responses``
  unless it already ends so (or in ``/codex``);
- the body: ``store: false``, the system prompt as ``instructions`` (default "You are a
  helpful assistant."), ``text.verbosity`` (``extra["text_verbosity"]``, default low),
  encrypted reasoning included, ``prompt_cache_key`` = session id, ``tool_choice: auto``,
  ``parallel_tool_calls: true``, tools with ``strict: null``, ``reasoning`` only when an effort
  is given;
- the stream: ``response.done`` counts as ``response.completed`` (an unknown status as none);
  an ``error`` event fails with ``Codex error: <message|code>``, ``response.failed`` with its
  message (or ``Codex response failed``), data that is not JSON with ``Invalid Codex SSE JSON``;
- an HTTP error: ``<status> <message>`` from the body's ``error.message``; a 429 or a usage-limit
  code says ``You have hit your ChatGPT usage limit (<plan> plan). Try again in ~N min.``.

Not done here (pi does them): the WebSocket transport pi tries first (this module always uses
SSE, pi's fallback), and pi's own retries of a failed request (the caller's retry policy
retries transient errors, as for every other provider).
"""

from __future__ import annotations

import json
import platform
import re
import time
from typing import Any

import httpx2
import msgspec

from ..oauth import CODEX_JWT_CLAIM, codex_account_id
from ..options import StreamOptions, extra_option
from ..types import AssistantMessage, Context, Model
from ._common import (
    ProviderError,
    StreamRun,
    apply_on_payload,
    describe_error,
    run_stream,
    sdk_client,
    shared_ssl_context,
)
from ._stream import open_http, read_response, request_headers, require_api_key, sse_reader, stream_simple_with_effort, warm_up_functions
from .openai_responses import _Mapper, convert_messages

__all__ = ["API", "stream", "stream_simple", "build_body", "codex_url", "account_id", "describe_codex_error",
           "CodexHTTPError", "prepare", "warm_up"]

API = "openai-codex-responses"

DEFAULT_BASE_URL = "https://chatgpt.com/backend-api"
#: The access token's claim that holds the ChatGPT account id.
JWT_CLAIM = CODEX_JWT_CLAIM
_STATUSES = ("completed", "incomplete", "failed", "cancelled", "queued", "in_progress")
_USAGE_LIMIT = re.compile(r"usage_limit_reached|usage_not_included|rate_limit_exceeded", re.IGNORECASE)
_decode = msgspec.json.Decoder().decode


def codex_url(base_url: str | None) -> str:
    raw = (base_url or "").strip() or DEFAULT_BASE_URL
    base = raw.rstrip("/")
    if base.endswith("/codex/responses"):
        return base
    if base.endswith("/codex"):
        return base + "/responses"
    return base + "/codex/responses"


def account_id(token: str) -> str:
    """The ChatGPT account id carried by an access token; ProviderError if it has none."""
    found = codex_account_id(token)
    if found is None:
        raise ProviderError("Failed to extract accountId from token")
    return found


def build_body(model: Model, context: Context, options: StreamOptions) -> dict[str, Any]:
    without_system = msgspec.structs.replace(context, system_prompt=None)
    body: dict[str, Any] = {
        "model": model.id, "store": False, "stream": True,
        "instructions": context.system_prompt or "You are a helpful assistant.",
        "input": convert_messages(model, without_system),
        "text": {"verbosity": extra_option(options, "text_verbosity") or "low"},
        "include": ["reasoning.encrypted_content"],
    }
    if options.session_id:
        body["prompt_cache_key"] = options.session_id
    body["tool_choice"] = "auto"
    body["parallel_tool_calls"] = True
    if options.temperature is not None:
        body["temperature"] = options.temperature
    tier = extra_option(options, "service_tier")
    if tier is not None:
        body["service_tier"] = tier
    if context.tools:
        body["tools"] = [{"type": "function", "name": t.name, "description": t.description,
                          "parameters": t.parameters, "strict": None} for t in context.tools]
    effort = extra_option(options, "reasoning_effort")
    if effort:
        body["reasoning"] = {"effort": effort, "summary": extra_option(options, "reasoning_summary") or "auto"}
    return body


def _headers(model: Model, options: StreamOptions, token: str, account: str) -> dict[str, str]:
    headers = {k.lower(): v for k, v in request_headers(model, options).items()}
    headers.update({
        "authorization": f"Bearer {token}", "chatgpt-account-id": account, "originator": "pi",
        "user-agent": f"pi ({platform.system().lower()} {platform.release()}; {platform.machine()})",
        "openai-beta": "responses=experimental", "accept": "text/event-stream", "content-type": "application/json",
    })
    if options.session_id:
        headers["session_id"] = options.session_id
        headers["x-client-request-id"] = options.session_id
    return headers


class CodexHTTPError(Exception):
    """An HTTP error answer (``status_code``/``response`` feed the shared Retry-After report)."""

    def __init__(self, status_code: int, body: str, response: Any) -> None:
        super().__init__(f"{status_code}")
        self.status_code, self.body, self.response = status_code, body, response


def describe_codex_error(exc: BaseException) -> str:
    """pi's texts for the backend's HTTP errors (see the module docstring)."""
    if not isinstance(exc, CodexHTTPError):
        return describe_error(exc)
    message = exc.body.strip() or "Request failed"
    try:
        error = json.loads(exc.body).get("error")
    except (ValueError, AttributeError):
        error = None
    if isinstance(error, dict):
        code = str(error.get("code") or error.get("type") or "")
        friendly = None
        if _USAGE_LIMIT.search(code) or exc.status_code == 429:
            plan = f" ({str(error['plan_type']).lower()} plan)" if error.get("plan_type") else ""
            when = ""
            if isinstance(error.get("resets_at"), int | float):
                when = f" Try again in ~{max(0, round((error['resets_at'] - time.time()) / 60))} min."
            friendly = f"You have hit your ChatGPT usage limit{plan}.{when}"
        if friendly:
            return friendly
        if isinstance(error.get("message"), str) and error["message"]:
            message = error["message"]
    return f"{exc.status_code} {message[:4000]}"


def _object(value: Any) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an empty one (hostile streams send anything)."""
    return value if isinstance(value, dict) else {}


class _CodexEvents:
    """Codex's variations on the Responses events, then the shared mapper."""

    def __init__(self, mapper: _Mapper) -> None:
        self.mapper = mapper

    async def sse(self, name: str | None, data: bytes) -> None:
        text = data.strip()
        if not text or text == b"[DONE]":
            return
        try:
            event = _decode(text)
        except msgspec.DecodeError as exc:
            raise ProviderError(f"Invalid Codex SSE JSON: {exc}: {text[:200].decode('utf-8', 'replace')!r}") from None
        if not isinstance(event, dict) or not isinstance(event.get("type"), str):
            return
        kind = event["type"]
        if kind == "error":
            detail = event.get("message") or event.get("code") or json.dumps(event)[:300]
            raise ProviderError(f"Codex error: {detail}")
        if kind == "response.failed":
            error = _object(_object(event.get("response")).get("error"))
            raise ProviderError(str(error.get("message") or "Codex response failed"))
        if kind in ("response.done", "response.completed", "response.incomplete"):
            response = _object(event.get("response"))
            status = response.get("status")
            response = {**response, "status": status if status in _STATUSES else None}
            event = {**event, "type": "response.completed", "response": response}
        handler = self.mapper._handlers.get(event["type"])
        if handler is not None:
            await handler(event)


def _make_client() -> httpx2.AsyncClient:
    return httpx2.AsyncClient(verify=shared_ssl_context(), timeout=None)


prepare, warm_up = warm_up_functions(_make_client)


def _http_error(response: Any, body: bytes) -> CodexHTTPError:
    return CodexHTTPError(response.status_code, body.decode("utf-8", "replace"), response)


async def _body(run: StreamRun, context: Context) -> None:
    model, options = run.model, run.options
    token = require_api_key(model, options)
    headers = _headers(model, options, token, account_id(token))
    body = await apply_on_payload(build_body(model, context, options), model, options)
    content = json.dumps(body, ensure_ascii=False).encode()
    async with sdk_client((API,), _make_client) as client:
        mapper = _Mapper(run, body.get("service_tier"))
        await read_response(run, lambda: open_http(run, client, codex_url(model.base_url), content, headers, _http_error),
                            sse_reader(run, _CodexEvents(mapper).sse, mapper.check_completed), sdk=False)


async def stream(model: Model, context: Context, options: StreamOptions | None, emit: Any) -> AssistantMessage:
    return await run_stream(model, options, emit, lambda run: _body(run, context), describe_codex_error)


async def stream_simple(model: Model, context: Context, options: StreamOptions | None, emit: Any) -> AssistantMessage:
    return await stream_simple_with_effort(stream, model, context, options, emit)
