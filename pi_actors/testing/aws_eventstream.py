"""Bedrock ``ConverseStream`` on the wire, for the scripted server: the AWS event-stream
encoder (binary framing: prelude, headers, CRC32s — the decoder is
``pi_actors.ai.providers.eventstream``) and the messages of one scripted :class:`Reply`.

Contract: ``encode_message(headers, payload)`` returns one framed message; header values are
str (type 7), bytes (6), bool (0/1) or int (4, i32). ``bedrock_frames(reply, model)`` returns
the reply as :class:`Frames` (each item one whole message): ``messageStart``, then per block
(thinking, text, tool calls, in that order, each its own ``contentBlockIndex``)
``contentBlockStart`` (tool calls only, as Bedrock), ``contentBlockDelta``\\ s and
``contentBlockStop``; the closing part is ``messageStop`` + ``metadata`` (usage), or an
``exception`` message (``modelStreamErrorException``) for ``stream_error``. Every event
payload carries Bedrock's ``p`` padding field. ``bedrock_error_body(reply, message)`` is an
HTTP error's JSON body and ``bedrock_error_type(status)`` its ``x-amzn-errortype``. Pure.
"""

from __future__ import annotations

import json
import struct
import zlib
from typing import Any

from .wire_formats import Frames, Reply, _output_tokens, _tool_id, split_text

__all__ = ["encode_message", "event_message", "bedrock_frames", "bedrock_error_body", "bedrock_error_type",
           "BAD_CHECKSUM_MESSAGE"]

_STOP = {"stop": "end_turn", "length": "max_tokens", "toolUse": "tool_use"}
_ERROR_TYPES = {400: "ValidationException", 403: "AccessDeniedException", 404: "ResourceNotFoundException",
                429: "ThrottlingException", 503: "ServiceUnavailableException"}


def _header(name: str, value: str | bytes | bool | int) -> bytes:
    raw_name = name.encode()
    head = struct.pack(">B", len(raw_name)) + raw_name
    if isinstance(value, bool):
        return head + struct.pack(">B", 0 if value else 1)
    if isinstance(value, int):
        return head + struct.pack(">Bi", 4, value)
    if isinstance(value, bytes):
        return head + struct.pack(">BH", 6, len(value)) + value
    raw = value.encode()
    return head + struct.pack(">BH", 7, len(raw)) + raw


def encode_message(headers: dict[str, str | bytes | bool | int], payload: bytes) -> bytes:
    """One event-stream message (module docstring)."""
    block = b"".join(_header(k, v) for k, v in headers.items())
    total = 12 + len(block) + len(payload) + 4
    prelude = struct.pack(">II", total, len(block))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    body = prelude + block + payload
    return body + struct.pack(">I", zlib.crc32(body))


def event_message(event_type: str, payload: dict[str, Any]) -> bytes:
    """An ``event`` message of ``event_type`` with a JSON payload (plus Bedrock's padding)."""
    data = json.dumps({**payload, "p": "abcdefghijklmnopqrstuvwxyz"[: 1 + len(event_type) % 20]},
                      ensure_ascii=False).encode()
    return encode_message({":event-type": event_type, ":content-type": "application/json",
                           ":message-type": "event"}, data)


#: A message whose trailing CRC is wrong (what ``Reply(malformed=True)`` puts mid-stream).
BAD_CHECKSUM_MESSAGE = event_message("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "x"}})[:-4] \
    + b"\x00\x00\x00\x00"


def bedrock_frames(reply: Reply, model: str) -> Frames:
    content = [event_message("messageStart", {"role": "assistant"})]
    index = 0
    if reply.thinking is not None:
        for piece in split_text(reply.thinking, reply.chunks):
            content.append(event_message("contentBlockDelta", {"contentBlockIndex": index,
                                                               "delta": {"reasoningContent": {"text": piece}}}))
        signature = reply.thinking_signature if reply.thinking_signature is not None else "c2lnbmF0dXJl"
        if signature:
            content.append(event_message("contentBlockDelta", {"contentBlockIndex": index,
                                                               "delta": {"reasoningContent": {"signature": signature}}}))
        content.append(event_message("contentBlockStop", {"contentBlockIndex": index}))
        index += 1
    if reply.text:
        for piece in split_text(reply.text, reply.chunks):
            content.append(event_message("contentBlockDelta", {"contentBlockIndex": index, "delta": {"text": piece}}))
        content.append(event_message("contentBlockStop", {"contentBlockIndex": index}))
        index += 1
    for i, call in enumerate(reply.tool_calls):
        content.append(event_message("contentBlockStart", {"contentBlockIndex": index, "start": {
            "toolUse": {"toolUseId": _tool_id(reply, i, "tooluse_scripted"), "name": call.name}}}))
        for fragment in split_text(json.dumps(call.arguments, ensure_ascii=False), call.chunks):
            content.append(event_message("contentBlockDelta", {"contentBlockIndex": index,
                                                               "delta": {"toolUse": {"input": fragment}}}))
        content.append(event_message("contentBlockStop", {"contentBlockIndex": index}))
        index += 1
    if reply.stream_error is not None:
        error = encode_message({":exception-type": "modelStreamErrorException", ":content-type": "application/json",
                                ":message-type": "exception"}, json.dumps({"message": reply.stream_error}).encode())
        return Frames(content, [error])
    stop = reply.stop_reason or ("toolUse" if reply.tool_calls else "stop")
    u = reply.usage
    out = _output_tokens(reply)
    usage = {"inputTokens": u.input, "outputTokens": out, "totalTokens": u.input + u.cache_read + u.cache_write + out}
    if u.cache_read:
        usage["cacheReadInputTokens"] = u.cache_read
    if u.cache_write:
        usage["cacheWriteInputTokens"] = u.cache_write
    closing = [event_message("messageStop", {"stopReason": _STOP.get(stop, stop)}),
               event_message("metadata", {"usage": usage, "metrics": {"latencyMs": 42}})]
    return Frames(content, closing)


def bedrock_error_type(status: int) -> str:
    """The ``x-amzn-errortype`` header of an HTTP error reply."""
    return _ERROR_TYPES.get(status, "InternalServerException") + ":http://internal.amazon.com/coral/com.amazon.bedrock/"


def bedrock_error_body(reply: Reply, message: str | None = None) -> bytes:
    if isinstance(reply.error_body, str):
        return reply.error_body.encode()
    if isinstance(reply.error_body, dict):
        return json.dumps(reply.error_body).encode()
    return json.dumps({"message": message or f"scripted error {reply.status}"}).encode()
