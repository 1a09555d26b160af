"""The interactive TUI (prompt_toolkit + rich); see ``app`` for the threads and the screen model.

``run_tui(config, initial)`` is a trio function: it starts the local runtime, reads the
session's state, runs the prompt_toolkit application in its own thread (own asyncio loop)
and serves the application's commands on the trio side until the user quits.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import trio

from ...actors import open_local_runtime
from ...ai import types as T
from ...protocol.config import RuntimeConfig
from ...runtime import ConnectionLost, RemoteError
from .._sessions import print_session_warnings

__all__ = ["run_tui", "run_app"]


async def run_app(controller: Any, ui: Any, initial: list[str]) -> None:
    """Run ``ui`` (a TuiApp) in its own thread and serve its commands with ``controller``
    until the user quits. Whatever ends the trio side (the user, an error, a cancellation),
    the terminal is given back before this returns."""
    token = trio.lowlevel.current_trio_token()
    done = trio.Event()
    errors: list[BaseException] = []

    def thread_main() -> None:
        try:
            ui.run()
        except BaseException as exc:  # noqa: BLE001 - reported by the trio side
            errors.append(exc)
        finally:
            try:
                token.run_sync_soon(done.set)
            except trio.RunFinishedError:
                pass

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(controller.serve, initial)
            threading.Thread(target=thread_main, name="pi-actors-tui", daemon=True).start()
            await done.wait()
            nursery.cancel_scope.cancel()
    finally:
        if not done.is_set():
            ui.post(ui.exit_app)
            with trio.CancelScope(shield=True), trio.move_on_after(3):
                await done.wait()
    if errors:
        raise errors[0]


async def _extension_registry(coordinator: Any, messages: list[dict[str, Any]]) -> dict[str, Any] | None:
    """What the session's extensions registered (keys, renderers), and the restored custom
    messages of a rendered type rendered now (``renderedLines``), so that the transcript is
    printed in order when the TUI opens. None when it cannot be read (the TUI asks again)."""
    import shutil

    try:
        registry = await coordinator.call("extension_commands") or {}
        rendered = set(registry.get("renderers") or [])
        width = shutil.get_terminal_size().columns
        for m in messages[-40:]:  # (the TUI prints the last 40)
            if m.get("role") == "custom" and m.get("display") and m.get("customType") in rendered:
                answer = await coordinator.call("extension_render", {"message": m, "width": width}) or {}
                if answer.get("lines") is not None:
                    m["renderedLines"] = answer["lines"]
    except RemoteError:
        return None
    return registry


async def run_tui(config: RuntimeConfig, initial: list[str], prestarted: Any = None) -> int:
    from .._config import agent_dir
    from .app import TuiApp
    from .controller import Controller

    coord_cfg = config.coordinator
    async with open_local_runtime(
        config, store_with_coordinator=True, restart_coordinator=True, announce=False, spares=True,
        prestarted=prestarted,
    ) as coordinator:
        try:
            session = await coordinator.call("session") or {}
        except RemoteError as exc:  # the session could not be opened (e.g. it is locked)
            from .._config import ConfigError

            raise ConfigError(exc.message) from None
        print_session_warnings(session)  # above the TUI, before it starts
        try:
            messages = (await coordinator.call("get_messages")).get("messages") or []
            state = await coordinator.call("get_state") or {}
        except RemoteError:
            messages, state = [], {}
        registry = await _extension_registry(coordinator, messages)
        session_cfg = coord_cfg.session
        path = session.get("path")
        info = {
            "cwd": coord_cfg.cwd,
            "agentDir": session_cfg.agent_dir or agent_dir(),
            "model": state.get("model") or T.to_plain(coord_cfg.model),
            "thinkingLevel": state.get("thinkingLevel") or coord_cfg.thinking_level,
            "sessionPath": path,
            "sessionDir": session_cfg.session_dir or (os.path.dirname(path) if path else None),
            "sessionName": session.get("name"),
            "messages": messages,
            "autoCompaction": coord_cfg.settings.compaction.enabled is not False,
            "extensions": registry,
            "scopedModels": coord_cfg.scoped_models,
            "hideThinkingBlock": bool(coord_cfg.settings.hide_thinking_block),
        }
        controller = Controller(coordinator, coord_cfg.cwd)
        ui = TuiApp(controller, info)
        async with trio.open_nursery() as nursery:

            async def watch_failure() -> None:
                # A coordinator that dies is restarted (the prompt in flight shows the error,
                # the next one works); only a session that failed for good ends the TUI.
                await coordinator.closed_event.wait()
                if coordinator.failure is not None:
                    nursery.cancel_scope.cancel()

            nursery.start_soon(watch_failure)
            await run_app(controller, ui, initial)
            await _tell_unsent(coordinator, ui)
            nursery.cancel_scope.cancel()
    if coordinator.failure is not None:
        import sys

        print(f"Error: {coordinator.failure}", file=sys.stderr)
        return 1
    return 0


async def _tell_unsent(coordinator: Any, ui: Any) -> None:
    """After the user quit (Ctrl+C twice, Ctrl+D, /quit): take the steering and follow-up
    messages still queued out of the session, so that none is sent while it closes, and
    print each below the TUI as it was typed. Nothing typed is lost silently (pi 0.73.1
    drops them, leaving them only in its editor history). The coordinator's answer says
    what is unsent; when it cannot answer (it failed, or took 5 s), the queue the TUI
    showed does."""
    import sys

    unsent = [(kind, text) for kind, _sent, text in ui.queued]
    try:
        with trio.move_on_after(5):
            queued = await coordinator.call("clear_queue", {}) or {}
            shown = list(ui.queued)
            unsent = []
            for kind, sent in [*(("Steering", t) for t in queued.get("steering") or []),
                               *(("Follow-up", t) for t in queued.get("followUp") or [])]:  # fmt: skip
                typed = next((q for q in shown if q[1] == sent), None)
                if typed is not None:
                    shown.remove(typed)  # the text before @file expansion
                unsent.append((kind, typed[2] if typed else sent))
    except (RemoteError, ConnectionLost):
        pass
    if unsent:
        n = len(unsent)
        print(f"Not sent (queued when you quit) — {n} message{'s' if n > 1 else ''}:", file=sys.stderr)
        for kind, text in unsent:
            print(f"  {kind}: " + text.replace("\n", "\n    "), file=sys.stderr)
