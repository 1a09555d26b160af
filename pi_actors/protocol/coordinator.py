"""The loop coordinator's contract: every method a UI (or the server, on a client's behalf)
may call on a session's coordinator.

A coordinator is one session's agent. Its methods fall in four groups:

* runs — ``prompt``, ``continue`` (stream the run's events, see :mod:`.events`), ``steer``,
  ``follow_up``, ``abort``, ``abort_retry``, ``compact``;
* reading — ``session``, ``get_state``, ``get_messages``, ``subscribe``, ``tree``,
  ``fork_messages``, ``get_session_stats``, ``get_last_assistant_text``,
  ``get_available_models``;
* the session tree and settings — ``navigate``, ``label``, ``fork``, ``set_model``,
  ``set_thinking_level``, ``new_session``, ``switch_session``, ``set_session_name``,
  ``set_queue_mode``, ``set_auto``, ``export_html``;
* ``bash`` — a user's ``!cmd``, run in the tool sandbox and recorded in the session.

Wire shapes are pi's (camelCase keys); a key whose value is its default is left out, except
where a result field is declared without a default: such a key is always present (``null``
included), as clients read it. Refusals keep pi's texts; a missing or mistyped argument is
``invalid_request`` naming the field (the router checks it before the coordinator sees the
call). Every method may also answer ``startup_failed`` (the session could not be opened) and
the codes every method may answer (``invalid_request``, ``not_found``, ``cancelled``,
``internal``).

Entries and messages of the session file are carried as plain trees (``dict[str, Any]``):
the transcript mixes the agent's messages with custom ones (``bashExecution``, ...) and the
tree's entry kinds are the session file's (``pi_actors.coding.session``); models are
``ai.types.Model``.

Where the declarations live: the session, runs, reading, ``bash`` and the ``COORDINATOR``
interface here; the tree-and-settings group in ``_coordinator_session``; the extension methods
in ``_coordinator_extensions``. Every name is importable from this module.
"""

from __future__ import annotations

from typing import Any

from ..ai.types import ImageContent, Model
from ..runtime import Empty, Interface, Method, WireStruct
from ._coordinator_extensions import (
    EXTENSION_COMMANDS,
    EXTENSION_RENDER,
    EXTENSION_SHORTCUT,
    EXTENSION_UI_RESPONSE,
    ExtensionCommands,
    ExtensionRenderArgs,
    ExtensionShortcutArgs,
    ExtensionShortcutResult,
    ExtensionUiResponseArgs,
)
from ._coordinator_session import (
    CLONE,
    EXPORT_HTML,
    FORK,
    LABEL,
    NAVIGATE,
    NEW_SESSION,
    SET_AUTO,
    SET_MODEL,
    SET_QUEUE_MODE,
    SET_SESSION_NAME,
    SET_THINKING_LEVEL,
    SWITCH_SESSION,
    CloneResult,
    ExportHtmlArgs,
    ExportHtmlResult,
    ForkArgs,
    ForkResult,
    LabelArgs,
    LabelResult,
    NavigateArgs,
    NavigateResult,
    NewSessionArgs,
    NewSessionResult,
    SessionNameArgs,
    SetAutoArgs,
    SetModelArgs,
    SetQueueModeArgs,
    SwitchSessionArgs,
    SwitchSessionResult,
    ThinkingLevelArgs,
    ThinkingLevelResult,
)
from .events import AgentEventData, WireEvent

