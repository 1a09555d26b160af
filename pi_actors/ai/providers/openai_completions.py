"""The ``openai-completions`` API: OpenAI chat completions and compatible servers, through the
official ``openai`` SDK (spec/pi-core.md §2.2).

Contract: ``stream`` / ``stream_simple`` follow the skeleton of ``_common.run_stream`` (never
raise, exactly one terminal event). Specific to this API:
- ``start`` is emitted once the HTTP request has been accepted, so an HTTP error, a refused
  connection or a missing key gives ``error`` with no ``start``;
- at most one block is open at a time; a block of another kind closes the open one first; a
  tool-call delta with a new ``id`` starts a new tool call (the delta ``index`` is ignored);
- usage: ``input = prompt - cached``, ``output = completion + reasoning``, ``cacheRead =
  cached``, ``totalTokens = input + output + cacheRead``; usage comes only at the end;
- a stream that ends without any ``finish_reason`` is treated as truncated (error), which pi
  would report as a success;
- ``stream_simple`` requires a key and maps ``reasoning`` to ``reasoning_effort`` (xhigh is
  clamped to high unless the model supports it).
"""

from __future__ import annotations

import json
import re
from typing import Any

import openai

from ..env_keys import get_env_api_key
from ..options import StreamOptions, build_base_options, clamp_reasoning, extra_option, supports_xhigh
from ..sanitize import sanitize_surrogates
from ..transform import transform_messages
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
    close_quietly,
    describe_error,
    run_stream,
    shared_ssl_context,
)
from .openai_compat import OpenAICompletionsCompat, get_compat

__all__ = ["API", "stream", "stream_simple", "convert_messages", "build_params"]

API = "openai-completions"

_STOP_REASONS = {"stop": "stop", "end": "stop", "length": "length", "tool_calls": "toolUse",
                 "function_call": "toolUse", "content_filter": "error"}
_REASONING_FIELDS = ("reasoning_content", "reasoning", "reasoning_text")
_ID_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")


# ---------------------------------------------------------------------------------------------
# Request


def _normalize_tool_call_id(call_id: str, model: Model, _source: AssistantMessage) -> str:
    if "|" in call_id:
        return _ID_UNSAFE.sub("_", call_id.split("|", 1)[0])[:40]
    if model.provider == "openai" and len(call_id) > 40:
        return call_id[:40]
    return call_id


def _image_part(block: ImageContent) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": f"data:{block.mime_type};base64,{block.data}"}}


def _assistant_message(msg: AssistantMessage, compat: OpenAICompletionsCompat) -> dict[str, Any] | None:
    out: dict[str, Any] = {"role": "assistant", "content": "" if compat.requires_assistant_after_tool_result else None}
    texts = [b.text for b in msg.content if isinstance(b, TextContent) and b.text.strip()]
    thinking = [b for b in msg.content if isinstance(b, ThinkingContent) and b.thinking.strip()]
    text = sanitize_surrogates("".join(texts))
    if thinking and compat.requires_thinking_as_text:
        parts = [{"type": "text", "text": sanitize_surrogates("\n\n".join(b.thinking for b in thinking))}]
        if text:
            parts.append({"type": "text", "text": text})
        out["content"] = parts
    else:
        if text:
            out["content"] = text
        if thinking and thinking[0].thinking_signature:
            out[thinking[0].thinking_signature] = sanitize_surrogates("\n".join(b.thinking for b in thinking))
    calls = [b for b in msg.content if isinstance(b, ToolCall)]
    if calls:
        out["tool_calls"] = [
            {"id": c.id, "type": "function",
             "function": {"name": c.name, "arguments": json.dumps(c.arguments, ensure_ascii=False)}}
            for c in calls
        ]
        details = []
        for c in calls:
            if c.thought_signature:
                try:
                    details.append(json.loads(c.thought_signature))
                except ValueError:
                    pass
        if details:
            out["reasoning_details"] = details
    if not out["content"] and not calls:
        return None
    return out


