"""The TUI against a remote session: ``pi-actors attach URL`` on a terminal.

The screen, keys and slash commands are the local TUI's (``TuiApp`` + ``Controller``); what
changes is where calls go and where the transcript comes from:

* Calls go to the current attachment through :class:`Attachment`, which stands in for the
  coordinator Peer. While disconnected, a call fails at once with ``connection_lost``
  ("not connected ... reconnecting"); a call in flight when the connection drops fails with
  ConnectionLost's "outcome unknown" error, shown in red, and is never re-sent.
* The screen is fed by the session's subscription (``follow_session``), not by the prompt
  call's own events, so runs started by any client of the session appear, in order, once.
  The first snapshot opens the UI with the transcript (and a reply being streamed, if one
  is); after a reconnect the follower re-attaches (a new attachment id) and the UI reprints
  the transcript from the new snapshot (:meth:`TuiApp.resync`).
"""

from __future__ import annotations

import os
from typing import Any

import trio

from ...runtime import ConnectionLost, remote_error_of

__all__ = ["Attachment", "run_remote_tui"]


class Attachment:
    """The coordinator, as the controller sees it, behind a server: ``call``/``open_call``
    on whichever attachment is current (``bind`` is called by the follower)."""

    def __init__(self) -> None:
        self.session: Any = None

    def bind(self, session: Any) -> None:
        self.session = session

    def _current(self) -> Any:
        if self.session is None:
            raise ConnectionLost("not connected to the server (reconnecting)")
        return self.session

    async def call(self, method: str, args: dict | None = None) -> Any:
        return await self._current().call(method, args)

    def open_call(self, method: str, args: dict | None = None) -> Any:
        return self._current().open_call(method, args)


class _View:
    """``follow_session``'s view: builds the UI at the first snapshot, then posts to it."""

    def __init__(self, attachment: Attachment, address: str) -> None:
        from .._config import agent_dir

        self.attachment = attachment
        self.address = address
        self.agent_dir = agent_dir()
        self.ui: Any = None
        self.controller: Any = None
        self.ready = trio.Event()
        self.session_id: str | None = None

    def attached(self, session_id: str, attachment_id: str) -> None:
        self.session_id = session_id
        if self.ui is not None:
            self.ui.post(self.ui.show_status, f"Attached to session {session_id} (attachment {attachment_id})")

    def snapshot(self, snap: dict) -> None:
        if self.ui is None:
            self._open(snap)
        else:
            self.ui.post(self.ui.resync, snap)
        self.ui.post(self.ui.set_extension_status, snap.get("extensionStatus") or {})
        self.controller.running = bool(snap.get("isStreaming"))

    def _open(self, snap: dict) -> None:
        from .app import TuiApp
        from .controller import Controller

        session = snap.get("session") or {}
        cwd = os.getcwd()  # @-completion and attachments read local files
        info = {
            "cwd": cwd,
            "agentDir": self.agent_dir,
            "model": snap.get("model") or {},
            "thinkingLevel": snap.get("thinkingLevel") or "off",
            "sessionPath": session.get("path"),
            "sessionDir": None,
            "sessionName": session.get("name"),
            "messages": snap.get("messages") or [],
            "remote": f"{self.address} · session {self.session_id}",
        }
        self.controller = Controller(self.attachment, cwd, render_prompt_events=False)
        self.ui = TuiApp(self.controller, info)
        if snap.get("isStreaming"):
            self.ui.running = True
            self.ui.stream = snap.get("streamMessage")
        self.ready.set()

    def event(self, event: dict) -> None:
        kind = event.get("type")
        if kind == "agent_start":
            self.controller.running = True
            self.ui.post(self.ui.run_started)
        self.ui.post(self.ui.on_event, event)
        if kind == "agent_end":  # whoever's run it was: the next Enter starts a new one
            self.controller.running = False
            self.ui.post(self.ui.run_finished)

    def status(self, text: str) -> None:
        if self.ui is not None:
            self.ui.post(self.ui.show_error, text)


async def run_remote_tui(
    address: str, *, token: str | None, session_id: str | None, create: dict, initial: list[str], tls_ca: str | None = None
) -> int:
    """Attach to a session on a server and run the TUI on it until the user quits.

    Raises RemoteError (ConnectionLost included) when the first connection fails, the token
    is refused or the session is unknown: the caller reports it. Later disconnects are
    retried with backoff while the UI stays up."""
    from ...server.remote_ui import follow_session
    from . import run_app

    attachment = Attachment()
    view = _View(attachment, address)

    async def follow() -> None:
        await follow_session(
            address, token=token, session_id=session_id, create=create, view=view, bind=attachment.bind, retry_first=False,
            tls_ca=tls_ca,
        )

    # One nursery: the follower runs before and during the UI; if it fails, the UI is
    # closed (run_app gives the terminal back on cancellation) and the error propagates.
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(follow)
            await view.ready.wait()
            await run_app(view.controller, view.ui, initial)
            nursery.cancel_scope.cancel()
    except BaseExceptionGroup as group:
        refusal = remote_error_of(group)
        if refusal is not None:
            raise refusal from None  # the refusal itself, for the caller to report
        raise
    return 0
