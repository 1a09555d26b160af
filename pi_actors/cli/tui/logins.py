"""The TUI's ``/login`` and ``/logout`` (pi's): subscription logins stored in this machine's
auth.json.

``/login`` (or ``/login PROVIDER``) picks a provider, then runs its flow (``ai.oauth``) in a
daemon thread: the URL and instructions are printed (and the browser opened, unless
``PI_ACTORS_NO_BROWSER`` is set), and an input
line takes a pasted code or redirect URL for a browser on another machine; GitHub Copilot asks
for an Enterprise domain first and prints the device code. The outcome is one line:
``Logged in to NAME`` or ``Login failed: ...``. Esc on the paste line cancels waiting for it
only (the browser redirect can still finish the login). ``/logout`` removes stored credentials
with pi's texts. Attached to a server, both are refused: the server's auth.json serves its
sessions (run ``pi-actors login`` there).

Every UI change happens on the UI loop (``tui.post``); the login thread blocks only on its
own queues and the network.
"""

from __future__ import annotations

import os
import queue
import threading
from typing import TYPE_CHECKING

from .widgets import InputSelector, Selector

if TYPE_CHECKING:
    from .app import TuiApp

__all__ = ["LoginCommands"]

_REMOTE = "/{} changes this machine's auth.json; attached to a server, run pi-actors {} on the server"


class LoginCommands:
    """``/login`` and ``/logout``, a part of ``SlashCommands`` (module docstring)."""

    tui: TuiApp

    def cmd_login(self, rest: str) -> None:
        from ...ai.oauth import OAUTH_PROVIDERS

        if self.tui.remote:
            self.tui.show_error(_REMOTE.format("login", "login"))
            return
        if rest.strip():
            self.start(rest.strip())
            return
        items = [(flow.name, pid) for pid, flow in OAUTH_PROVIDERS.items()]
        self.tui.open_selector(Selector("Select provider to login:", items, self.start))

    def cmd_logout(self, rest: str) -> None:
        from ...ai.oauth import OAUTH_PROVIDERS, AuthFileError, AuthStore
        from .._config import ConfigError
        from ..login import logout_message

        if self.tui.remote:
            self.tui.show_error(_REMOTE.format("logout", "logout"))
            return
        if rest.strip():
            try:
                self.tui.show_status(logout_message(rest.strip(), self.tui.agent_dir).replace("logout only", "/logout only")
                                     .replace("saved by login", "saved by /login"))
            except ConfigError as exc:
                self.tui.show_error(str(exc))
            return
        try:
            stored = AuthStore(os.path.join(self.tui.agent_dir, "auth.json")).read()
        except AuthFileError as exc:
            self.tui.show_error(str(exc))
            return
        if not stored:
            self.tui.show_status("No stored credentials to remove. /logout only removes credentials saved by /login; "
                                 "environment variables and models.json config are unchanged.")
            return
        items = [(OAUTH_PROVIDERS[p].name if p in OAUTH_PROVIDERS else p, p) for p in stored]
        self.tui.open_selector(Selector("Select provider to logout:", items, self.cmd_logout))

    def start(self, provider: str) -> None:
        """Run ``provider``'s login in a thread (module docstring)."""
        from ...ai.oauth import LoginIO, OAuthError, get_oauth_provider

        try:
            get_oauth_provider(provider)
        except OAuthError as exc:
            self.tui.show_error(str(exc))
            return
        tui = self.tui
        pasted: queue.Queue[str] = queue.Queue()
        answers: queue.Queue[str] = queue.Queue()

        def show(url: str, instructions: str) -> None:
            def on_ui() -> None:
                tui.show_status(f"Open this URL to log in:\n{url}\n{instructions}")
                if "Enter code" not in instructions:
                    tui.open_selector(InputSelector(tui, "Paste the authorization code or full redirect URL "
                                                    "(or finish in the browser):", pasted.put, lambda: None,
                                                    hint="enter submit, esc keep waiting for the browser"))

            tui.post(on_ui)
            if not os.environ.get("PI_ACTORS_NO_BROWSER"):
                import webbrowser

                threading.Thread(target=webbrowser.open, args=(url,), daemon=True).start()

        def ask(question: str) -> str:
            tui.post(lambda: tui.open_selector(InputSelector(tui, question, answers.put, lambda: answers.put(""),
                                                              hint="enter submit (blank: default), esc default")))
            return answers.get()

        def finish(line: str, ok: bool) -> None:
            if isinstance(tui.selector, InputSelector) and tui.selector.title.startswith("Paste the authorization"):
                tui.close_selector()
            (tui.show_status if ok else tui.show_error)(line)

        def work() -> None:
            from .._config import ConfigError
            from ..login import run_login

            io = LoginIO(show=show, ask=ask, progress=lambda text: tui.post(tui.show_status, text), paste=pasted.get)
            try:
                line, ok = run_login(provider, io, tui.agent_dir), True
            except ConfigError as exc:
                line, ok = str(exc), False
            except Exception as exc:  # a bug in a flow: say it, do not kill the UI thread silently
                line, ok = f"Login failed: {type(exc).__name__}: {exc}", False
            tui.post(finish, line, ok)

        threading.Thread(target=work, name=f"pi-actors-login-{provider}", daemon=True).start()
