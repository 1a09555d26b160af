"""The trio side of the TUI: owns the coordinator Peer and turns UI commands into calls.

The UI thread sends commands as tuples (``("prompt", text)``, ``("steer", text)``,
``("call", method, args, on_result)`` ...) through ``Controller.submit`` (thread-safe; it
hands them to trio with the run's TrioToken); results and AgentEvents go back through
``ui.post(fn, *args)`` (thread-safe; runs ``fn`` on the UI's asyncio loop).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import trio

from ...protocol.events import AgentEventRebuilder
from ...runtime import RemoteError

__all__ = ["Controller"]

_UI_REQUEST = "extension_ui_request"


def _from_subscription(event: dict) -> bool:
    """Whether the local TUI shows ``event`` from its subscription rather than from the
    prompt's stream: what an extension sends may come while no prompt runs (a key binding's
    handler), so it always comes from the subscription, and never twice."""
    kind = event.get("type")
    return kind == _UI_REQUEST or (kind == "message_end" and (event.get("message") or {}).get("role") == "custom")


class Controller:
    def __init__(self, coordinator: Any, cwd: str, *, render_prompt_events: bool = True) -> None:
        """``coordinator``: a Peer to the coordinator, or anything with its ``call`` and
        ``open_call`` (the remote TUI's attachment). ``render_prompt_events=False`` when the
        UI is fed from a subscription instead (remote: every client's runs are shown from
        it, so a prompt's own event stream would show them twice). With
        ``render_prompt_events`` (local), extensions' ``ctx.ui`` requests are read from a
        subscription of their own (:meth:`_follow_extension_ui`) and skipped in the prompt's
        stream: a key binding's handler asks while no prompt runs."""
        self.coordinator = coordinator
        self.render_prompt_events = render_prompt_events
        self.cwd = cwd
        self.token = trio.lowlevel.current_trio_token()
        self._send, self._recv = trio.open_memory_channel[tuple](math.inf)
        self.ui: Any = None
        self._running = False
        self._idle = trio.Event()  # set while no run is going on (see ``running``)
        self._idle.set()
        self._bash_scope: trio.CancelScope | None = None

    @property
    def running(self) -> bool:
        """Whether a run is going on in the session (ours, or another client's when remote)."""
        return self._running

    @running.setter
    def running(self, value: bool) -> None:
        self._running = value
        if value and self._idle.is_set():
            self._idle = trio.Event()
        elif not value:
            self._idle.set()

    # -- thread-safe entry from the UI thread ----------------------------------------------

    def submit(self, *cmd: Any) -> None:
        try:
            self.token.run_sync_soon(self._send.send_nowait, cmd)
        except trio.RunFinishedError:
            pass

    # -- the trio loop -----------------------------------------------------------------------

    async def serve(self, initial: list[str]) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            if initial:
                nursery.start_soon(self._initial, initial)
            if self.render_prompt_events:
                nursery.start_soon(self._follow_extension_ui)
            async for cmd in self._recv:
                kind = cmd[0]
                if kind == "prompt":
                    if self.running:
                        await self._call("steer", await self._with_images(cmd[1]))
                    else:
                        self.running = True
                        nursery.start_soon(self._prompt, cmd[1])
                elif kind in ("steer", "follow_up"):
                    if self.running:
                        await self._call(kind, await self._with_images(cmd[1]))
                    else:
                        self.running = True
                        nursery.start_soon(self._prompt, cmd[1])
                elif kind == "dequeue":
                    nursery.start_soon(self._dequeue, cmd[1])
                elif kind == "abort":
                    if self._bash_scope is not None:
                        self._bash_scope.cancel()
                    nursery.start_soon(self._call, "abort", {})
                elif kind == "call":
                    _, method, args, on_result, *on_error = cmd
                    nursery.start_soon(self._call_then, method, args, on_result, on_error[0] if on_error else None)
                elif kind == "bash":
                    nursery.start_soon(self._bash, cmd[1], cmd[2])

    async def _initial(self, texts: list[str]) -> None:
        for text in texts:
            while self.running:
                await self._idle.wait()
            self.running = True
            self.ui.post(self.ui.show_user_submission, text)
            await self._prompt(text)

    async def _with_images(self, text: str) -> dict:
        """A prompt's call arguments: its text, and the images it carries (an ``@file`` image
        of the command line) or names (``@path`` words naming image files, read from cwd in a
        thread). An image that cannot be attached is shown as an error; the text is sent."""
        from .._initial import AttachError, images_in_prompt, prompt_images

        found = prompt_images(text)
        if not found and "@" in text:
            try:
                images = await trio.to_thread.run_sync(images_in_prompt, text, self.cwd)
            except AttachError as exc:
                self.ui.post(self.ui.show_error, str(exc))
                images = []
            found = {"images": images} if images else {}
        return {"text": str(text), **found}

    async def _call(self, method: str, args: dict) -> Any:
        try:
            return await self.coordinator.call(method, args)
        except RemoteError as exc:
            self.ui.post(self.ui.show_error, f"{method}: {exc.message}")
            return None

    async def _dequeue(self, abort: bool) -> None:
        """Empty the coordinator's queues and hand their texts to the UI's editor; then, if
        ``abort``, abort the run (after the queues are empty, so that the run, which may
        still take a queued message at its next step, finds none)."""
        queued = await self._call("clear_queue", {})
        self.ui.post(self.ui.restore_queued, queued, abort)
        if abort:
            await self._call("abort", {})

    async def _call_then(self, method: str, args: dict, on_result: Callable[[Any], None] | None, on_error: Callable[[Any], None] | None = None) -> None:
        try:
            result = await self.coordinator.call(method, args)
        except RemoteError as exc:
            self.ui.post(self.ui.show_error, exc.message if exc.code != "not_found" else f"/{method}: not available ({exc.message})")
            if on_error is not None:
                self.ui.post(on_error, exc)
            return
        if on_result is not None:
            self.ui.post(on_result, result)

    async def _prompt(self, text: str) -> None:
        rebuild = AgentEventRebuilder()
        self.ui.post(self.ui.run_started)
        try:
            async with self.coordinator.open_call("prompt", await self._with_images(text)) as call:
                async for event in call:
                    if self.render_prompt_events and not _from_subscription(event):
                        self.ui.post(self.ui.on_event, rebuild.apply(event))
                await call.result()
        except RemoteError as exc:
            self.ui.post(self.ui.show_error, f"Error: {exc.message}")
        finally:
            self.running = False
            self.ui.post(self.ui.run_finished)

    async def _follow_extension_ui(self) -> None:
        """The local TUI's view of what extensions show, ask and send (``extension_ui_request``
        events, and custom messages' ``message_end``): a subscription filtered to them, whose
        snapshot brings the status lines set before the TUI started (``session_start``). Runs until the session ends;
        after a coordinator restart it subscribes to the new one."""
        closed = getattr(self.coordinator, "closed_event", None)
        while closed is None or not closed.is_set():
            restarted = getattr(self.coordinator, "restarted", None)
            try:
                async with self.coordinator.open_call("subscribe", {"types": [_UI_REQUEST, "message_end"]}) as call:
                    async for chunk in call:
                        if "snapshot" in chunk:
                            status = (chunk["snapshot"] or {}).get("extensionStatus") or {}
                            self.ui.post(self.ui.set_extension_status, status)
                        elif isinstance(chunk.get("event"), dict) and _from_subscription(chunk["event"]):
                            self.ui.post(self.ui.on_event, chunk["event"])
                    await call.result()
            except RemoteError as exc:
                if exc.code == "overflow":
                    continue  # fell behind: a new snapshot, and on
            if restarted is None:
                return
            await restarted.wait()  # (set already when the coordinator restarted meanwhile)

    async def _bash(self, command: str, exclude: bool) -> None:
        """``!cmd`` / ``!!cmd``: the coordinator's ``bash`` runs it through the tool pool (in
        the sandbox, in cwd) and records a bashExecution message (excluded from the context
        for ``!!``); Esc cancels it."""
        self.ui.post(self.ui.bash_started, command)
        result: dict = {}
        with trio.CancelScope() as scope:
            self._bash_scope = scope
            try:
                result = await self.coordinator.call("bash", {"command": command, "excludeFromContext": exclude})
            except RemoteError as exc:
                result = {"output": exc.message, "exitCode": None, "error": True}
        self._bash_scope = None
        if scope.cancelled_caught:
            result = {"output": "", "cancelled": True}
        self.ui.post(self.ui.bash_finished, command, result, exclude)
