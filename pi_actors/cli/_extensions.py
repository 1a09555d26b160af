"""What the CLI must know of a session's extensions before the session starts.

Extensions run in their own actor (the extension host), started with the session. Two of
their registrations are needed earlier, while the command line is still being read:

* their flags (``pi.register_flag``): ``--name [value]`` on the command line goes to the
  extension, and an option neither pi-actors nor an extension knows is still refused with
  the one-line "did you mean" (``_usage.CliParser``);
* their model providers (``pi.register_provider``): ``--model provider/id``,
  ``--list-models``, ``/model`` and RPC ``get_available_models`` list their models.

So the CLI *looks* at the extensions first: :func:`look_at_extensions` runs each
extension's ``register(pi)`` once in this process with an API connected to nothing (no
session, no UI), keeping only what was registered. An extension that fails here is left
for the host to report (it loads them again and reports failures as ``extension_error``).
``register(pi)`` therefore runs twice per session — keep it free of side effects, as pi's
docs ask (docs/extensions.md, "Flags and providers").
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ExtensionLook",
    "FlagError",
    "discover_session_extensions",
    "look_at_extensions",
    "take_extension_flags",
    "provider_models",
    "hook_timeout",
    "HOOK_TIMEOUT_VARIABLE",
]


class FlagError(Exception):
    """An extension flag given wrongly (a string flag without its value); one line."""


@dataclass
class ExtensionLook:
    """The session's extensions: ``specs`` to load (in order), ``sys_path`` for the host
    (installed packages' environments), and what their ``register(pi)`` declared:
    ``flags`` (name -> ``RegisteredFlag``) and ``providers`` (name -> pi's config dict)."""

    specs: list[str] = field(default_factory=list)
    sys_path: list[str] = field(default_factory=list)
    flags: dict[str, Any] = field(default_factory=dict)
    providers: dict[str, dict[str, Any]] = field(default_factory=dict)


def look_at_extensions(explicit: Iterable[str], no_extensions: bool, cwd: str, agent_dir: str) -> ExtensionLook:
    """Find the session's extensions (``-e`` paths, the extension directories and installed
    packages' entry points unless ``no_extensions``) and run their ``register(pi)`` here to
    learn their flags and providers. Never raises for an extension's failure."""
    from ..extensions import Extensions

    specs, sys_path = discover_session_extensions(explicit, no_extensions, cwd, agent_dir)
    look = ExtensionLook(specs=specs, sys_path=sys_path)
    if not specs:
        return look
    for entry in reversed(sys_path):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    extensions = Extensions(cwd)  # connected to nothing: no session, no UI
    try:
        # What an extension prints while loading must not reach stdout (json, RPC output).
        with contextlib.redirect_stdout(sys.stderr):
            extensions.load(specs)
    except (Exception, SystemExit):  # noqa: BLE001 - the host loads them again and reports it
        return look
    look.flags = dict(extensions.registry.flags)
    look.providers = {name: dict(config) for name, config in extensions.registry.providers.items()}
    return look


def discover_session_extensions(explicit: Iterable[str], no_extensions: bool, cwd: str, agent_dir: str) -> tuple[list[str], list[str]]:
    """The extension specs of a session in ``cwd`` (``explicit`` ``-e`` paths, then unless
    ``no_extensions`` the extension directories and installed packages' entry points) and
    the ``sys.path`` entries their packages need."""
    from ..extensions import discover_extension_specs
    from .packages import extension_specs, installed_packages

    # A package that is missing or broken is reported once, by session_resources.
    packages, _already_reported = installed_packages(agent_dir, cwd)
    extra, sys_path = extension_specs(packages, agent_dir, cwd)
    return discover_extension_specs(cwd, explicit, no_extensions=no_extensions, extra=extra), sys_path


#: The environment variable that sets the extension hook timeout (seconds; default 30).
HOOK_TIMEOUT_VARIABLE = "PI_ACTORS_EXTENSION_HOOK_TIMEOUT"


def hook_timeout(environ: dict[str, str] | None = None) -> float:
    """Seconds one extension event may take (``PI_ACTORS_EXTENSION_HOOK_TIMEOUT``, default
    30). Raises FlagError (one line) for a value that is not a positive number."""
    import math
    import os

    raw = (os.environ if environ is None else environ).get(HOOK_TIMEOUT_VARIABLE)
    if raw is None or raw == "":
        return 30.0
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not (value > 0 and math.isfinite(value)):
        raise FlagError(f"{HOOK_TIMEOUT_VARIABLE} must be a positive number of seconds, not {raw!r}")
    return value


def take_extension_flags(argv: Sequence[str], known: Iterable[str], flags: dict[str, Any]) -> tuple[list[str], dict[str, Any]]:
    """Split ``argv`` into what pi-actors parses and the extension flags' values.

    ``--name`` of a registered boolean flag is ``True`` (``--name=false`` is ``False``);
    ``--name VALUE`` or ``--name=VALUE`` of a string flag is ``VALUE``. An option in
    ``known`` (pi-actors' own) is never taken; nothing after ``--`` is looked at. Raises
    FlagError for a string flag without a value."""
    own = set(known)
    rest: list[str] = []
    values: dict[str, Any] = {}
    i = 0
    while i < len(argv):
        token = argv[i]
        i += 1
        if token == "--":
            rest.extend(argv[i - 1 :])
            break
        name, eq, value = token[2:].partition("=")
        if not token.startswith("--") or token.split("=", 1)[0] in own or name not in flags:
            rest.append(token)
            continue
        if flags[name].type == "boolean":
            values[name] = value.lower() not in ("false", "0", "no", "off") if eq else True
        elif eq:
            values[name] = value
        elif i < len(argv) and not argv[i].startswith("-"):
            values[name] = argv[i]
            i += 1
        else:
            raise FlagError(f"extension flag --{name} needs a value (registered by {flags[name].extension})")
    return rest, values


def provider_models(providers: dict[str, dict[str, Any]]) -> tuple[list[Any], dict[str, str], list[str]]:
    """The models of extension providers (pi's ``registerProvider`` config form), their raw
    ``apiKey`` values by provider, and one line per provider that is refused."""
    from ..ai.registry import models_of_provider_config

    models: list[Any] = []
    keys: dict[str, str] = {}
    errors: list[str] = []
    for name, config in providers.items():
        try:
            found, key = models_of_provider_config(name, config)
        except ValueError as exc:
            errors.append(f"extension provider {name}: {exc}")
            continue
        models += found
        if key:
            keys[name] = key
    return models, keys, errors
