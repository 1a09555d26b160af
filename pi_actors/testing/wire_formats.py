"""What a scripted reply looks like on the wire: OpenAI chat-completions, OpenAI Responses,
Anthropic messages, Google Gemini (``streamGenerateContent?alt=sse``) and Mistral chat SSE.

Contract: ``openai_frames(reply, model)``, ``responses_frames(reply, model)`` and
``anthropic_frames(reply, model)`` turn one :class:`Reply` into the list of SSE frames
(``bytes``, each a complete ``...\\n\\n`` event) a real server would send for it, and
``error_body(reply, api)`` into the body of an HTTP error reply.
Frames are split into a *content* part and a *closing* part so the server can hang or truncate
between them. Pure functions: no I/O here.

The shapes follow the public wire formats closely enough that the official SDKs parse them:
OpenAI sends ``data: {chunk}`` lines ending with ``data: [DONE]``; Anthropic sends
``event: <type>`` + ``data: {json}`` pairs (message_start, content_block_*, message_delta,
message_stop, with a ping after message_start); the Responses API sends ``event: <type>`` +
``data: {json}`` pairs (response.created, response.output_item.added/done around reasoning
summaries, output text and function-call arguments, then response.completed, .incomplete or
.failed), each with its ``sequence_number``.
"""

from __future__ import annotations

import json
import time
from typing import Any, Literal

import msgspec

__all__ = [
    "ScriptToolCall",
    "ScriptUsage",
    "Reply",
    "Frames",
    "openai_frames",
    "anthropic_frames",
    "responses_frames",
    "gemini_frames",
    "code_assist_frames",
    "mistral_frames",
    "error_body",
    "split_text",
]


