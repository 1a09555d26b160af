"""The ``openai-responses`` API: OpenAI's Responses endpoint through the official ``openai`` SDK
(pi's packages/ai, docs/architecture.md §7).

Contract: ``stream`` / ``stream_simple`` follow the skeleton of ``_common.run_stream`` (never
raise, exactly one terminal event). Specific to this API:
- the SDK makes the request (auth, headers, retries, HTTP errors); the SSE bytes are parsed
  here, without a typed object per event; a run of ``output_text``/``refusal`` deltas of the
  open message within one network read becomes one ``text_delta`` (``_sse.TextRuns``);
- ``start`` is emitted once the HTTP request has been accepted, so an HTTP error, a refused
  connection or a missing key gives ``error`` with no ``start``;
- output items map to blocks: ``reasoning`` → thinking (summary deltas, or raw
  ``reasoning_text`` deltas; parts are separated by ``"\\n\\n"`` in the deltas exactly as in the
  final text, which is the item's summaries (else its reasoning texts) joined by ``"\\n\\n"``;
  ``thinkingSignature`` is the item's compact JSON, encrypted content included), ``message`` →
  text (``textSignature`` ``{"v":1,"id":..,"phase"?:..}``), ``function_call`` → a tool call with
  id ``"<call_id>|<item id>"``; its ``toolcall_end`` carries a fresh ToolCall. An item still
  open when the next starts (OpenRouter starts the message before its reasoning is done) is
  ended first; a reasoning item's later ``output_item.done`` still sets its signature;
- the response's id (``responseId``) and, when it differs from the model asked for, its
  model (``responseModel``) are put on the message; a ``data: [DONE]`` line is ignored;
- ``response.completed`` / ``response.incomplete`` give usage (``input`` excludes cached
  tokens, ``totalTokens`` is the provider's own total; flex tier costs half, priority double)
  and the stop reason (completed → stop, or toolUse when the message has tool calls;
  incomplete → length; failed/cancelled → error; anything else raises ``Unhandled stop
  reason``); ``response.failed`` and ``error`` events become errors with the provider's
  message (an ``error`` event's code and message may be nested under ``error``); a stream that ends without ``response.completed``/``incomplete`` is an error (cut
  short), where pi would report success;
- ``stream_simple`` maps ``reasoning`` to ``reasoning_effort`` (xhigh clamped to high unless
  the model supports it); reasoning options are ignored for models without reasoning, and a
  ``gpt-5*`` reasoning model asked for no reasoning gets pi's "Juice: 0" developer message.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
import openai

from ..options import StreamOptions, extra_option, resolve_cache_retention, with_sdk_client_options
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
    delta_text,
    describe_error,
    note_response,
    run_stream,
    sdk_request_args,
)
from ._stream import (
    base36_hash,
    dispatch_json_event,
    open_sdk,
    read_response,
    require_api_key,
    sse_reader,
    stream_simple_with_effort,
    warm_model,
    warm_up_functions,
)
from .openai_completions import make_client, openai_client

__all__ = ["API", "stream", "stream_simple", "convert_messages", "build_params", "short_hash", "warm_up", "prepare"]

#: The host whose base URL gets the 24 h prompt-cache retention (as pi keys it).
OFFICIAL_HOST = "api.openai.com"

API = "openai-responses"

_ID_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")
_NORMALIZING_PROVIDERS = ("openai", "openai-codex", "opencode", "azure-openai-responses")
_STOP = {"completed": "stop", "in_progress": "stop", "queued": "stop", None: "stop", "incomplete": "length",
         "failed": "error", "cancelled": "error"}
_TIER_MULTIPLIER = {"flex": 0.5, "priority": 2.0}
_JUICE_ZERO = "# Juice: 0 !important"


def short_hash(text: str) -> str:
    """A short deterministic id fragment (base 36) for ids that would be too long."""
    return base36_hash(text, 8)


# ---------------------------------------------------------------------------------------------
# Request


def _normalize_tool_call_id(call_id: str, model: Model, _source: AssistantMessage) -> str:
    if model.provider not in _NORMALIZING_PROVIDERS or "|" not in call_id:
        return call_id
    call, item = call_id.split("|", 1)
    call = _ID_UNSAFE.sub("_", call)
    item = _ID_UNSAFE.sub("_", item)
    if not item.startswith("fc"):
        item = "fc_" + item
    return call[:64].rstrip("_") + "|" + item[:64].rstrip("_")


def _image(block: ImageContent) -> dict[str, Any]:
    return {"type": "input_image", "detail": "auto", "image_url": f"data:{block.mime_type};base64,{block.data}"}


def _text_item_id(signature: str | None, counter: int) -> tuple[str, str | None]:
    """(item id, phase) from a textSignature: JSON ``{"v":1,"id","phase"?}`` or a legacy plain id."""
    item_id, phase = None, None
    if signature:
        if signature.startswith("{"):
            try:
                data = json.loads(signature)
                item_id, phase = data.get("id"), data.get("phase")
            except (ValueError, AttributeError):
                pass
        else:
            item_id = signature
    if not item_id:
        item_id = f"msg_{counter}"
    elif len(item_id) > 64:
        item_id = f"msg_{short_hash(item_id)}"
    return item_id, phase


def _assistant_items(msg: AssistantMessage, model: Model, counter: int) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    other_model = msg.provider == model.provider and msg.api == model.api and msg.model != model.id
    for b in msg.content:
        if isinstance(b, ThinkingContent):
            if b.thinking_signature:
                try:
                    items.append(json.loads(b.thinking_signature))
                except ValueError:
                    pass  # not one of ours: nothing the API could take back
        elif isinstance(b, TextContent):
            item_id, phase = _text_item_id(b.text_signature, counter)
            item = {"type": "message", "role": "assistant",
                    "content": [{"type": "output_text", "text": sanitize_surrogates(b.text), "annotations": []}],
                    "status": "completed", "id": item_id}
            if phase:
                item["phase"] = phase
            items.append(item)
        elif isinstance(b, ToolCall):
            call_id, _, item_id = b.id.partition("|")
            call: dict[str, Any] = {"type": "function_call", "call_id": call_id, "name": b.name,
                                    "arguments": json.dumps(b.arguments, ensure_ascii=False)}
            if item_id and not (other_model and item_id.startswith("fc_")):
                call["id"] = item_id
            items.append(call)
    return items


def _tool_output(msg: ToolResultMessage, vision: bool) -> dict[str, Any]:
    text = sanitize_surrogates("\n".join(b.text for b in msg.content if isinstance(b, TextContent)))
    images = [b for b in msg.content if isinstance(b, ImageContent)]
    output: Any = text or "(see attached image)"
    if images and vision:
        output = ([{"type": "input_text", "text": text}] if text else []) + [_image(b) for b in images]
    return {"type": "function_call_output", "call_id": msg.tool_call_id.split("|", 1)[0], "output": output}


def convert_messages(model: Model, context: Context) -> list[dict[str, Any]]:
    """The request's ``input`` items for ``context`` (a new list; its dicts are not to be
    edited: they may be the ones the last request was built from, see :class:`_Conversion`)."""
    return _continuation.convert(model, context.system_prompt, context.messages,
                                 lambda: _Conversion(model, context.system_prompt)).result()


class _Conversion(HistoryConversion):
    """The conversion of one history, continued (:class:`HistoryConversion`); its key is the
    system prompt. The state carried over besides the transform's: the count of messages
    converted (an assistant text item's id without a signature is numbered by it). Output
    dicts are shared between requests and never edited."""

    def __init__(self, model: Model, system_prompt: str | None) -> None:
        super().__init__(model, system_prompt, _normalize_tool_call_id)
        if system_prompt:
            self.out.append({"role": "developer" if model.reasoning else "system",
                             "content": sanitize_surrogates(system_prompt)})
        self.counter = 0

    def convert(self, messages: list[Message]) -> None:
        model, out = self.model, self.out
        vision = "image" in model.input
        counter = self.counter
        for msg in messages:
            if isinstance(msg, UserMessage):
                if isinstance(msg.content, str):
                    parts = [{"type": "input_text", "text": sanitize_surrogates(msg.content)}]
                else:
                    parts = [{"type": "input_text", "text": sanitize_surrogates(b.text)} if isinstance(b, TextContent)
                             else _image(b) for b in msg.content if isinstance(b, TextContent) or vision]
                if not parts:
                    continue
                out.append({"role": "user", "content": parts})
            elif isinstance(msg, AssistantMessage):
                items = _assistant_items(msg, model, counter)
                if not items:
                    continue
                out.extend(items)
            else:
                out.append(_tool_output(msg, vision))
            counter += 1
        self.counter = counter


_continuation: Continuation[_Conversion] = Continuation()


def build_params(model: Model, context: Context, options: StreamOptions) -> dict[str, Any]:
    params: dict[str, Any] = {"model": model.id, "input": convert_messages(model, context), "stream": True,
                              "store": False}
    retention = resolve_cache_retention(options)
    if options.session_id and retention != "none":
        params["prompt_cache_key"] = options.session_id
    if retention == "long" and OFFICIAL_HOST in (model.base_url or ""):
        params["prompt_cache_retention"] = "24h"
    if options.max_tokens:
        params["max_output_tokens"] = options.max_tokens
    if options.temperature is not None:
        params["temperature"] = options.temperature
    tier = extra_option(options, "service_tier")
    if tier is not None:
        params["service_tier"] = tier
    if context.tools:
        params["tools"] = [{"type": "function", "name": t.name, "description": t.description,
                            "parameters": t.parameters, "strict": False} for t in context.tools]
    choice = extra_option(options, "tool_choice")
    if choice is not None:
        params["tool_choice"] = choice
    if model.reasoning:
        effort = extra_option(options, "reasoning_effort")
        summary = extra_option(options, "reasoning_summary")
        if effort or summary:
            params["reasoning"] = {"effort": effort or "medium", "summary": summary or "auto"}
            params["include"] = ["reasoning.encrypted_content"]
        elif model.name.startswith("gpt-5"):
            params["input"].append({"role": "developer", "content": [{"type": "input_text", "text": _JUICE_ZERO}]})
    return params


# ---------------------------------------------------------------------------------------------
# Response


def _texts(parts: Any) -> list[str]:
    """The ``text`` of each part of a reasoning item's ``summary`` or ``content`` list."""
    if not isinstance(parts, list):
        return []
    return [p.get("text") or "" for p in parts if isinstance(p, dict)]


def _error_text(ev: dict[str, Any]) -> str:
    """The message of an in-stream ``error`` event: its code and message sit on the event
    itself or (as OpenAI sends them) nested under ``error``."""
    nested: dict[str, Any] = ev["error"] if isinstance(ev.get("error"), dict) else {}
    code = ev.get("code") or nested.get("code") or nested.get("type")
    message = ev.get("message") or nested.get("message")
    if not message:
        return f"Error Code {code}: no message" if code else f"Provider error: {json.dumps(ev)[:300]}"
    return f"Error Code {code}: {message}" if code else str(message)


class _PlainTextEvent(msgspec.Struct, gc=False):
    """An event, decoded only as far as telling a text delta from anything else."""

    type: Any = None
    delta: Any = None


_decode_plain = msgspec.json.Decoder(_PlainTextEvent).decode
_TEXT_DELTAS = ("response.output_text.delta", "response.refusal.delta")


class _Mapper:
    """Maps Responses SSE events (decoded JSON) onto the run's blocks; one item open at a time.

    It is also the stream's ``TextRuns`` (``_sse``): :meth:`plain` picks out the text deltas
    of the open message item, which the reader joins a run per read and hands to
    :meth:`apply`."""

    def __init__(self, run: StreamRun, requested_tier: Any) -> None:
        self.run = run
        self.open: int | None = None
        self.open_type: str | None = None  # the open item's type: reasoning, message, function_call
        self.summary: list[str] = []  # summary parts of the open reasoning item
        self.raw_part: Any = None  # content_index of the last raw reasoning_text delta
        self.closed_reasoning: dict[Any, int] = {}  # output_index -> block, ended early
        self.finished = False
        self.open_index: Any = None  # output_index of the open item (ids may rotate: Copilot)
        self.requested_tier = requested_tier
        #: Event type → handler (events of any other type carry nothing for the message).
        self._handlers: dict[str, Callable[[dict[str, Any]], Awaitable[None]]] = {
            "response.output_text.delta": self._text_delta,
            "response.refusal.delta": self._text_delta,
            "response.function_call_arguments.delta": self._arguments_delta,
            "response.function_call_arguments.done": self._arguments_done,
            "response.reasoning_summary_text.delta": self._summary_delta,
            "response.reasoning_text.delta": self._raw_reasoning_delta,
            "response.reasoning_summary_part.added": self._summary_part_added,
            "response.reasoning_summary_part.done": self._summary_part_done,
            "response.output_item.added": self._output_item_added,
            "response.output_item.done": self._output_item_done,
            "response.created": self._created,
            "response.in_progress": self._created,
            "response.completed": self._completed_event,
            "response.incomplete": self._completed_event,
            "response.failed": self._failed,
            "error": self._error,
        }

    async def sse(self, name: str | None, data: bytes) -> None:
        """Apply one SSE event: its JSON ``type`` (else the SSE event name) picks the handler;
        events of other types are ignored. Raises ProviderError for malformed data and for
        the stream's own failure events."""
        if data == b"[DONE]":
            return  # some servers end the stream the chat-completions way; completion is checked apart
        await dispatch_json_event(self._handlers, name, data)

    def plain(self, _name: str | None, data: bytes) -> tuple[int, str] | None:
        """``(block, text)`` for an ``output_text``/``refusal`` delta whose ``delta`` is a
        string while a message item is open; None for anything else (including data that
        does not decode as such an event: the full path reports it)."""
        i = self.open
        if i is None or self.open_type != "message":
            return None
        try:
            ev = _decode_plain(data)
        except msgspec.DecodeError:
            return None
        if ev.type not in _TEXT_DELTAS or type(ev.delta) is not str:
            return None
        return i, ev.delta

    async def apply(self, key: Any, text: str) -> None:
        """The joined text of a run of :meth:`plain` deltas: one ``text_delta``."""
        await self.run.text_delta(key, text)

    async def check_completed(self) -> None:
        """At the body's end: raise ProviderError if ``response.completed``/``incomplete`` never
        came (pi would report success for a stream cut short)."""
        if not self.finished:
            raise ProviderError("Stream ended without response.completed (the response was cut short)")

    def _open_as(self, item_type: str) -> int | None:
        """The open block, if the open item is of ``item_type``."""
        return self.open if self.open_type == item_type else None

    async def _text_delta(self, ev: dict[str, Any]) -> None:
        i = self._open_as("message")
        if i is not None:
            await self.run.text_delta(i, delta_text(ev.get("delta"), "delta"))

    async def _arguments_delta(self, ev: dict[str, Any]) -> None:
        i = self._open_as("function_call")
        if i is not None:
            await self.run.toolcall_delta(i, delta_text(ev.get("delta"), "delta"))

    async def _arguments_done(self, ev: dict[str, Any]) -> None:
        i = self._open_as("function_call")
        if i is not None:
            self.run.set_tool_json(i, ev.get("arguments") or "")

    async def _summary_delta(self, ev: dict[str, Any]) -> None:
        i = self._open_as("reasoning")
        if i is not None:
            await self.run.thinking_delta(i, ev.get("delta") or "")

    async def _raw_reasoning_delta(self, ev: dict[str, Any]) -> None:
        """Raw reasoning text (OpenRouter, LM Studio, gpt-oss); its parts are joined by a blank
        line, as the final text is."""
        i = self._open_as("reasoning")
        if i is None:
            return
        part = ev.get("content_index")
        if self.raw_part is not None and part != self.raw_part:
            await self.run.thinking_delta(i, "\n\n")
        self.raw_part = part
        await self.run.thinking_delta(i, ev.get("delta") or "")

    async def _summary_part_added(self, ev: dict[str, Any]) -> None:
        # Parts are joined by a blank line, in the deltas exactly as in the final text.
        i = self._open_as("reasoning")
        if self.summary and i is not None:
            await self.run.thinking_delta(i, "\n\n")
        self.summary.append("")

    async def _summary_part_done(self, ev: dict[str, Any]) -> None:
        part = ev.get("part") or {}
        if self.summary:
            self.summary[-1] = part.get("text") or ""

    async def _output_item_added(self, ev: dict[str, Any]) -> None:
        await self._item_added(ev.get("item") or {}, ev.get("output_index"))

    async def _output_item_done(self, ev: dict[str, Any]) -> None:
        await self._item_done(ev.get("item") or {}, ev.get("output_index"))

    async def _created(self, ev: dict[str, Any]) -> None:
        response = ev.get("response") or {}
        if isinstance(response.get("id"), str) and response["id"]:
            note_response(self.run, response["id"], response.get("model"))

    async def _completed_event(self, ev: dict[str, Any]) -> None:
        self._completed(ev.get("response") or {})

    async def _failed(self, ev: dict[str, Any]) -> None:
        response = ev.get("response") or {}
        error, details = response.get("error"), response.get("incomplete_details")
        if error:
            raise ProviderError(f"{error.get('code') or 'unknown'}: {error.get('message') or 'no message'}")
        if details and details.get("reason"):
            raise ProviderError(f"incomplete: {details['reason']}")
        raise ProviderError("Unknown error (no error details in response)")

    async def _error(self, ev: dict[str, Any]) -> None:
        raise ProviderError(_error_text(ev))

    async def _end_open_early(self) -> None:
        """A new item starts while one is still open (OpenRouter starts the message before its
        reasoning item is done): end the open block now, with what was streamed. A reasoning
        item's later ``output_item.done`` still brings its id and encrypted content."""
        i, kind = self.open, self.open_type
        if i is None:
            return
        self.open = self.open_type = None
        if kind == "reasoning":
            self.closed_reasoning[self.open_index] = i
            await self.run.thinking_end(i)
        else:
            await self.run.end_block(i)

    async def _item_added(self, item: dict[str, Any], index: Any) -> None:
        run, kind = self.run, item.get("type")
        if kind in ("reasoning", "message", "function_call"):
            await self._end_open_early()
            self.open_index = index
        if kind == "reasoning":
            self.summary = []
            self.raw_part = None
            self.open = await run.thinking_start(signature=None)
        elif kind == "message":
            self.open = await run.text_start()
        elif kind == "function_call":
            self.open = await run.toolcall_start(f"{item.get('call_id') or ''}|{item.get('id') or ''}",
                                                 item.get("name") or "", initial_json=item.get("arguments") or "")
        else:
            return  # other item kinds (web search calls...) have no block
        self.open_type = kind

    async def _item_done(self, item: dict[str, Any], index: Any) -> None:
        run, i, kind = self.run, self.open, item.get("type")
        if kind == "reasoning" and index is not None and index in self.closed_reasoning:
            block = run.output.content[self.closed_reasoning.pop(index)]
            if isinstance(block, ThinkingContent):  # ended early: keep its id/encrypted content
                block.thinking_signature = json.dumps(item, ensure_ascii=False, separators=(",", ":"))
            return
        if i is None or kind != self.open_type:
            return
        run.sync()
        block = run.output.content[i]
        self.open = self.open_type = None
        if kind == "reasoning" and isinstance(block, ThinkingContent):
            texts = _texts(item.get("summary")) or _texts(item.get("content"))
            if texts:
                block.thinking = "\n\n".join(texts)
            block.thinking_signature = json.dumps(item, ensure_ascii=False, separators=(",", ":"))
            await run.thinking_end(i)
        elif kind == "message" and isinstance(block, TextContent):
            parts = item.get("content")
            if isinstance(parts, list):
                block.text = "".join(p.get("text") or p.get("refusal") or "" for p in parts if isinstance(p, dict))
            signature: dict[str, Any] = {"v": 1, "id": item.get("id")}
            if item.get("phase"):
                signature["phase"] = item["phase"]
            block.text_signature = json.dumps(signature, separators=(",", ":"))
            await run.text_end(i)
        elif kind == "function_call" and isinstance(block, ToolCall):
            if isinstance(item.get("arguments"), str):
                run.set_tool_json(i, item["arguments"])
            fresh = ToolCall(id=f"{item.get('call_id') or ''}|{item.get('id') or ''}",
                             name=item.get("name") or block.name, arguments={})
            await run.toolcall_end(i, emit_block=fresh)

    def _completed(self, response: dict[str, Any]) -> None:
        run = self.run
        if isinstance(response.get("id"), str) and response["id"]:
            note_response(run, response["id"], response.get("model"))
        self.finished = True
        usage = response.get("usage")
        if usage:
            cached = (usage.get("input_tokens_details") or {}).get("cached_tokens") or 0
            u = run.output.usage
            u.input = (usage.get("input_tokens") or 0) - cached
            u.output = usage.get("output_tokens") or 0
            u.cache_read = cached
            u.cache_write = 0
            u.total_tokens = usage.get("total_tokens") or 0
            cost = run.update_cost()
            factor = _TIER_MULTIPLIER.get(response.get("service_tier") or self.requested_tier, 1.0)
            if factor != 1.0:
                cost.input *= factor
                cost.output *= factor
                cost.cache_read *= factor
                cost.cache_write *= factor
                cost.total *= factor
        status = response.get("status")
        if status not in _STOP:
            raise ProviderError(f"Unhandled stop reason: {status}")
        reason = _STOP[status]
        if reason == "stop" and any(isinstance(b, ToolCall) for b in run.output.content):
            reason = "toolUse"
        run.output.stop_reason = reason  # type: ignore[assignment]


# ---------------------------------------------------------------------------------------------
# Entry points


def _warm_client() -> openai.AsyncOpenAI:
    """A throwaway client with the resource the provider calls touched (imports it)."""
    client = make_client(warm_model(API, "http://127.0.0.1/v1"), StreamOptions(), "warm-up")
    client.responses.with_streaming_response  # noqa: B018 - imports the resource
    return client


prepare, warm_up = warm_up_functions(_warm_client)


async def _body(run: StreamRun, context: Context) -> None:
    model, options = run.model, run.options
    api_key = require_api_key(model, options)
    params = await apply_on_payload(build_params(model, context, options), model, options)
    async with openai_client(model, options, api_key) as client:
        client = with_sdk_client_options(client, options)  # retry.provider.{timeoutMs,maxRetries}
        manager = client.responses.with_streaming_response.create(**sdk_request_args(params, "input"))
        mapper = _Mapper(run, params.get("service_tier"))
        await read_response(run, open_sdk(run, manager), sse_reader(run, mapper.sse, mapper.check_completed, mapper))


async def stream(model: Model, context: Context, options: StreamOptions | None, emit: Any) -> AssistantMessage:
    return await run_stream(model, options, emit, lambda run: _body(run, context), describe_error)


async def stream_simple(model: Model, context: Context, options: StreamOptions | None, emit: Any) -> AssistantMessage:
    return await stream_simple_with_effort(stream, model, context, options, emit)
