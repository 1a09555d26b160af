"""The coordinator's methods on the session tree and its settings (part of
:mod:`pi_actors.protocol.coordinator`, which re-exports every name here): moving in the tree
(``navigate``, ``label``, ``fork``, ``clone``), the model and thinking level, new and
switched sessions, the session's name, queue modes, the auto switches and the HTML export.

Wire shapes and refusals as described in :mod:`pi_actors.protocol.coordinator`.
"""

from __future__ import annotations

from typing import Any, Literal

from ..ai.types import Model
from ..runtime import Empty, Method, WireStruct

__all__ = [
    "NavigateArgs",
    "NavigateResult",
    "LabelArgs",
    "LabelResult",
    "ForkArgs",
    "ForkResult",
    "CloneResult",
    "SetModelArgs",
    "ThinkingLevelArgs",
    "ThinkingLevelResult",
    "NewSessionArgs",
    "NewSessionResult",
    "SwitchSessionArgs",
    "SwitchSessionResult",
    "SessionNameArgs",
    "SetQueueModeArgs",
    "SetAutoArgs",
    "ExportHtmlArgs",
    "ExportHtmlResult",
    "NAVIGATE",
    "LABEL",
    "FORK",
    "CLONE",
    "SET_MODEL",
    "SET_THINKING_LEVEL",
    "NEW_SESSION",
    "SWITCH_SESSION",
    "SET_SESSION_NAME",
    "EXPORT_HTML",
    "SET_QUEUE_MODE",
    "SET_AUTO",
]

#: Refused while a run is active (the UI should wait, steer, or abort first).
_BUSY = "a run is active: wait for it to end (or abort it) first"


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


# -- the methods -----------------------------------------------------------------------------

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
