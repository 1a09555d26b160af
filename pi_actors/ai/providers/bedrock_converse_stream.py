"""The ``bedrock-converse-stream`` API: Amazon Bedrock's ``ConverseStream`` (every Bedrock model:
Claude, Nova, Llama, Mistral, DeepSeek...), with ``botocore`` for AWS credentials and SigV4
signing (an optional extra: ``pip install 'pi-actors[bedrock]'``) and our own ``httpx2`` request
and event-stream decoder (``eventstream``) for the streamed body.

Why this split (measured on this machine, a loaded 2-core box): boto3's ConverseStream is
synchronous — on trio it would need a worker thread per call that an abort cannot interrupt
(the thread sits in a blocking socket read until the next event) and ~0.7 s of botocore
imports plus boto3's service-model loading; aiobotocore is asyncio-only. The ``anthropic``
SDK's ``AsyncAnthropicBedrock`` runs on trio but speaks InvokeModel with Anthropic's body, so
it serves Claude only (the catalog's amazon-bedrock provider also lists Nova, Llama, DeepSeek,
...), still needs botocore to sign, and took seconds to import. So the request is built and
sent here, cancellable like every other provider's, and botocore is used only for what it is
the reference for: the credential chain (env keys, ``AWS_PROFILE`` files, SSO, container and
web-identity roles — resolved in a worker thread, as they may do I/O) and SigV4.

Contract: ``stream`` / ``stream_simple`` follow ``_common.run_stream`` (never raise, exactly
one terminal event). As pi 0.73.1:
- auth: ``AWS_BEARER_TOKEN_BEDROCK`` (or ``extra`` ``bearer_token``) is sent as
  ``Authorization: Bearer`` (a Bedrock API key); else the request is SigV4-signed for service
  ``bedrock`` with botocore's default credentials (``extra`` ``profile`` or ``AWS_PROFILE``);
  ``AWS_BEDROCK_SKIP_AUTH=1`` signs with dummy keys (proxies that need none). No credentials:
  an ``error`` event naming the variables. The catalog's ``"<authenticated>"`` key is ignored;
- region: ``extra`` ``region``, ``AWS_REGION``, ``AWS_DEFAULT_REGION``, the profile's, the
  region of a standard ``bedrock-runtime.<region>.amazonaws.com`` base URL, else us-east-1;
  a standard base URL is replaced by the configured region's endpoint, any other (a proxy, a
  VPC endpoint, the scripted server) is used as given;
- request: ``POST <endpoint>/model/<url-encoded id>/converse-stream`` with pi's body
  (``messages``, ``system``, ``inferenceConfig``, ``toolConfig``,
  ``additionalModelRequestFields`` for Claude thinking); tool-call ids normalised to
  ``[a-zA-Z0-9_-]{1,64}``; consecutive tool results in one user message; images as bytes
  (base64 in JSON) with their format; a thinking block replayed to Claude needs its
  signature (else it goes as text), to other models without one; cache points for Claude
  models that support prompt caching, unless cache retention is ``none``;
- response: ``contentBlockDelta`` text / ``reasoningContent`` (text, then signature pieces) /
  ``toolUse`` input fragments, ``contentBlockStart`` for tool calls, ``contentBlockStop``
  ends a block; ``messageStop`` stop reason (end_turn/stop_sequence → stop, max_tokens /
  model_context_window_exceeded → length, tool_use → toolUse, any other → error);
  ``metadata`` usage (input, output, cache read/write, total);
- errors: an HTTP error is ``"<pi's prefix>: <message>"`` from ``x-amzn-errortype`` and the
  JSON ``message`` (``Throttling error: ...``); an ``exception`` message in the stream the
  same from its ``:exception-type``; bad framing is one ``Malformed event stream`` line; a
  stream that ends without ``messageStop`` is an error (cut short); ``start`` is emitted once
  the response headers are in with status 200.
"""

from __future__ import annotations

import json
import os
import re
import urllib.parse
from collections.abc import AsyncIterator
from typing import Any

import trio

try:
    import botocore.auth
    import botocore.awsrequest
    import botocore.credentials
    import botocore.session
    import httpx2
except ImportError as exc:  # pragma: no cover - exercised in a process without the extra
    raise ImportError(
        f"The bedrock-converse-stream API needs botocore ({exc.name or exc} is missing): "
        "pip install 'pi-actors[bedrock]'"
    ) from None

