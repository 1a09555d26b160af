"""The extension host's contract (``EXTENSION_HOST``) and the coordinator's answers to it
(``EXTENSION_CLIENT``).

User extensions (Python files or packages with a ``register(pi)`` function, see
docs/extensions.md) run in the extension-host actor (:mod:`pi_actors.actors.extension_host`),
never in the coordinator: an extension that raises, hangs or kills its process is contained
there, and the supervisor restarts the host.

Who calls what:

- the coordinator calls ``EXTENSION_HOST`` on its host: ``describe`` (what the extensions
  registered, and which failed to load), ``emit`` (one event through every handler of it, in
  load order; the coordinator bounds each with its hook timeout), ``run_tool`` (an extension
  tool's call, streaming its updates) and ``run_command`` (a ``/name args`` command);
- while serving one of those, the host calls ``EXTENSION_CLIENT`` on the same link, the other
  way: ``ui`` (``ctx.ui``: notify, confirm, select, input — forwarded by the coordinator to
  whatever UI is attached) and ``append`` (``pi.send_message`` / ``pi.append_entry``: custom
  entries written to the session).

Extension failures are *results*, never failed calls: a handler that raises is an entry of
``errors`` (one line naming the extension and the event), an extension tool that raises is
an error result. A failed call means the host itself is in trouble (it died, or the call was
cut off by the timeout).
"""

from __future__ import annotations

from typing import Any, Literal

from ..ai.types import ToolResultContent
from ..runtime import Empty, Interface, Method, WireStruct

__all__ = [
    "ExtensionHostConfig",
    "ToolSpec",
    "CommandSpec",
    "FlagSpec",
    "ShortcutSpec",
    "ExtensionError",
    "Registry",
    "EmitArgs",
    "EmitResult",
    "ExtToolArgs",
    "ExtToolUpdate",
    "ExtToolResult",
    "CommandArgs",
    "CommandResult",
    "UiArgs",
    "UiAnswer",
    "AppendArgs",
    "ShortcutArgs",
    "RenderArgs",
    "Rendered",
    "DESCRIBE",
    "EMIT",
    "RUN_TOOL",
    "RUN_COMMAND",
    "UI",
    "APPEND",
    "RUN_SHORTCUT",
    "RENDER_MESSAGE",
    "EXTENSION_HOST",
    "EXTENSION_CLIENT",
]


class ExtensionHostConfig(WireStruct):
    """What the host is started with. ``specs``: what to load, in order — a path (a ``.py``
    file, a package directory, or a directory of those) or ``module:<dotted.name>[:<attr>]``
    (an importable module, e.g. from a package's ``pi_actors.extensions`` entry point).
    ``sysPath``: entries put first on the host's ``sys.path``. ``cwd``: the session's working
    directory (``ctx.cwd``). ``flags``: values of extension flags given on the command line.
    ``hookTimeout``: seconds the coordinator gives one ``emit`` (time spent waiting for the
    user's answer to a ``ctx.ui`` request is not counted). ``hasUi``: a UI that answers
    ``ctx.ui`` dialogs is attached (the TUI, RPC, a remote client; not ``-p``/json)."""

    specs: list[str] = []
    sys_path: list[str] = []
    cwd: str = ""
    flags: dict[str, Any] = {}
    hook_timeout: float = 30.0
    has_ui: bool = False


class ToolSpec(WireStruct):
    """A tool an extension registered (``pi.register_tool``)."""

    name: str
    label: str
    description: str
    parameters: dict[str, Any]
    extension: str


class CommandSpec(WireStruct):
    """A ``/name`` command an extension registered."""

    name: str
    description: str = ""
    extension: str = ""


class FlagSpec(WireStruct):
    """A command-line flag an extension registered (``--name``)."""

    name: str
    description: str = ""
    type: Literal["boolean", "string"] = "boolean"
    default: Any = None
    extension: str = ""


class ShortcutSpec(WireStruct):
    """A key an extension bound (``pi.register_shortcut``)."""

    key: str
    description: str = ""
    extension: str = ""


class ExtensionError(WireStruct):
    """One extension failure, in one line: ``extensionPath`` which one, ``event`` where
    (``load``, an event name, ``tool:<name>``, ``command:<name>``), ``error`` what."""

    extension_path: str
    event: str
    error: str


class Registry(WireStruct):
    """Everything the loaded extensions registered, and the ones that failed to load (they
    are skipped; the others are loaded)."""

    extensions: list[str] = []
    tools: list[ToolSpec] = []
    commands: list[CommandSpec] = []
    flags: list[FlagSpec] = []
    shortcuts: list[ShortcutSpec] = []
    events: list[str] = []
    renderers: list[str] = []
    providers: list[str] = []
    errors: list[ExtensionError] = []


class EmitArgs(WireStruct):
    """One event (``event``: its name, see ``pi_actors.extensions.EVENTS``) and its payload
    (pi's field names). ``hasUi``: whether a UI can answer ``ctx.ui`` requests."""

    event: str
    payload: dict[str, Any] = {}
    has_ui: bool = False


class EmitResult(WireStruct):
    """The combined answer of the event's handlers (``None``: none changed anything), and the
    handlers that raised."""

    result: dict[str, Any] | None = None
    errors: list[ExtensionError] = []


