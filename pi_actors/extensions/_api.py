"""The object an extension's ``register(pi)`` receives, and the context its handlers get.

:class:`ExtensionAPI` records what one extension registers (tools, commands, handlers,
flags, shortcuts, renderers, providers); it runs nothing itself. :class:`Context` is the
``ctx`` of a handler, tool or command: ``cwd``, ``has_ui`` and ``ui`` (:class:`UI`), whose
requests go through a :class:`Bridge` — in the extension host, calls to the coordinator.

Registration mistakes (a tool without ``execute``, an unknown event name, a name registered
twice) raise ``ValueError`` with one line; raised inside ``register``, they make the
extension fail to load, as any other exception there does.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from .events import EVENTS

__all__ = [
    "ExtensionAPI",
    "Context",
    "UI",
    "Bridge",
    "RegisteredTool",
    "RegisteredCommand",
    "RegisteredFlag",
    "RegisteredShortcut",
]

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.:-]*$")


class Bridge(Protocol):
    """What a :class:`Context` needs of its host: UI requests and session entries."""

    async def ui(self, request: dict[str, Any]) -> dict[str, Any]: ...

    async def append(self, entry: dict[str, Any]) -> None: ...


@dataclass
class RegisteredTool:
    name: str
    label: str
    description: str
    parameters: dict[str, Any]
    execute: Callable[..., Any]
    extension: str


@dataclass
class RegisteredCommand:
    name: str
    description: str
    handler: Callable[..., Any]
    extension: str


@dataclass
class RegisteredFlag:
    name: str
    description: str
    type: str
    default: Any
    extension: str


@dataclass
class RegisteredShortcut:
    key: str
    description: str
    handler: Callable[..., Any]
    extension: str


@dataclass
class _Registrations:
    tools: dict[str, RegisteredTool] = field(default_factory=dict)
    commands: dict[str, RegisteredCommand] = field(default_factory=dict)
    flags: dict[str, RegisteredFlag] = field(default_factory=dict)
    shortcuts: dict[str, RegisteredShortcut] = field(default_factory=dict)
    handlers: list[tuple[str, Callable[..., Any], str]] = field(default_factory=list)
    renderers: dict[str, Callable[..., Any]] = field(default_factory=dict)
    providers: dict[str, dict[str, Any]] = field(default_factory=dict)


class ExtensionAPI:
    """``pi`` as an extension's ``register(pi)`` sees it (pi's ExtensionAPI, Python naming).

    One object per extension (``path`` names it in errors); the registrations of all
    extensions land in the shared ``registry`` (a later duplicate name is refused). ``bridge``
    carries ``send_message`` / ``append_entry`` to the session; ``flag_values`` are the values
    given on the command line."""

    def __init__(self, path: str, registry: _Registrations, bridge: Bridge | None = None,
                 flag_values: dict[str, Any] | None = None) -> None:  # fmt: skip
        self.path = path
        self._registry = registry
        self._bridge = bridge
        self._flag_values = flag_values or {}

    # -- what the model and the user can call ----------------------------------------------

    def register_tool(self, name: str, label: str | None = None, description: str = "",
                      parameters: dict[str, Any] | None = None, execute: Callable[..., Any] | None = None,
                      **_ignored: Any) -> None:  # fmt: skip
        """A tool the model can call. ``execute(tool_call_id, params, signal, on_update, ctx)``
        (sync or async) returns ``{"content": [...], "details"?}`` (or a string); raising
        makes an error result with the exception's text."""
        _check_name("tool", name)
        if not callable(execute):
            raise ValueError(f"register_tool({name!r}): execute must be a function")
        if parameters is not None and not isinstance(parameters, dict):
            raise ValueError(f"register_tool({name!r}): parameters must be a JSON schema object")
        if name in self._registry.tools:
            raise ValueError(f"tool {name!r} is already registered by {self._registry.tools[name].extension}")
        self._registry.tools[name] = RegisteredTool(
            name, label or name, description, parameters or {"type": "object", "properties": {}}, execute, self.path
        )

    def register_command(self, name: str, description: str = "", handler: Callable[..., Any] | None = None,
                         **_ignored: Any) -> None:  # fmt: skip
        """``/name args`` in every mode: ``handler(args, ctx)`` (sync or async)."""
        name = name.removeprefix("/")
        _check_name("command", name)
        if not callable(handler):
            raise ValueError(f"register_command({name!r}): handler must be a function")
        if name in self._registry.commands:
            raise ValueError(f"command {name!r} is already registered by {self._registry.commands[name].extension}")
        self._registry.commands[name] = RegisteredCommand(name, description, handler, self.path)

    def on(self, event: str, handler: Callable[..., Any]) -> None:
        """Handle ``event`` (see ``pi_actors.extensions.events``): ``handler(event, ctx)``,
        sync or async; ``event`` is the payload dict."""
        if event not in EVENTS:
            raise ValueError(f"pi.on: unknown event {event!r} (events: {', '.join(EVENTS)})")
        if not callable(handler):
            raise ValueError(f"pi.on({event!r}): handler must be a function")
        self._registry.handlers.append((event, handler, self.path))

    def register_flag(self, name: str, description: str = "", type: str = "boolean", default: Any = None) -> None:
        """A command-line flag ``--name`` (``type``: ``boolean`` or ``string``); read it with
        :meth:`get_flag`."""
        _check_name("flag", name)
        if type not in ("boolean", "string"):
            raise ValueError(f"register_flag({name!r}): type must be 'boolean' or 'string'")
        self._registry.flags[name] = RegisteredFlag(name, description, type, default, self.path)

    def get_flag(self, name: str) -> Any:
        """The flag's value from the command line, else its default."""
        flag = self._registry.flags.get(name)
        return self._flag_values.get(name, flag.default if flag is not None else None)

    def register_shortcut(self, key: str, handler: Callable[..., Any] | None = None, description: str = "") -> None:
        """A key binding of the interactive UI (e.g. ``ctrl+shift+p``): ``handler(ctx)``."""
        if not isinstance(key, str) or not key:
            raise ValueError("register_shortcut: key must be a non-empty string")
        if not callable(handler):
            raise ValueError(f"register_shortcut({key!r}): handler must be a function")
        self._registry.shortcuts[key] = RegisteredShortcut(key, description, handler, self.path)

    def register_message_renderer(self, custom_type: str, renderer: Callable[..., Any]) -> None:
        """How the UI shows this extension's custom messages of ``custom_type``."""
        if not callable(renderer):
            raise ValueError(f"register_message_renderer({custom_type!r}): renderer must be a function")
        self._registry.renderers[custom_type] = renderer

    def register_provider(self, name: str, config: dict[str, Any]) -> None:
        """A model provider (pi's shape: ``baseUrl``, ``api``, ``apiKey``, ``models``)."""
        _check_name("provider", name)
        if not isinstance(config, dict):
            raise ValueError(f"register_provider({name!r}): config must be a dict")
        self._registry.providers[name] = config

    # -- writing to the session --------------------------------------------------------------

    async def send_message(self, message: dict[str, Any]) -> None:
        """A custom message (``customType``, ``content``, ``display``, ``details``): written
        to the session, and in the model's context from then on."""
        if not isinstance(message, dict) or not isinstance(message.get("customType"), str):
            raise ValueError("send_message: the message needs a string customType")
        await self._need_bridge().append({
            "kind": "message", "customType": message["customType"], "content": message.get("content"),
            "display": bool(message.get("display", True)), "details": message.get("details"),
        })  # fmt: skip

    async def append_entry(self, custom_type: str, data: Any = None) -> None:
        """A custom entry (state for the extension; not sent to the model)."""
        if not isinstance(custom_type, str) or not custom_type:
            raise ValueError("append_entry: custom_type must be a non-empty string")
        await self._need_bridge().append({"kind": "entry", "customType": custom_type, "data": data})

    def _need_bridge(self) -> Bridge:
        if self._bridge is None:
            raise RuntimeError("this extension API is not connected to a session")
        return self._bridge