from ..options import (
    StreamOptions,
    adjust_max_tokens_for_thinking,
    build_base_options,
    clamp_reasoning,
    extra_option,
    resolve_cache_retention,
)
from ..sanitize import sanitize_surrogates
from ..transform import Continuation, HistoryConversion
from ..types import (
    AssistantMessage,
    Context,
    ImageContent,
    Message,
    Model,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from ._common import (
    ProviderError,
    StreamRun,
    apply_on_payload,
    describe_error,
    run_stream,
    sdk_client,
    shared_ssl_context,
)
from ._stream import open_http, read_response, request_headers, warm_up_functions
from .eventstream import EventStreamDecoder, EventStreamError

__all__ = ["API", "stream", "stream_simple", "build_params", "convert_messages", "resolve_region",
           "BedrockError", "describe_bedrock_error", "prepare", "warm_up"]

API = "bedrock-converse-stream"
_STOP = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length",
         "model_context_window_exceeded": "length", "tool_use": "toolUse"}
_PREFIXES = {"InternalServerException": "Internal server error", "ModelStreamErrorException": "Model stream error",
             "ValidationException": "Validation error", "ThrottlingException": "Throttling error",
             "ServiceUnavailableException": "Service unavailable"}
_IMAGE_FORMATS = {"image/jpeg": "jpeg", "image/jpg": "jpeg", "image/png": "png", "image/gif": "gif",
                  "image/webp": "webp"}
_STANDARD_HOST = re.compile(r"^bedrock-runtime(?:-fips)?\.([a-z0-9-]+)\.amazonaws\.com(?:\.cn)?$")
_ID_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")
_BUDGETS = {"minimal": 1024, "low": 2048, "medium": 8192, "high": 16384}


def _env(name: str) -> str | None:
    return os.environ.get(name) or None


# ---------------------------------------------------------------------------------------------
# Request


def _candidates(model: Model) -> list[str]:
    values = [model.id, model.name] if model.name else [model.id]
    return [v for value in values for v in (value.lower(), re.sub(r"[\s_.:]+", "-", value.lower()))]


def _is_claude(model: Model) -> bool:
    mid, name = model.id.lower(), (model.name or "").lower()
    return any(s in mid for s in ("anthropic.claude", "anthropic/claude")) or "claude" in name


def _adaptive(model: Model) -> bool:
    return any(s in c for c in _candidates(model) for s in ("opus-4-6", "opus-4-7", "sonnet-4-6"))


def _caches(model: Model) -> bool:
    found = _candidates(model)
    if not any("claude" in c for c in found):
        return _env("AWS_BEDROCK_FORCE_CACHE") == "1"
    return any(s in c for c in found for s in ("-4-", "claude-3-7-sonnet", "claude-3-5-haiku"))


def _normalize_id(call_id: str, _model: Model, _source: AssistantMessage) -> str:
    return _ID_UNSAFE.sub("_", call_id)[:64]


def _image(block: ImageContent) -> dict[str, Any]:
    fmt = _IMAGE_FORMATS.get(block.mime_type)
    if fmt is None:
        raise ProviderError(f"Unknown image type: {block.mime_type}")
    return {"image": {"format": fmt, "source": {"bytes": block.data}}}  # base64 in JSON, as the SDK sends


def _cache_point(retention: str) -> dict[str, Any]:
    return {"cachePoint": {"type": "default", **({"ttl": "1h"} if retention == "long" else {})}}


def _assistant(msg: AssistantMessage, model: Model) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for c in msg.content:
        if isinstance(c, TextContent):
            if c.text.strip():
                blocks.append({"text": sanitize_surrogates(c.text)})
        elif isinstance(c, ToolCall):
            blocks.append({"toolUse": {"toolUseId": c.id, "name": c.name, "input": c.arguments}})
        elif c.thinking.strip():
            text = sanitize_surrogates(c.thinking)
            if not _is_claude(model):
                blocks.append({"reasoningContent": {"reasoningText": {"text": text}}})
            elif (c.thinking_signature or "").strip():
                blocks.append({"reasoningContent": {"reasoningText": {"text": text,
                                                                      "signature": c.thinking_signature}}})
            else:
                blocks.append({"text": text})
    return blocks