def convert_messages(model: Model, context: Context, compat: OpenAICompletionsCompat) -> list[dict[str, Any]]:
    vision = "image" in model.input
    out: list[dict[str, Any]] = []
    if context.system_prompt:
        role = "developer" if model.reasoning and compat.supports_developer_role else "system"
        out.append({"role": role, "content": sanitize_surrogates(context.system_prompt)})

    messages: list[Message] = transform_messages(context.messages, model, _normalize_tool_call_id)
    pending_images: list[dict[str, Any]] = []
    after_tool_results = False

    def flush_images() -> None:
        if pending_images:
            if compat.requires_assistant_after_tool_result:
                out.append({"role": "assistant", "content": "I have processed the tool results."})
            out.append({"role": "user", "content": [{"type": "text", "text": "Attached image(s) from tool result:"},
                                                    *pending_images]})
            pending_images.clear()

    for msg in messages:
        if not isinstance(msg, ToolResultMessage):
            flush_images()
        if isinstance(msg, UserMessage):
            if after_tool_results and compat.requires_assistant_after_tool_result and out[-1]["role"] != "assistant":
                out.append({"role": "assistant", "content": "I have processed the tool results."})
            if isinstance(msg.content, str):
                out.append({"role": "user", "content": sanitize_surrogates(msg.content)})
            else:
                parts = [{"type": "text", "text": sanitize_surrogates(b.text)} if isinstance(b, TextContent)
                         else _image_part(b) for b in msg.content if isinstance(b, TextContent) or vision]
                if parts:
                    out.append({"role": "user", "content": parts})
        elif isinstance(msg, AssistantMessage):
            converted = _assistant_message(msg, compat)
            if converted is not None:
                out.append(converted)
        else:
            text = "\n".join(b.text for b in msg.content if isinstance(b, TextContent))
            tool_msg = {"role": "tool", "content": sanitize_surrogates(text) if text else "(see attached image)",
                        "tool_call_id": msg.tool_call_id}
            if compat.requires_tool_result_name:
                tool_msg["name"] = msg.tool_name
            out.append(tool_msg)
            if vision:
                pending_images.extend(_image_part(b) for b in msg.content if isinstance(b, ImageContent))
        after_tool_results = isinstance(msg, ToolResultMessage)
    flush_images()
    return out


def _has_tool_history(messages: list[Message]) -> bool:
    return any(isinstance(m, ToolResultMessage) or (isinstance(m, AssistantMessage)
               and any(isinstance(b, ToolCall) for b in m.content)) for m in messages)


def _add_openrouter_cache_control(messages: list[dict[str, Any]]) -> None:
    for msg in reversed(messages):
        if msg["role"] not in ("user", "assistant"):
            continue
        content = msg.get("content")
        if isinstance(content, str) and content:
            msg["content"] = [{"type": "text", "text": content, "cache_control": {"type": "ephemeral"}}]
            return
        if isinstance(content, list):
            for part in reversed(content):
                if part.get("type") == "text":
                    part["cache_control"] = {"type": "ephemeral"}
                    return


def build_params(model: Model, context: Context, options: StreamOptions,
                 compat: OpenAICompletionsCompat) -> dict[str, Any]:
    messages = convert_messages(model, context, compat)
    if model.provider == "openrouter" and model.id.startswith("anthropic/"):
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
    if model.reasoning:
        effort = extra_option(options, "reasoning_effort")
        if compat.thinking_format in ("zai", "qwen"):
            params["enable_thinking"] = bool(effort)
        elif compat.thinking_format == "qwen-chat-template":
            params["chat_template_kwargs"] = {"enable_thinking": bool(effort)}
        elif effort and compat.supports_reasoning_effort:
            params["reasoning_effort"] = compat.reasoning_effort_map.get(effort, effort)
    url = model.base_url or ""
    if "openrouter.ai" in url and (model.compat or {}).get("openRouterRouting"):
        params["provider"] = compat.open_router_routing
    routing = compat.vercel_gateway_routing
    if "ai-gateway.vercel.sh" in url and (routing.get("only") or routing.get("order")):
        params["providerOptions"] = {"gateway": {k: routing[k] for k in ("only", "order") if routing.get(k)}}
    return params


# ---------------------------------------------------------------------------------------------
# Response