__all__ = [
    "COORDINATOR",
    "AgentEventData",
    "WireEvent",
    "BashArgs",
    "BashResult",
    "CompactArgs",
    "CompactResult",
    "ContinueArgs",
    "ExportHtmlArgs",
    "ExportHtmlResult",
    "CloneResult",
    "ForkArgs",
    "ForkMessage",
    "ForkMessages",
    "ForkResult",
    "LabelArgs",
    "LabelResult",
    "LastAssistantText",
    "Messages",
    "Models",
    "NavigateArgs",
    "NavigateResult",
    "NewSessionArgs",
    "NewSessionResult",
    "PromptArgs",
    "SessionContext",
    "SessionDescription",
    "SessionNameArgs",
    "SessionStats",
    "SetAutoArgs",
    "SetModelArgs",
    "SetQueueModeArgs",
    "Snapshot",
    "State",
    "SubscribeArgs",
    "SubscriptionUpdate",
    "SwitchSessionArgs",
    "SwitchSessionResult",
    "TextArgs",
    "QueuedTexts",
    "ThinkingLevelArgs",
    "ThinkingLevelResult",
    "TokenStats",
    "Tree",
    # the methods
    "SESSION", "PROMPT", "CONTINUE", "STEER", "FOLLOW_UP", "ABORT", "ABORT_RETRY", "COMPACT",
    "GET_STATE", "GET_MESSAGES", "EXTENSION_UI_RESPONSE", "ExtensionUiResponseArgs", "EXTENSION_COMMANDS", "ExtensionCommands", "EXTENSION_SHORTCUT", "ExtensionShortcutArgs", "ExtensionShortcutResult", "EXTENSION_RENDER", "ExtensionRenderArgs", "SUBSCRIBE", "TREE", "NAVIGATE", "LABEL", "FORK",
    "CLONE", "FORK_MESSAGES", "SET_MODEL", "SET_THINKING_LEVEL", "NEW_SESSION", "SWITCH_SESSION",
    "SET_SESSION_NAME", "GET_SESSION_STATS", "GET_LAST_ASSISTANT_TEXT", "BASH",
    "GET_AVAILABLE_MODELS", "EXPORT_HTML", "SET_QUEUE_MODE", "SET_AUTO",
    "CLEAR_QUEUE",
]  # fmt: skip

# -- the session ---------------------------------------------------------------------------


class SessionContext(WireStruct):
    """What the LLM sees along the current branch, as the session file rebuilds it."""

    messages: list[dict[str, Any]]
    #: pi's thinking level recorded on the branch ("off" when none).
    thinking_level: str
    #: ``{provider, modelId}`` of the last model change on the branch, or null.
    model: dict[str, Any] | None


class SessionDescription(WireStruct):
    """The open session, as the session store describes it."""

    #: The file's header entry (``{type: "session", id, cwd, timestamp, ...}``).
    header: dict[str, Any] | None
    #: The session file; null for ``--no-session`` (kept in memory only).
    path: str | None
    context: SessionContext
    #: One-line texts for the user: damaged lines left out, a torn last line dropped.
    warnings: list[str]


# -- runs ------------------------------------------------------------------------------------


class PromptArgs(WireStruct):
    text: str
    #: False: stream no events on this call (the caller reads them from a subscription).
    events: bool = True
    #: Image parts sent after the text (pi's ``{type: "image", data, mimeType}``).
    images: list[ImageContent] = []
    #: Only events of these types are streamed on this call (empty: all). ``-p`` needs only
    #: the ``message_end`` events and the extensions' notices, not every delta and tool event.
    types: list[str] = []


class ContinueArgs(WireStruct):
    events: bool = True


class TextArgs(WireStruct):
    text: str
    #: Image parts sent after the text (steer / follow_up, as on prompt).
    images: list[ImageContent] = []


class QueuedTexts(WireStruct):
    """The texts of the messages that were waiting in the queues, oldest first (pi's
    ``clearQueue()``); a message whose content is a list of parts gives its text parts."""

    steering: list[str]
    follow_up: list[str]


class CompactArgs(WireStruct):
    #: Extra instructions for the summary (pi's ``/compact <instructions>``); empty: none.
    custom_instructions: str | None = None


class CompactResult(WireStruct):
    summary: str
    first_kept_entry_id: str
    tokens_before: int
    #: ``{readFiles, modifiedFiles}`` and whatever else the summary step recorded.
    details: Any


