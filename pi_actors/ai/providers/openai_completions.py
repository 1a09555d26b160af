"""The ``openai-completions`` API: OpenAI chat completions and compatible servers, through the
official ``openai`` SDK (pi's packages/ai, docs/architecture.md §7).

Contract: ``stream`` / ``stream_simple`` follow the skeleton of ``_common.run_stream`` (never
raise, exactly one terminal event). Specific to this API:
- ``start`` is emitted once the HTTP request has been accepted, so an HTTP error, a refused
  connection or a missing key gives ``error`` with no ``start``;
- the SDK makes the request (auth, headers, HTTP errors); the SSE bytes are parsed here, without
  a typed object per chunk;
- a run of chunks that carry nothing but text (``choices[0].delta.content``, no finish,
  usage, error, reasoning or tool call) within one network read becomes one ``text_delta``
  of the joined text (``_sse.TextRuns``); the final message is the same however the stream
  was split into reads;
- at most one block is open at a time; a block of another kind closes the open one first; a
  tool-call delta with a new ``id``, or with an ``index`` other than the open call's, starts a
  new tool call; as in pi, every block's ``*_end`` event comes at the end of the stream, in
  content order (a closed block only takes no more deltas) (pi ignores the index, so servers that send parallel calls without ids would
  have them merged into one);
- ``delta.content`` is text, or a list of typed parts (Mistral): ``text`` parts → text,
  ``thinking`` parts → thinking; reasoning fields (``reasoning_content``, ``reasoning``...) →
  thinking; any other content value ends the call as malformed data;
- usage: ``input = prompt - cached``, ``cacheRead = cached``, ``output = completion``, plus
  the reasoning tokens only when the totals sent say they are outside completion
  (``total == prompt + completion + reasoning``, xAI; inside on DeepSeek, Groq, OpenRouter...),
  ``totalTokens = input + output + cacheRead``; usage comes at the end, or with an in-stream
  error; a count that is not a whole number is malformed data;
- the chunks' ``id`` is the message's ``responseId``; their ``model``, when it differs from the
  model asked for, its ``responseModel``;
- a stream that ends without any ``finish_reason`` is treated as truncated (error), which pi
  would report as a success;
- ``stream_simple`` requires a key and maps ``reasoning`` to ``reasoning_effort`` (xhigh is
  clamped to high unless the model supports it).
"""

from __future__ import annotations

import json
from typing import Any, cast

import httpx2
import msgspec
import openai