def _tool_result(msg: ToolResultMessage) -> dict[str, Any]:
    content = [_image(c) if isinstance(c, ImageContent) else {"text": sanitize_surrogates(c.text)}
               for c in msg.content]
    return {"toolResult": {"toolUseId": msg.tool_call_id, "content": content,
                           "status": "error" if msg.is_error else "success"}}


def convert_messages(model: Model, context: Context, retention: str = "short") -> list[dict[str, Any]]:
    """The ``messages`` of a request: pi's conversion (module docstring). A new list; its
    dicts are not to be edited: they may be the ones the last request was built from (see
    :class:`_Conversion`). A conversion that fails halfway (an unknown image type) is not
    continued."""
    result = _continuation.convert(model, None, context.messages, lambda: _Conversion(model)).result()
    if retention != "none" and _caches(model) and result and result[-1]["role"] == "user":
        last = result[-1]
        result[-1] = {**last, "content": [*last["content"], _cache_point(retention)]}
    return result


class _Conversion(HistoryConversion):
    """The conversion of one history, continued (:class:`HistoryConversion`); no key. The
    state carried over is the transform's; a tool result joins the user message of the
    results before it, also when they came in an earlier feed (that message's content list
    grows: requests already built have been sent). The cache point goes on a copy of the last
    message."""

    def __init__(self, model: Model) -> None:
        super().__init__(model, None, _normalize_id)

    def convert(self, messages: list[Message]) -> None:
        model, result = self.model, self.out
        for msg in messages:
            if isinstance(msg, UserMessage):
                content = ([{"text": sanitize_surrogates(msg.content)}] if isinstance(msg.content, str) else
                           [{"text": sanitize_surrogates(c.text)} if isinstance(c, TextContent) else _image(c)
                            for c in msg.content])
                result.append({"role": "user", "content": content})
            elif isinstance(msg, AssistantMessage):
                blocks = _assistant(msg, model)
                if blocks:
                    result.append({"role": "assistant", "content": blocks})
            else:
                last = result[-1] if result else None
                if last is not None and last["role"] == "user" and last["content"] and \
                        all("toolResult" in b for b in last["content"]):
                    last["content"].append(_tool_result(msg))
                else:
                    result.append({"role": "user", "content": [_tool_result(msg)]})


_continuation: Continuation[_Conversion] = Continuation()


def _thinking_fields(model: Model, options: StreamOptions) -> dict[str, Any] | None:
    level = options.reasoning
    if not level or not model.reasoning or not _is_claude(model):
        return None
    region = (extra_option(options, "region") or _env("AWS_REGION") or _env("AWS_DEFAULT_REGION") or "").lower()
    gov = region.startswith("us-gov-") or model.id.lower().startswith(("us-gov.", "arn:aws-us-gov:"))
    display = None if gov else (extra_option(options, "thinking_display") or "summarized")
    shown = {"display": display} if display is not None else {}
    if _adaptive(model):
        mapped = (model.thinking_level_map or {}).get(level)
        if level == "xhigh" and any("opus-4-7" in c for c in _candidates(model)):
            effort = "xhigh"
        else:
            effort = mapped if isinstance(mapped, str) else {"minimal": "low", "low": "low"}.get(level, level)
            effort = effort if effort in ("low", "medium", "high", "xhigh") else "high"
        return {"thinking": {"type": "adaptive", **shown}, "output_config": {"effort": effort}}
    key = "high" if level == "xhigh" else level
    budget = (options.thinking_budgets or {}).get(key) or _BUDGETS.get(key, 16384)
    fields: dict[str, Any] = {"thinking": {"type": "enabled", "budget_tokens": budget, **shown}}
    if extra_option(options, "interleaved_thinking", True):
        fields["anthropic_beta"] = ["interleaved-thinking-2025-05-14"]
    return fields


