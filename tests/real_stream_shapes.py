"""Streams shaped like what real providers send, written for these tests (our own content).

Each :class:`Shape` is one streaming response body of one API with what a correct parse of it
must give: the blocks (kind and final content), the stop reason, the usage as the provider
counted it, the answering model and response id, or the error message. The shapes follow what
Anthropic, OpenAI (chat completions and Responses) and OpenAI-compatible providers (DeepSeek,
Groq, xAI, Mistral, OpenRouter, LM Studio...) were seen to send; the words are ours. Texts mix
multi-byte characters so that small byte slices split them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

COMPLETIONS, RESPONSES, ANTHROPIC = "openai-completions", "openai-responses", "anthropic-messages"


@dataclass
class Shape:
    name: str
    api: str
    body: str
    blocks: list[tuple[str, str]] = field(default_factory=list)  # (kind, final text / tool name)
    stop_reason: str = "stop"
    usage: dict[str, int] = field(default_factory=dict)  # input/output/cache_read/cache_write
    error: str | None = None  # a substring of error_message when the stream ends in an error
    response_id: str | None = None
    response_model: str | None = None
    fixed_by: str = ""  # the issue-21 item whose fix this shape needs ("" = parsed before)


def _data(obj: Any) -> str:
    return f"data: {json.dumps(obj, ensure_ascii=False, separators=(',', ':'))}\n\n"


def _named(obj: dict[str, Any]) -> str:
    return f"event: {obj['type']}\n" + _data(obj)


# ---------------------------------------------------------------------------------------------
# chat completions


def _chunk(cid: str, model: str, delta: dict | None, finish: str | None = None, **extra: Any) -> str:
    choices = [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}]
    return _data({"id": cid, "object": "chat.completion.chunk", "created": 1700000000, "model": model,
                  "choices": choices, **extra})


def _pieces(text: str, n: int = 3) -> list[str]:
    step = max(1, -(-len(text) // n))
    return [text[i:i + step] for i in range(0, len(text), step)]


def chat_plain() -> Shape:
    cid, model, text = "chatcmpl-plain1", "gpt-test-mini-0601", "Grüße aus Köln — 東京 🌧️ fine."
    body = _chunk(cid, model, {"role": "assistant", "content": ""})
    body += "".join(_chunk(cid, model, {"content": p}) for p in _pieces(text, 4))
    body += _chunk(cid, model, {}, "stop")
    body += _chunk(cid, model, None, usage={"prompt_tokens": 21, "completion_tokens": 9, "total_tokens": 30,
                                            "prompt_tokens_details": {"cached_tokens": 4},
                                            "completion_tokens_details": {"reasoning_tokens": 0}})
    body += "data: [DONE]\n\n"
    return Shape("chat-plain", COMPLETIONS, body, [("text", text)], "stop",
                 {"input": 17, "output": 9, "cache_read": 4}, response_id=cid, response_model=model)


def chat_reasoning_inside_completion() -> Shape:
    """DeepSeek/Groq/Azure/OpenRouter/Qwen/Z.ai/Cerebras: reasoning_tokens are part of
    completion_tokens (total = prompt + completion)."""
    cid, model = "chatcmpl-rin", "deep-reasoner"
    thought, text = "Zwei plus zwei … ergibt vier.", "4 ✓"
    body = _chunk(cid, model, {"role": "assistant", "content": None, "reasoning_content": ""})
    body += "".join(_chunk(cid, model, {"content": None, "reasoning_content": p}) for p in _pieces(thought))
    body += "".join(_chunk(cid, model, {"content": p, "reasoning_content": None}) for p in _pieces(text, 2))
    body += _chunk(cid, model, {"content": ""}, "stop",
                   usage={"prompt_tokens": 18, "completion_tokens": 219, "total_tokens": 237,
                          "prompt_tokens_details": {"cached_tokens": 0},
                          "completion_tokens_details": {"reasoning_tokens": 205}})
    body += "data: [DONE]\n\n"
    return Shape("chat-reasoning-inside-completion", COMPLETIONS, body, [("thinking", thought), ("text", text)],
                 "stop", {"input": 18, "output": 219, "cache_read": 0}, response_id=cid, response_model=model,
                 fixed_by="1")


def chat_groq_reasoning_field() -> Shape:
    """Groq: ``reasoning`` deltas with a channel, usage with timing fields, reasoning inside."""
    cid, model = "chatcmpl-groq", "oss-120b"
    thought, text = "Need the capital. Paris.", "Paris."
    body = _chunk(cid, model, {"role": "assistant", "content": ""})
    body += "".join(_chunk(cid, model, {"reasoning": p, "channel": "analysis"}) for p in _pieces(thought))
    body += "".join(_chunk(cid, model, {"content": p, "channel": "final"}) for p in _pieces(text, 2))
    body += _chunk(cid, model, {}, "stop",
                   usage={"queue_time": 0.12, "prompt_tokens": 30, "prompt_time": 0.001, "completion_tokens": 50,
                          "completion_time": 0.2, "total_tokens": 80, "total_time": 0.3,
                          "completion_tokens_details": {"reasoning_tokens": 41}})
    body += "data: [DONE]\n\n"
    return Shape("chat-groq-reasoning-field", COMPLETIONS, body, [("thinking", thought), ("text", text)], "stop",
                 {"input": 30, "output": 50}, response_id=cid, response_model=model, fixed_by="1")


def chat_reasoning_outside_completion() -> Shape:
    """xAI: reasoning_tokens are counted beside completion_tokens (total = p + c + r)."""
    cid, model = "chatcmpl-xai", "grok-test-mini"
    thought, text = "Hmm — quick one.", "Hi ☺"
    body = "".join(_chunk(cid, model, {"role": "assistant", "reasoning_content": p}) for p in _pieces(thought))
    body += "".join(_chunk(cid, model, {"role": "assistant", "content": p}) for p in _pieces(text, 2))
    body += _chunk(cid, model, {"role": "assistant", "content": ""}, "stop")
    body += _chunk(cid, model, None, usage={"prompt_tokens": 12, "completion_tokens": 2, "total_tokens": 304,
                                            "prompt_tokens_details": {"cached_tokens": 11, "text_tokens": 12},
                                            "completion_tokens_details": {"reasoning_tokens": 290}})
    body += "data: [DONE]\n\n"
    return Shape("chat-reasoning-outside-completion", COMPLETIONS, body, [("thinking", thought), ("text", text)],
                 "stop", {"input": 1, "output": 292, "cache_read": 11}, response_id=cid, response_model=model)


def chat_content_parts() -> Shape:
    """Mistral reasoning models: ``delta.content`` is a list of typed parts (thinking, text)."""
    cid, model = "f00dcafe", "magi-medium"
    t1, t2, text = "Die Frage ist", " einfach: 3·3=9.", "3 × 3 = 9"

    def thinking(t: str) -> dict:
        return {"type": "thinking", "thinking": [{"type": "text", "text": t}]}

    body = _chunk(cid, model, {"role": "assistant", "content": [thinking(t1)]})
    body += _chunk(cid, model, {"content": [thinking(t2)]})
    body += _chunk(cid, model, {"content": [{"type": "text", "text": text}]})
    body += _chunk(cid, model, {"content": ""}, "stop",
                   usage={"prompt_tokens": 10, "total_tokens": 50, "completion_tokens": 40})
    body += "data: [DONE]\n\n"
    return Shape("chat-content-parts", COMPLETIONS, body, [("thinking", t1 + t2), ("text", text)], "stop",
                 {"input": 10, "output": 40}, response_id=cid, response_model=model, fixed_by="4")


def chat_tool_fragments() -> Shape:
    cid, model = "chatcmpl-tool", "gpt-test-mini-0601"
    args = '{"path": "naïve/файл.txt", "limit": 5}'
    body = _chunk(cid, model, {"role": "assistant", "content": None, "tool_calls": [
        {"index": 0, "id": "call_x1", "type": "function", "function": {"name": "read", "arguments": ""}}]})
    body += "".join(_chunk(cid, model, {"tool_calls": [{"index": 0, "function": {"arguments": p}}]})
                    for p in _pieces(args, 5))
    body += _chunk(cid, model, {}, "tool_calls")
    body += _chunk(cid, model, None, usage={"prompt_tokens": 40, "completion_tokens": 15, "total_tokens": 55})
    body += "data: [DONE]\n\n"
    return Shape("chat-tool-fragments", COMPLETIONS, body, [("toolCall", "read")], "toolUse",
                 {"input": 40, "output": 15}, response_id=cid, response_model=model)


def chat_error_event() -> Shape:
    """Groq: a named ``error`` event in the middle of the stream, no [DONE]."""
    cid, model = "chatcmpl-gerr", "oss-120b"
    body = _chunk(cid, model, {"role": "assistant", "content": ""})
    body += "".join(_chunk(cid, model, {"reasoning": p, "channel": "analysis"}) for p in _pieces("Call it.", 2))
    body += "event: error\n" + _data({"error": {"message": "Tool call validation failed: missing 'name'",
                                                "type": "invalid_request_error", "code": "tool_use_failed"}})
    return Shape("chat-error-event", COMPLETIONS, body, [("thinking", "Call it.")], "error",
                 error="Tool call validation failed: missing 'name'")


def chat_error_with_usage() -> Shape:
    """OpenRouter: an ``error`` on a chunk that also has choices and the usage so far, then [DONE]."""
    cid, model = "gen-or-err", "vendor/small:free"
    body = _chunk(cid, model, {"role": "assistant", "content": "Teil"})
    body += _chunk(cid, model, {"role": "assistant", "content": ""}, None, provider="Upstream",
                   error={"code": 400, "message": "Token limit reached"},
                   usage={"prompt_tokens": 43, "completion_tokens": 10, "total_tokens": 53, "cost": 0,
                          "prompt_tokens_details": {"cached_tokens": 0}})
    body += "data: [DONE]\n\n"
    return Shape("chat-error-with-usage", COMPLETIONS, body, [("text", "Teil")], "error",
                 {"input": 43, "output": 10}, error="Token limit reached", fixed_by="usage-on-error")


# ---------------------------------------------------------------------------------------------
# Responses


class _Seq:
    def __init__(self) -> None:
        self.n = 0

    def __call__(self, obj: dict[str, Any]) -> str:
        obj = {"type": obj.pop("type"), "sequence_number": self.n, **obj}
        self.n += 1
        return _named(obj)


def _resp(rid: str, model: str, status: str, usage: dict | None = None, output: list | None = None,
          **extra: Any) -> dict:
    return {"id": rid, "object": "response", "created_at": 1700000000, "status": status, "model": model,
            "output": output or [], "usage": usage, "error": None, "incomplete_details": None, **extra}


def _resp_usage(inp: int, out: int, cached: int = 0, reasoning: int = 0) -> dict:
    return {"input_tokens": inp, "input_tokens_details": {"cached_tokens": cached}, "output_tokens": out,
            "output_tokens_details": {"reasoning_tokens": reasoning}, "total_tokens": inp + out}


def _message_events(ev: _Seq, index: int, mid: str, text: str, n: int = 3) -> tuple[str, dict]:
    item = {"id": mid, "type": "message", "status": "in_progress", "content": [], "role": "assistant"}
    out = ev({"type": "response.output_item.added", "output_index": index, "item": item})
    part = {"type": "output_text", "annotations": [], "text": ""}
    out += ev({"type": "response.content_part.added", "item_id": mid, "output_index": index, "content_index": 0,
               "part": part})
    for p in _pieces(text, n):
        out += ev({"type": "response.output_text.delta", "item_id": mid, "output_index": index,
                   "content_index": 0, "delta": p})
    out += ev({"type": "response.output_text.done", "item_id": mid, "output_index": index, "content_index": 0,
               "text": text})
    done_part = {**part, "text": text}
    out += ev({"type": "response.content_part.done", "item_id": mid, "output_index": index, "content_index": 0,
               "part": done_part})
    done = {**item, "status": "completed", "content": [done_part]}
    out += ev({"type": "response.output_item.done", "output_index": index, "item": done})
    return out, done


def responses_plain(done_trailer: bool = False) -> Shape:
    rid, model, text = "resp_plain01", "gpt-test-2025-01-01", "Ça va — très bien 👍"
    ev = _Seq()
    body = ev({"type": "response.created", "response": _resp(rid, model, "in_progress")})
    body += ev({"type": "response.in_progress", "response": _resp(rid, model, "in_progress")})
    msg, item = _message_events(ev, 0, "msg_01", text)
    body += msg
    body += ev({"type": "response.completed",
                "response": _resp(rid, model, "completed", _resp_usage(25, 7, cached=5), [item])})
    if done_trailer:
        body += "data: [DONE]\n\n"
    return Shape("responses-done-trailer" if done_trailer else "responses-plain", RESPONSES, body,
                 [("text", text)], "stop", {"input": 20, "output": 7, "cache_read": 5},
                 response_id=rid, response_model=model, fixed_by="3" if done_trailer else "")


def responses_reasoning_summary() -> Shape:
    """Reasoning with two summary parts, then the answer (OpenAI, Azure)."""
    rid, model = "resp_sum02", "gpt-test-2025-01-01"
    parts = ["**Plan** — lire l'énoncé.", "**Check** 二 + 二 = 四."]
    ev = _Seq()
    body = ev({"type": "response.created", "response": _resp(rid, model, "in_progress")})
    rs = {"id": "rs_02", "type": "reasoning", "summary": []}
    body += ev({"type": "response.output_item.added", "output_index": 0, "item": {**rs, "encrypted_content": None}})
    for k, part in enumerate(parts):
        body += ev({"type": "response.reasoning_summary_part.added", "item_id": "rs_02", "output_index": 0,
                    "summary_index": k, "part": {"type": "summary_text", "text": ""}})
        for p in _pieces(part, 3):
            body += ev({"type": "response.reasoning_summary_text.delta", "item_id": "rs_02", "output_index": 0,
                        "summary_index": k, "delta": p})
        body += ev({"type": "response.reasoning_summary_text.done", "item_id": "rs_02", "output_index": 0,
                    "summary_index": k, "text": part})
        body += ev({"type": "response.reasoning_summary_part.done", "item_id": "rs_02", "output_index": 0,
                    "summary_index": k, "part": {"type": "summary_text", "text": part}})
    rs_done = {**rs, "summary": [{"type": "summary_text", "text": p} for p in parts],
               "encrypted_content": "gAAAAenc=="}
    body += ev({"type": "response.output_item.done", "output_index": 0, "item": rs_done})
    msg, item = _message_events(ev, 1, "msg_02", "Vier.")
    body += msg
    body += ev({"type": "response.completed",
                "response": _resp(rid, model, "completed", _resp_usage(40, 90, reasoning=64), [rs_done, item])})
    return Shape("responses-reasoning-summary", RESPONSES, body,
                 [("thinking", "\n\n".join(parts)), ("text", "Vier.")], "stop", {"input": 40, "output": 90},
                 response_id=rid, response_model=model, fixed_by="2")


def responses_rotating_ids() -> Shape:
    """GitHub Copilot: every event names its item with a fresh id (added, deltas and done differ)."""
    shape = responses_reasoning_summary()
    counter = iter(range(1000))
    body = re.sub(r'"(rs_02|msg_02)"', lambda _m: f'"cap-id-{next(counter)}"', shape.body)
    return Shape("responses-rotating-ids", RESPONSES, body, shape.blocks, shape.stop_reason, shape.usage,
                 response_id=shape.response_id, response_model=shape.response_model)


def responses_raw_reasoning_interleaved() -> Shape:
    """OpenRouter/LM Studio: ``response.reasoning_text.delta`` (raw reasoning), and the message
    item added while the reasoning item is still open (its done comes after)."""
    rid, model = "gen-resp-or3", "vendor/open-model"
    thought, text = "User greets — greet back.", "Hallo! 😊"
    ev = _Seq()
    body = ev({"type": "response.created", "response": _resp(rid, model, "in_progress")})
    body += ev({"type": "response.in_progress", "response": _resp(rid, model, "in_progress")})
    rs = {"type": "reasoning", "id": "rs_or3", "summary": [], "status": "in_progress"}
    body += ev({"type": "response.output_item.added", "output_index": 0, "item": rs})
    for p in _pieces(thought, 4):
        body += ev({"type": "response.reasoning_text.delta", "item_id": "rs_or3", "output_index": 0,
                    "content_index": 0, "delta": p})
    mid = "msg_or3"
    item = {"id": mid, "type": "message", "status": "in_progress", "content": [], "role": "assistant"}
    body += ev({"type": "response.output_item.added", "output_index": 1, "item": item})
    body += ev({"type": "response.content_part.added", "item_id": mid, "output_index": 1, "content_index": 0,
                "part": {"type": "output_text", "annotations": [], "text": ""}})
    for p in _pieces(text, 2):
        body += ev({"type": "response.output_text.delta", "item_id": mid, "output_index": 1, "content_index": 0,
                    "delta": p})
    body += ev({"type": "response.output_text.done", "item_id": mid, "output_index": 1, "content_index": 0,
                "text": text})
    done = {**item, "status": "completed", "content": [{"type": "output_text", "annotations": [], "text": text}]}
    body += ev({"type": "response.output_item.done", "output_index": 1, "item": done})
    # the reasoning item is only done after the message (as OpenRouter sends it)
    body += ev({"type": "response.reasoning_text.done", "item_id": "rs_or3", "output_index": 0,
                "content_index": 0, "text": thought})
    rs_done = {**rs, "status": "completed", "content": [{"type": "reasoning_text", "text": thought}],
               "encrypted_content": "opaque-or3"}
    body += ev({"type": "response.output_item.done", "output_index": 0, "item": rs_done})
    body += ev({"type": "response.completed",
                "response": _resp(rid, model, "completed", _resp_usage(15, 30, reasoning=20), [rs_done, done])})
    return Shape("responses-raw-reasoning-interleaved", RESPONSES, body, [("thinking", thought), ("text", text)],
                 "stop", {"input": 15, "output": 30}, response_id=rid, response_model=model, fixed_by="2")


def responses_tool() -> Shape:
    rid, model = "resp_tool04", "gpt-test-2025-01-01"
    args = '{"a": 2, "b": 3, "op": "mul"}'
    ev = _Seq()
    body = ev({"type": "response.created", "response": _resp(rid, model, "in_progress")})
    fc = {"id": "fc_04", "type": "function_call", "status": "in_progress", "arguments": "", "call_id": "call_04",
          "name": "calc"}
    body += ev({"type": "response.output_item.added", "output_index": 0, "item": fc})
    for p in _pieces(args, 4):
        body += ev({"type": "response.function_call_arguments.delta", "item_id": "fc_04", "output_index": 0,
                    "delta": p})
    body += ev({"type": "response.function_call_arguments.done", "item_id": "fc_04", "output_index": 0,
                "arguments": args})
    fc_done = {**fc, "status": "completed", "arguments": args}
    body += ev({"type": "response.output_item.done", "output_index": 0, "item": fc_done})
    body += ev({"type": "response.completed",
                "response": _resp(rid, model, "completed", _resp_usage(137, 28), [fc_done])})
    return Shape("responses-tool", RESPONSES, body, [("toolCall", "calc")], "toolUse", {"input": 137, "output": 28},
                 response_id=rid, response_model=model)


def responses_error_nested() -> Shape:
    """An in-stream ``error`` event with code and message nested under ``error``, then failed."""
    rid, model = "resp_quota05", "gpt-test-nano"
    message = "You exceeded your current quota — check your plan."
    ev = _Seq()
    body = ev({"type": "response.created", "response": _resp(rid, model, "in_progress")})
    body += ev({"type": "response.in_progress", "response": _resp(rid, model, "in_progress")})
    body += ev({"type": "error", "error": {"type": "insufficient_quota", "code": "insufficient_quota",
                                           "message": message, "param": None}})
    body += ev({"type": "response.failed", "response": {**_resp(rid, model, "failed"),
                                                        "error": {"code": "insufficient_quota",
                                                                  "message": message}}})
    return Shape("responses-error-nested", RESPONSES, body, [], "error", error=message, fixed_by="3")


# ---------------------------------------------------------------------------------------------
# Anthropic messages


def _a_start(mid: str, model: str, inp: int, cache_read: int = 0, cache_write: int = 0) -> str:
    return _named({"type": "message_start", "message": {
        "id": mid, "type": "message", "role": "assistant", "model": model, "content": [], "stop_reason": None,
        "stop_sequence": None, "usage": {"input_tokens": inp, "cache_creation_input_tokens": cache_write,
                                         "cache_read_input_tokens": cache_read, "output_tokens": 1}}})


def anthropic_thinking_text() -> Shape:
    mid, model = "msg_01Think", "claude-test-4"
    thought, text = "Überlege: 7·6 = 42.", "Die Antwort ist 42 🙂"
    body = _a_start(mid, model, 50, cache_read=100, cache_write=20)
    body += _named({"type": "content_block_start", "index": 0,
                    "content_block": {"type": "thinking", "thinking": "", "signature": ""}})
    body += _named({"type": "ping"})
    for p in _pieces(thought):
        body += _named({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": p}})
    body += _named({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta",
                                                                         "signature": "EqQBsig=="}})
    body += _named({"type": "content_block_stop", "index": 0})
    body += _named({"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}})
    for p in _pieces(text):
        body += _named({"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": p}})
    body += _named({"type": "content_block_stop", "index": 1})
    body += _named({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                    "usage": {"output_tokens": 33}})
    body += _named({"type": "message_stop"})
    return Shape("anthropic-thinking-text", ANTHROPIC, body, [("thinking", thought), ("text", text)], "stop",
                 {"input": 50, "output": 33, "cache_read": 100, "cache_write": 20},
                 response_id=mid, response_model=model)


def anthropic_tool() -> Shape:
    mid, model = "msg_01Tool", "claude-test-4"
    args = '{"command": "ls -la ~/Données"}'
    body = _a_start(mid, model, 300)
    body += _named({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})
    body += _named({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Je regarde."}})
    body += _named({"type": "content_block_stop", "index": 0})
    body += _named({"type": "content_block_start", "index": 1,
                    "content_block": {"type": "tool_use", "id": "toolu_01", "name": "bash", "input": {}}})
    for p in _pieces(args, 4):
        body += _named({"type": "content_block_delta", "index": 1,
                        "delta": {"type": "input_json_delta", "partial_json": p}})
    body += _named({"type": "content_block_stop", "index": 1})
    body += _named({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                    "usage": {"input_tokens": 300, "output_tokens": 60}})
    body += _named({"type": "message_stop"})
    return Shape("anthropic-tool", ANTHROPIC, body, [("text", "Je regarde."), ("toolCall", "bash")], "toolUse",
                 {"input": 300, "output": 60}, response_id=mid, response_model=model)


def anthropic_midstream_overloaded() -> Shape:
    mid, model = "msg_01Over", "claude-test-4"
    body = _a_start(mid, model, 12)
    body += _named({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})
    body += _named({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Voilà"}})
    body += _named({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    return Shape("anthropic-midstream-overloaded", ANTHROPIC, body, [("text", "Voilà")], "error", error="Overloaded")


def anthropic_server_tool() -> Shape:
    """Web search run by the provider: ``server_tool_use`` and ``web_search_tool_result`` blocks
    between text blocks, and ``citations_delta`` inside the text (no block of ours for them)."""
    mid, model = "msg_01Search", "claude-test-4"
    body = _a_start(mid, model, 2000)
    body += _named({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})
    body += _named({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Je cherche."}})
    body += _named({"type": "content_block_stop", "index": 0})
    body += _named({"type": "content_block_start", "index": 1, "content_block": {
        "type": "server_tool_use", "id": "srvtoolu_01", "name": "web_search", "input": {}}})
    for p in _pieces('{"query": "météo Lyon"}', 3):
        body += _named({"type": "content_block_delta", "index": 1,
                        "delta": {"type": "input_json_delta", "partial_json": p}})
    body += _named({"type": "content_block_stop", "index": 1})
    body += _named({"type": "content_block_start", "index": 2, "content_block": {
        "type": "web_search_tool_result", "tool_use_id": "srvtoolu_01", "content": [
            {"type": "web_search_result", "title": "Météo", "url": "https://example.org/lyon",
             "encrypted_content": "EnC0ded", "page_age": None}]}})
    body += _named({"type": "content_block_stop", "index": 2})
    body += _named({"type": "content_block_start", "index": 3, "content_block": {"type": "text", "text": "",
                                                                                   "citations": []}})
    body += _named({"type": "content_block_delta", "index": 3, "delta": {"type": "citations_delta", "citation": {
        "type": "web_search_result_location", "cited_text": "soleil", "url": "https://example.org/lyon",
        "title": "Météo", "encrypted_index": "Eo8"}}})
    body += _named({"type": "content_block_delta", "index": 3, "delta": {"type": "text_delta", "text": "Du soleil ☀"}})
    body += _named({"type": "content_block_stop", "index": 3})
    body += _named({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                    "usage": {"input_tokens": 2000, "output_tokens": 80,
                              "server_tool_use": {"web_search_requests": 1}}})
    body += _named({"type": "message_stop"})
    return Shape("anthropic-server-tool", ANTHROPIC, body, [("text", "Je cherche."), ("text", "Du soleil ☀")],
                 "stop", {"input": 2000, "output": 80}, response_id=mid, response_model=model)


def chat_parallel_tools() -> Shape:
    cid, model = "chatcmpl-par", "gpt-test-mini-0601"
    body = _chunk(cid, model, {"role": "assistant", "content": None, "tool_calls": [
        {"index": 0, "id": "call_a", "type": "function", "function": {"name": "read", "arguments": ""}}]})
    body += _chunk(cid, model, {"tool_calls": [{"index": 0, "function": {"arguments": '{"path": "a.txt"}'}}]})
    body += _chunk(cid, model, {"tool_calls": [
        {"index": 1, "id": "call_b", "type": "function", "function": {"name": "ls", "arguments": ""}}]})
    body += _chunk(cid, model, {"tool_calls": [{"index": 1, "function": {"arguments": '{"dir": "ü"}'}}]})
    body += _chunk(cid, model, {}, "tool_calls", usage={"prompt_tokens": 60, "completion_tokens": 30,
                                                        "total_tokens": 90})
    body += "data: [DONE]\n\n"
    return Shape("chat-parallel-tools", COMPLETIONS, body, [("toolCall", "read"), ("toolCall", "ls")], "toolUse",
                 {"input": 60, "output": 30}, response_id=cid, response_model=model)


def all_shapes() -> list[Shape]:
    return [chat_plain(), chat_reasoning_inside_completion(), chat_groq_reasoning_field(),
            chat_reasoning_outside_completion(), chat_content_parts(), chat_tool_fragments(), chat_error_event(),
            chat_error_with_usage(), chat_parallel_tools(),
            responses_plain(), responses_plain(done_trailer=True), responses_reasoning_summary(),
            responses_raw_reasoning_interleaved(), responses_rotating_ids(), responses_tool(), responses_error_nested(),
            anthropic_thinking_text(), anthropic_tool(), anthropic_midstream_overloaded(), anthropic_server_tool()]
