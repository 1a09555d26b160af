"""The ``anthropic-messages`` API through the official ``anthropic`` SDK (pi's packages/ai, docs/architecture.md §7).

Contract: ``stream`` / ``stream_simple`` follow the skeleton of ``_common.run_stream`` (never
raise, exactly one terminal event). Specific to this API:
- ``start`` is emitted just before the HTTP request (pi emits it on creating the SDK stream), so
  an HTTP error or a refused connection gives ``start`` then ``error``; a missing key or an
  already-aborted signal gives ``error`` alone;
- the SDK makes the request (``client.post``: its auth, headers, retries and HTTP errors) with
  the body as msgspec-encoded bytes, the ones ``messages.create`` sent; the SSE bytes are
  parsed here, without a typed object per event; an in-stream ``error`` event becomes an
  error with its message; a run of ``text_delta``s of one block within one network read
  becomes one ``text_delta`` (``_sse.TextRuns``);
- blocks follow the wire's block indexes; ``signature_delta`` updates the thinking block without
  an event; ``redacted_thinking`` becomes a redacted thinking block;
- usage comes from ``message_start`` (so an aborted call still has it) and is overwritten field
  by field by ``message_delta`` when present; ``totalTokens`` is the sum of the four counts;
- ``message_start``'s message id is the message's ``responseId`` (its model, when it differs
  from the model asked for, ``responseModel``);
- a stream that ends without a stop reason is treated as truncated (error);
- requests: a session's history is converted once, each request converting only the messages
  appended since (:class:`_Conversion`); consecutive tool results are merged into one user
  message; ``cache_control`` on the system blocks and on the last block of a trailing user
  message (unless retention ``none``); ``temperature`` only without thinking; OAuth keys
  (``sk-ant-oat``) use Bearer auth and the Claude Code identity.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from typing import Any

import anthropic
import httpx2
import msgspec

from ..options import (
    StreamOptions,
    adjust_max_tokens_for_thinking,
    extra_option,
    resolve_cache_retention,
    with_sdk_client_options,
)
from ..sanitize import sanitize_surrogates
from ..transform import Continuation, HistoryConversion
from ..types import (
    AssistantMessage,
    Context,
    ImageContent,
    Message,
    Model,
    StopReason,
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
    delta_text,
    note_response,
    run_stream,
    sdk_client,
    shared_ssl_context,
)
from ._one_write import send_requests_whole
from ._stream import (
    dispatch_json_event,
    read_response,
    require_api_key,
    simple_base_options,
    sse_reader,
    warm_model,
    warm_up_functions,
)

__all__ = ["API", "OFFICIAL_HOST", "stream", "stream_simple", "convert_messages", "build_params", "is_adaptive",
           "warm_up", "prepare"]

API = "anthropic-messages"
# The official API's host: a base URL containing it gets the 1-hour cache TTL for long retention.
OFFICIAL_HOST = "api.anthropic.com"

_STOP_REASONS: dict[str, StopReason] = {"end_turn": "stop", "pause_turn": "stop", "stop_sequence": "stop", "max_tokens": "length",
                 "tool_use": "toolUse", "refusal": "error", "sensitive": "error"}
_ID_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")
_CLAUDE_CODE_IDENTITY = "You are Claude Code, Anthropic's official CLI for Claude."
_CLAUDE_CODE_VERSION = "2.0.0"
_CLAUDE_CODE_TOOLS = ["Read", "Write", "Edit", "Bash", "Grep", "Glob", "AskUserQuestion", "EnterPlanMode",
                      "ExitPlanMode", "KillShell", "NotebookEdit", "Skill", "Task", "TaskOutput", "TodoWrite",
                      "WebFetch", "WebSearch"]
_BETA_TOOL_STREAMING = "fine-grained-tool-streaming-2025-05-14"
_BETA_INTERLEAVED = "interleaved-thinking-2025-05-14"


def is_adaptive(model: Model) -> bool:
    return any(s in model.id for s in ("opus-4-6", "opus-4.6", "sonnet-4-6", "sonnet-4.6"))


def _is_oauth(key: str) -> bool:
    return "sk-ant-oat" in key


def _to_claude_code_name(name: str) -> str:
    for canonical in _CLAUDE_CODE_TOOLS:
        if canonical.lower() == name.lower():
            return canonical
    return name


# ---------------------------------------------------------------------------------------------
# Request


def _normalize_tool_call_id(call_id: str, _model: Model, _source: AssistantMessage) -> str:
    return _ID_UNSAFE.sub("_", call_id)[:64]


def _image(block: ImageContent) -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": block.mime_type, "data": block.data}}


def _tool_result(msg: ToolResultMessage) -> dict[str, Any]:
    texts = [b for b in msg.content if isinstance(b, TextContent)]
    images = [b for b in msg.content if isinstance(b, ImageContent)]
    if images:
        content: Any = [{"type": "text", "text": sanitize_surrogates(b.text)} if isinstance(b, TextContent)
                        else _image(b) for b in msg.content]
        if not texts:
            content.insert(0, {"type": "text", "text": "(see attached image)"})
    else:
        content = sanitize_surrogates("\n".join(b.text for b in texts))
    return {"type": "tool_result", "tool_use_id": msg.tool_call_id, "content": content, "is_error": msg.is_error}


def _assistant(msg: AssistantMessage, oauth: bool) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for b in msg.content:
        if isinstance(b, TextContent):
            if b.text.strip():
                blocks.append({"type": "text", "text": sanitize_surrogates(b.text)})
        elif isinstance(b, ThinkingContent):
            if b.redacted:
                blocks.append({"type": "redacted_thinking", "data": b.thinking_signature or ""})
            elif not b.thinking.strip():
                continue
            elif not (b.thinking_signature or "").strip():
                blocks.append({"type": "text", "text": sanitize_surrogates(b.thinking)})
            else:
                blocks.append({"type": "thinking", "thinking": sanitize_surrogates(b.thinking),
                               "signature": b.thinking_signature})
        elif isinstance(b, ToolCall):
            blocks.append({"type": "tool_use", "id": b.id, "name": _to_claude_code_name(b.name) if oauth else b.name,
                           "input": b.arguments or {}})
    return blocks


def convert_messages(model: Model, context: Context, oauth: bool = False) -> list[dict[str, Any]]:
    """The request's ``messages`` for ``context`` (a new list; its dicts are not to be edited:
    they may be the ones the last request was built from, see :class:`_Conversion`)."""
    return _continuation.convert(model, oauth, context.messages, lambda: _Conversion(model, oauth)).result()


class _Conversion(HistoryConversion):
    """The conversion of one history, continued (:class:`HistoryConversion`); its key is the
    OAuth mode. The state carried over besides the transform's: the tool results waiting to
    be merged into one user message with those that follow them. Output dicts are shared
    between requests: :func:`build_params` copies the one it marks for the cache."""

    def __init__(self, model: Model, oauth: bool) -> None:
        super().__init__(model, oauth, _normalize_tool_call_id)
        self.oauth = oauth
        self.results: list[dict[str, Any]] = []

    def convert(self, messages: list[Message]) -> None:
        vision = "image" in self.model.input
        out, results = self.out, self.results
        for msg in messages:
            if isinstance(msg, ToolResultMessage):
                results.append(_tool_result(msg))
                continue
            if results:
                out.append({"role": "user", "content": results})
                results = self.results = []
            if isinstance(msg, UserMessage):
                if isinstance(msg.content, str):
                    if msg.content.strip():
                        out.append({"role": "user", "content": sanitize_surrogates(msg.content)})
                    continue
                parts = []
                for b in msg.content:
                    if isinstance(b, TextContent):
                        if b.text.strip():
                            parts.append({"type": "text", "text": sanitize_surrogates(b.text)})
                    elif vision:
                        parts.append(_image(b))
                if parts:
                    out.append({"role": "user", "content": parts})
            else:
                blocks = _assistant(msg, self.oauth)
                if blocks:
                    out.append({"role": "assistant", "content": blocks})

    def result(self) -> list[dict[str, Any]]:
        """The messages so far, with the tool results still waiting merged into the last user
        message of the copy."""
        out = list(self.out)
        if self.results:
            out.append({"role": "user", "content": list(self.results)})
        return out


_continuation: Continuation[_Conversion] = Continuation()


def _cache_control(model: Model, options: StreamOptions) -> dict[str, Any] | None:
    retention = resolve_cache_retention(options)
    if retention == "none":
        return None
    if retention == "long" and OFFICIAL_HOST in (model.base_url or ""):
        return {"type": "ephemeral", "ttl": "1h"}
    return {"type": "ephemeral"}


def _mark_last_user_block(messages: list[dict[str, Any]], cache: dict[str, Any]) -> None:
    """Put ``cache_control`` on the last block of a trailing user message, in a copy of that
    message (its dicts may be shared with the next request's: :class:`_Conversion`)."""
    if not messages or messages[-1]["role"] != "user":
        return
    last = messages[-1]
    if isinstance(last["content"], str):
        messages[-1] = {**last, "content": [{"type": "text", "text": last["content"], "cache_control": cache}]}
    elif last["content"] and last["content"][-1].get("type") in ("text", "image", "tool_result"):
        content = list(last["content"])
        content[-1] = {**content[-1], "cache_control": cache}
        messages[-1] = {**last, "content": content}


def build_params(model: Model, context: Context, options: StreamOptions, oauth: bool = False) -> dict[str, Any]:
    cache = _cache_control(model, options)
    messages = convert_messages(model, context, oauth)
    if cache is not None:
        _mark_last_user_block(messages, cache)
    params: dict[str, Any] = {"model": model.id, "messages": messages,
                              "max_tokens": options.max_tokens or model.max_tokens // 3, "stream": True}
    system = ([_CLAUDE_CODE_IDENTITY] if oauth else []) + ([context.system_prompt] if context.system_prompt else [])
    if system:
        params["system"] = [{"type": "text", "text": sanitize_surrogates(s), **({"cache_control": cache} if cache else {})}
                            for s in system]
    thinking = bool(extra_option(options, "thinking_enabled")) and model.reasoning
    if options.temperature is not None and not thinking:
        params["temperature"] = options.temperature
    if context.tools:
        params["tools"] = [{"name": _to_claude_code_name(t.name) if oauth else t.name, "description": t.description,
                            "input_schema": {"type": "object", "properties": t.parameters.get("properties") or {},
                                             "required": t.parameters.get("required") or []}}
                           for t in context.tools]
    if thinking:
        if is_adaptive(model):
            params["thinking"] = {"type": "adaptive"}
            effort = extra_option(options, "effort")
            if effort:
                params["output_config"] = {"effort": effort}
        else:
            params["thinking"] = {"type": "enabled",
                                  "budget_tokens": extra_option(options, "thinking_budget_tokens") or 1024}
    metadata = extra_option(options, "metadata")
    if isinstance(metadata, dict) and isinstance(metadata.get("user_id"), str):
        params["metadata"] = {"user_id": metadata["user_id"]}
    choice = extra_option(options, "tool_choice")
    if choice is not None:
        params["tool_choice"] = {"type": choice} if isinstance(choice, str) else choice
    return params


def _headers(model: Model, options: StreamOptions, oauth: bool) -> dict[str, str]:
    betas = [_BETA_TOOL_STREAMING]
    if extra_option(options, "interleaved_thinking", True) and not is_adaptive(model):
        betas.append(_BETA_INTERLEAVED)
    headers = {"anthropic-beta": ",".join(betas)}
    if oauth:
        headers = {"anthropic-beta": ",".join(["claude-code-20250219", "oauth-2025-04-20", *betas]),
                   "user-agent": f"claude-cli/{_CLAUDE_CODE_VERSION}", "x-app": "cli"}
    return {**headers, **(model.headers or {}), **(options.headers or {})}


# ---------------------------------------------------------------------------------------------
# Response


class _PlainDelta(msgspec.Struct, gc=False):
    type: Any = None
    text: Any = None


class _PlainEvent(msgspec.Struct, gc=False):
    """An event, decoded only as far as telling a text delta from anything else."""

    type: Any = None
    index: Any = None
    delta: _PlainDelta | None = None


_decode_plain = msgspec.json.Decoder(_PlainEvent).decode


class _Mapper:
    """Maps Anthropic SSE events (decoded JSON) onto the run's blocks by the SDK's block index.

    It is also the stream's ``TextRuns`` (``_sse``): :meth:`plain` picks out the text deltas
    of an open block, which the reader joins a run per read and hands to :meth:`apply`."""

    def __init__(self, run: StreamRun, context: Context, oauth: bool) -> None:
        self.run = run
        self.blocks: dict[Any, int] = {}  # wire block index -> our content index
        self.stop_seen = False
        self.tool_names = {t.name.lower(): t.name for t in context.tools or []} if oauth else {}
        #: Event type → handler; block type → start; delta type → apply.
        self._handlers: dict[str, Callable[[dict[str, Any]], Awaitable[None]]] = {
            "message_start": self._message_start,
            "content_block_start": self._block_start,
            "content_block_delta": self._block_delta,
            "content_block_stop": self._block_stop,
            "message_delta": self._message_delta,
            "error": self._error,
        }
        self._block_starts: dict[Any, Callable[[dict[str, Any]], Awaitable[int]]] = {
            "text": self._text_start,
            "thinking": self._thinking_start,
            "redacted_thinking": self._redacted_start,
            "tool_use": self._tool_use_start,
        }
        self._block_deltas: dict[Any, Callable[[int, dict[str, Any]], Awaitable[None]]] = {
            "text_delta": self._text_delta,
            "thinking_delta": self._thinking_delta,
            "input_json_delta": self._json_delta,
            "signature_delta": self._signature_delta,
        }

    def _usage(self, usage: dict[str, Any], overwrite_only_present: bool) -> None:
        u = self.run.output.usage
        for ours, theirs in (("input", "input_tokens"), ("output", "output_tokens"),
                             ("cache_read", "cache_read_input_tokens"), ("cache_write", "cache_creation_input_tokens")):
            value = usage.get(theirs)
            if value is not None:
                setattr(u, ours, value)
            elif not overwrite_only_present:
                setattr(u, ours, 0)
        u.total_tokens = u.input + u.output + u.cache_read + u.cache_write
        self.run.update_cost()

    async def sse(self, name: str | None, data: bytes) -> None:
        """Apply one SSE event: its JSON ``type`` (else the SSE event name) picks the handler;
        events of other types (``ping``, ``message_stop``...) are ignored. Raises
        ProviderError for malformed data, an unknown stop reason and an in-stream error."""
        await dispatch_json_event(self._handlers, name, data)

    def plain(self, _name: str | None, data: bytes) -> tuple[int, str] | None:
        """``(block, text)`` for a ``content_block_delta`` whose delta is a ``text_delta`` with
        a string ``text``, of a block that is open; None for anything else (including data
        that does not decode as such an event: the full path reports it)."""
        try:
            ev = _decode_plain(data)
        except msgspec.DecodeError:
            return None
        delta, index = ev.delta, ev.index
        if ev.type != "content_block_delta" or delta is None or delta.type != "text_delta" \
                or type(delta.text) is not str or type(index) is not int:
            return None
        i = self.blocks.get(index)
        return None if i is None else (i, delta.text)

    async def apply(self, key: Any, text: str) -> None:
        """The joined text of a run of :meth:`plain` deltas: one ``text_delta``."""
        await self.run.text_delta(key, text)

    async def check_stopped(self) -> None:
        """At the body's end: raise ProviderError if no stop reason came (a stream cut short)."""
        if not self.stop_seen:
            raise ProviderError("Stream ended without a stop reason (the response was cut short)")

    async def _message_start(self, ev: dict[str, Any]) -> None:
        message = ev.get("message") or {}
        if isinstance(message.get("id"), str) and message["id"]:
            note_response(self.run, message["id"], message.get("model"))
        usage = message.get("usage")
        if usage:
            self._usage(usage, overwrite_only_present=False)

    async def _block_start(self, ev: dict[str, Any]) -> None:
        block = ev.get("content_block") or {}
        start = self._block_starts.get(block.get("type"))
        if start is not None:
            self.blocks[ev.get("index")] = await start(block)

    async def _text_start(self, block: dict[str, Any]) -> int:
        return await self.run.text_start()

    async def _thinking_start(self, block: dict[str, Any]) -> int:
        return await self.run.thinking_start(signature="")

    async def _redacted_start(self, block: dict[str, Any]) -> int:
        return await self.run.thinking_start(signature=block.get("data") or "", text="[Reasoning redacted]", redacted=True)

    async def _tool_use_start(self, block: dict[str, Any]) -> int:
        name = block.get("name") or ""
        name = self.tool_names.get(name.lower(), name)
        initial = block.get("input")
        return await self.run.toolcall_start(block.get("id") or "", name, initial if isinstance(initial, dict) else {})

    async def _block_delta(self, ev: dict[str, Any]) -> None:
        i = self.blocks.get(ev.get("index"))
        if i is None:
            return
        delta = ev.get("delta") or {}
        apply = self._block_deltas.get(delta.get("type"))
        if apply is not None:
            await apply(i, delta)

    async def _text_delta(self, i: int, delta: dict[str, Any]) -> None:
        await self.run.text_delta(i, delta_text(delta.get("text"), "delta.text"))

    async def _thinking_delta(self, i: int, delta: dict[str, Any]) -> None:
        await self.run.thinking_delta(i, delta_text(delta.get("thinking"), "delta.thinking"))

    async def _json_delta(self, i: int, delta: dict[str, Any]) -> None:
        await self.run.toolcall_delta(i, delta_text(delta.get("partial_json"), "delta.partial_json"))

    async def _signature_delta(self, i: int, delta: dict[str, Any]) -> None:
        block = self.run.output.content[i]
        if isinstance(block, ThinkingContent):
            block.thinking_signature = (block.thinking_signature or "") + (delta.get("signature") or "")

    async def _block_stop(self, ev: dict[str, Any]) -> None:
        i = self.blocks.pop(ev.get("index"), None)
        if i is not None:
            await self.run.end_block(i)

    async def _message_delta(self, ev: dict[str, Any]) -> None:
        reason = (ev.get("delta") or {}).get("stop_reason")
        if reason:
            mapped = _STOP_REASONS.get(reason)
            if mapped is None:
                raise ProviderError(f"Unhandled stop reason: {reason}")
            self.run.output.stop_reason = mapped
            self.stop_seen = True
        if ev.get("usage"):
            self._usage(ev["usage"], overwrite_only_present=True)

    async def _error(self, ev: dict[str, Any]) -> None:
        error = ev.get("error")
        message = error.get("message") if isinstance(error, dict) else None
        raise ProviderError(message or json.dumps(ev))


# ---------------------------------------------------------------------------------------------
# Entry points


def _make_client(model: Model, options: StreamOptions, api_key: str, oauth: bool) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(api_key=None if oauth else api_key, auth_token=api_key if oauth else None,
                                    base_url=model.base_url or None, max_retries=0,
                                    default_headers=_headers(model, options, oauth),
                                    http_client=send_requests_whole(anthropic.DefaultAsyncHttpxClient(verify=shared_ssl_context())))


def _warm_client() -> anthropic.AsyncAnthropic:
    """A throwaway client with the resource the provider calls touched (imports it)."""
    client = _make_client(warm_model(API, "http://127.0.0.1"), StreamOptions(), "warm-up", False)
    client.messages.with_streaming_response  # noqa: B018 - imports the resource
    return client


prepare, warm_up = warm_up_functions(_warm_client)


async def _body(run: StreamRun, context: Context) -> None:
    model, options = run.model, run.options
    api_key = require_api_key(model, options)
    oauth = _is_oauth(api_key)
    params = await apply_on_payload(build_params(model, context, options, oauth), model, options)
    key = (API, api_key, oauth, model.base_url, tuple(sorted(_headers(model, options, oauth).items())))
    async with sdk_client(key, lambda: _make_client(model, options, api_key, oauth)) as client:
        client = with_sdk_client_options(client, options)  # retry.provider.{timeoutMs,maxRetries}
        await run.start()
        body = _wire_body(params)
        mapper = _Mapper(run, context, oauth)
        await read_response(run, lambda: run.open_response(lambda: _post(client, body)),
                            sse_reader(run, mapper.sse, mapper.check_stopped, mapper), sdk=False)


_json_body = msgspec.json.Encoder()


#: The order of the body's keys as ``messages.create`` writes them (anthropic 2.16); keys it does
#: not name (``temperature``) follow, as its merge of ``extra_body`` put them.
_CREATE_ORDER = ("max_tokens", "messages", "model", "cache_control", "container", "diagnostics", "inference_geo",
                 "metadata", "output_config", "service_tier", "speed", "stop_sequences", "stream", "system",
                 "thinking", "tool_choice", "tools")


def _wire_body(params: dict[str, Any]) -> dict[str, Any]:
    """The request body (``stream`` set) in the order ``messages.create`` put it on the wire,
    so that the bytes sent are the ones ``create`` sent."""
    params = {**params, "stream": True}
    head = {key: params[key] for key in _CREATE_ORDER if key in params}
    return {**head, **{k: v for k, v in params.items() if k not in head}}


async def _post(client: anthropic.AsyncAnthropic, body: dict[str, Any]) -> httpx2.Response:
    """POST the body through the SDK's own request path (its auth, headers, retries and HTTP
    errors: an error status raises the same ``APIStatusError`` as ``create``), returning the
    streamed HTTP response once its headers are in; its SSE bytes are parsed here.

    The body goes as bytes encoded by msgspec (the same compact JSON, UTF-8 unescaped), not as
    ``messages.create``'s arguments: the SDK copies a body it is given as data node by node
    (``_copy_and_prepare``, for file inputs) and encodes it with the standard library's
    ``json`` on every request, which at 300 turns was most of the provider's time per request,
    growing with the session. A body msgspec cannot encode (a hook's own objects) goes the
    SDK's way."""
    try:
        content = _json_body.encode(body)
    except (TypeError, msgspec.EncodeError):
        return await client.post("/v1/messages", cast_to=httpx2.Response, body=body, stream=True)
    return await client.post("/v1/messages", cast_to=httpx2.Response, content=content, stream=True)


async def stream(model: Model, context: Context, options: StreamOptions | None, emit: Any) -> AssistantMessage:
    return await run_stream(model, options, emit, lambda run: _body(run, context))


_ADAPTIVE_EFFORT = {"minimal": "low", "low": "low", "medium": "medium", "high": "high"}


async def stream_simple(model: Model, context: Context, options: StreamOptions | None, emit: Any) -> AssistantMessage:
    base = simple_base_options(model, options)
    level = options.reasoning if options else None
    if not level or not model.reasoning:  # a model without reasoning ignores the level entirely
        base.extra["thinking_enabled"] = False
    elif is_adaptive(model):
        base.extra["thinking_enabled"] = True
        is_opus_46 = "opus-4-6" in model.id or "opus-4.6" in model.id
        base.extra["effort"] = _ADAPTIVE_EFFORT.get(level) or ("max" if is_opus_46 else "high")
    else:
        max_tokens, budget = adjust_max_tokens_for_thinking(base.max_tokens or 0, model.max_tokens, level,
                                                             options.thinking_budgets if options else None)
        base.max_tokens = max_tokens
        base.extra["thinking_enabled"] = True
        base.extra["thinking_budget_tokens"] = budget
    return await stream(model, context, base, emit)