class ExtToolArgs(WireStruct):
    """One call of an extension tool."""

    tool_call_id: str
    name: str
    args: dict[str, Any] = {}
    has_ui: bool = False


class ExtToolUpdate(WireStruct):
    """A partial result (the tool's ``on_update``)."""

    content: list[ToolResultContent] = []
    details: Any = None


class ExtToolResult(WireStruct):
    """The tool's result; a tool that raised is ``isError`` with the exception's one line."""

    content: list[ToolResultContent] = []
    details: Any = None
    is_error: bool = False


class CommandArgs(WireStruct):
    """``/name args``."""

    name: str
    args: str = ""
    has_ui: bool = False


class CommandResult(WireStruct):
    """``error``: the command's handler raised (one line)."""

    error: str | None = None


class UiArgs(WireStruct):
    """A ``ctx.ui`` request, in pi's ``extension_ui_request`` field names. ``method``:
    ``notify`` (no answer awaited), ``confirm``, ``select``, ``input``, ``setStatus``."""

    method: str
    title: str | None = None
    message: str | None = None
    options: list[str] | None = None
    placeholder: str | None = None
    notify_type: str | None = None
    status_key: str | None = None
    status_text: str | None = None
    timeout: float | None = None


class UiAnswer(WireStruct):
    """The user's answer, in pi's ``extension_ui_response`` field names: ``confirmed``
    (confirm), ``value`` (select, input), ``cancelled`` (dismissed, or no UI attached)."""

    value: str | None = None
    confirmed: bool | None = None
    cancelled: bool = False


class AppendArgs(WireStruct):
    """``kind``: ``message`` (``pi.send_message``: a ``custom_message`` entry, in the context
    from then on) or ``entry`` (``pi.append_entry``: a ``custom`` entry, data only)."""

    kind: Literal["message", "entry"]
    custom_type: str
    content: Any = None
    display: bool = True
    details: Any = None
    data: Any = None


class ShortcutArgs(WireStruct):
    """A key an extension bound (``key`` as registered) was pressed in the interactive UI."""

    key: str
    has_ui: bool = False


class RenderArgs(WireStruct):
    """Show a custom message through its type's renderer (``pi.register_message_renderer``):
    ``message`` (role ``custom``: ``customType``, ``content``, ``display``, ``details``),
    ``expanded`` (tool output expanded, Ctrl+O) and ``width`` (the terminal's columns)."""

    message: dict[str, Any]
    expanded: bool = False
    width: int = 80


class Rendered(WireStruct):
    """A renderer's lines (may hold ANSI colour escapes); ``lines`` null: no renderer for the
    type, or it returned None (the UI's default rendering is used); ``error``: it raised."""

    lines: list[str] | None = None
    error: str | None = None


DESCRIBE: Method[Empty, None, Registry] = Method(
    "describe", args=Empty, result=Registry, doc="What the loaded extensions registered, and the load errors."
)
EMIT: Method[EmitArgs, None, EmitResult] = Method(
    "emit",
    args=EmitArgs,
    result=EmitResult,
    doc="Run every handler of the event in load order, each seeing the changes of the one "
    "before; a cancel (the coordinator's timeout) stops the running handler.",
)
RUN_TOOL: Method[ExtToolArgs, ExtToolUpdate, ExtToolResult] = Method(
    "run_tool",
    args=ExtToolArgs,
    result=ExtToolResult,
    chunk=ExtToolUpdate,
    errors={"not_found": "no extension registered a tool of that name"},
    doc="Run an extension tool; its updates are chunks; a cancel aborts it (its signal).",
)
RUN_COMMAND: Method[CommandArgs, None, CommandResult] = Method(
    "run_command",
    args=CommandArgs,
    result=CommandResult,
    errors={"not_found": "no extension registered a command of that name"},
    doc="Run an extension's /command.",
)
UI: Method[UiArgs, None, UiAnswer] = Method(
    "ui",
    args=UiArgs,
    result=UiAnswer,
    doc="A ctx.ui request, answered by the attached UI (cancelled when none can answer).",
)
APPEND: Method[AppendArgs, None, Empty] = Method(
    "append", args=AppendArgs, result=Empty, doc="Write a custom entry to the session (answered once on disk)."
)

RUN_SHORTCUT: Method[ShortcutArgs, None, CommandResult] = Method(
    "run_shortcut",
    args=ShortcutArgs,
    result=CommandResult,
    errors={"not_found": "no extension bound that key"},
    doc="Run the handler of an extension's key binding (pressed in the interactive UI).",
)
RENDER_MESSAGE: Method[RenderArgs, None, Rendered] = Method(
    "render_message",
    args=RenderArgs,
    result=Rendered,
    doc="Render a custom message with its type's registered renderer (lines of text).",
)

EXTENSION_HOST = Interface(
    "extension_host",
    [DESCRIBE, EMIT, RUN_TOOL, RUN_COMMAND, RUN_SHORTCUT, RENDER_MESSAGE],
    doc="The extension host: user extensions' tools, commands and event handlers.",
)
EXTENSION_CLIENT = Interface(
    "extension_client",
    [UI, APPEND],
    doc="What the coordinator serves its extension host: UI requests and custom entries.",
)
