"""A scripted Gemini session, request by request, for the two SDK APIs (``google-generative-ai``
and ``google-vertex``): what the tests that compare request bytes send.

``session_steps(api, base_url)`` gives the steps of one session in order, each
``(model, context, options)`` for ``stream``: a system prompt, tools with a tool choice, thinking
by budget and by level and turned off, this model's signed thinking, text and calls replayed,
another model's thinking (sent as text), images in a user message and in tool results (under
Gemini 2.5: a separate user turn; under Gemini 3: nested), three consecutive tool results
(one an error), call ids for a ``claude-*`` model, an errored and an aborted turn (dropped),
a history that gets shorter (a branch switch), a text-only model (image placeholders).

``wire(record)``: a scripted server's request record as the bytes that matter — method,
target (path and query), headers but ``host`` (the port varies), body bytes.
"""

from __future__ import annotations

import base64
from typing import Any

from pi_actors import ai

PROVIDER = {"google-generative-ai": "google", "google-vertex": "google-vertex"}

#: Standard base64 with ``+`` and ``/`` in it: the SDK decodes a signature and re-encodes it.
SIGNATURE = base64.b64encode(bytes(range(250, 256)) * 4 + b"sig").decode()
PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(240, 256))).decode()  # + and / in it


def model(api: str, base_url: str, model_id: str = "gemini-2.5-flash", **kw: Any) -> ai.Model:
    fields: dict[str, Any] = dict(id=model_id, api=api, provider=PROVIDER[api], base_url=base_url,
                                  reasoning=True, input=["text", "image"], max_tokens=65536)
    fields.update(kw)
    return ai.Model(**fields)


def _assistant(m: ai.Model, *blocks: Any, stop: str = "toolUse", other: bool = False) -> ai.AssistantMessage:
    source = dict(api="anthropic-messages", provider="anthropic", model="claude-x") if other else \
        dict(api=m.api, provider=m.provider, model=m.id)
    return ai.AssistantMessage(content=list(blocks), usage=ai.Usage(), stop_reason=stop, timestamp=1,
                               **source)  # type: ignore[arg-type]


def _result(call_id: str, text: str = "ok", *, image: bool = False, error: bool = False,
            name: str = "bash") -> ai.ToolResultMessage:
    content: list[Any] = [ai.TextContent(text=text)] if text else []
    if image:
        content.append(ai.ImageContent(data=PNG, mime_type="image/png"))
    return ai.ToolResultMessage(tool_call_id=call_id, tool_name=name, content=content, is_error=error, timestamp=1)


def _user(text: str, *, image: bool = False) -> ai.UserMessage:
    if not image:
        return ai.UserMessage(content=text, timestamp=1)
    return ai.UserMessage(content=[ai.TextContent(text=text), ai.ImageContent(data=PNG, mime_type="image/jpeg")],
                          timestamp=1)


TOOLS = [ai.Tool(name="bash", description="Run a command",
                 parameters={"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}),
         ai.Tool(name="read", description="Read a file", parameters={"type": "object"})]


def _options(**extra: Any) -> ai.StreamOptions:
    return ai.StreamOptions(api_key="g-key", temperature=0.5, max_tokens=4000, extra=extra)


def _signed_turn(m: ai.Model, k: int) -> list[ai.Message]:
    """This model's turn: signed thinking, signed text, three signed calls, their results
    (one with an image, one an error)."""
    calls = [ai.ToolCall(id=f"call|{k}.{i}", name="bash", arguments={"command": f"echo {k}{i}"},
                         thought_signature=SIGNATURE) for i in range(3)]
    turn = _assistant(m, ai.ThinkingContent(thinking=f"Plan {k}.", thinking_signature=SIGNATURE),
                      ai.TextContent(text=f"Running {k}.", text_signature=SIGNATURE), *calls)
    return [turn, _result(calls[0].id, f"out {k}"), _result(calls[1].id, "see", image=True),
            _result(calls[2].id, "failed", error=True)]


def _other_turn(m: ai.Model, k: int) -> list[ai.Message]:
    """Another model's turn: its thinking is sent as text, its signatures are not sent."""
    call = ai.ToolCall(id=f"toolu_{k}", name="read", arguments={"path": "a.png"}, thought_signature=SIGNATURE)
    turn = _assistant(m, ai.ThinkingContent(thinking=f"Other {k}.", thinking_signature="opaque"),
                      ai.TextContent(text="Reading."), call, other=True)
    return [turn, _result(call.id, "", image=True, name="read")]


def _failed_turns(m: ai.Model) -> list[ai.Message]:
    return [_assistant(m, ai.TextContent(text="half"), stop="error"),
            _assistant(m, ai.TextContent(text="cut"), stop="aborted")]


def session_steps(api: str, base_url: str) -> list[tuple[ai.Model, ai.Context, ai.StreamOptions]]:
    """One session's requests in order (see the module docstring)."""
    flash = model(api, base_url)
    pro3 = model(api, base_url, "gemini-3-pro-preview")
    claude = model(api, base_url, "claude-sonnet-4-5")
    text_only = model(api, base_url, "gemini-2.5-flash-lite", input=["text"])
    system = "You are a careful coding assistant."
    budget = _options(tool_choice="any", thinking_enabled=True, thinking_budget_tokens=1024)
    level = _options(tool_choice="auto", thinking_enabled=True, thinking_level="HIGH")
    steps: list[tuple[ai.Model, ai.Context, ai.StreamOptions]] = []

    def request(m: ai.Model, history: list[ai.Message], options: ai.StreamOptions) -> None:
        steps.append((m, ai.Context(system_prompt=system, messages=list(history), tools=TOOLS), options))

    history: list[ai.Message] = [_user("hello")]
    request(flash, history, budget)
    history += _signed_turn(flash, 1)
    request(flash, history, budget)
    history += _other_turn(flash, 2)
    request(flash, history, budget)
    history += [_user("look at this", image=True), *_failed_turns(flash), _user("again")]
    request(flash, history, budget)
    history += _signed_turn(flash, 3)
    request(flash, history, _options(tool_choice="none", thinking_enabled=False))
    history = history[:5] + [_user("a branch")]  # a shorter history: a branch switch
    request(flash, history, budget)
    history += _signed_turn(flash, 4)
    request(flash, history, ai.StreamOptions(api_key="g-key", extra={"thinking_enabled": True,
                                                                     "thinking_budget_tokens": 2048}))
    pro_history = [_user("hello")] + _signed_turn(pro3, 5) + _other_turn(pro3, 6)
    request(pro3, pro_history, level)
    request(pro3, pro_history + _signed_turn(pro3, 7), ai.StreamOptions(api_key="g-key",
                                                                      extra={"thinking_enabled": False}))
    claude_history = [_user("hello")] + _signed_turn(claude, 8) + _other_turn(claude, 9)
    request(claude, claude_history, _options())
    request(text_only, history + [_user("text only", image=True)], budget)
    return steps


def wire(record: dict[str, Any]) -> tuple[str, str, dict[str, str], bytes]:
    """A request as sent: method, target, headers but ``host``, body bytes."""
    headers = {k: v for k, v in record["headers"].items() if k != "host"}
    return record["method"], record["target"], headers, record["raw"]
