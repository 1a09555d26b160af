"""The coordinator's two remote capabilities, as the agent loop sees them: its stream
function (a ``stream`` call to the provider actor) and its tools (``run_tool`` calls to the
tool pool). Both read the coordinator only for what a call names: its session id, cwd,
settings, log and the links to the two actors.

* :class:`ProviderStream` — ``stream_fn``: the provider keeps the session's context, so a
  request carries only the messages appended since the last one (``_context_cache``), or the
  whole context once when the provider refuses the base; a dead provider or a bad reply is an
  error message (never raised, never retried: nothing is replayed behind the user's back).
* :func:`make_pool_tool` — one tool: its partial results stream back as updates, an abort
  cancels the call cooperatively, a failure is :class:`ToolFailure` with the model's text;
  write/edit calls on one file run in call order (``changed_path``).
"""

from __future__ import annotations

import os
import sys
from typing import Any

import msgspec

from ..agent import AgentTool, AgentToolResult
from ..ai import types as T
from ..ai.abort import AbortSignal
from ..coding.tools import MUTATING_TOOLS
from ..coding.tools.paths import resolve_to_cwd
from ..protocol.events import StreamRebuilder
from ..protocol.pool import shell_settings
from ..runtime import ActorDied, ConnectionLost, RemoteError
from ._context_cache import STALE_CONTEXT, ContextSender
from ._tool_warm import ToolCallCounter

__all__ = ["ProviderStream", "ToolFailure", "make_pool_tool", "result_blocks"]


class ToolFailure(Exception):
    """A remote tool call ended with isError: the message is what the model sees."""


def error_message(model: T.Model, text: str) -> T.AssistantMessage:
    msg = T.new_assistant_message(model)
    msg.stop_reason = "error"
    msg.error_message = text
    return msg


class ProviderStream:
    """The agent loop's stream function for coordinator ``c`` (``stream_fn``), with what it
    keeps between requests: their count (the request ids) and what the provider was last
    sent of the context."""

    def __init__(self, c: Any) -> None:
        self.c = c
        self._requests = 0
        #: What the provider was last sent of the context (requests carry only what is new).
        self._context_sender = ContextSender()

    async def stream_fn(self, model: T.Model, context: T.Context, options: Any, emit: Any) -> T.AssistantMessage:
        """The agent loop's stream function, served by the provider actor. Never raises.

        The provider keeps the session's context: a request carries only the messages
        appended since the last one (``_context_cache``), or the whole context when they do
        not extend it or the provider refuses the base (``stale_context``: resent whole once)."""
        rebuild = StreamRebuilder()
        signal: AbortSignal | None = getattr(options, "signal", None)
        self._requests += 1
        request_id = f"{(self.c.session_id or 'nosession')[:8]}-{self._requests}"
        fixed = {
            "model": T.to_plain(model),
            "options": wire_options(options),
            "requestId": request_id,
        }
        ids = {"session": self.c.session_id, "request": request_id, "provider": model.provider, "model": model.id}
        self.c.log.event("llm_request", **ids, messages=len(context.messages))
        final = await self._stream_remote(fixed, context, model, signal, emit, rebuild)
        self.c.log.event(
            "llm_response", **ids, stopReason=final.stop_reason, error=final.error_message,
            inputTokens=final.usage.input, outputTokens=final.usage.output,
        )  # fmt: skip
        return final

    def _stream_args(self, fixed: dict[str, Any], context: T.Context) -> dict[str, Any]:
        """The ``stream`` arguments: ``fixed`` plus the context, as a delta when it can be."""
        messages, label = self._context_sender.plan(self.c.session_id, context.messages, (context.system_prompt, context.tools))
        if label.keep_frame:  # the provider keeps the system prompt and tools of the base
            wire = T.Context(messages=messages)
        else:
            wire = T.Context(system_prompt=context.system_prompt, messages=messages, tools=context.tools)
        return {**fixed, "context": T.to_plain(wire), "cached": T.to_plain(label)}

    async def _stream_remote(
        self, fixed: dict[str, Any], context: T.Context, model: T.Model, signal: AbortSignal | None, emit: Any,
        rebuild: StreamRebuilder,
    ) -> T.AssistantMessage:
        resent = False
        # The reply's tool calls, told to the pool as they stream (it forks their workers).
        calls = ToolCallCounter(
            self.c.tools_peer, self.c.cwd, getattr(self.c, "_run_nursery", None), ready=self.c.config.warm_tools
        )
        while True:
            try:
                terminal: T.AssistantMessage | None = None
                async with self.c.provider.open_call("stream", self._stream_args(fixed, context)) as call:
                    async with call.cancel_when(signal):
                        async for data in call:
                            event = rebuild.apply(data)
                            calls.saw(event)
                            if isinstance(event, (T.DoneEvent, T.ErrorEvent)):
                                # The final message, which the session keeps: its repeated
                                # names shared, not one copy per message of a long session.
                                terminal = shared_names(event.message if isinstance(event, T.DoneEvent) else event.error)
                            await emit(event)
                    result = await call.result()
                # The result repeats the terminal event's message (the one the loop keeps):
                # converted again only when no terminal event came.
                return terminal if terminal is not None else msgspec.convert(result, T.AssistantMessage)
            except (RemoteError, msgspec.ValidationError, ValueError) as exc:
                self._context_sender.forget()
                if isinstance(exc, RemoteError) and exc.code == STALE_CONTEXT and not resent:
                    # Refused before anything streamed: the provider lacks our base. Once, whole.
                    self.c.log.event("context_resent", session=self.c.session_id, request=fixed["requestId"])
                    resent = True
                    continue
                # A dead provider is said plainly (and is not a transient error to retry: the
                # request may have reached the model; nothing is replayed behind the user's back).
                final = error_message(model, exc.message if isinstance(exc, ActorDied) else f"provider actor: {exc}")
                if signal is not None and signal.aborted:
                    final.stop_reason = "aborted"
                await emit(T.ErrorEvent(reason=final.stop_reason, error=final))  # type: ignore[arg-type]
                return final