def build_params(model: Model, context: Context, options: StreamOptions) -> dict[str, Any]:
    """The ConverseStream request body (camelCase, as on the wire; the model id is in the URL)."""
    retention = resolve_cache_retention(options)
    params: dict[str, Any] = {"messages": convert_messages(model, context, retention)}
    if context.system_prompt:
        system: list[dict[str, Any]] = [{"text": sanitize_surrogates(context.system_prompt)}]
        if retention != "none" and _caches(model):
            system.append(_cache_point(retention))
        params["system"] = system
    inference: dict[str, Any] = {}
    if options.max_tokens:
        inference["maxTokens"] = options.max_tokens
    if options.temperature is not None:
        inference["temperature"] = options.temperature
    params["inferenceConfig"] = inference
    choice = extra_option(options, "tool_choice")
    if context.tools and choice != "none":
        config: dict[str, Any] = {"tools": [{"toolSpec": {"name": t.name, "description": t.description,
                                                          "inputSchema": {"json": t.parameters}}}
                                            for t in context.tools]}
        if choice in ("auto", "any"):
            config["toolChoice"] = {choice: {}}
        elif isinstance(choice, dict) and choice.get("type") == "tool":
            config["toolChoice"] = {"tool": {"name": choice.get("name")}}
        params["toolConfig"] = config
    fields = _thinking_fields(model, options)
    if fields is not None:
        params["additionalModelRequestFields"] = fields
    metadata = extra_option(options, "request_metadata")
    if metadata is not None:
        params["requestMetadata"] = metadata
    return params


# ---------------------------------------------------------------------------------------------
# Endpoint and auth


def _standard_region(base_url: str) -> str | None:
    try:
        host = urllib.parse.urlsplit(base_url).hostname or ""
    except ValueError:
        return None
    match = _STANDARD_HOST.match(host.lower())
    return match.group(1) if match else None


def resolve_region(model: Model, options: StreamOptions, profile_region: str | None = None) -> str:
    """The region to sign for (module docstring's order)."""
    return (extra_option(options, "region") or _env("AWS_REGION") or _env("AWS_DEFAULT_REGION") or profile_region
            or _standard_region(model.base_url or "") or "us-east-1")


def _endpoint(model: Model, region: str) -> str:
    base = (model.base_url or "").strip().rstrip("/")
    if base and _standard_region(base) is None:
        return base  # a proxy, a VPC endpoint: as given
    suffix = ".amazonaws.com.cn" if region.startswith("cn-") else ".amazonaws.com"
    return f"https://bedrock-runtime.{region}{suffix}"


def _load_credentials(profile: str | None) -> tuple[Any, str | None]:
    """(frozen credentials or None, the profile's region) from botocore's chain (blocking)."""
    session = botocore.session.Session(profile=profile)
    credentials = session.get_credentials()
    return (credentials.get_frozen_credentials() if credentials is not None else None), session.get_config_variable(
        "region")


async def _auth_headers(options: StreamOptions, model: Model, url: str, body: bytes,
                        headers: dict[str, str]) -> dict[str, str]:
    """``headers`` plus what authenticates the request (module docstring); raises
    ProviderError when there are no credentials."""
    bearer = extra_option(options, "bearer_token") or _env("AWS_BEARER_TOKEN_BEDROCK")
    skip = _env("AWS_BEDROCK_SKIP_AUTH") == "1"
    if bearer and not skip:
        return {**headers, "authorization": f"Bearer {bearer}"}
    profile_region = None
    if skip:
        credentials: Any = botocore.credentials.ReadOnlyCredentials("dummy-access-key", "dummy-secret-key", None)
    else:
        profile = extra_option(options, "profile") or _env("AWS_PROFILE")
        try:
            credentials, profile_region = await trio.to_thread.run_sync(_load_credentials, profile,
                                                                        abandon_on_cancel=True)
        except Exception as exc:
            raise ProviderError(f"AWS credentials could not be loaded: {type(exc).__name__}: {exc}") from exc
        if credentials is None:
            raise ProviderError("No AWS credentials for amazon-bedrock: set AWS_PROFILE, AWS_ACCESS_KEY_ID and "
                                "AWS_SECRET_ACCESS_KEY, or AWS_BEARER_TOKEN_BEDROCK")
    region = resolve_region(model, options, profile_region)
    request = botocore.awsrequest.AWSRequest(method="POST", url=url, data=body, headers=headers)
    botocore.auth.SigV4Auth(credentials, "bedrock", region).add_auth(request)
    return {k: v for k, v in request.headers.items()}


# ---------------------------------------------------------------------------------------------
# Response


