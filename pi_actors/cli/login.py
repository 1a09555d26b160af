"""``pi-actors login [PROVIDER]`` and ``pi-actors logout PROVIDER``: subscription logins for
scripts and terminals (the TUI's ``/login`` and ``/logout`` do the same).

``login`` without a provider lists the logins there are. With one it runs the provider's flow
(``ai.oauth``): it prints the URL to open (and opens the browser when stdin is a terminal,
unless ``--no-browser``), takes a pasted code or redirect URL on stdin for a browser on another
machine, and for GitHub Copilot prints the device code to enter. On success the credentials go
to ``<agent dir>/auth.json`` (0600) and it prints ``Logged in to NAME``. ``logout`` removes
what ``login`` stored (pi's texts). A failed login or an unknown provider is a ConfigError:
one line, exit code 1.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from ._config import ConfigError
from ._paths import agent_dir

__all__ = ["main", "entry", "run_login", "logout_message"]


def _auth_path(directory: str | None = None) -> str:
    return os.path.join(directory or agent_dir(), "auth.json")


def run_login(provider: str, io: Any, directory: str | None = None) -> str:
    """Run ``provider``'s login with ``io`` (an ``ai.oauth.LoginIO``), store the credentials in
    ``directory``'s (default: the agent directory's) auth.json, and return ``Logged in to
    NAME``. Raises ConfigError (one line) when it fails."""
    from ..ai.oauth import AuthFileError, AuthStore, OAuthError, get_oauth_provider

    try:
        flow = get_oauth_provider(provider)
        credentials = flow.login(io)
        AuthStore(_auth_path(directory)).set(provider, {"type": "oauth", **credentials})
    except (OAuthError, AuthFileError) as exc:
        raise ConfigError(f"Login failed: {exc}") from None
    return f"Logged in to {flow.name}"


def logout_message(provider: str, directory: str | None = None) -> str:
    """Remove ``provider``'s stored credentials; pi's sentence for what happened. Raises
    ConfigError for a malformed auth.json."""
    from ..ai.oauth import OAUTH_PROVIDERS, AuthFileError, AuthStore

    store = AuthStore(_auth_path(directory))
    try:
        entry = store.get(provider)
        if entry is None or not store.remove(provider):
            return (f"No stored credentials for {provider}. logout only removes credentials saved by login; "
                    "environment variables and models.json config are unchanged.")
    except AuthFileError as exc:
        raise ConfigError(str(exc)) from None
    flow = OAUTH_PROVIDERS.get(provider)
    name = flow.name if flow else provider
    if entry["type"] == "oauth":
        return f"Logged out of {name}"
    return f"Removed stored API key for {name}. Environment variables and models.json config are unchanged."


def _listing() -> str:
    from ..ai.oauth import OAUTH_PROVIDERS, AuthFileError, AuthStore

    try:
        stored = AuthStore(_auth_path()).read()
    except AuthFileError as exc:
        raise ConfigError(str(exc)) from None
    lines = ["Subscription logins (pi-actors login PROVIDER):"]
    for pid, flow in OAUTH_PROVIDERS.items():
        mark = "  (logged in)" if stored.get(pid, {}).get("type") == "oauth" else ""
        lines.append(f"  {pid:<18} {flow.name}{mark}")
    return "\n".join(lines)


def _terminal_io(no_browser: bool, enterprise: str | None) -> Any:
    from ..ai.oauth import LoginIO

    interactive = sys.stdin.isatty()

    def show(url: str, instructions: str) -> None:
        print(f"Open this URL to log in:\n{url}\n{instructions}", flush=True)
        if interactive and not no_browser:
            import webbrowser

            webbrowser.open(url)
        if "Enter code" not in instructions:
            print("Or paste the authorization code or final redirect URL here:", flush=True)

    def ask(question: str) -> str:
        if enterprise is not None:
            return enterprise
        if not interactive:
            return ""
        return input(f"{question}: ")

    return LoginIO(show=show, ask=ask, progress=lambda text: print(text, flush=True), paste=sys.stdin.readline)


def main(argv: list[str], command: str = "login") -> int:
    """Run ``pi-actors login|logout argv`` (module docstring); returns the exit code."""
    from ._usage import CliParser

    if command == "logout":
        p = CliParser(prog="pi-actors logout", description="remove the credentials a login stored in auth.json")
        p.add_argument("provider", help="anthropic, openai-codex, github-copilot, google-gemini-cli, google-antigravity, or a provider with a stored key")
        args = p.parse_args(argv)
        print(logout_message(args.provider))
        return 0
    p = CliParser(prog="pi-actors login", description="log in with a subscription (Claude Pro/Max, ChatGPT Plus/Pro, "
                  "GitHub Copilot, Google Gemini CLI / Antigravity) and store the credentials in auth.json")
    p.add_argument("provider", nargs="?", help="anthropic, openai-codex, github-copilot, google-gemini-cli or google-antigravity "
                   "(none: list them)")
    p.add_argument("--no-browser", action="store_true", help="print the URL without opening a browser")
    p.add_argument("--enterprise", metavar="DOMAIN", help="GitHub Enterprise domain (github-copilot; default github.com)")
    args = p.parse_args(argv)
    if not args.provider:
        print(_listing())
        return 0
    print(run_login(args.provider, _terminal_io(args.no_browser, args.enterprise)))
    return 0


def entry(command: str) -> Any:
    """The ``main(argv)`` of ``login`` or ``logout`` (for the CLI's subcommand table)."""
    return lambda argv: main(argv, command)
