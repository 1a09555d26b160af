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
"""

from __future__ import annotations

from typing import Any, Literal

from ..ai.types import ImageContent, Model
from ..runtime import Empty, Interface, Method, WireStruct
from .events import AgentEventData, WireEvent
from .extension_host import CommandSpec, Rendered, ShortcutSpec

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

#: Refused while a run is active (the UI should wait, steer, or abort first).
_BUSY = "a run is active: wait for it to end (or abort it) first"


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


# -- the tree and settings -----------------------------------------------------------------


class NavigateArgs(WireStruct):
    target_id: str
    #: Summarize the branch being left (with the session's model) into a branch_summary.
    summarize: bool = False
    custom_instructions: str | None = None
    #: The custom instructions replace pi's summary prompt instead of extending it.
    replace_instructions: bool = False
    #: A summary given by the caller (no model call); with ``details`` for the entry.
    summary: str | None = None
    details: Any = None


class NavigateResult(WireStruct):
    #: The text of the user message navigated to (to edit and re-send), or null.
    editor_text: str | None
    leaf_id: str | None


class LabelArgs(WireStruct):
    target_id: str
    #: Empty or absent: clear the label.
    label: str | None = None


class LabelResult(WireStruct):
    #: The label entry written.
    id: str


class ForkArgs(WireStruct):
    #: A user message's entry id: the history before it becomes the new session.
    entry_id: str


class ForkResult(WireStruct):
    #: The forked user message's text (for the editor).
    text: str
    path: str | None


class CloneResult(WireStruct):
    """pi's ``{cancelled}`` (always false here: nothing can cancel a clone) and the new
    session's file (null for a session not saved)."""

    cancelled: bool = False
    path: str | None = None


class SetModelArgs(WireStruct):
    """Either ``provider`` and ``modelId`` (a model the configuration knows) or ``model``."""

    provider: str | None = None
    model_id: str | None = None
    model: Model | None = None


class ThinkingLevelArgs(WireStruct):
    #: One of off, minimal, low, medium, high, xhigh.
    level: str


class ThinkingLevelResult(WireStruct):
    #: The level applied (clamped to what the model supports).
    level: str


class NewSessionArgs(WireStruct):
    #: pi's ``parentSession``; accepted and not used.
    parent_session: str | None = None


class NewSessionResult(WireStruct):
    cancelled: bool
    previous_session_file: str | None
    path: str | None


class SwitchSessionArgs(WireStruct):
    session_path: str


class SwitchSessionResult(WireStruct):
    cancelled: bool
    path: str | None
    warnings: list[str]


class SessionNameArgs(WireStruct):
    name: str


class SetQueueModeArgs(WireStruct):
    queue: Literal["steering", "followUp"]
    #: all or one-at-a-time.
    mode: str


class SetAutoArgs(WireStruct):
    what: Literal["compaction", "retry"]
    enabled: bool


class ExportHtmlArgs(WireStruct):
    #: Where to write; absent: next to the session file (see the method).
    output_path: str | None = None


class ExportHtmlResult(WireStruct):
    path: str


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

NAVIGATE: Method[NavigateArgs, None, NavigateResult] = Method(
    "navigate", args=NavigateArgs, result=NavigateResult,
    errors={
        "busy": _BUSY,
        "not_found": "no entry has that id (Entry <id> not found)",
        "invalid_state": "summarize without a model",
        "summarization_failed": "the branch summary could not be made",
        "cancelled": "the branch summary was aborted",
    },
    doc="Move to another point of the tree (pi's /tree): a user message is re-asked (the "
    "leaf becomes its parent and its text comes back as editorText); with summarize the "
    "model summarizes the branch being left (or summary gives the text) into a "
    "branch_summary entry.",
)  # fmt: skip

LABEL: Method[LabelArgs, None, LabelResult] = Method(
    "label", args=LabelArgs, result=LabelResult,
    errors={"busy": _BUSY, "not_found": "no entry has that id"},
    doc="Label an entry of the tree (an empty label clears it).",
)  # fmt: skip

FORK: Method[ForkArgs, None, ForkResult] = Method(
    "fork", args=ForkArgs, result=ForkResult,
    errors={
        "busy": _BUSY,
        "not_found": "no entry has that id",
        "invalid_args": "the entry is not a user message (Invalid entry ID for forking)",
    },
    doc="pi's /fork: the history before a user message becomes a new session file, which "
    "the coordinator continues in; the message's text is returned for the editor.",
)  # fmt: skip

CLONE: Method[Empty, None, CloneResult] = Method(
    "clone", args=Empty, result=CloneResult,
    errors={
        "busy": _BUSY,
        "invalid_state": "the session has no entry yet (Cannot clone session: no current entry selected)",
        "not_supported": "the session is not saved (--no-session)",
    },
    doc="pi's /clone and RPC clone: the current branch (root to leaf, labels kept) becomes a "
    "new session file, which the coordinator continues in.",
)  # fmt: skip

FORK_MESSAGES: Method[Empty, None, ForkMessages] = Method(
    "fork_messages", args=Empty, result=ForkMessages,
    doc="The user messages one can fork from, with their entry ids.",
)  # fmt: skip

SET_MODEL: Method[SetModelArgs, None, Model] = Method(
    "set_model", args=SetModelArgs, result=Model,
    errors={"not_found": "the configuration knows no such model (Model not found: p/id)"},
    doc="Switch the session's model (recorded as a model_change entry); the thinking level "
    "is clamped to what the model supports. Returns the model.",
)  # fmt: skip