# -- reading ---------------------------------------------------------------------------------


class State(WireStruct):
    model: Model | None
    thinking_level: str
    is_streaming: bool
    message_count: int
    #: Steering plus follow-up messages waiting.
    pending_message_count: int
    steering_mode: str
    follow_up_mode: str
    session_file: str | None
    session_id: str | None
    auto_compaction_enabled: bool
    auto_retry_enabled: bool
    #: The session's name (its latest session_info entry), absent when it has none.
    session_name: str | None = None
    #: A compaction (manual or automatic) or a branch summary is being made.
    is_compacting: bool = False
    #: The sequence number of the last event sent to subscribers: a subscriber that has
    #: seen it has seen every event of what was done before this call.
    seq: int = 0


class Messages(WireStruct):
    """The transcript in pi's JSON shapes (custom messages such as ``bashExecution`` too)."""

    messages: list[dict[str, Any]]


class SubscribeArgs(WireStruct):
    #: Undelivered updates held for this subscriber before it is dropped (``overflow``).
    max_queue: int = 1024
    #: Only events of these types are sent (empty: all); ``seq`` then has gaps. For a UI
    #: that reads its own runs from its prompt calls and wants only what comes from
    #: elsewhere (the local TUI: ``extension_ui_request``).
    types: list[str] = []


class Snapshot(WireStruct):
    """A subscriber's starting point: the session as of sequence number ``seq``."""

    seq: int
    #: The finished messages (during a run: those subscribers have been told of).
    messages: list[dict[str, Any]]
    #: The assistant message being streamed, or null: seed the event rebuilder with it.
    stream_message: dict[str, Any] | None
    is_streaming: bool
    pending_tool_calls: list[str]
    model: Model | None
    thinking_level: str
    session: dict[str, Any] | None
    #: The extensions' status lines (``ctx.ui.set_status``) shown now, by key.
    extension_status: dict[str, str] = {}


class SubscriptionUpdate(WireStruct):
    """One chunk of ``subscribe``: the first is ``{snapshot}``, every later one ``{seq, event}``
    with ``seq`` one more than the previous."""

    snapshot: Snapshot | None = None
    seq: int | None = None
    event: WireEvent | None = None


class Tree(WireStruct):
    """The whole session tree (pi's ``/tree``)."""

    entries: list[dict[str, Any]]
    leaf_id: str | None
    #: entry id -> label.
    labels: dict[str, Any]


class ForkMessage(WireStruct):
    entry_id: str
    text: str


class ForkMessages(WireStruct):
    messages: list[ForkMessage]


class TokenStats(WireStruct):
    input: int
    output: int
    cache_read: int
    cache_write: int
    total: int


class ContextUsage(WireStruct):
    """pi's estimate of the context's size: ``tokens`` and ``percent`` are null after a
    compaction until a reply has reported its usage."""

    tokens: int | None
    context_window: int
    percent: float | None


class SessionStats(WireStruct):
    session_id: str | None
    user_messages: int
    assistant_messages: int
    tool_calls: int
    tool_results: int
    total_messages: int
    tokens: TokenStats
    cost: float
    #: Absent for a session not saved to a file.
    session_file: str | None = None
    #: How full the model's context window is (pi's ``contextUsage``); absent without a
    #: model or a context window.
    context_usage: ContextUsage | None = None


class LastAssistantText(WireStruct):
    #: Absent when there is no assistant reply with text.
    text: str | None = None


class Models(WireStruct):
    """The models the CLI's configuration knows (pi's ``/model`` list), as configured."""

    models: list[dict[str, Any]]


class BashArgs(WireStruct):
    command: str
    #: pi's ``!!cmd``: recorded in the session but left out of the LLM context.
    exclude_from_context: bool = False


class BashResult(WireStruct):
    output: str
    #: null when the command was cancelled or its code is unknown.
    exit_code: int | None
    cancelled: bool
    truncated: bool
    #: The file holding the whole output when it was truncated.
    full_output_path: str | None = None