class _Mapper:
    """Maps chat-completion chunks onto the run's blocks (one open block at a time)."""

    def __init__(self, run: StreamRun) -> None:
        self.run = run
        self.open: int | None = None
        self.saw_finish = False

    def _block(self) -> Any:
        return None if self.open is None else self.run.output.content[self.open]

    async def close_open(self) -> None:
        if self.open is not None:
            i, self.open = self.open, None
            await self.run.end_block(i)

    def _usage(self, usage: Any) -> None:
        details = getattr(usage, "prompt_tokens_details", None)
        cached = (getattr(details, "cached_tokens", None) or 0) if details is not None else 0
        out_details = getattr(usage, "completion_tokens_details", None)
        reasoning = (getattr(out_details, "reasoning_tokens", None) or 0) if out_details is not None else 0
        u = self.run.output.usage
        u.input = (getattr(usage, "prompt_tokens", None) or 0) - cached
        u.output = (getattr(usage, "completion_tokens", None) or 0) + reasoning
        u.cache_read = cached
        u.cache_write = 0
        u.total_tokens = u.input + u.output + u.cache_read
        self.run.update_cost()

    async def chunk(self, chunk: Any) -> None:
        run = self.run
        if getattr(chunk, "usage", None) is not None:
            self._usage(chunk.usage)
        choices = getattr(chunk, "choices", None) or []
        if not choices:
            return
        choice = choices[0]
        if getattr(chunk, "usage", None) is None and getattr(choice, "usage", None) is not None:
            self._usage(choice.usage)  # Moonshot puts usage on the choice
        if choice.finish_reason:
            self.saw_finish = True
            reason = _STOP_REASONS.get(choice.finish_reason)
            if reason is None:
                raise ProviderError(f"Unhandled stop reason: {choice.finish_reason}")
            run.output.stop_reason = reason
        delta = choice.delta
        if delta is None:
            return
        if delta.content:
            if not isinstance(self._block(), TextContent):
                await self.close_open()
                self.open = await run.text_start()
            await run.text_delta(self.open, delta.content)
        for field in _REASONING_FIELDS:
            text = getattr(delta, field, None)
            if isinstance(text, str) and text:
                if not isinstance(self._block(), ThinkingContent):
                    await self.close_open()
                    self.open = await run.thinking_start(signature=field)
                await run.thinking_delta(self.open, text)
                break
        for call in delta.tool_calls or []:
            block = self._block()
            if not isinstance(block, ToolCall) or (call.id and call.id != block.id):
                await self.close_open()
                self.open = await run.toolcall_start(call.id or "", "")
                block = self._block()
            if call.id:
                block.id = call.id
            fn = call.function
            if fn is not None and fn.name:
                block.name = fn.name
            await run.toolcall_delta(self.open, (fn.arguments if fn is not None else None) or "")
        for detail in getattr(delta, "reasoning_details", None) or []:
            if isinstance(detail, dict) and detail.get("type") == "reasoning.encrypted" \
                    and detail.get("id") and detail.get("data"):
                for block in run.output.content:
                    if isinstance(block, ToolCall) and block.id == detail["id"]:
                        block.thought_signature = json.dumps(detail)


# ---------------------------------------------------------------------------------------------
# Entry points


def _describe(exc: BaseException) -> str:
    msg = describe_error(exc)
    body = getattr(exc, "body", None)
    raw = body.get("metadata", {}).get("raw") if isinstance(body, dict) and isinstance(body.get("metadata"), dict) else None
    return f"{msg}\n{raw}" if isinstance(raw, str) and raw else msg


async def _body(run: StreamRun, context: Context) -> None:
    model, options = run.model, run.options
    api_key = options.api_key or get_env_api_key(model.provider)
    if not api_key:
        raise ProviderError(f"No API key for provider: {model.provider}")
    params = build_params(model, context, options, get_compat(model))
    params = await apply_on_payload(params, model, options)
    headers = {**(model.headers or {}), **(options.headers or {})}
    client = openai.AsyncOpenAI(api_key=api_key, base_url=model.base_url or None, max_retries=0,
                                default_headers=headers or None,
                                http_client=openai.DefaultAsyncHttpxClient(verify=shared_ssl_context()))
    sdk_stream = None
    try:
        rest = {k: v for k, v in params.items() if k not in ("model", "messages", "stream")}
        sdk_stream = await run.io(client.chat.completions.create, model=params["model"],
                                  messages=params["messages"], stream=True, extra_body=rest)
        await run.start()
        mapper = _Mapper(run)
        chunks = sdk_stream.__aiter__()
        while True:
            try:
                chunk = await run.io(chunks.__anext__)
            except StopAsyncIteration:
                break
            await mapper.chunk(chunk)
        run.check_aborted()
        if not mapper.saw_finish:
            raise ProviderError("Stream ended without a finish reason (the response was cut short)")
        await mapper.close_open()
    finally:
        await close_quietly(sdk_stream)
        await close_quietly(client)


async def stream(model: Model, context: Context, options: StreamOptions | None, emit: Any) -> AssistantMessage:
    return await run_stream(model, options, emit, lambda run: _body(run, context), _describe)


async def stream_simple(model: Model, context: Context, options: StreamOptions | None, emit: Any) -> AssistantMessage:
    api_key = (options.api_key if options else None) or get_env_api_key(model.provider)
    base = build_base_options(model, options, api_key)
    level = options.reasoning if options else None
    if level:
        base.extra["reasoning_effort"] = level if supports_xhigh(model) else clamp_reasoning(level)
    return await stream(model, context, base, emit)
