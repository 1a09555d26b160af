"""Running what extensions registered: events through their handlers, tools, commands.

:class:`Extensions` holds the registrations of one set of loaded extensions and runs them.
Nothing here raises for an extension's failure: a handler that raises is an error entry
(one line: extension, event, what), a tool that raises is an error result, a command that
raises is an error text. Cancellation (trio) goes through untouched: the caller's timeout or
abort stops the running handler or tool.

Events chain: each handler sees the payload as the handlers before it left it (a rewritten
``input``, the rewritten ``messages``), and the combined result is returned. A ``tool_call``
handler that blocks ends the chain.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from typing import Any

from ._api import Bridge, Context, _Registrations
from ._loader import _one_line, load_specs

__all__ = ["Extensions", "HandlerError"]


class HandlerError:
    """One failure: ``extension`` (its path), ``event`` (where), ``error`` (one line)."""

    def __init__(self, extension: str, event: str, error: str) -> None:
        self.extension, self.event, self.error = extension, event, error

    def as_wire(self) -> dict[str, str]:
        return {"extensionPath": self.extension, "event": self.event, "error": self.error}


async def _call(fn: Callable[..., Any], *args: Any) -> Any:
    value = fn(*args)
    if inspect.isawaitable(value):
        value = await value
    return value


class Extensions:
    """The loaded extensions of one host. ``bridge``: where ``ctx.ui`` and the session
    entries go. ``cwd``: ``ctx.cwd``."""

    def __init__(self, cwd: str, bridge: Bridge | None = None) -> None:
        self.cwd = cwd
        self.bridge = bridge
        self.registry = _Registrations()
        self.loaded: list[str] = []
        self.load_errors: list[HandlerError] = []

    def load(self, specs: Iterable[str], flag_values: dict[str, Any] | None = None) -> None:
        loaded, failed = load_specs(specs, self.registry, bridge=self.bridge, flag_values=flag_values)
        self.loaded += loaded
        self.load_errors += [HandlerError(path, "load", error) for path, error in failed]

    def context(self, has_ui: bool) -> Context:
        return Context(self.cwd, self.bridge, has_ui)

    def handles(self, event: str) -> bool:
        return any(name == event for name, _, _ in self.registry.handlers)

    async def emit(self, event: str, payload: dict[str, Any], *, has_ui: bool = False) -> tuple[dict[str, Any] | None, list[HandlerError]]:
        """Run ``event``'s handlers in load order; returns the combined result (None: nothing
        changed) and the failures."""
        current = dict(payload)
        result: dict[str, Any] = {}
        errors: list[HandlerError] = []
        ctx = self.context(has_ui)
        for name, handler, path in list(self.registry.handlers):
            if name != event:
                continue
            try:
                value = await _call(handler, current, ctx)
            except Exception as exc:  # noqa: BLE001 - an extension's failure, reported
                errors.append(HandlerError(path, event, _one_line(exc)))
                continue
            if value is None:
                continue
            if not isinstance(value, dict):
                errors.append(HandlerError(path, event, f"a handler must return a dict or None, not {type(value).__name__}"))
                continue
            if _merge(event, current, result, value):
                break
        return (result or None), errors

    async def run_tool(self, name: str, tool_call_id: str, params: dict[str, Any],
                       on_update: Callable[[dict[str, Any]], Any], *, has_ui: bool = False) -> dict[str, Any]:  # fmt: skip
        """Run one tool; returns ``{content, details, isError}``. Raises KeyError for an
        unknown tool."""
        tool = self.registry.tools[name]
        signal = _Signal()
        try:
            value = await _call(tool.execute, tool_call_id, params, signal, on_update, self.context(has_ui))
        except Exception as exc:  # noqa: BLE001 - the tool's failure is its error result
            return {"content": [{"type": "text", "text": _one_line(exc)}], "isError": True}
        return _tool_result(value)

    async def run_command(self, name: str, args: str, *, has_ui: bool = False) -> str | None:
        """Run ``/name args``; returns the error's line if the handler raised. Raises
        KeyError for an unknown command."""
        command = self.registry.commands[name]
        try:
            await _call(command.handler, args, self.context(has_ui))
        except Exception as exc:  # noqa: BLE001 - the command's failure, reported
            return _one_line(exc)
        return None

    async def run_shortcut(self, key: str, *, has_ui: bool = False) -> str | None:
        """Run the handler bound to ``key`` (``handler(ctx)``); returns the error's line if
        it raised. Raises KeyError for a key no extension bound."""
        shortcut = self.registry.shortcuts[key]
        try:
            await _call(shortcut.handler, self.context(has_ui))
        except Exception as exc:  # noqa: BLE001 - the handler's failure, reported
            return _one_line(exc)
        return None

    async def render_message(self, message: dict[str, Any], options: dict[str, Any]) -> tuple[list[str] | None, str | None]:
        """``message`` as its type's renderer shows it: ``renderer(message, options)``
        (``options``: ``expanded``, ``width``) returns a string, a list of lines or None.
        Returns (lines or None, the error's line if it raised or returned something else)."""
        renderer = self.registry.renderers.get(str(message.get("customType")))
        if renderer is None:
            return None, None
        try:
            value = await _call(renderer, message, options)
        except Exception as exc:  # noqa: BLE001 - the renderer's failure, reported
            return None, _one_line(exc)
        if value is None:
            return None, None
        if isinstance(value, str):
            return value.split("\n"), None
        if isinstance(value, (list, tuple)) and all(isinstance(line, str) for line in value):
            return list(value), None
        return None, f"a message renderer must return a string, a list of strings or None, not {type(value).__name__}"


class _Signal:
    """The ``signal`` a tool gets: ``aborted`` stays False while it runs (an abort cancels
    the tool's task, as trio does; ``aborted`` is there for code written for pi's shape)."""

    aborted = False


def _tool_result(value: Any) -> dict[str, Any]:
    if value is None:
        return {"content": []}
    if isinstance(value, str):
        return {"content": [{"type": "text", "text": value}]}
    if isinstance(value, dict):
        content = value.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        out: dict[str, Any] = {"content": content if isinstance(content, list) else []}
        if value.get("details") is not None:
            out["details"] = value["details"]
        if value.get("isError") or value.get("is_error"):
            out["isError"] = True
        return out
    return {"content": [{"type": "text", "text": str(value)}]}


def _merge(event: str, current: dict[str, Any], result: dict[str, Any], value: dict[str, Any]) -> bool:
    """Fold one handler's ``value`` into the payload the next one sees (``current``) and the
    combined ``result``; True ends the chain. Events without results ignore ``value``."""
    fold = _FOLDS.get(event)
    return fold(current, result, value) if fold is not None else False


def _fold_input(current: dict[str, Any], result: dict[str, Any], value: dict[str, Any]) -> bool:
    action = value.get("action")
    if action == "handled":
        result.clear()
        result["action"] = "handled"
        return True
    if action == "transform" and isinstance(value.get("text"), str):
        current["text"] = value["text"]
        result.update(action="transform", text=value["text"])
    return False


def _fold_tool_call(current: dict[str, Any], result: dict[str, Any], value: dict[str, Any]) -> bool:
    if value.get("block"):
        result.clear()
        result.update(block=True, reason=value.get("reason"))
        return True
    if isinstance(value.get("input"), dict):
        current["input"] = result["input"] = value["input"]
    return False


def _fold_context(current: dict[str, Any], result: dict[str, Any], value: dict[str, Any]) -> bool:
    if isinstance(value.get("messages"), list):
        current["messages"] = result["messages"] = value["messages"]
    return False


def _fold_before_agent_start(current: dict[str, Any], result: dict[str, Any], value: dict[str, Any]) -> bool:
    if isinstance(value.get("systemPrompt"), str):
        current["systemPrompt"] = result["systemPrompt"] = value["systemPrompt"]
    if isinstance(value.get("message"), dict):
        result.setdefault("messages", []).append(value["message"])
    return False


def _fold_tool_result(current: dict[str, Any], result: dict[str, Any], value: dict[str, Any]) -> bool:
    for key in ("content", "details", "isError"):
        if key in value:
            current[key] = result[key] = value[key]
    return False


def _fold_before_compact(current: dict[str, Any], result: dict[str, Any], value: dict[str, Any]) -> bool:
    if value.get("cancel"):
        result.clear()
        result["cancel"] = True
        return True
    if isinstance(value.get("compaction"), dict):
        result["compaction"] = value["compaction"]
    return False


_FOLDS: dict[str, Callable[[dict[str, Any], dict[str, Any], dict[str, Any]], bool]] = {
    "input": _fold_input,
    "tool_call": _fold_tool_call,
    "context": _fold_context,
    "before_agent_start": _fold_before_agent_start,
    "tool_result": _fold_tool_result,
    "session_before_compact": _fold_before_compact,
}