class ScriptToolCall(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One tool call the scripted model makes; ``arguments`` is streamed in ``chunks`` fragments."""

    name: str
    arguments: dict[str, Any] = {}
    id: str | None = None
    chunks: int = 3


class ScriptUsage(msgspec.Struct, kw_only=True, omit_defaults=True):
    """Token counts reported by the scripted model (``output`` defaults to a rough count)."""

    input: int = 10
    output: int | None = None
    cache_read: int = 0
    cache_write: int = 0
    reasoning: int = 0


class Reply(msgspec.Struct, kw_only=True, omit_defaults=True):
    """One scripted answer. Loadable from JSON (``msgspec.convert(obj, Reply)``).

    - ``text`` / ``thinking`` / ``tool_calls``: content, sent in the order thinking, text, tools;
      ``chunks`` is how many deltas the text and thinking are each split into.
    - ``redacted_thinking``: an opaque reasoning payload sent before the thinking (Anthropic: a
      ``redacted_thinking`` block; Responses: a reasoning item with only ``encrypted_content``;
      chat completions: not sent).
    - ``stop_reason``: ``stop``/``length``/``toolUse`` (mapped to each wire's word) or any raw
      wire value (``content_filter``, ``refusal``, ``weird``...). Default: toolUse if there are
      tool calls, else stop. On the Responses wire the raw value is the response ``status``;
      ``failed`` sends ``response.failed`` (with ``stream_error`` as its message).
    - ``status`` + ``error_body``: an HTTP error reply; a str body is sent verbatim (may be
      non-JSON or empty), a dict as JSON, None as the provider's usual error JSON.
    - ``headers``: extra response headers (``retry-after``, ``retry-after-ms`` …), sent with
      an error reply and with a stream's headers alike.
    - ``truncate``: send about half of the stream then stop. ``truncate_style`` "abrupt" drops the
      connection mid-body; "clean" ends the body properly but without the closing events.
    - ``hang_after_start``: send the start and all content, then wait until the client goes away.
    - ``hang_before_headers``: send nothing at all, and wait until the client goes away.
    - ``malformed``: put an unparseable ``data:`` line in the middle of the stream.
    - ``stream_error``: after the content, send the provider's in-stream error with this message.
    - ``raw_sse``: send this text verbatim as the event-stream body instead of generated frames.
    - ``delivery``: how the body is cut into socket writes: ``batched`` (up to 64 KiB of whole
      events per write, the default), ``event`` (one SSE event per write) or ``slices`` (writes of
      ``slice_bytes`` bytes, which split lines and UTF-8 characters anywhere).
    """

    text: str | None = None
    thinking: str | None = None
    thinking_signature: str | None = None
    redacted_thinking: str | None = None
    tool_calls: list[ScriptToolCall] = []
    stop_reason: str | None = None
    usage: ScriptUsage = msgspec.field(default_factory=ScriptUsage)
    chunks: int = 3
    status: int = 200
    error_body: str | dict[str, Any] | None = None
    headers: dict[str, str] = {}
    truncate: bool = False
    truncate_style: Literal["abrupt", "clean"] = "abrupt"
    hang_after_start: bool = False
    hang_before_headers: bool = False
    malformed: bool = False
    stream_error: str | None = None
    raw_sse: str | None = None
    model: str | None = None
    delivery: Literal["batched", "event", "slices"] = "batched"
    slice_bytes: int = 13


class Frames(msgspec.Struct):
    """SSE frames of one reply: ``content`` (start + blocks) then ``closing`` (stop, usage, done)."""

    content: list[bytes]
    closing: list[bytes]


def split_text(text: str, n: int) -> list[str]:
    """``text`` cut into at most ``n`` non-empty consecutive pieces (one piece for n <= 1)."""
    if not text:
        return []
    n = max(1, min(n, len(text)))
    size, extra = divmod(len(text), n)
    pieces, pos = [], 0
    for i in range(n):
        step = size + (1 if i < extra else 0)
        pieces.append(text[pos : pos + step])
        pos += step
    return pieces


def _output_tokens(reply: Reply) -> int:
    if reply.usage.output is not None:
        return reply.usage.output
    words = len((reply.text or "").split()) + len((reply.thinking or "").split())
    return max(1, words + 5 * len(reply.tool_calls))


def _tool_id(reply: Reply, i: int, prefix: str) -> str:
    call = reply.tool_calls[i]
    return call.id if call.id is not None else f"{prefix}{i + 1}"


def _args_json(call: ScriptToolCall) -> str:
    return json.dumps(call.arguments, ensure_ascii=False)


# ---------------------------------------------------------------------------------------------
# OpenAI chat completions


_OPENAI_STOP = {"stop": "stop", "length": "length", "toolUse": "tool_calls"}


def _openai_data(obj: Any) -> bytes:
    return b"data: " + json.dumps(obj, ensure_ascii=False).encode() + b"\n\n"


def openai_frames(reply: Reply, model: str) -> Frames:
    created = int(time.time())

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return _openai_data(
            {
                "id": "chatcmpl-scripted",
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }
        )

    content = [chunk({"role": "assistant", "content": ""})]
    for piece in split_text(reply.thinking or "", reply.chunks):
        content.append(chunk({"reasoning_content": piece}))
    for piece in split_text(reply.text or "", reply.chunks):
        content.append(chunk({"content": piece}))
    for i, call in enumerate(reply.tool_calls):
        head = {"index": i, "id": _tool_id(reply, i, "call_"), "type": "function",
                "function": {"name": call.name, "arguments": ""}}
        content.append(chunk({"tool_calls": [head]}))
        for frag in split_text(_args_json(call), call.chunks):
            content.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": frag}}]}))

    stop = reply.stop_reason or ("toolUse" if reply.tool_calls else "stop")
    closing = []
    if reply.stream_error is not None:
        closing.append(_openai_data({"error": {"message": reply.stream_error, "type": "server_error"}}))
    closing.append(chunk({}, _OPENAI_STOP.get(stop, stop)))
    u = reply.usage
    usage = {
        "prompt_tokens": u.input + u.cache_read,
        "completion_tokens": _output_tokens(reply),
        "total_tokens": u.input + u.cache_read + _output_tokens(reply),
        "prompt_tokens_details": {"cached_tokens": u.cache_read},
        "completion_tokens_details": {"reasoning_tokens": u.reasoning},
    }
    closing.append(_openai_data({"id": "chatcmpl-scripted", "object": "chat.completion.chunk",
                                 "created": created, "model": model, "choices": [], "usage": usage}))
    closing.append(b"data: [DONE]\n\n")
    return Frames(content, closing)


# ---------------------------------------------------------------------------------------------
# Anthropic messages


_ANTHROPIC_STOP = {"stop": "end_turn", "length": "max_tokens", "toolUse": "tool_use"}


def _anthropic_event(obj: dict[str, Any]) -> bytes:
    return f"event: {obj['type']}\n".encode() + b"data: " + json.dumps(obj, ensure_ascii=False).encode() + b"\n\n"


def anthropic_frames(reply: Reply, model: str) -> Frames:
    u = reply.usage
    content = [
        _anthropic_event({
            "type": "message_start",
            "message": {
                "id": "msg_scripted", "type": "message", "role": "assistant", "model": model,
                "content": [], "stop_reason": None, "stop_sequence": None,
                "usage": {"input_tokens": u.input, "output_tokens": 1,
                          "cache_read_input_tokens": u.cache_read,
                          "cache_creation_input_tokens": u.cache_write},
            },
        }),
        _anthropic_event({"type": "ping"}),
    ]
    index = 0

    def block(start: dict[str, Any], deltas: list[dict[str, Any]]) -> None:
        nonlocal index
        content.append(_anthropic_event({"type": "content_block_start", "index": index, "content_block": start}))
        for d in deltas:
            content.append(_anthropic_event({"type": "content_block_delta", "index": index, "delta": d}))
        content.append(_anthropic_event({"type": "content_block_stop", "index": index}))
        index += 1

    if reply.redacted_thinking is not None:
        block({"type": "redacted_thinking", "data": reply.redacted_thinking}, [])
    if reply.thinking is not None:
        sig = reply.thinking_signature if reply.thinking_signature is not None else "c2lnbmF0dXJl"
        deltas = [{"type": "thinking_delta", "thinking": p} for p in split_text(reply.thinking, reply.chunks)]
        deltas += [{"type": "signature_delta", "signature": p} for p in split_text(sig, 2)]
        block({"type": "thinking", "thinking": "", "signature": ""}, deltas)
    if reply.text is not None:
        block({"type": "text", "text": ""},
              [{"type": "text_delta", "text": p} for p in split_text(reply.text, reply.chunks)])
    for i, call in enumerate(reply.tool_calls):
        block({"type": "tool_use", "id": _tool_id(reply, i, "toolu_"), "name": call.name, "input": {}},
              [{"type": "input_json_delta", "partial_json": p} for p in split_text(_args_json(call), call.chunks)])

    stop = reply.stop_reason or ("toolUse" if reply.tool_calls else "stop")
    closing = []
    if reply.stream_error is not None:
        closing.append(_anthropic_event({"type": "error", "error": {"type": "overloaded_error",
                                                                   "message": reply.stream_error}}))
    closing.append(_anthropic_event({
        "type": "message_delta",
        "delta": {"stop_reason": _ANTHROPIC_STOP.get(stop, stop), "stop_sequence": None},
        "usage": {"output_tokens": _output_tokens(reply)},
    }))
    closing.append(_anthropic_event({"type": "message_stop"}))
    return Frames(content, closing)


# ---------------------------------------------------------------------------------------------
# OpenAI Responses


_RESPONSES_STATUS = {"stop": "completed", "toolUse": "completed", "length": "incomplete"}


def responses_frames(reply: Reply, model: str) -> Frames:
    created = int(time.time())
    seq = 0
    u = reply.usage
    output: list[dict[str, Any]] = []

    def event(kind: str, **fields: Any) -> bytes:
        nonlocal seq
        obj = {"type": kind, "sequence_number": seq, **fields}
        seq += 1
        return f"event: {kind}\n".encode() + b"data: " + json.dumps(obj, ensure_ascii=False).encode() + b"\n\n"

    def response(status: str, **extra: Any) -> dict[str, Any]:
        return {"id": "resp_scripted", "object": "response", "created_at": created, "status": status,
                "model": model, "output": list(output), "parallel_tool_calls": True, "tool_choice": "auto",
                "tools": [], "error": None, "incomplete_details": None, **extra}

    content = [event("response.created", response=response("in_progress")),
               event("response.in_progress", response=response("in_progress"))]

    def item(obj: dict[str, Any], deltas: list[bytes]) -> None:
        index = len(output)
        added = dict(obj, status="in_progress") if obj["type"] != "reasoning" else dict(obj, summary=[])
        if obj["type"] == "message":
            added["content"] = []
        if obj["type"] == "function_call":
            added["arguments"] = ""
        content.append(event("response.output_item.added", output_index=index, item=added))
        content.extend(deltas)
        content.append(event("response.output_item.done", output_index=index, item=obj))
        output.append(obj)

    n = len(output)
    if reply.redacted_thinking is not None:
        item({"id": f"rs_scripted_{n}", "type": "reasoning", "summary": [],
              "encrypted_content": reply.redacted_thinking}, [])
    if reply.thinking is not None:
        rid = f"rs_scripted_{len(output)}"
        idx = len(output)
        part = {"type": "summary_text", "text": ""}
        deltas = [event("response.reasoning_summary_part.added", item_id=rid, output_index=idx, summary_index=0,
                        part=part)]
        deltas += [event("response.reasoning_summary_text.delta", item_id=rid, output_index=idx, summary_index=0,
                         delta=p) for p in split_text(reply.thinking, reply.chunks)]
        deltas.append(event("response.reasoning_summary_text.done", item_id=rid, output_index=idx, summary_index=0,
                            text=reply.thinking))
        deltas.append(event("response.reasoning_summary_part.done", item_id=rid, output_index=idx, summary_index=0,
                            part={"type": "summary_text", "text": reply.thinking}))
        obj: dict[str, Any] = {"id": rid, "type": "reasoning",
                               "summary": [{"type": "summary_text", "text": reply.thinking}]}
        if reply.thinking_signature is not None:
            obj["encrypted_content"] = reply.thinking_signature
        item(obj, deltas)
    if reply.text is not None:
        mid = f"msg_scripted_{len(output)}"
        idx = len(output)
        deltas = [event("response.content_part.added", item_id=mid, output_index=idx, content_index=0,
                        part={"type": "output_text", "text": "", "annotations": []})]
        deltas += [event("response.output_text.delta", item_id=mid, output_index=idx, content_index=0, delta=p,
                         logprobs=[]) for p in split_text(reply.text, reply.chunks)]
        deltas.append(event("response.output_text.done", item_id=mid, output_index=idx, content_index=0,
                            text=reply.text, logprobs=[]))
        done_part = {"type": "output_text", "text": reply.text, "annotations": []}
        deltas.append(event("response.content_part.done", item_id=mid, output_index=idx, content_index=0,
                            part=done_part))
        item({"id": mid, "type": "message", "status": "completed", "role": "assistant", "content": [done_part]},
             deltas)
    for i, call in enumerate(reply.tool_calls):
        fid = f"fc_scripted_{i + 1}"
        idx = len(output)
        args = _args_json(call)
        deltas = [event("response.function_call_arguments.delta", item_id=fid, output_index=idx, delta=p)
                  for p in split_text(args, call.chunks)]
        deltas.append(event("response.function_call_arguments.done", item_id=fid, output_index=idx,
                            arguments=args))
        item({"id": fid, "type": "function_call", "status": "completed", "arguments": args,
              "call_id": _tool_id(reply, i, "call_"), "name": call.name}, deltas)

    stop = reply.stop_reason or ("toolUse" if reply.tool_calls else "stop")
    status = _RESPONSES_STATUS.get(stop, stop)
    out_tokens = _output_tokens(reply)
    usage = {"input_tokens": u.input + u.cache_read, "input_tokens_details": {"cached_tokens": u.cache_read},
             "output_tokens": out_tokens, "output_tokens_details": {"reasoning_tokens": u.reasoning},
             "total_tokens": u.input + u.cache_read + out_tokens}
    closing = []
    if status == "failed":
        error = {"code": "server_error", "message": reply.stream_error or "The model failed"}
        closing.append(event("response.failed", response=response("failed", error=error, usage=usage)))
    elif reply.stream_error is not None:
        closing.append(event("error", code="server_error", message=reply.stream_error, param=None))
    elif status == "incomplete":
        closing.append(event("response.incomplete", response=response(
            "incomplete", incomplete_details={"reason": "max_output_tokens"}, usage=usage)))
    else:
        closing.append(event("response.completed", response=response(status, usage=usage)))
    return Frames(content, closing)


# ---------------------------------------------------------------------------------------------
# Google Gemini (generateContent SSE)


_GEMINI_FINISH = {"stop": "STOP", "toolUse": "STOP", "length": "MAX_TOKENS", "error": "SAFETY"}


def _gemini_data(obj: Any) -> bytes:
    # Google's servers end every event with CRLF pairs.
    return b"data: " + json.dumps(obj, ensure_ascii=False).encode() + b"\r\n\r\n"


def _gemini_calls(reply: Reply, signature: str) -> list[dict[str, Any]]:
    """The function-call parts of a reply; the first carries the thought signature when the
    reply thought."""
    calls: list[dict[str, Any]] = []
    for i, call in enumerate(reply.tool_calls):
        fc: dict[str, Any] = {"name": call.name, "args": call.arguments}
        if call.id is not None:
            fc["id"] = call.id
        part: dict[str, Any] = {"functionCall": fc}
        if i == 0 and reply.thinking is not None:
            part["thoughtSignature"] = signature
        calls.append(part)
    return calls


def gemini_frames(reply: Reply, model: str) -> Frames:
    """``streamGenerateContent?alt=sse``: each event a whole ``GenerateContentResponse``
    (``candidates[0].content.parts``, ``usageMetadata``, ``modelVersion``, ``responseId``).
    Thought summaries are parts with ``"thought": true``; the thought signature (base64) rides
    on the last thinking part, or on the first function call when there are calls. Function
    calls come whole, all in one event (parallel calls), with ``id`` only when scripted. The
    last event carries ``finishReason``; an in-stream error is a ``{"error": {...}}`` event."""
    u = reply.usage
    out_tokens = _output_tokens(reply)

    def usage(final: bool) -> dict[str, Any]:
        meta: dict[str, Any] = {"promptTokenCount": u.input + u.cache_read}
        if final:
            meta["candidatesTokenCount"] = out_tokens
            meta["totalTokenCount"] = u.input + u.cache_read + out_tokens + u.reasoning
            if u.reasoning:
                meta["thoughtsTokenCount"] = u.reasoning
        else:
            meta["totalTokenCount"] = u.input + u.cache_read
        if u.cache_read:
            meta["cachedContentTokenCount"] = u.cache_read
        return meta

    def event(parts: list[dict[str, Any]], finish: str | None = None) -> bytes:
        candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "index": 0}
        if finish is not None:
            candidate["finishReason"] = finish
        return _gemini_data({"candidates": [candidate], "usageMetadata": usage(finish is not None),
                             "modelVersion": model, "responseId": "gemini-scripted-response"})

    content: list[bytes] = []
    signature = reply.thinking_signature if reply.thinking_signature is not None else "c2lnbmF0dXJl"
    if reply.thinking is not None:
        pieces = split_text(reply.thinking, reply.chunks) or [""]
        for n, piece in enumerate(pieces):
            part: dict[str, Any] = {"text": piece, "thought": True}
            if n == len(pieces) - 1 and not reply.tool_calls:
                part["thoughtSignature"] = signature
            content.append(event([part]))
    for piece in split_text(reply.text or "", reply.chunks):
        content.append(event([{"text": piece}]))
    if reply.tool_calls:
        content.append(event(_gemini_calls(reply, signature)))

    stop = reply.stop_reason or ("toolUse" if reply.tool_calls else "stop")
    closing: list[bytes] = []
    if reply.stream_error is not None:
        closing.append(_gemini_data({"error": {"code": 503, "message": reply.stream_error, "status": "UNAVAILABLE"}}))
    else:
        closing.append(event([{"text": ""}] if not reply.tool_calls else [], _GEMINI_FINISH.get(stop, stop)))
    return Frames(content, closing)


def code_assist_frames(reply: Reply, model: str) -> Frames:
    """Cloud Code Assist's ``v1internal:streamGenerateContent?alt=sse`` (the google-gemini-cli
    API): the Gemini events of ``gemini_frames``, each wrapped as ``{"response": <event>,
    "traceId"}``; an in-stream error stays a bare ``{"error": {...}}`` event."""
    frames = gemini_frames(reply, model)

    def wrap(frame: bytes) -> bytes:
        obj = json.loads(frame[len(b"data: "):])
        if "error" in obj:
            return frame
        return _gemini_data({"response": obj, "traceId": "scripted-trace"})

    return Frames([wrap(f) for f in frames.content], [wrap(f) for f in frames.closing])


# ---------------------------------------------------------------------------------------------
# Mistral chat completions (the mistral-conversations API)


_MISTRAL_FINISH = {"stop": "stop", "length": "length", "toolUse": "tool_calls", "error": "error"}


def _mistral_call_id(reply: Reply, i: int) -> str:
    """Mistral's tool-call ids are 9 letters and digits."""
    call = reply.tool_calls[i]
    return call.id if call.id is not None else f"scrpt{i + 1:04d}"


def mistral_frames(reply: Reply, model: str) -> Frames:
    """Mistral's ``/v1/chat/completions`` stream: chat-completion chunks like OpenAI's, but a
    reasoning model's thinking comes as content *chunks* (``{"type": "thinking", "thinking":
    [{"type": "text", "text": ...}]}``) beside plain string content; each tool call comes
    whole in one chunk (9-character id, ``index``); the last chunk has ``finish_reason`` and
    ``usage``; then ``data: [DONE]``. An in-stream error is an ``{"object": "error", ...}``
    event."""
    created = int(time.time())
    u = reply.usage
    out_tokens = _output_tokens(reply)

    def chunk(delta: dict[str, Any], finish: str | None = None, usage: dict[str, int] | None = None) -> bytes:
        obj: dict[str, Any] = {"id": "cmpl-scripted", "object": "chat.completion.chunk", "created": created,
                               "model": model, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        if usage is not None:
            obj["usage"] = usage
        return _openai_data(obj)

    content = [chunk({"role": "assistant", "content": ""})]
    for piece in split_text(reply.thinking or "", reply.chunks):
        content.append(chunk({"content": [{"type": "thinking", "thinking": [{"type": "text", "text": piece}]}]}))
    for piece in split_text(reply.text or "", reply.chunks):
        content.append(chunk({"content": piece}))
    for i, call in enumerate(reply.tool_calls):
        content.append(chunk({"tool_calls": [{"id": _mistral_call_id(reply, i), "type": "function", "index": i,
                                              "function": {"name": call.name, "arguments": _args_json(call)}}]}))
    stop = reply.stop_reason or ("toolUse" if reply.tool_calls else "stop")
    closing: list[bytes] = []
    if reply.stream_error is not None:
        closing.append(_openai_data({"object": "error", "message": reply.stream_error, "type": "internal_error",
                                     "code": "3000"}))
    else:
        usage = {"prompt_tokens": u.input, "completion_tokens": out_tokens, "total_tokens": u.input + out_tokens}
        closing.append(chunk({"content": ""}, _MISTRAL_FINISH.get(stop, stop), usage))
        closing.append(b"data: [DONE]\n\n")
    return Frames(content, closing)


# ---------------------------------------------------------------------------------------------
# HTTP error bodies


def error_body(reply: Reply, api: Literal["openai", "responses", "anthropic", "gemini", "mistral"],
               message: str | None = None) -> bytes:
    """The body of an HTTP error reply: verbatim str, JSON dict, or the provider's usual JSON."""
    if isinstance(reply.error_body, str):
        return reply.error_body.encode()
    if isinstance(reply.error_body, dict):
        return json.dumps(reply.error_body).encode()
    msg = message or f"scripted error {reply.status}"
    if api == "anthropic":
        kind = {400: "invalid_request_error", 401: "authentication_error", 429: "rate_limit_error",
                529: "overloaded_error"}.get(reply.status, "api_error")
        return json.dumps({"type": "error", "error": {"type": kind, "message": msg}}).encode()
    if api == "gemini":
        status = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND",
                  429: "RESOURCE_EXHAUSTED", 503: "UNAVAILABLE"}.get(reply.status, "INTERNAL")
        return json.dumps({"error": {"code": reply.status, "message": msg, "status": status}}).encode()
    if api == "mistral":
        return json.dumps({"object": "error", "message": msg, "type": "invalid_request_error" if reply.status < 500
                           else "internal_error", "param": None, "code": str(reply.status)}).encode()
    kind = {400: "invalid_request_error", 401: "invalid_request_error"}.get(reply.status, "server_error")
    return json.dumps({"error": {"message": msg, "type": kind, "param": None, "code": None}}).encode()