from ..options import StreamOptions, extra_option, with_sdk_client_options
from ..types import (
    AssistantMessage,
    Context,
    Message,
    Model,
    StopReason,
    ToolCall,
    ToolResultMessage,
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
from ._one_write import send_requests_whole
from ._sse import decode_json
from ._stream import (
    headers_key,
    read_response,
    request_headers,
    require_api_key,
    sse_reader,
    stream_simple_with_effort,
    warm_model,
    warm_up_functions,
)
from .openai_compat import OpenAICompletionsCompat, get_compat
from .openai_messages import convert_messages

_decode = msgspec.json.Decoder().decode

__all__ = ["API", "stream", "stream_simple", "convert_messages", "build_params", "warm_up", "prepare"]

API = "openai-completions"

_STOP_REASONS: dict[str, StopReason] = {"stop": "stop", "end": "stop", "length": "length", "tool_calls": "toolUse",
                 "function_call": "toolUse", "content_filter": "error"}
_REASONING_FIELDS = ("reasoning_content", "reasoning", "reasoning_text")


# ---------------------------------------------------------------------------------------------
# Request


def _has_tool_history(messages: list[Message]) -> bool:
    return any(isinstance(m, ToolResultMessage) or (isinstance(m, AssistantMessage)
               and any(isinstance(b, ToolCall) for b in m.content)) for m in messages)


def _add_openrouter_cache_control(messages: list[dict[str, Any]]) -> None:
    """Marks the last text of the last user or assistant message; the message it edits is
    replaced by a copy (the dicts of ``messages`` may be shared with the next request's)."""
    for i in range(len(messages) - 1, -1, -1):
        msg = messages[i]
        if msg["role"] not in ("user", "assistant"):
            continue
        content = msg.get("content")
        if isinstance(content, str) and content:
            messages[i] = {**msg, "content": [{"type": "text", "text": content, "cache_control": {"type": "ephemeral"}}]}
            return
        if isinstance(content, list):
            for j in range(len(content) - 1, -1, -1):
                if content[j].get("type") == "text":
                    parts = list(content)
                    parts[j] = {**content[j], "cache_control": {"type": "ephemeral"}}
                    messages[i] = {**msg, "content": parts}
                    return


def build_params(model: Model, context: Context, options: StreamOptions,
                 compat: OpenAICompletionsCompat) -> dict[str, Any]:
    messages = convert_messages(model, context, compat)
    if compat.cache_control_format == "anthropic":
        _add_openrouter_cache_control(messages)
    params: dict[str, Any] = {"model": model.id, "messages": messages, "stream": True}
    if compat.supports_usage_in_streaming:
        params["stream_options"] = {"include_usage": True}
    if compat.supports_store:
        params["store"] = False
    if options.max_tokens:
        params[compat.max_tokens_field] = options.max_tokens
    if options.temperature is not None:
        params["temperature"] = options.temperature
    params.update(_tool_params(context, options, compat))
    if model.reasoning:
        params.update(_reasoning_params(model, options, compat))
    params.update(_routing_params(model, compat))
    return params


def _tool_params(context: Context, options: StreamOptions, compat: OpenAICompletionsCompat) -> dict[str, Any]:
    """``tools`` (empty when the history has tool calls but no tools are offered: some servers
    refuse such a history otherwise) and ``tool_choice``."""
    params: dict[str, Any] = {}
    if context.tools:
        tools = []
        for tool in context.tools:
            fn: dict[str, Any] = {"name": tool.name, "description": tool.description, "parameters": tool.parameters}
            if compat.supports_strict_mode:
                fn["strict"] = False
            tools.append({"type": "function", "function": fn})
        params["tools"] = tools
    elif _has_tool_history(context.messages):
        params["tools"] = []
    tool_choice = extra_option(options, "tool_choice")
    if tool_choice is not None:
        params["tool_choice"] = tool_choice
    return params


def _reasoning_params(model: Model, options: StreamOptions, compat: OpenAICompletionsCompat) -> dict[str, Any]:
    """The reasoning switch in the server's own format (a reasoning model only). The model's
    ``thinkingLevelMap`` names the server's value for a level (and for "off")."""
    effort = extra_option(options, "reasoning_effort")
    level_map = model.thinking_level_map or {}
    mapped = (level_map.get(effort) or effort) if effort else None
    if compat.thinking_format in ("zai", "qwen"):
        return {"enable_thinking": bool(effort)}
    if compat.thinking_format == "qwen-chat-template":
        return {"chat_template_kwargs": {"enable_thinking": bool(effort)}}
    if compat.thinking_format == "deepseek":
        return {"thinking": {"type": "enabled" if effort else "disabled"}, **({"reasoning_effort": mapped} if effort else {})}
    if compat.thinking_format == "openrouter":
        if effort:
            return {"reasoning": {"effort": mapped}}
        if "off" in level_map and level_map["off"] is None:
            return {}
        return {"reasoning": {"effort": level_map.get("off") or "none"}}
    if effort and compat.supports_reasoning_effort:
        return {"reasoning_effort": compat.reasoning_effort_map.get(effort, mapped)}
    if not effort and compat.supports_reasoning_effort and isinstance(level_map.get("off"), str):
        return {"reasoning_effort": level_map["off"]}
    return {}


def _routing_params(model: Model, compat: OpenAICompletionsCompat) -> dict[str, Any]:
    """Provider routing for OpenRouter and the Vercel AI gateway, when configured."""
    params: dict[str, Any] = {}
    url = model.base_url or ""
    if "openrouter.ai" in url and (model.compat or {}).get("openRouterRouting"):
        params["provider"] = compat.open_router_routing
    routing = compat.vercel_gateway_routing
    if "ai-gateway.vercel.sh" in url and (routing.get("only") or routing.get("order")):
        params["providerOptions"] = {"gateway": {k: routing[k] for k in ("only", "order") if routing.get(k)}}
    return params


# ---------------------------------------------------------------------------------------------
# Response


def _count(usage: dict[str, Any], section: str | None, name: str) -> int:
    """A token count of ``usage`` (or of its ``section`` object): absent or null is 0; anything
    but a whole number is malformed data."""
    where = usage.get(section) if section else usage
    if where is None:
        return 0
    if not isinstance(where, dict):
        raise ProviderError(f"Malformed stream data: usage.{section} is {json.dumps(where)[:100]} (expected an object)")
    value = where.get(name)
    if value is None:
        return 0
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        shown = f"{section}.{name}" if section else name
        raise ProviderError(f"Malformed stream data: usage.{shown} is {json.dumps(value)[:100]} (expected a token count)")
    return value


class _PlainDelta(msgspec.Struct, gc=False):
    """The fields of a delta that decide whether it is plain text (the others are ignored)."""

    content: Any = None
    reasoning_content: Any = None
    reasoning: Any = None
    reasoning_text: Any = None
    tool_calls: Any = None
    reasoning_details: Any = None


class _PlainChoice(msgspec.Struct, gc=False):
    delta: _PlainDelta | None = None
    finish_reason: Any = None
    usage: Any = None


class _PlainChunk(msgspec.Struct, gc=False):
    """A chunk, decoded only as far as telling a plain text delta from anything else."""

    id: Any = None
    model: Any = None
    choices: list[_PlainChoice] | None = None
    usage: Any = None
    error: Any = None


_decode_plain = msgspec.json.Decoder(_PlainChunk).decode


class _Mapper:
    """Maps chat-completion chunks (decoded JSON) onto the run's blocks, one open block at a time.

    It is also the stream's ``TextRuns``: :meth:`plain` picks out the chunks that only add
    text, which the reader joins a run per read and hands to :meth:`apply`."""

    def __init__(self, run: StreamRun) -> None:
        self.run = run
        self.open: int | None = None
        self.open_kind: str | None = None  # "text", "thinking" or "toolCall"
        self.tool_index: int | None = None  # the wire ``index`` of the open tool call
        self.saw_finish = False
        self.done = False
        self.closed: list[int] = []  # blocks that take no more deltas, not yet ended

    async def close_open(self) -> None:
        """The open block takes no more deltas; its end event waits for :meth:`end_all`."""
        if self.open is not None:
            self.closed.append(self.open)
            self.open, self.open_kind = None, None

    async def finish(self) -> None:
        """At the body's end: raise ProviderError if no ``finish_reason`` came (a stream cut
        short), else end every block (``end_all``)."""
        if not self.saw_finish:
            raise ProviderError("Stream ended without a finish reason (the response was cut short)")
        await self.end_all()

    async def end_all(self) -> None:
        """The stream is over: every block's ``*_end``, in content order (pi's order)."""
        await self.close_open()
        for i in sorted(self.closed):
            await self.run.end_block(i)
        self.closed = []

    def _usage(self, usage: dict[str, Any]) -> None:
        if not isinstance(usage, dict):
            raise ProviderError(f"Malformed stream data: usage is {json.dumps(usage)[:100]} (expected an object)")
        cached = _count(usage, "prompt_tokens_details", "cached_tokens")
        reasoning = _count(usage, "completion_tokens_details", "reasoning_tokens")
        prompt, completion = _count(usage, None, "prompt_tokens"), _count(usage, None, "completion_tokens")
        # Most providers count reasoning inside completion_tokens (total = prompt + completion);
        # some (xAI) beside it (total = prompt + completion + reasoning). The totals sent say which.
        outside = bool(reasoning) and usage.get("total_tokens") == prompt + completion + reasoning
        u = self.run.output.usage
        u.input = prompt - cached
        u.output = completion + (reasoning if outside else 0)
        u.cache_read = cached
        u.cache_write = 0
        u.total_tokens = u.input + u.output + u.cache_read
        self.run.update_cost()

    async def sse(self, _name: str | None, data: bytes) -> None:
        if data == b"[DONE]":
            self.done = True
            return
        try:
            chunk = _decode(data)
        except msgspec.DecodeError:
            chunk = decode_json(data)  # raises the error that says so
        if not isinstance(chunk, dict):
            raise ProviderError(f"Malformed stream data (not an object): {data[:200]!r}")
        error = chunk.get("error")
        if error is not None:
            if chunk.get("usage"):
                self._usage(chunk["usage"])  # OpenRouter sends the usage so far with the error
            raise ProviderError(_stream_error_text(error))
        await self.chunk(chunk)

    def plain(self, _name: str | None, data: bytes) -> tuple[int, str] | None:
        """``(0, text)`` for a chunk that does nothing but add ``text`` (maybe empty) to the
        reply's text: no error, usage, finish reason, reasoning, tool call or reasoning
        detail, and ``delta.content`` a string. Notes the response id as :meth:`chunk` does.
        None for anything else, and for data that does not decode as such a chunk (the full
        path then reports what is wrong with it)."""
        try:
            chunk = _decode_plain(data)
        except msgspec.DecodeError:
            return None
        choices = chunk.choices
        if not choices or chunk.error is not None or chunk.usage:
            return None
        choice = choices[0]
        delta = choice.delta
        if delta is None or choice.finish_reason or choice.usage or type(delta.content) is not str:
            return None
        if (delta.reasoning_content is not None or delta.reasoning is not None or delta.reasoning_text is not None
                or delta.tool_calls is not None or delta.reasoning_details is not None):
            return None
        if self.run.output.response_id is None and isinstance(chunk.id, str) and chunk.id:
            note_response(self.run, chunk.id, chunk.model)
        return 0, delta.content

    async def apply(self, _key: object, text: str) -> None:
        """The joined text of a run of :meth:`plain` chunks (empty pieces add nothing, as in
        :meth:`_content`)."""
        if text:
            await self._text(text)

    async def _text(self, text: str) -> None:
        i = self.open
        if self.open_kind != "text" or i is None:
            await self.close_open()
            i = await self.run.text_start()
            self.open, self.open_kind = i, "text"
        await self.run.text_delta(i, text)

    async def _thinking(self, thought: str, signature: str | None) -> None:
        i = self.open
        if self.open_kind != "thinking" or i is None:
            await self.close_open()
            i = await self.run.thinking_start(signature=signature)
            self.open, self.open_kind = i, "thinking"
        await self.run.thinking_delta(i, thought)

    async def _content_parts(self, parts: list[Any]) -> None:
        """``delta.content`` as a list of typed parts (Mistral's reasoning models): ``text``
        parts are text, ``thinking`` parts (whose ``thinking`` is a string or a list of text
        parts) are thinking. Parts of other types carry nothing we can show and are skipped."""
        for part in parts:
            if not isinstance(part, dict):
                continue
            kind = part.get("type")
            if kind == "text" and isinstance(part.get("text"), str) and part["text"]:
                await self._text(part["text"])
            elif kind == "thinking":
                inner = part.get("thinking")
                if isinstance(inner, list):
                    inner = "".join(p.get("text") or "" for p in inner
                                    if isinstance(p, dict) and isinstance(p.get("text"), str))
                if isinstance(inner, str) and inner:
                    await self._thinking(inner, None)

    async def chunk(self, chunk: dict[str, Any]) -> None:
        """Apply one chunk: its id and model, its usage (on the chunk, or on the choice as
        Moonshot sends it), the first choice's finish reason, then its delta."""
        run = self.run
        if run.output.response_id is None and isinstance(chunk.get("id"), str) and chunk["id"]:
            note_response(run, chunk["id"], chunk.get("model"))
        usage = chunk.get("usage")
        if usage:
            self._usage(usage)
        choices = chunk.get("choices")
        if not choices:
            return
        choice = choices[0]
        if not usage and choice.get("usage"):
            self._usage(choice["usage"])
        if choice.get("finish_reason"):
            self._finish(choice["finish_reason"])
        delta = choice.get("delta")
        if delta:
            await self._delta(delta)

    def _finish(self, finish: Any) -> None:
        self.saw_finish = True
        reason = _STOP_REASONS.get(finish)
        if reason is None:
            raise ProviderError(f"Unhandled stop reason: {finish}")
        self.run.output.stop_reason = reason

    async def _delta(self, delta: dict[str, Any]) -> None:
        """One choice's delta: content, reasoning, tool-call pieces, reasoning details."""
        if await self._content(delta):
            return  # the common case: nothing but content
        for field in _REASONING_FIELDS:
            thought = delta.get(field)
            if isinstance(thought, str) and thought:
                await self._thinking(thought, field)
                break
        for call in delta.get("tool_calls") or ():
            await self._tool_call(call)
        for detail in delta.get("reasoning_details") or ():
            self._reasoning_detail(detail)

    async def _content(self, delta: dict[str, Any]) -> bool:
        """``delta.content``: text, or a list of typed parts. True when the delta holds
        nothing else (so the other fields need no look)."""
        text = delta.get("content")
        if isinstance(text, list):
            await self._content_parts(text)
        elif text is not None and not isinstance(text, str):
            raise ProviderError(f"Malformed stream data: delta.content is {json.dumps(text)[:100]} "
                                "(expected text or a list of parts)")
        elif text:
            await self._text(text)
            return len(delta) == 1 or (len(delta) == 2 and "role" in delta)
        return False

    def _open_tool_call(self) -> tuple[int, ToolCall] | None:
        """The open block and its ToolCall, if a tool call is open."""
        i = self.open
        if self.open_kind != "toolCall" or i is None:
            return None
        block = self.run.output.content[i]
        return (i, block) if isinstance(block, ToolCall) else None

    async def _tool_call(self, call: dict[str, Any]) -> None:
        """A piece of a tool call: a new ``id``, or an ``index`` other than the open call's,
        starts a new call (the id and name the first piece gives are on the partial at
        ``toolcall_start``); otherwise it continues the open one."""
        call_id, index = call.get("id"), call.get("index")
        fn = call.get("function") or {}
        current = self._open_tool_call()
        if current is None or (call_id and call_id != current[1].id) or \
                (index is not None and self.tool_index is not None and index != self.tool_index):
            await self.close_open()
            i = await self.run.toolcall_start(call_id or "", fn.get("name") or "")
            self.open, self.open_kind = i, "toolCall"
            current = self._open_tool_call()
            assert current is not None  # just started
        i, block = current
        self.tool_index = index
        if call_id:
            block.id = call_id
        if fn.get("name"):
            block.name = fn["name"]
        await self.run.toolcall_delta(i, fn.get("arguments") or "")

    def _reasoning_detail(self, detail: Any) -> None:
        """An encrypted reasoning detail (OpenRouter) is kept on the tool call it names."""
        if not (isinstance(detail, dict) and detail.get("type") == "reasoning.encrypted"
                and detail.get("id") and detail.get("data")):
            return
        for b in self.run.output.content:
            if isinstance(b, ToolCall) and b.id == detail["id"]:
                b.thought_signature = json.dumps(detail, separators=(",", ":"))


# ---------------------------------------------------------------------------------------------
# Entry points


def _stream_error_text(error: Any) -> str:
    if isinstance(error, dict):
        text = error.get("message") or json.dumps(error)
        raw = (error.get("metadata") or {}).get("raw") if isinstance(error.get("metadata"), dict) else None
        return f"{text}\n{raw}" if isinstance(raw, str) and raw else str(text)
    return str(error)


def _describe(exc: BaseException) -> str:
    msg = describe_error(exc)
    body = getattr(exc, "body", None)
    raw = body.get("metadata", {}).get("raw") if isinstance(body, dict) and isinstance(body.get("metadata"), dict) else None
    return f"{msg}\n{raw}" if isinstance(raw, str) and raw else msg


def openai_client(model: Model, options: StreamOptions, api_key: str) -> Any:
    """``sdk_client`` for a call of either OpenAI API (this one and openai-responses build the
    same client): kept per key, base URL and headers inside ``reuse_clients``."""
    key = ("openai", api_key, model.base_url, headers_key(model, options))
    return sdk_client(key, lambda: make_client(model, options, api_key))


_json_body = msgspec.json.Encoder()


class _Client(openai.AsyncOpenAI):
    """The SDK's client, with the request body encoded by msgspec instead of the standard
    library's ``json`` (the SDK sends ``bytes`` given as the body as they are). The body holds
    the whole conversation: at 300 turns its encoding was a third of the request's build time
    in the provider (py-spy), and msgspec's is several times faster. The bytes are the same
    compact JSON, UTF-8 unescaped; a body holding something msgspec cannot encode (the SDK's
    own models, dates) is left to the SDK."""

    def _build_request(self, options: Any, *, retries_taken: int = 0) -> Any:
        body, extra = options.json_data, options.extra_json
        if type(body) is dict and (extra is None or type(extra) is dict) and options.files is None:
            # The SDK's merge of ``extra_body`` (see ``_common.sdk_request_args``): its keys
            # over the named arguments', in place; an ``Omit`` value removes the key.
            merged = {k: v for k, v in {**body, **(extra or {})}.items() if not isinstance(v, openai.Omit)}
            try:
                encoded = _json_body.encode(merged)
            except (TypeError, msgspec.EncodeError):
                pass  # not plain JSON data: the SDK's own encoder knows its types
            else:
                options = options.model_copy(update={"json_data": encoded, "extra_json": None})
        return super()._build_request(options, retries_taken=retries_taken)

    @property
    def user_agent(self) -> str:
        """The stock client's ``AsyncOpenAI/Python <version>``: the SDK names the client's
        class in it, and this subclass's name is ours, not something to tell a server."""
        return f"{openai.AsyncOpenAI.__name__}/Python {self._version}"

    def _prepare_url(self, url: str) -> Any:
        """The SDK's URL for ``url`` (a path under the base URL), kept for the next request to
        the same path and base URL: the SDK parses the path and rebuilds the URL on every
        request (httpx URLs are immutable, so one object serves them all)."""
        base = self.base_url
        kept = self.__dict__.get("_pi_prepared_url")
        if kept is not None and kept[0] == url and kept[1] is base:
            return kept[2]
        prepared = super()._prepare_url(url)
        self.__dict__["_pi_prepared_url"] = (url, base, prepared)
        return prepared


def make_client(model: Model, options: StreamOptions, api_key: str) -> openai.AsyncOpenAI:
    headers = request_headers(model, options)
    return _Client(api_key=api_key, base_url=model.base_url or None, max_retries=0,
                   default_headers=headers or None,
                   http_client=send_requests_whole(openai.DefaultAsyncHttpxClient(verify=shared_ssl_context())))


def _warm_client() -> openai.AsyncOpenAI:
    """A throwaway client with the resource the provider calls touched (imports it)."""
    client = make_client(warm_model(API, "http://127.0.0.1/v1"), StreamOptions(), "warm-up")
    client.chat.completions.with_streaming_response  # noqa: B018 - imports the resource
    return client


prepare, warm_up = warm_up_functions(_warm_client)


async def _body(run: StreamRun, context: Context) -> None:
    model, options = run.model, run.options
    api_key = require_api_key(model, options)
    params = build_params(model, context, options, get_compat(model))
    params = await apply_on_payload(params, model, options)
    async with openai_client(model, options, api_key) as client:
        client = with_sdk_client_options(client, options)  # retry.provider.{timeoutMs,maxRetries}
        body = _wire_body(params)
        mapper = _Mapper(run)
        await read_response(run, lambda: run.open_response(lambda: _post(client, body)),
                            sse_reader(run, mapper.sse, mapper.finish, mapper), sdk=False)


#: The request options ``chat.completions.create`` gives the SDK (the API key as a bearer token).
_POST_OPTIONS: dict[str, Any] = {"security": {"bearer_auth": True}}


def _wire_body(params: dict[str, Any]) -> dict[str, Any]:
    """The request body in the order ``chat.completions.create`` puts it on the wire: ``model``,
    ``stream``, then the rest as built (``sdk_request_args``'s merge gave the same bytes)."""
    rest = {k: v for k, v in params.items() if k != "model" and k != "stream"}
    return {"model": params["model"], "stream": True, **rest}


async def _post(client: openai.AsyncOpenAI, body: dict[str, Any]) -> httpx2.Response:
    """POST the body through the SDK's own request path (its auth, headers, retries and HTTP
    errors: an error status raises the same ``APIStatusError`` as ``create``), returning the
    streamed HTTP response once its headers are in; its SSE bytes are parsed here, which avoids
    a typed chunk object per delta. ``client.post`` rather than ``create``: ``create`` runs
    its TypedDict transform over the arguments and wraps the response in two more objects on
    every request (~0.4 ms of the provider's CPU per turn), for a body ours already is."""
    return await client.post("/chat/completions", cast_to=httpx2.Response, body=body,
                             options=cast(Any, _POST_OPTIONS), stream=True)


async def stream(model: Model, context: Context, options: StreamOptions | None, emit: Any) -> AssistantMessage:
    return await run_stream(model, options, emit, lambda run: _body(run, context), _describe)


async def stream_simple(model: Model, context: Context, options: StreamOptions | None, emit: Any) -> AssistantMessage:
    return await stream_simple_with_effort(stream, model, context, options, emit)
