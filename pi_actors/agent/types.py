"""The agent layer's data: events, tools, context, loop configuration and hook contracts.

AgentEvents are msgspec Structs tagged by ``type`` with camelCase wire names, so
``msgspec.to_builtins(event)`` gives pi's JSON shape (``toolCallId``, ``toolResults``,
``assistantMessageEvent``, ``partialResult``, ``isError``). Each event class also carries its
tag as a class attribute, so ``event.type == "message_end"`` works in Python.

An *AgentMessage* is an ai ``Message`` (user, assistant, toolResult) or any app-defined object
with a ``role`` attribute (a custom message). Custom messages pass through the loop untouched;
only ``convert_to_llm`` filters or converts them. Event fields that hold messages are therefore
typed ``Any``; a receiver that decodes events from the wire validates the messages itself.

Tools, contexts, configs and hook payloads hold live Python objects (callables, the working
context), so they are plain dataclasses, not wire Structs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

import msgspec

from ..ai.abort import AbortSignal
from ..ai.types import (
    AssistantMessage,
    AssistantMessageEvent,
    Context,
    ImageContent,
    Message,
    Model,
    TextContent,
    ToolCall,
    ToolResultMessage,
)
from ..choices import ThinkingChoice, ToolExecutionMode

__all__ = [
    "AgentMessage",
    "AgentThinkingLevel",
    "ToolExecutionMode",
    "AgentToolResult",
    "AgentToolUpdateCallback",
    "AgentTool",
    "AgentContext",
    "BeforeToolCallContext",
    "BeforeToolCallResult",
    "AfterToolCallContext",
    "AfterToolCallResult",
    "TurnContext",
    "AgentLoopTurnUpdate",
    "LoopStreamOptions",
    "Emit",
    "StreamFn",
    "AgentEventSink",
    "AgentLoopConfig",
    "AgentStartEvent",
    "AgentEndEvent",
    "TurnStartEvent",
    "TurnEndEvent",
    "MessageStartEvent",
    "MessageUpdateEvent",
    "MessageEndEvent",
    "ToolExecutionStartEvent",
    "ToolExecutionUpdateEvent",
    "ToolExecutionEndEvent",
    "AgentEvent",
    "default_convert_to_llm",
    "message_role",
]

AgentMessage = Any
"""A ``Message`` or any custom object with a ``role`` attribute."""

AgentThinkingLevel = ThinkingChoice  # (pi_actors.choices: defined once)


def message_role(message: Any) -> str | None:
    """The role of an AgentMessage: ``user``, ``assistant``, ``toolResult`` or a custom one.

    Works for the ai Structs (whose role is their msgspec tag), for custom objects with a
    ``role`` attribute, and for plain dicts with a ``"role"`` key.
    """
    if isinstance(message, AssistantMessage):
        return "assistant"
    if isinstance(message, ToolResultMessage):
        return "toolResult"
    if isinstance(message, msgspec.Struct):
        config = type(message).__struct_config__
        if config.tag_field == "role" and isinstance(config.tag, str):
            return config.tag
    if isinstance(message, dict):
        role = message.get("role")
        return role if isinstance(role, str) else None
    role = getattr(message, "role", None)
    return role if isinstance(role, str) else None


def default_convert_to_llm(messages: list[AgentMessage]) -> list[Message]:
    """Keep the user, assistant and toolResult messages; drop every custom message."""
    from ..ai.types import UserMessage

    return [m for m in messages if isinstance(m, (UserMessage, AssistantMessage, ToolResultMessage))]


# ---------------------------------------------------------------------------------------------
# Tools


class AgentToolResult(msgspec.Struct, rename="camel", omit_defaults=True, kw_only=True):
    """What a tool returns (or passes to ``on_update``): ``{content, details}`` in pi's shape.

    ``terminate`` is a hint that the run should not make another LLM call after this tool
    batch; it takes effect only when *every* result of the batch says so.
    """

    content: list[TextContent | ImageContent] = msgspec.field(default_factory=list)
    details: Any = None
    terminate: bool | None = None


AgentToolUpdateCallback = Callable[[AgentToolResult], Awaitable[None]]
"""``await on_update(partial)``: report progress; each call becomes a ``tool_execution_update``.
Calls made after ``execute`` has returned or raised are ignored."""


@dataclass(kw_only=True)
class AgentTool:
    """A tool the loop can run: what the model is told, plus ``execute``.

    ``execute(tool_call_id, params, signal, on_update) -> AgentToolResult`` is awaited with the
    validated (and coerced) arguments. A tool reports failure by **raising**; the exception
    text becomes the error result the model sees. ``signal`` (an AbortSignal or None) is the
    run's abort signal, which the tool should honour itself.

    ``prepare_arguments(raw_args) -> args`` (optional, sync or async) adapts the model's raw
    arguments before schema validation (a compatibility shim); a raise is an error result.

    ``exclusive_key(args) -> str | None`` (optional, sync) names what a call changes, e.g. the
    absolute path a write touches. In parallel mode, calls of one assistant message with the
    same key run one after another in call order (each starts once the one before it has
    settled), while all other calls still run at once; ``None`` means no constraint. It is
    asked after validation; a raise is an error result. (pi 0.73 gets the same effect from a
    per-file mutation queue inside its edit and write tools; here the loop orders the calls,
    so the order is the call order whatever the scheduler does. ``execution_mode`` below is
    the coarser tool: it serialises a whole batch.)

    ``execution_mode`` (pi's ``executionMode``): ``"sequential"`` for a tool whose calls must
    not overlap anything — when any call of an assistant message names such a tool, the whole
    batch runs one call after another in call order, even when the agent's default is
    parallel. ``None`` (or ``"parallel"``) follows the agent's setting.

    Any object with these attributes works as a tool; this dataclass is the convenient form.
    """

    name: str
    description: str
    parameters: dict[str, Any]
    execute: Callable[[str, Any, AbortSignal | None, AgentToolUpdateCallback], Awaitable[AgentToolResult]]
    label: str = ""
    prepare_arguments: Callable[[Any], Any] | None = None
    exclusive_key: Callable[[Any], str | None] | None = None
    execution_mode: ToolExecutionMode | None = None


@dataclass
class AgentContext:
    """The working context of a run: system prompt, transcript (AgentMessages) and tools."""

    system_prompt: str = ""
    messages: list[AgentMessage] = field(default_factory=list)
    tools: list[Any] = field(default_factory=list)


# ---------------------------------------------------------------------------------------------
# Hook payloads and results


@dataclass
class BeforeToolCallContext:
    assistant_message: AssistantMessage
    tool_call: ToolCall  # the raw block from the assistant message
    args: Any  # validated, coerced arguments
    context: AgentContext  # the live working context


@dataclass
class BeforeToolCallResult:
    """``block=True`` prevents execution; the error result's text is ``reason`` or
    ``"Tool execution was blocked"``. ``terminate`` is the blocked result's terminate hint."""

    block: bool = False
    reason: str | None = None
    terminate: bool | None = None


@dataclass
class AfterToolCallContext:
    assistant_message: AssistantMessage
    tool_call: ToolCall
    args: Any
    result: AgentToolResult  # as executed, before any override
    is_error: bool
    context: AgentContext


@dataclass
class AfterToolCallResult:
    """Field-wise overrides of an executed result: each field that is not None replaces the
    original (no deep merge)."""

    content: list[TextContent | ImageContent] | None = None
    details: Any = None
    is_error: bool | None = None
    terminate: bool | None = None


@dataclass
class TurnContext:
    """Passed to ``should_stop_after_turn`` and ``prepare_next_turn``."""

    message: AssistantMessage  # the assistant message that completed the turn
    tool_results: list[ToolResultMessage]  # as in that turn's ``turn_end``
    context: AgentContext  # the working context, the turn's messages appended
    new_messages: list[AgentMessage]  # what the run would return if it ended here


@dataclass
class AgentLoopTurnUpdate:
    """Returned by ``prepare_next_turn``: replacements for the next LLM call (None = keep).

    ``thinking_level`` ``"off"`` means no reasoning; any other level is passed as reasoning.
    """

    context: AgentContext | None = None
    model: Model | None = None
    thinking_level: AgentThinkingLevel | None = None


# ---------------------------------------------------------------------------------------------
# The stream function the loop consumes


@dataclass
class LoopStreamOptions:
    """The options the loop hands to the stream function (third argument).

    A stream function reads these by attribute, so ``ai.stream``'s options type need not be
    this class; any object with these attributes serves.
    """

    api_key: str | None = None
    signal: AbortSignal | None = None
    reasoning: str | None = None
    session_id: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    thinking_budgets: dict[str, int] | None = None


Emit = Callable[[AssistantMessageEvent], Awaitable[None]]
StreamFn = Callable[[Model, Context, Any, Emit], Awaitable[AssistantMessage]]
"""``await stream_fn(model, context, options, emit) -> AssistantMessage``.

Runs to completion, awaits ``emit`` with each event in order (``start``, deltas, then exactly
one ``done`` or ``error``) and returns the final message. It must not raise: failures arrive as
an ``error`` event; an abort through ``options.signal`` ends with reason ``aborted``. (The loop
survives a stream function that breaks this contract; see loop.py.)"""


# ---------------------------------------------------------------------------------------------
# Events (pi's packages/agent, docs/architecture.md §7)


class _AgentEvent(msgspec.Struct, tag_field="type", rename="camel", kw_only=True):
    type: ClassVar[str]


class AgentStartEvent(_AgentEvent, tag="agent_start"):
    type: ClassVar[str] = "agent_start"


class AgentEndEvent(_AgentEvent, tag="agent_end"):
    type: ClassVar[str] = "agent_end"
    messages: list[Any]


class TurnStartEvent(_AgentEvent, tag="turn_start"):
    type: ClassVar[str] = "turn_start"


class TurnEndEvent(_AgentEvent, tag="turn_end"):
    type: ClassVar[str] = "turn_end"
    message: Any
    tool_results: list[ToolResultMessage]


class MessageStartEvent(_AgentEvent, tag="message_start"):
    type: ClassVar[str] = "message_start"
    message: Any


class MessageUpdateEvent(_AgentEvent, tag="message_update"):
    type: ClassVar[str] = "message_update"
    message: AssistantMessage  # a shallow copy of the partial
    assistant_message_event: AssistantMessageEvent  # the raw provider event


class MessageEndEvent(_AgentEvent, tag="message_end"):
    type: ClassVar[str] = "message_end"
    message: Any


class ToolExecutionStartEvent(_AgentEvent, tag="tool_execution_start"):
    type: ClassVar[str] = "tool_execution_start"
    tool_call_id: str
    tool_name: str
    args: Any  # the raw arguments from the tool call


class ToolExecutionUpdateEvent(_AgentEvent, tag="tool_execution_update"):
    type: ClassVar[str] = "tool_execution_update"
    tool_call_id: str
    tool_name: str
    args: Any
    partial_result: Any


class ToolExecutionEndEvent(_AgentEvent, tag="tool_execution_end"):
    type: ClassVar[str] = "tool_execution_end"
    tool_call_id: str
    tool_name: str
    result: AgentToolResult
    is_error: bool


AgentEvent = (
    AgentStartEvent
    | AgentEndEvent
    | TurnStartEvent
    | TurnEndEvent
    | MessageStartEvent
    | MessageUpdateEvent
    | MessageEndEvent
    | ToolExecutionStartEvent
    | ToolExecutionUpdateEvent
    | ToolExecutionEndEvent
)

AgentEventSink = Callable[[AgentEvent], Awaitable[None]]


# ---------------------------------------------------------------------------------------------
# Loop configuration (pi's packages/agent, docs/architecture.md §7)


@dataclass(kw_only=True)
class AgentLoopConfig:
    """Everything a run needs besides its context. Callbacks may be sync or async.

    * ``convert_to_llm(messages) -> list[Message]``: once per LLM call, after
      ``transform_context``; the default keeps the three LLM roles.
    * ``transform_context(messages, signal) -> messages``: per LLM call; the result feeds only
      that call, the working context is not replaced.
    * ``get_api_key(provider) -> str | None``: per LLM call; a falsy result falls back to
      ``api_key``.
    * ``get_steering_messages() -> list``: polled at the start and after each turn (after
      all of the turn's tool results, in either execution mode). Non-empty: injected before
      the next LLM call; no tool call is skipped for it (pi 0.73).
    * ``get_follow_up_messages() -> list``: polled when the run would otherwise end.
    * ``before_tool_call(BeforeToolCallContext, signal) -> BeforeToolCallResult | None``.
    * ``after_tool_call(AfterToolCallContext, signal) -> AfterToolCallResult | None``.
    * ``should_stop_after_turn(TurnContext) -> bool``: after each completed turn (after
      ``turn_end``); True ends the run before steering and follow-ups are polled.
    * ``prepare_next_turn(TurnContext) -> AgentLoopTurnUpdate | None``: right before each
      later turn starts; may replace the context, model or thinking level.

    A callback that raises ends the run with an error assistant message (see loop.py), except
    ``before_tool_call``, whose raise becomes that tool call's error result.
    """

    model: Model
    convert_to_llm: Callable[[list[AgentMessage]], Any] = default_convert_to_llm
    transform_context: Callable[[list[AgentMessage], AbortSignal | None], Any] | None = None
    get_api_key: Callable[[str], Any] | None = None
    get_steering_messages: Callable[[], Any] | None = None
    get_follow_up_messages: Callable[[], Any] | None = None
    before_tool_call: Callable[[BeforeToolCallContext, AbortSignal | None], Any] | None = None
    after_tool_call: Callable[[AfterToolCallContext, AbortSignal | None], Any] | None = None
    should_stop_after_turn: Callable[[TurnContext], Any] | None = None
    prepare_next_turn: Callable[[TurnContext], Any] | None = None
    tool_execution: ToolExecutionMode = "parallel"
    reasoning: str | None = None
    api_key: str | None = None
    session_id: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    thinking_budgets: dict[str, int] | None = None