def make_pool_tool(c: Any, spec: Any) -> AgentTool:
    """The agent tool ``spec`` as a ``run_tool`` call to the tool pool of coordinator ``c``
    (its cwd, session id, settings and log), with pi's first empty bash update; a failed
    call raises :class:`ToolFailure` with the text the model sees."""

    async def execute(
        tool_call_id: str, params: dict[str, Any], signal: AbortSignal | None = None, on_update: Any = None
    ) -> AgentToolResult:
        ids = {"session": c.session_id, "toolCallId": tool_call_id, "tool": spec.name}
        c.log.event("tool_start", **ids)
        try:
            result = await run(tool_call_id, params, signal, on_update)
        except ToolFailure as exc:
            c.log.event("tool_end", **ids, isError=True, error=str(exc)[:200])
            raise
        c.log.event("tool_end", **ids, isError=False)
        return result

    async def run(tool_call_id: str, params: dict[str, Any], signal: AbortSignal | None, on_update: Any) -> AgentToolResult:
        args = {
            "toolCallId": tool_call_id,
            "name": spec.name,
            "args": params,
            "cwd": c.cwd,
            "sessionId": c.session_id,
        }
        if not c.config.settings.images.auto_resize:
            args["autoResizeImages"] = False
        args.update(shell_settings(c.config.settings))
        if not c.wants_tool_updates():
            args["updates"] = False  # nobody reads them: the pool streams none
        if spec.name == "bash" and on_update is not None:
            # pi's bash tool reports an empty partial result as it starts (the first
            # tool_execution_update of every bash call).
            # As the plain tree pi sends: the Struct would leave out the empty content.
            await on_update({"content": []})
        try:
            async with c.tools_peer.open_call("run_tool", args) as call:
                async with call.cancel_when(signal):
                    async for partial in call:
                        if on_update is not None:
                            await on_update(AgentToolResult(content=result_blocks(partial.get("content")), details=partial.get("details")))
                result = await call.result()
        except ActorDied as exc:
            raise ToolFailure(exc.message) from None
        except ConnectionLost as exc:
            raise ToolFailure(f"tool pool unavailable: {exc.message}") from None
        except RemoteError as exc:
            raise ToolFailure(exc.message) from None
        content = result_blocks(result.get("content"))
        if result.get("isError"):
            text = "\n".join(b.text for b in content if isinstance(b, T.TextContent)) or "Tool failed"
            raise ToolFailure(text)
        return AgentToolResult(content=content, details=result.get("details"))

    return AgentTool(
        name=spec.name,
        label=spec.label,
        description=spec.description,
        parameters=spec.parameters,
        prepare_arguments=spec.prepare_arguments,
        execute=execute,
        exclusive_key=(lambda params: changed_path(params, c.cwd)) if spec.name in MUTATING_TOOLS else None,
    )


def changed_path(params: Any, cwd: str) -> str | None:
    """The file a write/edit changes, so that the agent runs one reply's calls on the
    same file one after another, in call order. This is the only same-file ordering: the
    pool runs whatever reaches it at once."""
    path = params.get("path") if isinstance(params, dict) else None
    return os.path.realpath(resolve_to_cwd(path, cwd)) if isinstance(path, str) else None


def shared_names(message: T.AssistantMessage) -> T.AssistantMessage:
    """``message`` with the names that repeat from reply to reply interned (in place): api,
    provider, model, stop reason, tool names (the tool results reuse them) and the keys of
    tool arguments. Each arrives as a new string with every reply; a long session keeps
    one object of each instead of one per reply (~0.6 kB less per prompt of one tool call)."""
    message.api = sys.intern(message.api)
    message.provider = sys.intern(message.provider)
    message.model = sys.intern(message.model)
    message.stop_reason = sys.intern(message.stop_reason)  # type: ignore[assignment]
    for block in message.content:
        if isinstance(block, T.ToolCall):
            block.name = sys.intern(block.name)
            if isinstance(block.arguments, dict):
                block.arguments = {sys.intern(k) if isinstance(k, str) else k: v for k, v in block.arguments.items()}
    return message


def wire_options(options: Any) -> dict[str, Any]:
    """The stream options the provider actor takes (camelCase); the key and signal stay here."""
    out: dict[str, Any] = {}
    for attr, key in (
        ("reasoning", "reasoning"),
        ("session_id", "sessionId"),
        ("max_tokens", "maxTokens"),
        ("temperature", "temperature"),
        ("thinking_budgets", "thinkingBudgets"),
    ):
        value = getattr(options, attr, None)
        if value is not None:
            out[key] = value
    return out


def result_blocks(content: Any) -> list[Any]:
    """A tool result's ``content`` as content blocks; anything else as one text block."""
    if not content:
        return []
    try:
        return msgspec.convert(content, list[T.ToolResultContent])
    except msgspec.ValidationError:
        return [T.TextContent(text=str(content))]