class BedrockError(Exception):
    """A Bedrock error, HTTP or in-stream: ``"<pi's prefix>: <message>"`` (module docstring).
    ``status_code``/``response`` are there for the shared retry-after reporting."""

    def __init__(self, kind: str, message: str, status_code: int = 0, response: Any = None) -> None:
        name = kind.split(":", 1)[0]
        name = name[:1].upper() + name[1:]  # in-stream types are lowerCamel (throttlingException)
        prefix = _PREFIXES.get(name, name or "Bedrock error")
        super().__init__(f"{prefix}: {message}" if message else prefix)
        self.status_code = status_code
        self.response = response


def describe_bedrock_error(exc: BaseException) -> str:
    if isinstance(exc, BedrockError | EventStreamError):
        return str(exc)
    return describe_error(exc)


class _Mapper:
    """Maps ConverseStream events onto the run's blocks (pi's handling)."""

    def __init__(self, run: StreamRun) -> None:
        self.run = run
        self.blocks: dict[int, int] = {}  # Bedrock's contentBlockIndex → our content index
        self.stopped = False

    async def event(self, kind: str, data: dict[str, Any]) -> None:
        run = self.run
        if kind == "messageStart":
            if data.get("role") not in (None, "assistant"):
                raise ProviderError("Unexpected assistant message start but got user message start instead")
        elif kind == "contentBlockStart":
            tool = (data.get("start") or {}).get("toolUse")
            if isinstance(tool, dict):
                index = data.get("contentBlockIndex")
                i = await run.toolcall_start(str(tool.get("toolUseId") or ""), str(tool.get("name") or ""))
                self.blocks[index if isinstance(index, int) else -1] = i
        elif kind == "contentBlockDelta":
            await self.delta(data.get("contentBlockIndex"), data.get("delta") or {})
        elif kind == "contentBlockStop":
            i = self.blocks.pop(data.get("contentBlockIndex"), None)  # type: ignore[arg-type]
            if i is not None:
                await run.end_block(i)
        elif kind == "messageStop":
            reason = str(data.get("stopReason"))
            stop = _STOP.get(reason, "error")
            run.output.stop_reason = stop  # type: ignore[assignment]
            if stop == "error":
                run.output.error_message = f"Bedrock stopped: {reason}"
            self.stopped = True
        elif kind == "metadata":
            usage = data.get("usage")
            if isinstance(usage, dict):
                self.usage(usage)

    async def delta(self, index: Any, delta: dict[str, Any]) -> None:
        run = self.run
        i = self.blocks.get(index)
        block = run.output.content[i] if i is not None else None
        if isinstance(delta.get("text"), str):
            if i is None:
                i = self.blocks[index] = await run.text_start()
                block = run.output.content[i]
            if isinstance(block, TextContent):
                await run.text_delta(i, delta["text"])
        elif isinstance(delta.get("toolUse"), dict):
            if i is not None and isinstance(block, ToolCall):
                await run.toolcall_delta(i, str(delta["toolUse"].get("input") or ""))
        elif isinstance(delta.get("reasoningContent"), dict):
            reasoning = delta["reasoningContent"]
            if i is None:
                i = self.blocks[index] = await run.thinking_start(signature="")
                block = run.output.content[i]
            if isinstance(block, ThinkingContent):
                if reasoning.get("text"):
                    await run.thinking_delta(i, str(reasoning["text"]))
                if reasoning.get("signature"):
                    block.thinking_signature = (block.thinking_signature or "") + str(reasoning["signature"])

    def usage(self, usage: dict[str, Any]) -> None:
        def count(name: str) -> int:
            value = usage.get(name)
            return value if isinstance(value, int) else 0

        u = self.run.output.usage
        u.input, u.output = count("inputTokens"), count("outputTokens")
        u.cache_read, u.cache_write = count("cacheReadInputTokens"), count("cacheWriteInputTokens")
        u.total_tokens = count("totalTokens") or u.input + u.output
        self.run.update_cost()

    async def message(self, headers: dict[str, Any], payload: bytes) -> None:
        kind = headers.get(":message-type")
        if kind == "exception":
            raise BedrockError(str(headers.get(":exception-type") or ""), _payload_message(payload))
        if kind == "error":
            raise BedrockError(str(headers.get(":error-code") or ""), str(headers.get(":error-message") or ""))
        try:
            data = json.loads(payload) if payload else {}
        except ValueError:
            raise ProviderError("Malformed stream data (not JSON) in a Bedrock event") from None
        if not isinstance(data, dict):
            raise ProviderError("Malformed stream data: a Bedrock event is not a JSON object")
        await self.event(str(headers.get(":event-type") or ""), data)

    async def finish(self) -> None:
        for i in list(self.blocks.values()):
            await self.run.end_block(i)
        self.blocks.clear()


