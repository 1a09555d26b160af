"""The data of one LLM call: models, messages, content blocks, usage and the 12 stream events.

Everything here is a msgspec Struct and the single source of truth for these shapes. Field
names are snake_case in Python and camelCase on every wire and file (``rename="camel"``), so
``msgspec.to_builtins(msg)`` gives pi's JSON shapes (``stopReason``, ``toolCallId``, ...).

Schema-evolution rule: a new field gets a default; no field ever changes its type.

Content blocks are tagged by ``type``, messages by ``role``, events by ``type``; each class
also carries its tag as a class attribute (``block.type``, ``message.role``). Optional fields
are omitted from the encoding when unset (pi leaves them ``undefined``).
"""

from __future__ import annotations

import math
import time
from typing import Any, ClassVar, Literal

import msgspec

from ..choices import THINKING_LEVELS

__all__ = [
    "Api",
    "StopReason",
    "ThinkingLevel",
    "THINKING_LEVELS",
    "TextContent",
    "ThinkingContent",
    "ImageContent",
    "ToolCall",
    "UserContent",
    "AssistantContent",
    "ToolResultContent",
    "UsageCost",
    "Usage",
    "UserMessage",
    "AssistantMessage",
    "ToolResultMessage",
    "Message",
    "Tool",
    "Context",
    "ModelCost",
    "Model",
    "StartEvent",
    "TextStartEvent",
    "TextDeltaEvent",
    "TextEndEvent",
    "ThinkingStartEvent",
    "ThinkingDeltaEvent",
    "ThinkingEndEvent",
    "ToolCallStartEvent",
    "ToolCallDeltaEvent",
    "ToolCallEndEvent",
    "DoneEvent",
    "ErrorEvent",
    "AssistantMessageEvent",
    "now_ms",
    "empty_usage",
    "new_assistant_message",
    "to_plain",
    "message_from_plain",
    "event_from_plain",
]

Api = str
StopReason = Literal["stop", "length", "toolUse", "error", "aborted"]
ThinkingLevel = Literal["minimal", "low", "medium", "high", "xhigh"]
# THINKING_LEVELS (``off`` and then these) is defined once, in ``pi_actors.choices``.


def now_ms() -> int:
    """Milliseconds since the epoch, as pi stamps its messages."""
    return int(time.time() * 1000)


# Memory (``gc=False`` below): the transcript of a long session is kept as these Structs for
# as long as the session lives. Structs that hold only JSON-shaped data (strings, numbers,
# lists, dicts decoded from the wire) can never be part of a reference cycle, so they need
# not be tracked by the garbage collector: 16 bytes less each and fewer objects for it to
# walk. Not ToolResultMessage: its ``details`` may be any object a tool chose to keep.


class _Block(msgspec.Struct, tag_field="type", rename="camel", omit_defaults=True, kw_only=True, gc=False):
    pass


class TextContent(_Block, tag="text"):
    type: ClassVar[str] = "text"
    text: str
    text_signature: str | None = None


class ThinkingContent(_Block, tag="thinking"):
    type: ClassVar[str] = "thinking"
    thinking: str
    thinking_signature: str | None = None
    redacted: bool | None = None


class ImageContent(_Block, tag="image"):
    type: ClassVar[str] = "image"
    data: str  # base64, no data: prefix
    mime_type: str


class ToolCall(_Block, tag="toolCall"):
    type: ClassVar[str] = "toolCall"
    id: str
    name: str
    arguments: dict[str, Any]
    thought_signature: str | None = None


UserContent = TextContent | ImageContent
AssistantContent = TextContent | ThinkingContent | ToolCall
ToolResultContent = TextContent | ImageContent


class UsageCost(msgspec.Struct, rename="camel", kw_only=True, gc=False):
    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0
    total: float = 0.0

    def __post_init__(self) -> None:
        # Every decoded number is a new float object (24 bytes); most costs of a reply are
        # zero (free and local models, no cache reads or writes), so those share one
        # object. (-0.0 keeps its own, so that it encodes as it came.)
        if self.input == 0.0 and _is_plain_zero(self.input):
            self.input = 0.0
        if self.output == 0.0 and _is_plain_zero(self.output):
            self.output = 0.0
        if self.cache_read == 0.0 and _is_plain_zero(self.cache_read):
            self.cache_read = 0.0
        if self.cache_write == 0.0 and _is_plain_zero(self.cache_write):
            self.cache_write = 0.0
        if self.total == 0.0 and _is_plain_zero(self.total):
            self.total = 0.0


def _is_plain_zero(value: float) -> bool:
    """True for the float 0.0 (not -0.0, not the int 0, which encode differently)."""
    return type(value) is float and math.copysign(1.0, value) > 0


class Usage(msgspec.Struct, rename="camel", kw_only=True, gc=False):
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    total_tokens: int = 0
    cost: UsageCost = msgspec.field(default_factory=UsageCost)


def empty_usage() -> Usage:
    return Usage()


def new_assistant_message(model: Model) -> AssistantMessage:
    """The empty output message a provider starts from (pi's packages/ai, docs/architecture.md §7)."""
    return AssistantMessage(
        content=[],
        api=model.api,
        provider=model.provider,
        model=model.id,
        usage=Usage(),
        stop_reason="stop",
        timestamp=now_ms(),
    )


class _Message(msgspec.Struct, tag_field="role", rename="camel", omit_defaults=True, kw_only=True):
    pass


class UserMessage(_Message, tag="user", gc=False):
    role: ClassVar[str] = "user"
    content: str | list[UserContent]
    timestamp: int


