"""The ``mistral-conversations`` API: Mistral's chat completions stream (``POST
/v1/chat/completions``, ``stream: true``), in its documented HTTP/SSE format.

Why not the ``mistralai`` SDK: its async client runs its hooks through ``asyncio.to_thread``,
so it cannot run on trio. The request is small (a bearer key, a JSON body); it goes out on
an ``httpx2`` client (already there for the OpenAI SDK), so this API needs no extra.

Contract: ``stream`` / ``stream_simple`` follow the skeleton of ``_common.run_stream`` (never
raise, exactly one terminal event). Specific to this API:
- ``model.base_url`` is the server root (``https://api.mistral.ai``); the SSE bytes are decoded
  by ``_sse``, without a typed object per event;
- ``start`` is emitted once the request has been accepted: an HTTP error gives ``error`` with
  no ``start``, worded as pi words it: ``Mistral API error (<status>): <body>``;
- deltas: string content → text; ``thinking`` content chunks (their text parts) → thinking;
  ``text`` chunks → text; a change of kind ends the open block. Tool calls (keyed by id and
  index; a missing or ``"null"`` id gets a derived one) end the open text/thinking block,
  accumulate their argument JSON, and all end together when the stream does, in order;
- usage from the chunk carrying it (no cache figures: Mistral reports none); ``responseId``
  from the first chunk's id; ``finish_reason`` stop → stop, length/model_length → length,
  tool_calls → toolUse, error → error, anything else → stop (pi's mapping); a stream that ends
  with no finish reason is an error (cut short), where pi would report success; an
  ``{"object": "error"}`` event mid-stream is an error with its message;
- replay: every tool-call id is rewritten to the 9 letters and digits Mistral requires
  (collisions get another hash) and the results follow; thinking goes back as a ``thinking``
  chunk (Mistral keeps no signatures), text as a ``text`` chunk; a tool result's text carries
  ``[tool error] `` when it failed; a model without image input gets pi's omission texts;
- ``options.session_id`` is sent as ``x-affinity`` (Mistral's prefix-cache affinity) unless
  the caller's headers set it;
- ``stream_simple``: a reasoning level on a reasoning model sends ``reasoning_effort`` for the
  models that take it (mistral-small-2603/-latest, mistral-medium-3.5) and ``prompt_mode:
  "reasoning"`` for the others; no level sends neither.
"""

from __future__ import annotations

import json
import re
from typing import Any

import httpx2

from ..options import StreamOptions, clamp_reasoning, extra_option
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
    ToolResultMessage,
    UserMessage,
)
from ._common import (
    ProviderError,
    StreamRun,
    apply_on_payload,
    describe_error,
    note_response,
    run_stream,
    sdk_client,
    shared_ssl_context,
)
from ._sse import decode_json
from ._stream import (
    base36_hash,
    open_http,
    read_response,
    request_headers,
    require_api_key,
    simple_base_options,
    sse_reader,
    warm_up_functions,
)

__all__ = ["API", "stream", "stream_simple", "convert_messages", "build_params", "describe_mistral_error",
           "MistralHTTPError", "mistral_call_id", "prepare", "warm_up"]

API = "mistral-conversations"

_ID_LENGTH = 9
_NOT_ALNUM = re.compile(r"[^a-zA-Z0-9]")
_MAX_ERROR_BODY = 4000
_STOP = {"stop": "stop", "length": "length", "model_length": "length", "tool_calls": "toolUse", "error": "error"}
_EFFORT_MODELS = ("mistral-small-2603", "mistral-small-latest", "mistral-medium-3.5")
_NO_IMAGES = "(image omitted: model does not support images)"


# ---------------------------------------------------------------------------------------------
# Request


def _hash36(text: str) -> str:
    return base36_hash(text, 12).rjust(_ID_LENGTH, "0")


def mistral_call_id(call_id: str, attempt: int = 0) -> str:
    """A tool-call id in Mistral's shape (9 letters and digits): the id itself when it already
    is one, else a hash of it (``attempt`` > 0: another hash, for a collision)."""
    plain = _NOT_ALNUM.sub("", call_id)
    if attempt == 0 and len(plain) == _ID_LENGTH:
        return plain
    seed = plain or call_id
    return _hash36(seed if attempt == 0 else f"{seed}:{attempt}")[:_ID_LENGTH]