# -- the methods -----------------------------------------------------------------------------

SESSION: Method[Empty, None, SessionDescription] = Method(
    "session", args=Empty, result=SessionDescription,
    doc="The open session: its header, file path, the context along the current branch and "
    "any warnings from loading it.",
)  # fmt: skip

PROMPT: Method[PromptArgs, WireEvent, Empty] = Method(
    "prompt", args=PromptArgs, result=Empty, chunk=WireEvent, cooperative=True,
    errors={
        "busy": "a run is already active (use steer or follow_up, or wait)",
        "write_failed": "a finished message could not be saved; the run stopped",
    },
    doc="Send a user message and run the agent until it is done, streaming every event of "
    "the run (pi's AgentEvents and the session events auto_retry_*, compaction_*, "
    "queue_update, session_info_changed, in the wire shape of pi_actors.protocol.events) unless events is false; with types, only "
    "the events of those types; the result {} "
    "comes when the run is over. Cancelling the call aborts the run; the aborted reply still "
    "arrives.",
)  # fmt: skip

CONTINUE: Method[ContinueArgs, WireEvent, Empty] = Method(
    "continue", args=ContinueArgs, result=Empty, chunk=WireEvent, cooperative=True,
    errors={
        "busy": "a run is already active",
        "invalid_state": "there is nothing to continue from",
        "write_failed": "a finished message could not be saved; the run stopped",
    },
    doc="Run the agent again from the transcript, as prompt does but without a new message; "
    "a trailing failed (error or aborted) reply is dropped first, so this retries it.",
)  # fmt: skip

STEER: Method[TextArgs, None, Empty] = Method(
    "steer", args=TextArgs, result=Empty,
    doc="Queue a user message for the next LLM call of the current run (pi's steering).",
)  # fmt: skip

FOLLOW_UP: Method[TextArgs, None, Empty] = Method(
    "follow_up", args=TextArgs, result=Empty,
    doc="Queue a user message for when the current run would otherwise end (pi's follow-up).",
)  # fmt: skip

CLEAR_QUEUE: Method[Empty, None, QueuedTexts] = Method(
    "clear_queue", args=Empty, result=QueuedTexts,
    doc="Empty the steering and follow-up queues and return their texts (pi's clearQueue): "
    "the UI puts them back into the editor, on Esc before it aborts or on Alt+Up.",
)  # fmt: skip

ABORT: Method[Empty, None, Empty] = Method(
    "abort", args=Empty, result=Empty,
    doc="Abort the active run (and a retry wait or compaction) and answer once it has ended.",
)  # fmt: skip

ABORT_RETRY: Method[Empty, None, Empty] = Method(
    "abort_retry", args=Empty, result=Empty,
    doc="Stop a wait before an automatic retry; the failed reply stays the last message.",
)  # fmt: skip

COMPACT: Method[CompactArgs, None, CompactResult] = Method(
    "compact", args=CompactArgs, result=CompactResult,
    errors={
        "nothing_to_compact": "the session is too short or already compacted (pi's texts)",
        "compaction_failed": "the summary could not be made (Summarization failed: ...)",
        "cancelled": "the compaction was aborted",
    },
    doc="Summarize the older part of the branch into a compaction entry (pi's /compact), "
    "aborting an active run first; the transcript is reloaded from the file.",
)  # fmt: skip

GET_STATE: Method[Empty, None, State] = Method(
    "get_state", args=Empty, result=State,
    doc="Model, thinking level, whether a run is active, message counts, queue modes, the "
    "session's file, id and name, the auto-compaction/auto-retry switches, whether a "
    "compaction is under way, and the sequence number of the last event sent to subscribers.",
)  # fmt: skip

GET_MESSAGES: Method[Empty, None, Messages] = Method(
    "get_messages", args=Empty, result=Messages,
    doc="The transcript the agent works from, in pi's message shapes.",
)  # fmt: skip