class AssistantMessage(_Message, tag="assistant", gc=False):
    role: ClassVar[str] = "assistant"
    # Fields without defaults are always encoded, as pi always writes them.
    content: list[AssistantContent]
    api: str
    provider: str
    model: str
    usage: Usage
    stop_reason: StopReason
    timestamp: int
    error_message: str | None = None
    # The provider's id for this response (``responseId``, as pi 0.73.1 writes it), and the model
    # the provider says answered when that differs from ``model`` (routers, aliases).
    response_id: str | None = None
    response_model: str | None = None


class ToolResultMessage(_Message, tag="toolResult"):
    role: ClassVar[str] = "toolResult"
    tool_call_id: str
    tool_name: str
    content: list[ToolResultContent]
    is_error: bool
    timestamp: int
    details: Any = None


Message = UserMessage | AssistantMessage | ToolResultMessage


class Tool(msgspec.Struct, rename="camel", kw_only=True):
    """What a model is told about a tool: name, description and a JSON-Schema object."""

    name: str
    description: str
    parameters: dict[str, Any]


class Context(msgspec.Struct, rename="camel", omit_defaults=True, kw_only=True):
    system_prompt: str | None = None
    messages: list[Message] = msgspec.field(default_factory=list)
    tools: list[Tool] | None = None


class ModelCost(msgspec.Struct, rename="camel", kw_only=True):
    """USD per million tokens."""

    input: float = 0.0
    output: float = 0.0
    cache_read: float = 0.0
    cache_write: float = 0.0


class Model(msgspec.Struct, rename="camel", kw_only=True):
    id: str
    name: str = ""
    api: str
    provider: str
    base_url: str = ""
    reasoning: bool = False
    input: list[str] = msgspec.field(default_factory=lambda: ["text"])
    cost: ModelCost = msgspec.field(default_factory=ModelCost)
    context_window: int = 128000
    max_tokens: int = 16384
    headers: dict[str, str] | None = None
    compat: dict[str, Any] | None = None
    #: pi's ``thinkingLevelMap``: thinking level -> the provider's value for it (None: the
    #: level is not offered by this model). Absent: the API's own mapping.
    thinking_level_map: dict[str, str | None] | None = None


# ---------------------------------------------------------------------------------------------
# The 12 AssistantMessageEvents (pi's packages/ai, docs/architecture.md §7). ``partial`` is the live message being
# built; it is None when an event crosses a process boundary (the receiver rebuilds it).


class _Event(msgspec.Struct, tag_field="type", rename="camel", omit_defaults=True, kw_only=True):
    pass


class StartEvent(_Event, tag="start"):
    type: ClassVar[str] = "start"
    partial: AssistantMessage | None = None


class TextStartEvent(_Event, tag="text_start"):
    type: ClassVar[str] = "text_start"
    content_index: int
    partial: AssistantMessage | None = None


class TextDeltaEvent(_Event, tag="text_delta"):
    type: ClassVar[str] = "text_delta"
    content_index: int
    delta: str
    partial: AssistantMessage | None = None


class TextEndEvent(_Event, tag="text_end"):
    type: ClassVar[str] = "text_end"
    content_index: int
    content: str
    partial: AssistantMessage | None = None


class ThinkingStartEvent(_Event, tag="thinking_start"):
    type: ClassVar[str] = "thinking_start"
    content_index: int
    partial: AssistantMessage | None = None


class ThinkingDeltaEvent(_Event, tag="thinking_delta"):
    type: ClassVar[str] = "thinking_delta"
    content_index: int
    delta: str
    partial: AssistantMessage | None = None


class ThinkingEndEvent(_Event, tag="thinking_end"):
    type: ClassVar[str] = "thinking_end"
    content_index: int
    content: str
    partial: AssistantMessage | None = None


class ToolCallStartEvent(_Event, tag="toolcall_start"):
    type: ClassVar[str] = "toolcall_start"
    content_index: int
    partial: AssistantMessage | None = None


class ToolCallDeltaEvent(_Event, tag="toolcall_delta"):
    type: ClassVar[str] = "toolcall_delta"
    content_index: int
    delta: str
    partial: AssistantMessage | None = None


class ToolCallEndEvent(_Event, tag="toolcall_end"):
    type: ClassVar[str] = "toolcall_end"
    content_index: int
    tool_call: ToolCall
    partial: AssistantMessage | None = None


class DoneEvent(_Event, tag="done"):
    type: ClassVar[str] = "done"
    reason: Literal["stop", "length", "toolUse"]
    message: AssistantMessage


class ErrorEvent(_Event, tag="error"):
    type: ClassVar[str] = "error"
    reason: Literal["error", "aborted"]
    error: AssistantMessage


AssistantMessageEvent = (
    StartEvent
    | TextStartEvent
    | TextDeltaEvent
    | TextEndEvent
    | ThinkingStartEvent
    | ThinkingDeltaEvent
    | ThinkingEndEvent
    | ToolCallStartEvent
    | ToolCallDeltaEvent
    | ToolCallEndEvent
    | DoneEvent
    | ErrorEvent
)


def to_plain(obj: Any) -> Any:
    """A Struct (or a tree holding Structs) as plain JSON-like data in pi's camelCase shapes."""
    return msgspec.to_builtins(obj)


def message_from_plain(data: Any) -> Message:
    """Validate plain data (pi's JSON shape) into a Message; raises msgspec.ValidationError."""
    return msgspec.convert(data, Message)


def event_from_plain(data: Any) -> AssistantMessageEvent:
    """Validate plain data into an AssistantMessageEvent; raises msgspec.ValidationError."""
    return msgspec.convert(data, AssistantMessageEvent)