class _IdNormalizer:
    """Maps every foreign id to a distinct Mistral id, the same one each time it is seen."""

    def __init__(self) -> None:
        self.ids: dict[str, str] = {}
        self.owners: dict[str, str] = {}

    def __call__(self, call_id: str, _model: Model, _source: AssistantMessage) -> str:
        known = self.ids.get(call_id)
        if known is not None:
            return known
        attempt = 0
        while True:
            candidate = mistral_call_id(call_id, attempt)
            owner = self.owners.get(candidate)
            if owner is None or owner == call_id:
                self.ids[call_id] = candidate
                self.owners[candidate] = call_id
                return candidate
            attempt += 1


def _image_url(block: ImageContent) -> dict[str, Any]:
    return {"type": "image_url", "image_url": f"data:{block.mime_type};base64,{block.data}"}


def _tool_text(text: str, has_images: bool, vision: bool, is_error: bool) -> str:
    prefix = "[tool error] " if is_error else ""
    if text.strip():
        suffix = "\n[tool image omitted: model does not support images]" if has_images and not vision else ""
        return f"{prefix}{text.strip()}{suffix}"
    if has_images:
        return prefix + ("(see attached image)" if vision else _NO_IMAGES)
    return prefix + "(no tool output)"


def _assistant(msg: AssistantMessage) -> dict[str, Any] | None:
    parts: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    for block in msg.content:
        if isinstance(block, TextContent):
            if block.text.strip():
                parts.append({"type": "text", "text": sanitize_surrogates(block.text)})
        elif isinstance(block, ThinkingContent):
            if block.thinking.strip():
                parts.append({"type": "thinking",
                              "thinking": [{"type": "text", "text": sanitize_surrogates(block.thinking)}]})
        else:
            calls.append({"id": block.id, "type": "function",
                          "function": {"name": block.name,
                                       "arguments": json.dumps(block.arguments or {}, ensure_ascii=False)}})
    if not parts and not calls:
        return None
    out: dict[str, Any] = {"role": "assistant"}
    if parts:
        out["content"] = parts
    if calls:
        out["tool_calls"] = calls
    return out


def _tool_message(msg: ToolResultMessage, vision: bool) -> dict[str, Any]:
    text = "\n".join(sanitize_surrogates(b.text) for b in msg.content if isinstance(b, TextContent))
    images = [b for b in msg.content if isinstance(b, ImageContent)]
    content: list[dict[str, Any]] = [{"type": "text", "text": _tool_text(text, bool(images), vision, msg.is_error)}]
    if vision:
        content.extend(_image_url(b) for b in images)
    return {"role": "tool", "tool_call_id": msg.tool_call_id, "name": msg.tool_name, "content": content}


def convert_messages(model: Model, context: Context) -> list[dict[str, Any]]:
    """The request's ``messages`` (system prompt first), in the API's snake_case shape (a new
    list; its dicts are not to be edited: they may be the ones the last request was built
    from, see :class:`_Conversion`)."""
    return _continuation.convert(model, context.system_prompt, context.messages,
                                 lambda: _Conversion(model, context.system_prompt)).result()


class _Conversion(HistoryConversion):
    """The conversion of one history, continued (:class:`HistoryConversion`); its key is the
    system prompt. The state carried over besides the transform's: the id normalizer's (an id
    keeps the Mistral id it was given)."""

    def __init__(self, model: Model, system_prompt: str | None) -> None:
        super().__init__(model, system_prompt, _IdNormalizer())
        if system_prompt:
            self.out.append({"role": "system", "content": sanitize_surrogates(system_prompt)})

    def convert(self, messages: list[Message]) -> None:
        vision = "image" in self.model.input
        out = self.out
        for msg in messages:
            if isinstance(msg, UserMessage):
                if isinstance(msg.content, str):
                    out.append({"role": "user", "content": sanitize_surrogates(msg.content)})
                    continue
                parts = [{"type": "text", "text": sanitize_surrogates(b.text)} if isinstance(b, TextContent)
                         else _image_url(b) for b in msg.content if isinstance(b, TextContent) or vision]
                if parts:
                    out.append({"role": "user", "content": parts})
                elif any(isinstance(b, ImageContent) for b in msg.content):
                    out.append({"role": "user", "content": _NO_IMAGES})
            elif isinstance(msg, AssistantMessage):
                item = _assistant(msg)
                if item is not None:
                    out.append(item)
            else:
                out.append(_tool_message(msg, vision))


_continuation: Continuation[_Conversion] = Continuation()