SET_THINKING_LEVEL: Method[ThinkingLevelArgs, None, ThinkingLevelResult] = Method(
    "set_thinking_level", args=ThinkingLevelArgs, result=ThinkingLevelResult,
    errors={"invalid_args": "not one of off, minimal, low, medium, high, xhigh"},
    doc="Set the thinking level (clamped to the model; recorded as a thinking_level_change "
    "entry) and return the level applied.",
)  # fmt: skip

NEW_SESSION: Method[NewSessionArgs, None, NewSessionResult] = Method(
    "new_session", args=NewSessionArgs, result=NewSessionResult,
    doc="pi's /new: abort any run and start an empty session in a new file.",
)  # fmt: skip

SWITCH_SESSION: Method[SwitchSessionArgs, None, SwitchSessionResult] = Method(
    "switch_session", args=SwitchSessionArgs, result=SwitchSessionResult,
    errors={
        "invalid_args": "sessionPath is empty",
        "session_locked": "another process has that session open (the current one stays)",
        "not_found": "no such session file",
    },
    doc="pi's /resume: abort any run and continue another session file, with its model and "
    "thinking level; warnings say what could not be loaded.",
)  # fmt: skip

SET_SESSION_NAME: Method[SessionNameArgs, None, Empty] = Method(
    "set_session_name", args=SessionNameArgs, result=Empty,
    errors={"invalid_args": "the name is empty (Session name cannot be empty)"},
    doc="Name the session (a session_info entry), as pi's /name.",
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

EXPORT_HTML: Method[ExportHtmlArgs, None, ExportHtmlResult] = Method(
    "export_html", args=ExportHtmlArgs, result=ExportHtmlResult,
    errors={
        "invalid_args": "this (served) session takes no outputPath",
        "write_failed": "the file could not be written",
    },
    doc="The session as a self-contained HTML page, its current branch shown (pi's /export). Without "
    "outputPath it is pi's pi-session-<session file name>.html in the session's working directory "
    "(or the configured exports directory); a served session writes only in its exports directory, "
    "never overwriting a file or following a symlink.",
)  # fmt: skip

SET_QUEUE_MODE: Method[SetQueueModeArgs, None, Empty] = Method(
    "set_queue_mode", args=SetQueueModeArgs, result=Empty,
    errors={"invalid_args": "mode is not all or one-at-a-time"},
    doc="How queued steering or follow-up messages are delivered: all at once or one at a time.",
)  # fmt: skip

SET_AUTO: Method[SetAutoArgs, None, Empty] = Method(
    "set_auto", args=SetAutoArgs, result=Empty,
    doc="Switch auto-compaction or auto-retry on or off for this session.",
)  # fmt: skip

class ExtensionUiResponseArgs(WireStruct):
    """pi's ``extension_ui_response``: ``id`` of the ``extension_ui_request`` answered, and
    ``value`` (select, input), ``confirmed`` (confirm) or ``cancelled``."""

    id: str
    value: str | None = None
    confirmed: bool | None = None
    cancelled: bool = False


EXTENSION_UI_RESPONSE: Method[ExtensionUiResponseArgs, None, Empty] = Method(
    "extension_ui_response",
    args=ExtensionUiResponseArgs,
    result=Empty,
    errors={"not_found": "no extension UI request with that id is waiting (answered, timed out, or never asked)"},
    doc="Answer an extension's ctx.ui dialog (an extension_ui_request session event).",
)


class ExtensionCommands(WireStruct):
    """The ``/name`` commands the session's extensions registered, in load order (none when
    the session has no extensions); ``extension`` is the path or spec that registered each."""

    commands: list[CommandSpec] = []
    #: The keys the extensions bound (``pi.register_shortcut``), for the interactive UI.
    shortcuts: list[ShortcutSpec] = []
    #: The custom message types an extension renders (``pi.register_message_renderer``).
    renderers: list[str] = []


EXTENSION_COMMANDS: Method[Empty, None, ExtensionCommands] = Method(
    "extension_commands",
    args=Empty,
    result=ExtensionCommands,
    doc="The commands the session's extensions registered (RPC get_commands lists them first, as pi does).",
)


class ExtensionShortcutArgs(WireStruct):
    """``key``: an extension's key binding (as it registered it), pressed by the user."""

    key: str


class ExtensionShortcutResult(WireStruct):
    """``error``: the shortcut's handler raised, or the host failed (one line)."""

    error: str | None = None


EXTENSION_SHORTCUT: Method[ExtensionShortcutArgs, None, ExtensionShortcutResult] = Method(
    "extension_shortcut",
    args=ExtensionShortcutArgs,
    result=ExtensionShortcutResult,
    errors={"not_found": "the session has no extensions, or none bound that key"},
    doc="Run an extension's key binding in the extension host (the interactive UI's key press).",
)


class ExtensionRenderArgs(WireStruct):
    """A custom message (role ``custom``) to show, ``expanded`` (Ctrl+O) at ``width`` columns."""

    message: dict[str, Any]
    expanded: bool = False
    width: int = 80


EXTENSION_RENDER: Method[ExtensionRenderArgs, None, Rendered] = Method(
    "extension_render",
    args=ExtensionRenderArgs,
    result=Rendered,
    doc="A custom message as its extension renders it (lines); null lines: use the default view.",
)


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