def _check_name(what: str, name: Any) -> None:
    if not isinstance(name, str) or not _NAME.match(name):
        raise ValueError(f"invalid {what} name {name!r}")


class UI:
    """``ctx.ui``: requests to whatever UI is attached (the TUI, an RPC client, a remote
    client). Without one (``-p``, json mode) ``confirm`` is False, ``select``/``input`` None,
    ``notify`` and ``set_status`` do nothing visible."""

    def __init__(self, bridge: Bridge | None, has_ui: bool) -> None:
        self._bridge = bridge
        self._has_ui = has_ui

    async def _ask(self, request: dict[str, Any]) -> dict[str, Any]:
        if self._bridge is None:
            return {"cancelled": True}
        return await self._bridge.ui({k: v for k, v in request.items() if v is not None})

    async def notify(self, message: str, type: str = "info") -> None:
        await self._ask({"method": "notify", "message": str(message), "notifyType": type})

    async def set_status(self, key: str, text: str | None) -> None:
        """A line in the status area under ``key`` (None clears it)."""
        await self._ask({"method": "setStatus", "statusKey": key, "statusText": text})

    async def confirm(self, title: str, message: str = "", timeout: float | None = None) -> bool:
        if not self._has_ui:
            return False
        answer = await self._ask({"method": "confirm", "title": title, "message": message, "timeout": timeout})
        return bool(answer.get("confirmed")) and not answer.get("cancelled")

    async def select(self, title: str, options: list[str], timeout: float | None = None) -> str | None:
        if not self._has_ui:
            return None
        answer = await self._ask({"method": "select", "title": title, "options": list(options), "timeout": timeout})
        return None if answer.get("cancelled") else answer.get("value")

    async def input(self, title: str, placeholder: str | None = None, timeout: float | None = None) -> str | None:
        if not self._has_ui:
            return None
        answer = await self._ask({"method": "input", "title": title, "placeholder": placeholder, "timeout": timeout})
        return None if answer.get("cancelled") else answer.get("value")


class Context:
    """``ctx`` of a handler, tool or command: ``cwd``, ``has_ui``, ``ui``."""

    def __init__(self, cwd: str, bridge: Bridge | None, has_ui: bool) -> None:
        self.cwd = cwd
        self.has_ui = has_ui
        self.ui = UI(bridge, has_ui)