def _payload_message(payload: bytes) -> str:
    try:
        data = json.loads(payload)
    except ValueError:
        return payload.decode("utf-8", "replace").strip()[:4000]
    if isinstance(data, dict):
        message = data.get("message") or data.get("Message")
        if isinstance(message, str):
            return message
    return json.dumps(data)[:4000]


# ---------------------------------------------------------------------------------------------
# Entry points


def _make_client() -> httpx2.AsyncClient:
    return httpx2.AsyncClient(verify=shared_ssl_context(), timeout=None)


class _WarmClient:
    """A throwaway HTTP client with the ``close`` the shared warm-up calls; building it also
    loads botocore's session machinery (its data files are read on the first session)."""

    def __init__(self) -> None:
        self.http = _make_client()
        botocore.session.Session().get_component("credential_provider")

    async def close(self) -> None:
        await self.http.aclose()


prepare, warm_up = warm_up_functions(_WarmClient)


def _http_error(response: Any, raw: bytes) -> BedrockError:
    kind = response.headers.get("x-amzn-errortype") or f"HTTP {response.status_code}"
    return BedrockError(kind, _payload_message(raw) or f"status code {response.status_code} (no body)",
                        response.status_code, response)


async def _read_events(run: StreamRun, chunks: AsyncIterator[bytes]) -> None:
    """Decode the event-stream body into the mapper; raise ProviderError for a stream cut
    short or stopped with an error."""
    mapper = _Mapper(run)
    decoder = EventStreamDecoder()
    while True:
        try:
            data = await run.read_chunk(chunks.__anext__)
        except StopAsyncIteration:
            break
        for message in decoder.feed(data):
            await mapper.message(message.headers, message.payload)
        run.check_aborted()
    decoder.finish()
    await mapper.finish()
    if not mapper.stopped:
        raise ProviderError("Stream ended without a stop reason (the response was cut short)")
    if run.output.stop_reason == "error":
        raise ProviderError(run.output.error_message or "Bedrock stopped with an error")


async def _body(run: StreamRun, context: Context) -> None:
    model, options = run.model, run.options
    params = await apply_on_payload(build_params(model, context, options), model, options)
    body = json.dumps(params, ensure_ascii=False).encode()
    region = resolve_region(model, options)
    url = f"{_endpoint(model, region)}/model/{urllib.parse.quote(model.id, safe='')}/converse-stream"
    headers = {"content-type": "application/json", "accept": "application/vnd.amazon.eventstream",
               **request_headers(model, options)}
    headers = await _auth_headers(options, model, url, body, headers)
    async with sdk_client((API,), _make_client) as client:
        await read_response(run, lambda: open_http(run, client, url, body, headers, _http_error),
                            lambda chunks: _read_events(run, chunks), sdk=False)


async def stream(model: Model, context: Context, options: StreamOptions | None, emit: Any) -> AssistantMessage:
    return await run_stream(model, options, emit, lambda run: _body(run, context), describe_bedrock_error)


async def stream_simple(model: Model, context: Context, options: StreamOptions | None, emit: Any) -> AssistantMessage:
    """pi's reasoning mapping: Claude with budgets gets ``max_tokens`` raised by the budget;
    adaptive Claude and other models get the level as is (read by ``build_params``)."""
    base = build_base_options(model, options, options.api_key if options else None)
    level = options.reasoning if options else None
    base.reasoning = level
    if level and _is_claude(model) and not _adaptive(model):
        budgets = options.thinking_budgets if options else None
        max_tokens, budget = adjust_max_tokens_for_thinking(base.max_tokens or 0, model.max_tokens, level, budgets)
        base.max_tokens = max_tokens
        base.thinking_budgets = {**(budgets or {}), str(clamp_reasoning(level)): budget}
    return await stream(model, context, base, emit)
