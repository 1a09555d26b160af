"""The coordinator's methods for the session's extensions (part of
:mod:`pi_actors.protocol.coordinator`, which re-exports every name here): answers to their UI
dialogs, the commands and key bindings they registered, and custom messages they render.
"""

from __future__ import annotations

from typing import Any

from ..runtime import Empty, Method, WireStruct
from .extension_host import CommandSpec, Rendered, ShortcutSpec

__all__ = [
    "ExtensionUiResponseArgs",
    "EXTENSION_UI_RESPONSE",
    "ExtensionCommands",
    "EXTENSION_COMMANDS",
    "ExtensionShortcutArgs",
    "ExtensionShortcutResult",
    "EXTENSION_SHORTCUT",
    "ExtensionRenderArgs",
    "EXTENSION_RENDER",
]


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