SUBSCRIBE: Method[SubscribeArgs, SubscriptionUpdate, Empty] = Method(
    "subscribe", args=SubscribeArgs, result=Empty, chunk=SubscriptionUpdate,
    errors={"overflow": "the subscriber fell more than maxQueue updates behind; resubscribe"},
    doc="Follow the session: the first chunk is {snapshot} (sequence N), then every event as "
    "{seq, event} with N+1, N+2, ... without gaps, until the caller cancels. A subscriber "
    "that cannot keep up is dropped with overflow (others are never slowed down). With "
    "types, only events of those types are sent (the numbering then has gaps).",
)  # fmt: skip

TREE: Method[Empty, None, Tree] = Method(
    "tree", args=Empty, result=Tree,
    doc="The whole session tree (entries, current leaf, labels) for pi's /tree.",
)  # fmt: skip

FORK_MESSAGES: Method[Empty, None, ForkMessages] = Method(
    "fork_messages", args=Empty, result=ForkMessages,
    doc="The user messages one can fork from, with their entry ids.",
)  # fmt: skip

GET_SESSION_STATS: Method[Empty, None, SessionStats] = Method(
    "get_session_stats", args=Empty, result=SessionStats,
    doc="Message and tool-call counts, token totals and cost of the transcript (pi's /session).",
)  # fmt: skip

GET_LAST_ASSISTANT_TEXT: Method[Empty, None, LastAssistantText] = Method(
    "get_last_assistant_text", args=Empty, result=LastAssistantText,
    doc="The text of the last assistant reply (pi's /copy); {} when there is none.",
)  # fmt: skip

BASH: Method[BashArgs, None, BashResult] = Method(
    "bash", args=BashArgs, result=BashResult,
    errors={
        "invalid_args": "the command is empty",
        "bash_failed": "the tool pool could not run it",
    },
    doc="A user's !cmd: run in the tool sandbox like any tool call and recorded as a "
    "bashExecution message (excludeFromContext for !!cmd); returns its output and exit code. "
    "Allowed during a run, as in pi: the message is then recorded when the run ends.",
)  # fmt: skip

ABORT_BASH: Method[Empty, None, Empty] = Method(
    "abort_bash", args=Empty, result=Empty,
    doc="Stop the user's !cmd that is running, if any; its bash call answers with cancelled.",
)  # fmt: skip

GET_AVAILABLE_MODELS: Method[Empty, None, Models] = Method(
    "get_available_models", args=Empty, result=Models,
    doc="The models the configuration offers (those whose provider has credentials, and the session's own), for pi's model selector.",
)  # fmt: skip

COORDINATOR = Interface(
    "coordinator",
    [
        SESSION,
        PROMPT,
        CONTINUE,
        STEER,
        FOLLOW_UP,
        ABORT,
        ABORT_RETRY,
        COMPACT,
        GET_STATE,
        GET_MESSAGES,
        SUBSCRIBE,
        TREE,
        NAVIGATE,
        LABEL,
        FORK,
        CLONE,
        FORK_MESSAGES,
        SET_MODEL,
        SET_THINKING_LEVEL,
        NEW_SESSION,
        SWITCH_SESSION,
        SET_SESSION_NAME,
        GET_SESSION_STATS,
        GET_LAST_ASSISTANT_TEXT,
        BASH,
        ABORT_BASH,
        GET_AVAILABLE_MODELS,
        EXPORT_HTML,
        SET_QUEUE_MODE,
        SET_AUTO,
        CLEAR_QUEUE,
        EXTENSION_UI_RESPONSE,
        EXTENSION_COMMANDS,
        EXTENSION_SHORTCUT,
        EXTENSION_RENDER,
    ],  # fmt: skip
    doc="One session's agent: runs, the session tree and settings, subscriptions. Served "
    "to the session's UI (and by the server to its clients).",
)
