"""``pi-actors``: the command line.

Usage::

    pi-actors [options] [@files...] [messages...]   interactive (the TUI, or a plain line mode)
    pi-actors -p "prompt"                   print the final assistant text
    pi-actors --mode json "prompt"          every AgentEvent as one JSON line (pi's shapes)
    pi-actors <command> ...                 a subcommand of :data:`SUBCOMMANDS` (demo, serve,
                                            attach, tool-host, ...)

User mistakes (unknown model, no key, bad flag) give one line on stderr and exit code 1;
a traceback is shown only with ``--verbose``. Heavy imports (trio, the actors, the SDKs) are
deferred so ``--version`` and ``--help`` stay fast.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from ..protocol.config import RuntimeConfig, SessionConfig, Settings

__all__ = ["main", "build_parser"]

VERSION = "0.1.0"

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

#: The API key variables ``--help`` names, with the model each one selects by default.
_KEY_VARIABLES = (
    ("ANTHROPIC_API_KEY", "Anthropic key; default model anthropic/{anthropic}"),
    ("ANTHROPIC_OAUTH_TOKEN", "Anthropic OAuth token (used before ANTHROPIC_API_KEY)"),
    ("OPENAI_API_KEY", "OpenAI key; default model openai/{openai} (when no Anthropic key)"),
)


def build_parser() -> argparse.ArgumentParser:
    """The parser of a session's command line (not the subcommands'): one-line errors with a
    "did you mean" (``_usage.CliParser``); ``--help`` ends with the subcommands, the
    configuration directory, where sessions go and the key variables (``_usage.help_epilog``)."""
    from ..choices import SANDBOX_MODES, THINKING_LEVELS
    from ._config import DEFAULT_MODEL_IDS
    from ._paths import agent_dir
    from ._usage import CliParser, help_epilog

    keys = [(name, what.format(**DEFAULT_MODEL_IDS)) for name, what in _KEY_VARIABLES]
    p = CliParser(
        prog="pi-actors",
        usage="pi-actors [options] [@files...] [messages...]\n       pi-actors <command> [options]",
        description="A multi-process coding agent on trio, in the lineage of pi.",
        epilog=help_epilog(((name, summary) for name, (_m, summary) in SUBCOMMANDS.items()), agent_dir(), keys),
    )
    p.add_argument(
        "messages",
        nargs="*",
        help="prompt messages, each its own turn; @FILE attaches a text file to the first "
        "(after piped stdin, as pi)",
    )
    p.add_argument("-p", "--print", dest="print_mode", action="store_true", help="non-interactive: run the prompt(s), print the answer, exit")
    p.add_argument("--mode", choices=["text", "json", "rpc"], default="text", help="output mode (json: one event per line; rpc: pi's JSON-lines RPC on stdin/stdout)")
    p.add_argument("--provider", help="provider of --model (anthropic, openai, or one from models.json)")
    p.add_argument("--model", help="model id, provider/id, optionally with :thinking suffix")
    p.add_argument(
        "--models",
        help="comma-separated model patterns Ctrl+P cycles among (globs like 'anthropic/*', '*sonnet*', "
        "or substrings; optional :thinking suffix); default: settings enabledModels",
    )
    p.add_argument("--api-key", help="API key for the chosen provider (not saved)")
    p.add_argument("--thinking", choices=THINKING_LEVELS, help="thinking level")
    p.add_argument("--system-prompt", help="replace the system prompt (text or file)")
    p.add_argument("--append-system-prompt", help="append to the system prompt (text or file)")
    p.add_argument("--tools", help="comma-separated active tools (default: read,bash,edit,write)")
    p.add_argument("--no-tools", action="store_true", help="no built-in tools")
    p.add_argument(
        "--sandbox",
        choices=SANDBOX_MODES,
        help="where tools may write: workspace-write (default on Linux: the working directory and a private /tmp), "
        "read-only, or off (no sandbox)",
    )
    p.add_argument("--allow-network", action="store_true", help="let sandboxed tools use the network")
    p.add_argument("--no-session", action="store_true", help="do not save the session")
    p.add_argument("-c", "--continue", dest="continue_", action="store_true", help="continue the most recent session here")
    p.add_argument("-r", "--resume", action="store_true", help="choose a session of this directory to resume")
    p.add_argument("--session", metavar="PATH|ID", help="open a session file, or a session by id prefix")
    p.add_argument("--fork", metavar="PATH|ID", help="copy a session (all branches) into a new one here and continue it")
    p.add_argument("--session-dir", help="directory for session files")
    p.add_argument("--export", nargs="+", metavar="FILE", help="export SESSION.jsonl [OUTPUT.html] to HTML and exit")
    p.add_argument("--list-models", nargs="?", const="", metavar="SEARCH", help="list models and exit")
    p.add_argument("--skill", action="append", default=[], metavar="PATH", help="load a skill (a SKILL.md, a .md file or a directory of skills); repeatable")
    p.add_argument("--no-skills", action="store_true", help="do not discover skills (--skill paths still load)")
    p.add_argument("--prompt-template", action="append", default=[], metavar="PATH", help="load a prompt template (.md file or directory); repeatable")
    p.add_argument("--no-prompt-templates", action="store_true", help="do not discover prompt templates (--prompt-template paths still load)")
    p.add_argument("--theme", metavar="NAME|PATH", help="TUI colour theme: dark, light, a theme's name or a theme JSON file")
    p.add_argument("--verbose", action="store_true", help="show tracebacks for errors")
    p.add_argument("--log-file", metavar="PATH", help="append structured logs (JSON lines) from every process here")
    p.add_argument("-e", "--extension", action="append", default=[], metavar="PATH",
                   help="load an extension (a .py file or a package directory); repeatable")  # fmt: skip
    p.add_argument("--no-extensions", action="store_true",
                   help="do not load extensions from ~/.pi-actors/extensions and .pi-actors/extensions (-e still loads)")  # fmt: skip
    p.add_argument("-v", "--version", action="version", version=f"pi-actors {VERSION}")
    return p


class UsageError(Exception):
    pass


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


def _create_hidden_paths(log_file: str | None, session_dir: str | None) -> None:
    """Create the log file and the session directory now, if missing: the sandbox hides
    only paths that exist when it starts, and the actors would create them later. Best
    effort: a path that cannot be made is reported by whoever writes it."""
    try:
        if session_dir:
            os.makedirs(session_dir, exist_ok=True)
    except OSError:
        pass
    try:
        if log_file:
            os.close(os.open(log_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))
    except OSError:
        pass


def runtime_config(
    *,
    model: Any,
    thinking: str,
    tools: list[str],
    cwd: str,
    system_prompt: str,
    no_session: bool = False,
    session_dir: str | None = None,
    agent_dir: str,
    session: SessionConfig | dict[str, Any] | None = None,
    settings: Settings | dict[str, Any] | None = None,
    models: list[Any] | None = None,
    log_file: str | None = None,
    runtime_keys: dict[str, str],
    key_sources: dict[str, str],
    sandbox: str | None = None,
    allow_network: bool = False,
    resources: Any = None,
    scoped_models: list[Any] | None = None,
) -> RuntimeConfig:
    """The configuration handed to the actor processes (``pi_actors.protocol.config``).

    ``session``: the session choice (a ``SessionConfig`` or its camelCase document; default: a
    new session in ``session_dir``, none saved with ``no_session``). ``settings``: settings.json
    (typed, or the document ``load_settings`` gave). ``sandbox``: the tool sandbox policy
    (``off``, ``read-only``, ``workspace-write``; None is the platform default,
    ``workspace-write`` on Linux), with ``cwd`` as the workspace; the agent directory, the
    session directories and the log file are hidden from tools; ``settings.sandbox`` sets the
    limits and the home allow-list (SandboxPolicy.from_settings). Raises ConfigError (one line
    naming the key) for a bad setting.
    """
    import msgspec

    from ..choices import THINKING_LEVELS
    from ..coding.sandbox import SandboxPolicy, default_mode
    from ..protocol.config import (
        CoordinatorConfig,
        ProviderConfig,
        RuntimeConfig,
        SandboxConfig,
        SessionConfig,
        StoreConfig,
        ToolPoolConfig,
        read_part,
    )
    from ._config import ConfigError
    from ._resources import resources_config
    from ._settings import parse_settings, stream_limits

    typed = parse_settings(settings)
    if thinking not in THINKING_LEVELS:
        raise ConfigError(f"unknown thinking level {thinking!r}; pass --thinking with one of {', '.join(THINKING_LEVELS)}")
    # Actor processes start in "/" (runtime._spawn): every path they get must be absolute.
    cwd, agent_dir = os.path.abspath(cwd), os.path.abspath(agent_dir)
    session_dir = _absolute(session_dir)
    log_file = _absolute(log_file)
    if session is None:
        chosen = SessionConfig(no_session=no_session, session_dir=session_dir, agent_dir=agent_dir)
    else:
        try:
            chosen = read_part(session, SessionConfig)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        chosen = msgspec.structs.replace(
            chosen, session_dir=_absolute(chosen.session_dir), resume=_absolute(chosen.resume),
            fork_from=_absolute(chosen.fork_from), agent_dir=_absolute(chosen.agent_dir),
        )  # fmt: skip
    session_dirs = [session_dir, chosen.session_dir, chosen.resume, chosen.fork_from]
    try:
        policy = SandboxPolicy.from_settings(
            msgspec.to_builtins(typed.sandbox),
            mode=sandbox or default_mode(),
            workspace=cwd,
            allow_network=allow_network,
            hidden=tuple(p for p in [agent_dir, *session_dirs, log_file] if p),
            read_only=tuple(resources.readable) if resources is not None else (),
        )
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    return RuntimeConfig(
        provider=ProviderConfig(
            runtime_api_keys=runtime_keys, api_key_sources=key_sources, warm_api=model.api, log_file=log_file,
            limits=stream_limits(typed),
        ),
        # Workers warm up when the first prompt starts, overlapping the model's first reply
        # instead of competing with start-up for the CPU.
        tools=ToolPoolConfig(
            warm_on_request=True, sandbox=msgspec.convert(policy.to_config(), SandboxConfig), log_file=log_file
        ),
        store=StoreConfig(log_file=log_file),
        coordinator=CoordinatorConfig(
            cwd=cwd,
            model=model,
            thinking_level=thinking,  # type: ignore[arg-type]  # (checked above)
            system_prompt=system_prompt,
            tools=list(tools),
            session=chosen,
            settings=typed,
            log_file=log_file,
            # The models a session may switch to (set_model, and restoring a resumed one).
            models=list(models or [model]),
            resources=resources_config(resources),
            scoped_models=list(scoped_models or []),
        ),
    )


def _absolute(path: str | None) -> str | None:
    return os.path.abspath(path) if path else path


async def run_prompts(config: RuntimeConfig, prompts: list[str], renderer: Any, early: Any = None) -> int:
    """Start the local runtime, send each prompt in turn, feed every event to ``renderer``.
    ``early``: the provider process started ahead (``_early.EarlyProvider``), booted by the
    runtime with ``config``.

    The answer is printed (``renderer.finish()``) as soon as the last run has ended, before
    the actors are shut down; the exit still waits for every process."""
    from ..actors import open_local_runtime
    from ..runtime import RemoteError
    from ._client import send_prompt
    from ._sessions import print_session_warnings

    # One run per invocation: a coordinator that dies ends it (one line, exit 1) rather than
    # restarting; a dead provider or tool pool is restarted and the run goes on or fails clearly.
    prestarted = {"provider": early.adopt()} if early is not None else None
    async with open_local_runtime(config, store_with_coordinator=True, prestarted=prestarted) as coordinator:
        try:
            session = await coordinator.call("session")
        except RemoteError as exc:
            raise UsageError(exc.message) from None
        print_session_warnings(session)
        renderer.header((session or {}).get("header") or {})
        for text in prompts:
            try:
                await send_prompt(coordinator, text, renderer)
            except RemoteError as exc:
                print(f"Error: {exc.message}", file=sys.stderr)
                return 1
        code = renderer.finish()
    return code


def _list_models(search: str, args: argparse.Namespace | None = None) -> int:
    """``--list-models [SEARCH]``: the models whose provider has credentials, as pi lists them
    (sorted by provider and id; context and max output as 200K / 1M); when none has, how to
    add one."""
    from ._config import load_model_registry, no_models_message

    reg = load_model_registry()
    for err in reg.errors:
        print(f"Warning: {err}", file=sys.stderr)
    if args is not None:
        _with_extension_providers(reg, args.extension_look)
    models = reg.available()
    if not models:
        print(no_models_message())
        return 0
    words = search.lower().split()
    rows = [m for m in models if all(w in f"{m.provider}/{m.id} {m.provider} {m.id}".lower() for w in words)]
    if not rows:
        print(f'No models matching "{search}"')
        return 0
    rows.sort(key=lambda m: (m.provider, m.id))
    table = [("provider", "model", "context", "max-out", "thinking", "images")] + [
        (m.provider, m.id, _tokens(m.context_window), _tokens(m.max_tokens), "yes" if m.reasoning else "no",
         "yes" if "image" in m.input else "no")
        for m in rows
    ]  # fmt: skip
    widths = [max(len(row[i]) for row in table) for i in range(6)]
    for row in table:
        print("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip())
    return 0


def _tokens(count: int) -> str:
    """A token count as pi shows it: 200K, 1M, 1.5M, 4096 stays 4.1K."""
    for size, unit in ((1_000_000, "M"), (1_000, "K")):
        if count >= size:
            value = count / size
            return f"{value:g}{unit}" if value == int(value) else f"{value:.1f}{unit}"
    return str(count)


def _export(paths: list[str]) -> int:
    from ..coding.export_html import default_export_name, export_html
    from ..coding.session import SessionLoadError, load_session
    from ._config import ConfigError

    if len(paths) > 2:
        raise ConfigError("--export takes a session file and optionally an output path")
    source = paths[0]
    try:
        loaded = load_session(source)
    except FileNotFoundError:
        raise ConfigError(f"File not found: {os.path.abspath(source)}") from None
    except (SessionLoadError, OSError) as exc:
        raise ConfigError(f"Cannot export {source}: {exc}") from None
    for warning in loaded.warnings:  # damaged lines are not in the page: say so
        print(f"Warning: {warning}", file=sys.stderr)
    # pi's default: pi-session-<file name>.html in the current directory (also /export's name).
    target = paths[1] if len(paths) == 2 else default_export_name(source)
    try:
        written = export_html(loaded.header, loaded.entries, target)
    except OSError as exc:
        raise ConfigError(f"Cannot write {target}: {exc.strerror or exc}") from None
    print(f"Exported to: {written}")
    return 0


def _run(argv: Sequence[str]) -> int:
    """Run the command line ``argv``: a subcommand, a listing or export, or a session in
    the mode the options choose. Returns the exit code; user mistakes raise ConfigError or
    UsageError (one line, exit 1, in :func:`main`)."""
    sub = _subcommand(argv)
    if sub is not None:
        return sub(list(argv[1:]))
    args = _parse_session_args(argv)
    if args.list_models is not None:
        return _list_models(args.list_models, args)
    if args.export:
        return _export(args.export)
    messages = _initial_messages(args)
    interactive = not args.print_mode and args.mode == "text"
    if not messages and not interactive and args.mode != "rpc":
        raise UsageError("No prompt given. Pass a message, pipe one on stdin, or run without -p for interactive mode.")
    early = _early_provider(args) if not interactive and args.mode != "rpc" else None
    try:
        config = _session_config(args)
        if config is None:
            print("No session selected", file=sys.stderr)
            return 0
        return _start(args, config, messages, interactive, early)
    finally:
        if early is not None:
            early.abandon()  # (no-op once the runtime has it)


def _parse_session_args(argv: Sequence[str]) -> argparse.Namespace:
    """A session's command line, with the flags its extensions registered.

    Unknown options are judged *after* the extensions are looked at (``_extensions``): the
    command line is first read leniently to learn ``-e`` and ``--no-extensions``, the
    extensions' flags are taken out of it, and what remains is read strictly, so an
    option neither pi-actors nor an extension knows still gets the one-line "did you mean".
    The look is kept on the result (``extension_look``), with the flags' values
    (``extension_flags``)."""
    from ._extensions import ExtensionLook, FlagError, look_at_extensions, take_extension_flags
    from ._paths import agent_dir

    parser = build_parser()
    first, extras = parser.parse_known_args(argv)
    look = ExtensionLook()
    if first.export is None:
        look = look_at_extensions(first.extension, first.no_extensions, os.getcwd(), agent_dir())
    values: dict[str, Any] = {}
    if look.flags and any(e.startswith("--") for e in extras):
        try:
            argv, values = take_extension_flags(argv, parser.option_strings(), look.flags)  # type: ignore[attr-defined]
        except FlagError as exc:
            raise UsageError(str(exc)) from None
    own = set(parser.option_strings())  # type: ignore[attr-defined]
    for name in look.flags:  # taken out already; known here so that a typo's hint names them
        if f"--{name}" not in own:
            parser.add_argument(f"--{name}", dest=f"extension_flag_{name}", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.extension_look, args.extension_flags = look, values
    return args


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


def _early_provider(args: argparse.Namespace) -> Any:
    """Print and JSON modes: start the provider process now, so that its start-up and SDK
    import overlap the CLI's own (``_early``); None if it cannot be started (the runtime
    then starts one as usual, and reports what is wrong)."""
    from ._early import sdk_module_hint, start_provider_early
    from ._paths import agent_dir

    try:
        return start_provider_early(sdk_module_hint(args.provider, args.model, agent_dir()))
    except OSError:
        return None


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


def _initial_messages(args: argparse.Namespace) -> list[str]:
    """The user messages to send first (``_initial.initial_messages``): the text piped on
    stdin, the ``@file`` attachments and the first message argument as one message, then the
    other arguments, one turn each. Piped text switches to print mode, as pi. RPC mode takes
    its prompts from stdin as commands, so it refuses message and ``@file`` arguments.
    Raises UsageError (RPC with arguments) or ConfigError (a file that cannot be attached)."""
    from ._config import ConfigError
    from ._initial import AttachError, initial_messages

    if args.mode == "rpc":
        if args.messages:
            raise UsageError("In RPC mode prompts come as commands on stdin, not as arguments")
        return []
    piped = None
    if not sys.stdin.isatty():
        piped = sys.stdin.read()
        if piped.strip():
            args.print_mode = True
    try:
        return initial_messages(args.messages, piped, os.getcwd(), auto_resize=_auto_resize_images(args))
    except AttachError as exc:
        raise ConfigError(str(exc)) from None


def _auto_resize_images(args: argparse.Namespace) -> bool:
    """The ``images.autoResize`` setting for ``@file`` images (True when there are no
    ``@file`` arguments, or the settings cannot be read: the session's start reports that)."""
    if not any(a.startswith("@") for a in args.messages):
        return True
    from ._config import ConfigError
    from ._paths import agent_dir
    from ._settings import load_settings, parse_settings

    try:
        return parse_settings(load_settings(agent_dir(), os.getcwd())[0]).images.auto_resize
    except ConfigError:
        return True


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


def _start(args: argparse.Namespace, config: RuntimeConfig, messages: list[str], interactive: bool, early: Any = None) -> int:
    """Run the session in the chosen mode (RPC, interactive, or print/JSON) until it ends;
    ``early``: the provider started ahead, for print/JSON mode."""
    import trio

    from ._render import JsonRenderer, PrintRenderer

    if args.mode == "rpc":
        from .rpc import run_rpc

        return trio.run(run_rpc, config)
    if interactive:
        from .interactive import run_interactive

        _choose_theme(args, config)

        return trio.run(run_interactive, config, messages)
    renderer = JsonRenderer() if args.mode == "json" else PrintRenderer()
    return trio.run(run_prompts, config, messages, renderer, early)


def _choose_theme(args: argparse.Namespace, config: RuntimeConfig) -> None:
    """The TUI's colours: ``--theme`` (a bad one is a one-line error), else the settings'."""
    from ._paths import agent_dir
    from ._settings import load_settings
    from .tui.themes import ThemeError, choose_theme

    cwd, adir = config.coordinator.cwd, agent_dir()
    settings, _warnings = load_settings(adir, cwd)
    try:
        warnings = choose_theme(args.theme, agent_dir=adir, cwd=cwd, settings=settings)
    except ThemeError as exc:
        raise UsageError(str(exc)) from None
    for warning in warnings:
        print(warning, file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point; exits with the process exit code.

    Called without ``argv`` (the console script: this process is the command), the process
    ends through :func:`_end_process` once the work is done — output flushed, ``atexit``
    handlers run, no interpreter teardown. Called with ``argv`` (from Python), it raises
    ``SystemExit`` as usual."""
    own_process = argv is None
    argv = list(sys.argv[1:] if argv is None else argv)
    verbose = "--verbose" in argv
    from ._config import ConfigError

    try:
        code = _run(argv)
    except KeyboardInterrupt:
        # Ctrl-C outside the event loop, perhaps in the middle of an import: handled with
        # nothing more imported (an import here could fail on the half-imported module).
        if verbose:
            raise
        print("Interrupted.", file=sys.stderr)
        code = 130
    except BaseException as exc:  # noqa: BLE001 - sorted below; anything else is re-raised
        # Failures raised inside trio arrive wrapped in exception groups: judge the leaves.
        from ..runtime import RemoteError, leaf_exceptions

        leaves = leaf_exceptions(exc)

        if all(isinstance(e, (ConfigError, UsageError)) for e in leaves) and not verbose:
            print(f"Error: {leaves[0]}", file=sys.stderr)
            code = 1
        elif any(isinstance(e, KeyboardInterrupt) for e in leaves) and not verbose:
            # Ctrl-C, also while the actors start (other leaves are their cancellation).
            print("Interrupted.", file=sys.stderr)
            code = 130
        elif all(isinstance(e, (RemoteError, OSError)) for e in leaves) and not verbose and not all(
            isinstance(e, BrokenPipeError) for e in leaves
        ):
            # A runtime fault (an actor that died or refused, a lost connection): one line.
            first = leaves[0]
            print(f"Error: {first.message if isinstance(first, RemoteError) else first}", file=sys.stderr)
            code = 1
        elif all(isinstance(e, BrokenPipeError) for e in leaves):
            # The reader of our output went away (``pi-actors --mode json ... | head``).
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            code = 141
        else:
            raise
    if own_process:
        _end_process(code)
    sys.exit(code)


def _end_process(code: int) -> NoReturn:
    """End the CLI process without the interpreter's teardown (~25 ms of module finalisation
    after every actor has already exited): run the ``atexit`` handlers, flush stdout and
    stderr, then ``os._exit``. A reader that went away while the rest of the output was being
    flushed gives exit code 141, as a broken pipe does earlier in :func:`main`."""
    import atexit

    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BrokenPipeError:
            code = 141
    os._exit(code)



if __name__ == "__main__":
    main()