def build_params(model: Model, context: Context, options: StreamOptions) -> dict[str, Any]:
    """The request body (what ``chat.stream_async`` sends), snake_case as on the wire."""
    params: dict[str, Any] = {"model": model.id, "messages": convert_messages(model, context)}
    if context.tools:
        params["tools"] = [{"type": "function", "function": {"name": t.name, "description": t.description,
                                                             "parameters": t.parameters, "strict": False}}
                           for t in context.tools]
    if options.temperature is not None:
        params["temperature"] = options.temperature
    if options.max_tokens:
        params["max_tokens"] = options.max_tokens
    choice = extra_option(options, "tool_choice")
    if isinstance(choice, str):
        params["tool_choice"] = choice
    elif isinstance(choice, dict) and isinstance(choice.get("function"), dict):
        params["tool_choice"] = {"type": "function", "function": {"name": choice["function"].get("name")}}
    for name in ("prompt_mode", "reasoning_effort"):
        value = extra_option(options, name)
        if value:
            params[name] = value
    return params


# ---------------------------------------------------------------------------------------------
# Response


def _object(value: Any) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an empty one (hostile streams send anything)."""
    return value if isinstance(value, dict) else {}


class _Mapper:
    """Maps decoded Mistral chunks (JSON) onto the run's blocks."""

    def __init__(self, run: StreamRun) -> None:
        self.run = run
        self.open: int | None = None
        self.open_kind: str | None = None
        self.calls: dict[str, int] = {}  # "<id>:<index>" -> block, in arrival order
        self.finished = False

    async def end_open(self) -> None:
        if self.open is not None:
            i, self.open, self.open_kind = self.open, None, None
            await self.run.end_block(i)

    async def _delta(self, kind: str, text: str) -> None:
        if not text:
            return
        run = self.run
        if self.open is None or self.open_kind != kind:
            await self.end_open()
            self.open = await (run.thinking_start() if kind == "thinking" else run.text_start())
            self.open_kind = kind
        if kind == "thinking":
            await run.thinking_delta(self.open, sanitize_surrogates(text))
        else:
            await run.text_delta(self.open, sanitize_surrogates(text))

    async def sse(self, _name: str | None, data: bytes) -> None:
        """Apply one SSE event. Raises ProviderError for malformed data and for an error event."""
        if data.strip() == b"[DONE]":
            return
        ev = decode_json(data)
        if not isinstance(ev, dict):
            raise ProviderError(f"Malformed stream data (not an object): {data[:200]!r}")
        if ev.get("object") == "error" or ("error" in ev and "choices" not in ev):
            inner = ev.get("error") if isinstance(ev.get("error"), dict) else ev
            message = inner.get("message") if isinstance(inner, dict) else None
            raise ProviderError(f"Mistral stream error: {message or json.dumps(ev)[:300]}")
        run = self.run
        if isinstance(ev.get("id"), str) and ev["id"] and not run.output.response_id:
            note_response(run, ev["id"], ev.get("model"))
        usage = ev.get("usage")
        if isinstance(usage, dict):
            self._usage(usage)
        choices = ev.get("choices")
        choice = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else None
        if choice is None:
            return
        finish = choice.get("finish_reason")
        if isinstance(finish, str) and finish:
            run.output.stop_reason = _STOP.get(finish, "stop")  # type: ignore[assignment]
            self.finished = True
        delta = choice.get("delta")
        if isinstance(delta, dict):
            await self._content(delta.get("content"))
            calls = delta.get("tool_calls")
            if isinstance(calls, list):
                for call in calls:
                    if isinstance(call, dict):
                        await self._tool_call(call)

    async def _content(self, content: Any) -> None:
        items = [content] if isinstance(content, str) else content if isinstance(content, list) else []
        for item in items:
            if isinstance(item, str):
                await self._delta("text", item)
            elif isinstance(item, dict) and item.get("type") == "thinking":
                parts = item.get("thinking")
                texts = [p.get("text") for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []
                await self._delta("thinking", "".join(t for t in texts if isinstance(t, str)))
            elif isinstance(item, dict) and item.get("type") == "text" and isinstance(item.get("text"), str):
                await self._delta("text", item["text"])

    async def _tool_call(self, call: dict[str, Any]) -> None:
        await self.end_open()
        run = self.run
        index = call.get("index") if isinstance(call.get("index"), int) else 0
        given = call.get("id")
        call_id = given if isinstance(given, str) and given and given != "null" else mistral_call_id(f"toolcall:{index}")
        key = f"{call_id}:{index}"
        function = _object(call.get("function"))
        i = self.calls.get(key)
        if i is None:
            name = function.get("name")
            i = self.calls[key] = await run.toolcall_start(call_id, name if isinstance(name, str) else "")
        args = function.get("arguments")
        fragment = args if isinstance(args, str) else json.dumps(args if args is not None else {})
        await run.toolcall_delta(i, fragment)

    def _usage(self, usage: dict[str, Any]) -> None:
        def count(name: str) -> int:
            value = usage.get(name)
            return value if isinstance(value, int) else 0

        u = self.run.output.usage
        u.input, u.output = count("prompt_tokens"), count("completion_tokens")
        u.cache_read = u.cache_write = 0
        u.total_tokens = count("total_tokens") or u.input + u.output
        self.run.update_cost()

    async def finish(self) -> None:
        await self.end_open()
        for i in self.calls.values():
            await self.run.toolcall_end(i)

    async def end_of_stream(self) -> None:
        """At the body's end: end every block (``finish``), then raise ProviderError if no
        finish reason came (a stream cut short) or the reason was ``error``."""
        await self.finish()
        if not self.finished:
            raise ProviderError("Stream ended without a finish reason (the response was cut short)")
        if self.run.output.stop_reason == "error":
            raise ProviderError("Mistral finished the response with an error")


# ---------------------------------------------------------------------------------------------
# Entry points


class MistralHTTPError(Exception):
    """An HTTP error answer. ``status_code`` and ``response`` are what the shared skeleton
    reads to report a ``Retry-After``."""

    def __init__(self, status_code: int, body: str, response: Any) -> None:
        super().__init__(f"Mistral API error ({status_code})")
        self.status_code, self.body, self.response = status_code, body, response


def describe_mistral_error(exc: BaseException) -> str:
    """pi's wording for HTTP errors: ``Mistral API error (<status>): <body>`` (the body cut at
    4000 characters); everything else as the other providers describe it."""
    if isinstance(exc, MistralHTTPError):
        body = exc.body.strip()
        if not body:
            return f"Mistral API error ({exc.status_code}): status code (no body)"
        if len(body) > _MAX_ERROR_BODY:
            body = f"{body[:_MAX_ERROR_BODY]}... [truncated {len(body) - _MAX_ERROR_BODY} chars]"
        return f"Mistral API error ({exc.status_code}): {body}"
    return describe_error(exc)


def _make_client() -> httpx2.AsyncClient:
    return httpx2.AsyncClient(verify=shared_ssl_context(), timeout=None, follow_redirects=True)


prepare, warm_up = warm_up_functions(_make_client)  # a throwaway client: never connects


def _http_error(response: Any, body: bytes) -> MistralHTTPError:
    return MistralHTTPError(response.status_code, body.decode("utf-8", "replace"), response)


async def _body(run: StreamRun, context: Context) -> None:
    model, options = run.model, run.options
    api_key = require_api_key(model, options)
    params = await apply_on_payload(build_params(model, context, options), model, options)
    params["stream"] = True
    headers = {"content-type": "application/json", "accept": "text/event-stream",
               "authorization": f"Bearer {api_key}", **request_headers(model, options)}
    if options.session_id and not any(k.lower() == "x-affinity" for k in headers):
        headers["x-affinity"] = options.session_id
    url = (model.base_url or "https://api.mistral.ai").rstrip("/") + "/v1/chat/completions"
    body = json.dumps(params, ensure_ascii=False).encode()
    async with sdk_client((API,), _make_client) as client:
        mapper = _Mapper(run)
        await read_response(run, lambda: open_http(run, client, url, body, headers, _http_error),
                            sse_reader(run, mapper.sse, mapper.end_of_stream), sdk=False)


async def stream(model: Model, context: Context, options: StreamOptions | None, emit: Any) -> AssistantMessage:
    return await run_stream(model, options, emit, lambda run: _body(run, context), describe_mistral_error)


async def stream_simple(model: Model, context: Context, options: StreamOptions | None, emit: Any) -> AssistantMessage:
    base = simple_base_options(model, options)
    level = clamp_reasoning(options.reasoning if options else None)
    if level and model.reasoning:
        if model.id in _EFFORT_MODELS:
            level_map = (model.compat or {}).get("thinkingLevelMap") or {}
            base.extra["reasoning_effort"] = level_map.get(level, "high") if isinstance(level_map, dict) else "high"
        else:
            base.extra["prompt_mode"] = "reasoning"
    return await stream(model, context, base, emit)
