"""The subcommand table of ``pi-actors`` (``pi-actors <command> ...``) and the look-up of a
subcommand's entry point. Only the standard library is imported (``--help`` lists the table).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

__all__ = ["SUBCOMMANDS", "_subcommand"]

#: The subcommands, in the order ``--help`` lists them: name -> (module under ``pi_actors.cli``,
#: one-line summary). ``pi-actors NAME ARGS...`` runs ``module.main(ARGS)`` (an exit code), or
#: for ``module:command`` ``module.entry(command)(ARGS)``; a subcommand added here is
#: dispatched and listed in ``--help`` with nothing else to change.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "demo": ("demo", "a real multi-process session against a bundled scripted model (no API key)"),
    "serve": ("serve", "host sessions for remote clients over WebSocket or a unix socket"),
    "attach": ("attach", "attach to a session on a pi-actors server (TUI, line mode or -p)"),
    "tool-host": ("tool_host", "run the tool calls of a server's session on this machine"),
    "batch": ("batch", "run many headless sessions from a JSONL task file; results appended as they finish"),
    "install": ("packages:install", "install a package (PyPI requirement, git URL or path) of extensions, skills, prompts, themes"),
    "remove": ("packages:remove", "remove an installed package (also: uninstall)"),
    "uninstall": ("packages:uninstall", "the same as remove"),
    "update": ("packages:update", "update installed packages"),
    "list": ("packages:list", "list installed packages"),
    "login": ("login:login", "log in with a subscription (Claude Pro/Max, ChatGPT Plus/Pro, GitHub Copilot)"),
    "logout": ("login:logout", "remove the credentials a login stored"),
}


def _subcommand(argv: Sequence[str]) -> Callable[[list[str]], int] | None:
    """The entry point of the subcommand ``argv`` names (:data:`SUBCOMMANDS`), or None when
    ``argv`` is a session's command line."""
    from importlib import import_module

    if not argv or argv[0] not in SUBCOMMANDS:
        return None
    module_name, _, command = SUBCOMMANDS[argv[0]][0].partition(":")
    module = import_module(f".{module_name}", __package__)
    entry: Callable[[list[str]], int] = module.entry(command) if command else module.main
    return entry
