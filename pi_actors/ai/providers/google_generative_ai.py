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

import base64
import itertools
import json
import re
import time
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

from ..options import StreamOptions, clamp_reasoning, extra_option
from ..sanitize import sanitize_surrogates
from ..transform import transform_messages
from ..types import (
    AssistantMessage,
    Context,
    ImageContent,
    Model,
    TextContent,
    ThinkingContent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from ._common import (
    StreamRun,
    apply_on_payload,
    describe_error,
    note_response,
    run_stream,
)
from ._stream import headers_key, require_api_key, simple_base_options, warm_model, warm_up_functions

__all__ = ["API", "stream", "stream_simple", "convert_messages", "build_params", "describe_google_error",
           "GeminiAPIError",
           "prepare", "warm_up"]

API = "google-generative-ai"

_BASE64 = re.compile(r"^[A-Za-z0-9+/]+={0,2}$")
_ID_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")
_FINISH = {"STOP": "stop", "MAX_TOKENS": "length"}
_call_counter = itertools.count(1)


# ---------------------------------------------------------------------------------------------
# Request


def _needs_call_id(model_id: str) -> bool:
    return model_id.startswith(("claude-", "gpt-oss-"))


def _valid_signature(signature: str | None) -> bool:
    return bool(signature) and len(signature or "") % 4 == 0 and bool(_BASE64.match(signature or ""))


def _normalize_id(call_id: str, model: Model, _source: AssistantMessage) -> str:
    return _ID_UNSAFE.sub("_", call_id)[:64] if _needs_call_id(model.id) else call_id


def _gemini_major(model_id: str) -> int | None:
    match = re.match(r"^gemini(?:-live)?-(\d+)", model_id.lower())
    return int(match.group(1)) if match else None


def _image_part(block: ImageContent) -> dict[str, Any]:
    return {"inlineData": {"mimeType": block.mime_type, "data": block.data}}


def _assistant_parts(msg: AssistantMessage, model: Model) -> list[dict[str, Any]]:
    same = msg.provider == model.provider and msg.model == model.id
    parts: list[dict[str, Any]] = []

    def signed(part: dict[str, Any], signature: str | None) -> dict[str, Any]:
        if same and _valid_signature(signature):
            part["thoughtSignature"] = signature
        return part

    for block in msg.content:
        if isinstance(block, TextContent):
            if block.text.strip():
                parts.append(signed({"text": sanitize_surrogates(block.text)}, block.text_signature))
        elif isinstance(block, ThinkingContent):
            if not block.thinking.strip():
                continue
            if same:
                parts.append(signed({"thought": True, "text": sanitize_surrogates(block.thinking)},
                                    block.thinking_signature))
            else:
                parts.append({"text": sanitize_surrogates(block.thinking)})
        else:
            call: dict[str, Any] = {"name": block.name, "args": block.arguments or {}}
            if _needs_call_id(model.id):
                call["id"] = block.id
            parts.append(signed({"functionCall": call}, block.thought_signature))
    return parts


def _tool_result(msg: ToolResultMessage, model: Model, contents: list[dict[str, Any]]) -> None:
    text = "\n".join(b.text for b in msg.content if isinstance(b, TextContent))
    images = [b for b in msg.content if isinstance(b, ImageContent)] if "image" in model.input else []
    value = sanitize_surrogates(text) if text else ("(see attached image)" if images else "")
    major = _gemini_major(model.id)
    nested_images = major is None or major >= 3
    response: dict[str, Any] = {"name": msg.tool_name,
                                "response": {"error": value} if msg.is_error else {"output": value}}
    if images and nested_images:
        response["parts"] = [_image_part(b) for b in images]
    if _needs_call_id(model.id):
        response["id"] = msg.tool_call_id
    part = {"functionResponse": response}
    last = contents[-1] if contents else None
    if last is not None and last["role"] == "user" and any("functionResponse" in p for p in last["parts"]):
        last["parts"].append(part)
    else:
        contents.append({"role": "user", "parts": [part]})
    if images and not nested_images:
        contents.append({"role": "user", "parts": [{"text": "Tool result image:"}, *(_image_part(b) for b in images)]})


def convert_messages(model: Model, context: Context) -> list[dict[str, Any]]:
    """The ``contents`` of a request: pi's conversion (see the module docstring)."""
    contents: list[dict[str, Any]] = []
    for msg in transform_messages(context.messages, model, _normalize_id):
        if isinstance(msg, UserMessage):
            if isinstance(msg.content, str):
                contents.append({"role": "user", "parts": [{"text": sanitize_surrogates(msg.content)}]})
                continue
            parts = [{"text": sanitize_surrogates(b.text)} if isinstance(b, TextContent) else _image_part(b)
                     for b in msg.content]
            if parts:
                contents.append({"role": "user", "parts": parts})
        elif isinstance(msg, AssistantMessage):
            parts = _assistant_parts(msg, model)
            if parts:
                contents.append({"role": "model", "parts": parts})
        else:
            _tool_result(msg, model, contents)
    return contents


def build_params(model: Model, context: Context, options: StreamOptions) -> dict[str, Any]:
    """``{"model", "contents", "config"}`` for ``generate_content_stream`` (camelCase keys,
    as on the wire; the SDK takes either spelling)."""
    config: dict[str, Any] = {}
    if options.temperature is not None:
        config["temperature"] = options.temperature
    if options.max_tokens:
        config["maxOutputTokens"] = options.max_tokens
    if context.system_prompt:
        config["systemInstruction"] = sanitize_surrogates(context.system_prompt)
    if context.tools:
        config["tools"] = [{"functionDeclarations": [
            {"name": t.name, "description": t.description, "parametersJsonSchema": t.parameters}
            for t in context.tools]}]
        choice = extra_option(options, "tool_choice")
        if choice:
            mode = {"auto": "AUTO", "none": "NONE", "any": "ANY"}.get(choice, "AUTO")
            config["toolConfig"] = {"functionCallingConfig": {"mode": mode}}
    thinking = extra_option(options, "thinking_enabled")
    if model.reasoning and thinking:
        cfg: dict[str, Any] = {"includeThoughts": True}
        level, budget = extra_option(options, "thinking_level"), extra_option(options, "thinking_budget_tokens")
        if level is not None:
            cfg["thinkingLevel"] = level
        elif budget is not None:
            cfg["thinkingBudget"] = budget
        config["thinkingConfig"] = cfg
    elif model.reasoning and thinking is False:
        config["thinkingConfig"] = _thinking_off(model)
    return {"model": model.id, "contents": convert_messages(model, context), "config": config}


def _is_gemini3_pro(model: Model) -> bool:
    return re.search(r"gemini-3(?:\.\d+)?-pro", model.id.lower()) is not None


def _is_gemini3_flash(model: Model) -> bool:
    return re.search(r"gemini-3(?:\.\d+)?-flash", model.id.lower()) is not None


def _is_gemma4(model: Model) -> bool:
    return re.search(r"gemma-?4", model.id.lower()) is not None


def _thinking_off(model: Model) -> dict[str, Any]:
    """The lowest thinking a model allows (Gemini 3 cannot turn it off; 2.x takes budget 0)."""
    if _is_gemini3_pro(model):
        return {"thinkingLevel": "LOW"}
    if _is_gemini3_flash(model) or _is_gemma4(model):
        return {"thinkingLevel": "MINIMAL"}
    return {"thinkingBudget": 0}


def _thinking_level(effort: str, model: Model) -> str:
    if _is_gemini3_pro(model):
        return "LOW" if effort in ("minimal", "low") else "HIGH"
    if _is_gemma4(model):
        return "MINIMAL" if effort in ("minimal", "low") else "HIGH"
    return effort.upper()


_BUDGETS = (
    ("2.5-pro", {"minimal": 128, "low": 2048, "medium": 8192, "high": 32768}),
    ("2.5-flash-lite", {"minimal": 512, "low": 2048, "medium": 8192, "high": 24576}),
    ("2.5-flash", {"minimal": 128, "low": 2048, "medium": 8192, "high": 24576}),
)


def _thinking_budget(model: Model, effort: str, custom: dict[str, int] | None) -> int:
    if custom and effort in custom:
        return custom[effort]
    for fragment, table in _BUDGETS:
        if fragment in model.id:
            return table[effort]
    return -1  # dynamic: the model decides


# ---------------------------------------------------------------------------------------------
# Response


def _signature_text(raw: Any) -> str | None:
    """A part's thought signature as base64 text (the SDK decodes it to bytes)."""
    if isinstance(raw, bytes | bytearray):
        return base64.b64encode(raw).decode("ascii") if raw else None
    return raw if isinstance(raw, str) and raw else None


class _Mapper:
    """Maps the SDK's ``GenerateContentResponse`` chunks onto the run's blocks."""

    def __init__(self, run: StreamRun) -> None:
        self.run = run
        self.open: int | None = None
        self.open_kind: str | None = None  # "thinking" or "text"
        self.finished = False

    async def end_open(self) -> None:
        if self.open is not None:
            i, self.open, self.open_kind = self.open, None, None
            await self.run.end_block(i)

    async def chunk(self, chunk: Any) -> None:
        run = self.run
        response_id = getattr(chunk, "response_id", None)
        if isinstance(response_id, str) and response_id and not run.output.response_id:
            note_response(run, response_id, getattr(chunk, "model_version", None))
        candidates = getattr(chunk, "candidates", None) or []
        candidate = candidates[0] if candidates else None
        content = getattr(candidate, "content", None)
        for part in getattr(content, "parts", None) or []:
            await self.part(part)
        finish = getattr(candidate, "finish_reason", None)
        if finish is not None:
            name = getattr(finish, "value", finish)
            reason = _FINISH.get(str(name), "error")
            if any(isinstance(b, ToolCall) for b in run.output.content):
                reason = "toolUse"
            run.output.stop_reason = reason  # type: ignore[assignment]
            if reason == "error":
                run.output.error_message = f"Gemini stopped: {name}"
            self.finished = True
        usage = getattr(chunk, "usage_metadata", None)
        if usage is not None:
            self.usage(usage)

    async def part(self, part: Any) -> None:
        run = self.run
        signature = _signature_text(getattr(part, "thought_signature", None))
        text = getattr(part, "text", None)
        kind = "thinking" if getattr(part, "thought", None) is True else "text"
        if text == "" and not signature and self.open_kind != kind:
            text = None  # an empty part (the last chunk often has one) opens no block
        if isinstance(text, str):
            if self.open is None or self.open_kind != kind:
                await self.end_open()
                self.open = await (run.thinking_start() if kind == "thinking" else run.text_start())
                self.open_kind = kind
            block = run.output.content[self.open]
            if kind == "thinking":
                await run.thinking_delta(self.open, text)
                if signature and isinstance(block, ThinkingContent):
                    block.thinking_signature = signature
            else:
                await run.text_delta(self.open, text)
                if signature and isinstance(block, TextContent):
                    block.text_signature = signature
        call = getattr(part, "function_call", None)
        if call is not None:
            await self.end_open()
            name = getattr(call, "name", None) or ""
            given = getattr(call, "id", None)
            used = {b.id for b in run.output.content if isinstance(b, ToolCall)}
            call_id = given if isinstance(given, str) and given and given not in used else \
                f"{name}_{int(time.time() * 1000)}_{next(_call_counter)}"
            args = getattr(call, "args", None)
            arguments = args if isinstance(args, dict) else {}
            i = await run.toolcall_start(call_id, name, arguments)
            block = run.output.content[i]
            if signature and isinstance(block, ToolCall):
                block.thought_signature = signature
            await run.toolcall_delta(i, json.dumps(arguments, ensure_ascii=False))
            await run.toolcall_end(i)

    def usage(self, meta: Any) -> None:
        def count(name: str) -> int:
            value = getattr(meta, name, None)
            return value if isinstance(value, int) else 0

        u = self.run.output.usage
        cached = count("cached_content_token_count")
        u.input = count("prompt_token_count") - cached
        u.output = count("candidates_token_count") + count("thoughts_token_count")
        u.cache_read = cached
        u.cache_write = 0
        u.total_tokens = count("total_token_count")
        self.run.update_cost()


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
