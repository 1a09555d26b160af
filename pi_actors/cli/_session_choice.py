"""The session a command line chooses: the model (flags, scope, a resumed session's own,
settings), thinking level, tools, session file (and whether it can be saved), extensions and
sandbox, as the :func:`_session_config` that the runtime starts from. Warnings go to stderr;
user mistakes raise ConfigError or UsageError (one line).
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any

from ._runtime_config import _create_hidden_paths, runtime_config
from ._usage import UsageError

if TYPE_CHECKING:
    from ..protocol.config import RuntimeConfig, Settings

__all__ = ["_session_config", "_implied_model", "_unrestorable", "_with_extension_providers"]


def _session_config(args: argparse.Namespace) -> RuntimeConfig | None:
    """The runtime configuration for the session the options choose (model, thinking level,
    tools, system prompt, session file, sandbox), with warnings about the model registry and
    the settings printed on stderr; None when the user chose no session to resume."""
    from ..coding.session import default_session_dir
    from ..coding.system_prompt import build_system_prompt
    from ._config import ConfigError, agent_dir, choose_model, load_model_registry
    from ._sessions import NoSessionSelected, choose_session
    from ._settings import load_settings, parse_settings

    reg = load_model_registry()
    for err in reg.errors:
        print(f"Warning: {err}", file=sys.stderr)
    _with_extension_providers(reg, args.extension_look)
    settings, warnings = load_settings(agent_dir(), os.getcwd())
    for warning in warnings:
        print(warning, file=sys.stderr)
    if args.api_key and not args.model and not args.provider:
        raise ConfigError("--api-key requires a model to be specified via --model or --provider")
    cwd = os.getcwd()
    if args.session_dir is None and settings.get("sessionDir"):  # pi's sessionDir; the flag wins
        args.session_dir = os.path.join(cwd, os.path.expanduser(settings["sessionDir"]))
    adir = agent_dir()
    default_dir = os.path.join(adir, "sessions")
    try:
        session = choose_session(
            agent_dir=adir,
            cwd=cwd,
            session_dir=args.session_dir,
            no_session=args.no_session,
            continue_=args.continue_,
            resume=args.resume,
            session=args.session,
            fork=args.fork,
        )
    except NoSessionSelected:
        return None
    except OSError as exc:  # the session folder could not be made
        raise ConfigError(_unwritable(exc.filename or args.session_dir or default_dir, exc)) from None
    run_dir = _run_directory(session.cwd, cwd, session.config.resume, args)
    if run_dir is None:
        return None
    if run_dir != cwd:
        # A session opened by name runs where it was saved (pi 0.73): that directory's
        # project settings, resources, extensions and tools; the sandbox's workspace is that
        # directory.
        start, cwd = cwd, run_dir
        settings, more = load_settings(adir, cwd)
        for warning in more:
            if warning not in warnings:
                print(warning, file=sys.stderr)
        reg = _look_again_at_extensions(args, start, cwd, adir, reg)
    if not args.no_session:
        _check_session_writable(session.config.resume, args.session_dir or default_session_dir(adir, cwd))
    typed = parse_settings(settings)
    scoped = _model_scope(args, settings, reg)
    model_arg = args.model
    if model_arg is None and args.provider is None and scoped and session.model is None:
        # pi: a new session starts on the saved default when it is in scope, else on the
        # first scoped model (with its :level).
        model_arg = _first_in_scope(scoped, _implied_model(typed, None, reg.available()))
    elif model_arg is None and args.provider is None:
        # A resumed session's model is restored only while its provider has credentials;
        # otherwise pi's warning, and the registry's choice.
        model_arg = _implied_model(typed, session.model, reg.available())
        lost = _unrestorable(session.model, model_arg, reg)
        if lost:
            print(f"Warning: Could not restore model {lost} (no auth configured).", file=sys.stderr)
    choice = choose_model(reg, provider=args.provider, model=model_arg, api_key=args.api_key)
    thinking = _thinking_level(args.thinking, choice, session.thinking, typed)
    tools = _tool_names(args)
    log_file = os.path.abspath(args.log_file) if args.log_file else None
    _create_hidden_paths(log_file, args.session_dir)
    from ._resources import session_resources

    resources = session_resources(args, cwd=cwd, agent_dir=adir, settings=settings)
    config = runtime_config(
        model=choice.model,
        thinking=thinking,
        tools=tools,
        cwd=cwd,
        system_prompt=build_system_prompt(
            cwd=cwd, tools=tools, custom=args.system_prompt, append=args.append_system_prompt, agent_dir=adir,
            skills=resources.skills,
        ),
        agent_dir=adir,
        session=session.config,
        settings=settings,
        # Only the models with credentials may be switched to (pi's getAvailable), and the chosen one.
        models=reg.available({choice.model.provider: args.api_key} if args.api_key else None, keep=(choice.model,)),
        log_file=log_file,
        runtime_keys={choice.model.provider: args.api_key} if args.api_key else {},
        key_sources=reg.key_sources,
        sandbox=args.sandbox,
        allow_network=args.allow_network,
        resources=resources,
        scoped_models=scoped,
    )
    return _with_extensions(config, args, cwd, adir)


def _look_again_at_extensions(args: argparse.Namespace, start: str, cwd: str, adir: str, reg: Any) -> Any:
    """The session runs in ``cwd``, not in ``start`` where the command line was read: its
    extensions are those of ``cwd`` (its project's extension directory and packages; the
    ``-e`` paths still relative to ``start``, as pi resolves them), which replace
    ``args.extension_look``. Returns the model registry with their providers (``reg`` itself
    when they register the same ones). The flags were taken from the command line with the
    extensions of ``start``: a flag only an extension of ``cwd`` registers was refused there."""
    from ._config import load_model_registry
    from ._extensions import look_at_extensions

    explicit = [p if p.startswith("module:") else os.path.join(start, os.path.expanduser(p)) for p in args.extension]
    before = args.extension_look
    args.extension_look = look = look_at_extensions(explicit, args.no_extensions, cwd, adir)
    if look.providers == before.providers:
        return reg
    fresh = load_model_registry()
    _with_extension_providers(fresh, look)
    return fresh


def _run_directory(saved: str | None, here: str, session_file: str | None, args: argparse.Namespace) -> str | None:
    """Where the chosen session runs: ``saved`` (the directory a session opened by name was
    saved in) when there is one and it exists, else ``here``. A saved directory that is gone is
    pi's error outside the interactive mode (ConfigError: stored directory, session file,
    current directory); in it, the question whether to go on here (None: the user said no)."""
    from ._config import ConfigError

    if saved is None or os.path.realpath(saved) == os.path.realpath(here):
        return here
    if os.path.isdir(saved):
        return saved
    interactive = not args.print_mode and args.mode == "text"
    if interactive and sys.stdin.isatty():
        print(f"The session's working directory does not exist: {saved}", file=sys.stderr)
        answer = input(f"Continue in the current directory {here}? [y/N] ").strip().lower()
        return here if answer in ("y", "yes") else None
    raise ConfigError(
        f"Stored session working directory does not exist: {saved}\nSession file: {session_file}\n"
        f"Current working directory: {here}"
    )


def _tool_names(args: argparse.Namespace) -> list[str]:
    from ..coding.tools import DEFAULT_TOOLS, TOOL_SPECS

    if args.no_tools and not args.tools:
        return []
    if args.tools:
        names = [t.strip() for t in args.tools.split(",") if t.strip()]
        unknown = [t for t in names if t not in TOOL_SPECS]
        for t in unknown:
            print(f"Warning: unknown tool {t!r} ignored (available: {', '.join(TOOL_SPECS)})", file=sys.stderr)
        return [t for t in names if t in TOOL_SPECS]
    return [t for t in DEFAULT_TOOLS if t in TOOL_SPECS]


def _with_extension_providers(reg: Any, look: Any) -> None:
    """Add the models of the providers the extensions registered (pi's ``registerProvider``
    config form) to ``reg``, with their ``apiKey`` sources; a refused one is a warning."""
    from ._extensions import provider_models

    if not look.providers:
        return
    models, keys, errors = provider_models(look.providers)
    for error in errors:
        print(f"Warning: {error}", file=sys.stderr)
    ours = {(m.provider, m.id) for m in models}
    reg.models = [m for m in reg.models if (m.provider, m.id) not in ours] + models
    for provider, key in keys.items():
        reg.key_sources.setdefault(provider, key)


def _model_scope(args: argparse.Namespace, settings: dict[str, Any], reg: Any) -> list[Any]:
    """The scoped models (``cli.model_scope``): ``--models``, else settings ``enabledModels``,
    among the models with credentials; pi's warnings for patterns matching nothing go to
    stderr. Raises ConfigError when ``enabledModels`` is not a list of strings."""
    from ._config import ConfigError
    from .model_scope import resolve_model_scope, split_patterns

    if args.models is not None:
        patterns = split_patterns(args.models)
    else:
        enabled = settings.get("enabledModels")
        if enabled is None:
            return []
        if not isinstance(enabled, list) or not all(isinstance(p, str) for p in enabled):
            raise ConfigError("settings enabledModels must be a list of model patterns (strings)")
        patterns = [p for p in enabled if p.strip()]
    keys = {args.provider: args.api_key} if args.api_key and args.provider else None
    scoped, warnings = resolve_model_scope(patterns, reg.available(keys))
    for warning in warnings:
        print(warning, file=sys.stderr)
    return scoped


def _first_in_scope(scoped: list[Any], default: str | None) -> str:
    """The ``--model`` argument a new scoped session starts with: ``default`` (the saved
    default model) when it is in scope, else the first scoped model with its ``:level``."""
    for s in scoped:
        if f"{s.provider}/{s.model_id}" == default:
            return default + (f":{s.thinking_level}" if s.thinking_level else "")
    first = scoped[0]
    return f"{first.provider}/{first.model_id}" + (f":{first.thinking_level}" if first.thinking_level else "")


def _with_extensions(config: RuntimeConfig, args: argparse.Namespace, cwd: str, adir: str) -> RuntimeConfig:
    """``config`` with the extension host's part, if there are extensions to load (``-e``,
    the extension directories and installed packages' extensions unless ``--no-extensions``;
    a package's environment goes on the host's ``sys.path``; ``args.extension_look``), with
    the values of their flags given on the command line. ``ctx.ui`` dialogs are answered
    in RPC mode and the TUI; in ``-p`` and json mode they get their default answer."""
    import msgspec

    from ..protocol.extension_host import ExtensionHostConfig
    from ._extensions import FlagError, hook_timeout

    look = args.extension_look
    if not look.specs:
        return config
    try:
        timeout = hook_timeout()
    except FlagError as exc:
        raise UsageError(str(exc)) from None
    has_ui = args.mode == "rpc" or (args.mode == "text" and not args.print_mode)
    host = ExtensionHostConfig(specs=look.specs, cwd=cwd, has_ui=has_ui, sys_path=look.sys_path, flags=args.extension_flags,
                               hook_timeout=timeout)  # fmt: skip
    return msgspec.structs.replace(config, extensions=host)


def _check_session_writable(resumed: str | None, directory: str) -> None:
    """Raise ConfigError (:func:`_unwritable`) unless the session can be saved: the resumed
    file can be appended to, or new files can be made in its folder or ``directory`` (created
    if missing, 0700).
    Checked before the run, so that no model request is made for an answer that cannot be
    saved; ``os.access`` also sees a read-only file system, even for root."""
    import errno

    from ..coding.session.format import make_private_dirs
    from ._config import ConfigError

    if resumed is not None and os.path.exists(resumed):
        if not os.access(resumed, os.W_OK):
            raise ConfigError(_unwritable(resumed, _refusal(resumed)))
        return
    if resumed is not None:  # --session naming a file still to be made
        directory = os.path.dirname(os.path.abspath(resumed))
    try:
        make_private_dirs(directory)
    except OSError as exc:
        raise ConfigError(_unwritable(exc.filename or directory, exc)) from None
    if not os.path.isdir(directory):
        raise ConfigError(_unwritable(directory, NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR))))
    if not os.access(directory, os.W_OK | os.X_OK):
        raise ConfigError(_unwritable(directory, _refusal(directory)))


def _refusal(path: str) -> OSError:
    """Why ``os.access`` refused to let us write at ``path``: a read-only file system, or
    the permissions."""
    import errno

    try:
        read_only = bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        read_only = False
    code = errno.EROFS if read_only else errno.EACCES
    return OSError(code, os.strerror(code))


def _unwritable(path: str, exc: OSError) -> str:
    """The one-line error for a session that cannot be saved at ``path``."""
    reason = exc.strerror or str(exc)
    return (
        f"Cannot save the session in {path}: {reason}. Run with --no-session, "
        "or --session-dir DIR to save sessions elsewhere"
    )


def _unrestorable(saved: dict[str, Any] | None, implied: str | None, reg: Any) -> str | None:
    """``provider/id`` of a resumed session's model that is known but was not restored
    (``implied`` is not it): its provider has no credentials. None otherwise."""
    if not saved:
        return None
    wanted = f"{saved.get('provider')}/{saved.get('modelId')}"
    if implied == wanted or not any(f"{m.provider}/{m.id}" == wanted for m in reg.models):
        return None
    return wanted


def _implied_model(settings: Settings, saved: dict[str, Any] | None, models: list[Any]) -> str | None:
    """The model to use when neither ``--model`` nor ``--provider`` is given: a resumed
    session's own model while it is still known, else the settings' ``defaultModel``
    (qualified by ``defaultProvider``), else None (the registry's choice)."""
    if saved:
        wanted = f"{saved.get('provider')}/{saved.get('modelId')}"
        if any(f"{m.provider}/{m.id}" == wanted for m in models):
            return wanted
        return None
    default, provider = settings.default_model, settings.default_provider
    if default is None:
        return None
    return f"{provider}/{default}" if provider is not None and "/" not in default else default


def _thinking_level(flag: str | None, choice: Any, saved: str | None, settings: Settings) -> str:
    """The thinking level: ``--thinking``, the model argument's ``:level`` suffix, the resumed
    session's level, the settings' ``defaultThinkingLevel``, else ``off``; always ``off`` for
    a model without reasoning, and clamped to the levels the model offers, as pi (its
    ``thinkingLevelMap``: DeepSeek V4's "low" becomes "high"; xhigh only where supported)."""
    from ..ai import clamp_thinking_level

    if not choice.model.reasoning:
        return "off"
    level: str = flag or choice.thinking or saved or settings.default_thinking_level or "off"
    return clamp_thinking_level(choice.model, level)
