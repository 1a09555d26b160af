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
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from ._listing import _export, _list_models
from ._runtime_config import runtime_config
from ._session_choice import _implied_model, _session_config, _unrestorable
from ._subcommands import SUBCOMMANDS, _subcommand
from ._usage import UsageError

if TYPE_CHECKING:
    from ..protocol.config import RuntimeConfig

__all__ = ["main", "build_parser", "runtime_config", "run_prompts", "UsageError", "SUBCOMMANDS",
           "_implied_model", "_unrestorable"]

VERSION = "0.1.0"


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


async def run_prompts(config: RuntimeConfig, prompts: list[str], renderer: Any, early: Any = None, pool: Any = None) -> int:
    """Start the local runtime, send each prompt in turn, feed every event to ``renderer``.
    ``early``: the provider process started ahead (``_early.EarlyProvider``), booted by the
    runtime with ``config``; ``pool``: the tool pool forked ahead (``_early.fork_tool_pool``),
    likewise.

    The answer is printed (``renderer.finish()``) as soon as the last run has ended, before
    the actors are shut down; the exit still waits for every process."""
    from ..actors import open_local_runtime
    from ..runtime import RemoteError
    from ._client import send_prompt
    from ._sessions import print_session_warnings

    # One run per invocation: a coordinator that dies ends it (one line, exit 1) rather than
    # restarting; a dead provider or tool pool is restarted and the run goes on or fails clearly.
    prestarted = {"provider": early.adopt()} if early is not None else {}
    if pool is not None:
        prestarted["tool-pool"] = pool
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


def _run(argv: Sequence[str], *, own_process: bool = False) -> int:
    """Run the command line ``argv``: a subcommand, a listing or export, or a session in
    the mode the options choose. Returns the exit code; user mistakes raise ConfigError or
    UsageError (one line, exit 1, in :func:`main`). ``own_process``: this process is the
    command (it may fork actors from itself, :func:`_run_session`)."""
    from .._startup_gc import release

    sub = _subcommand(argv)
    if sub is not None:
        release()  # a subcommand's start-up is its own business: the collector as usual
        return sub(list(argv[1:]))
    try:
        return _run_session(argv, own_process=own_process)
    finally:
        release()  # (once the event loop has started, _start did it already)


def _run_session(argv: Sequence[str], *, own_process: bool = False) -> int:
    """:func:`_run` for a session (or a listing, an export): the command line read with
    the extensions' flags, then the session run in its mode."""
    parser = build_parser()
    first, extras = parser.parse_known_args(argv)
    # Print and JSON modes named by the flags: the provider starts now, before the extensions
    # are looked at (installed packages, entry points, the coding layer and trio imported:
    # most of the CLI's own start-up). Piped text (print mode found out by reading stdin)
    # starts it once stdin has been read, below. The tool pool is forked from this process
    # right after, in every mode that runs a session, before any credential is resolved or
    # extension code runs (``_early``); only by the command itself (a program calling
    # ``main`` is not forked).
    early = _early_provider(first) if _print_or_json(first) else None
    pool = None
    try:
        pool = _forked_pool() if own_process and _runs_session(first) else None
        args = _parse_session_args(argv, parser, first, extras)
        if args.list_models is not None:
            return _list_models(args.list_models, args)
        if args.export:
            return _export(args.export)
        messages = _initial_messages(args)
        interactive = not args.print_mode and args.mode == "text"
        if not messages and not interactive and args.mode != "rpc":
            raise UsageError("No prompt given. Pass a message, pipe one on stdin, or run without -p for interactive mode.")
        if early is None and not interactive and args.mode != "rpc":
            early = _early_provider(args)
        config = _session_config(args)
        if config is None:
            print("No session selected", file=sys.stderr)
            return 0
        return _start(args, config, messages, interactive, early, pool)
    finally:
        if early is not None:
            early.abandon()  # (no-op once the runtime has it)
        if pool is not None:
            pool.abandon()  # (likewise)


def _runs_session(first: argparse.Namespace) -> bool:
    """Whether the leniently read command line ``first`` runs a session (not a listing or
    an export)."""
    return first.list_models is None and not first.export


def _print_or_json(first: argparse.Namespace) -> bool:
    """Whether the leniently read command line ``first`` runs a session in print or JSON mode
    (``-p`` or ``--mode json``; not a listing or an export)."""
    wanted = first.print_mode or first.mode == "json"
    return wanted and first.mode != "rpc" and first.list_models is None and not first.export


def _parse_session_args(
    argv: Sequence[str], parser: argparse.ArgumentParser, first: argparse.Namespace, extras: list[str]
) -> argparse.Namespace:
    """A session's command line, with the flags its extensions registered.

    Unknown options are judged *after* the extensions are looked at (``_extensions``): the
    command line is first read leniently (``first``, ``extras``: ``parser.parse_known_args``,
    done by the caller) to learn ``-e`` and ``--no-extensions``, the extensions' flags are
    taken out of it, and what remains is read strictly, so an option neither pi-actors nor an
    extension knows still gets the one-line "did you mean". The look is kept on the result
    (``extension_look``), with the flags' values (``extension_flags``)."""
    from ._extensions import ExtensionLook, FlagError, look_at_extensions, take_extension_flags
    from ._paths import agent_dir

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


def _forked_pool() -> Any:
    """The tool pool forked from this process (``_early.fork_tool_pool``), or None."""
    from ._early import fork_tool_pool

    return fork_tool_pool()


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


def _start(args: argparse.Namespace, config: RuntimeConfig, messages: list[str], interactive: bool, early: Any = None,
           pool: Any = None) -> int:  # fmt: skip
    """Run the session in the chosen mode (RPC, interactive, or print/JSON) until it ends;
    ``early``: the provider started ahead (print/JSON mode); ``pool``: the tool pool forked
    ahead (any mode)."""
    import trio

    from .._startup_gc import release
    from ._render import JsonRenderer, PrintRenderer

    # The command's start-up is over: what it made is frozen, the collector on for the session.
    release()
    prestarted = {"tool-pool": pool} if pool is not None else None
    if args.mode == "rpc":
        from .rpc import run_rpc

        return trio.run(run_rpc, config, prestarted)
    if interactive:
        from .interactive import run_interactive

        _choose_theme(args, config)

        return trio.run(run_interactive, config, messages, prestarted)
    renderer = JsonRenderer() if args.mode == "json" else PrintRenderer()
    return trio.run(run_prompts, config, messages, renderer, early, pool)


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
    if own_process:
        # The command's start-up (its imports, the configuration) without the cyclic
        # collector, until its event loop starts or it returns (pi_actors._startup_gc).
        from .._startup_gc import pause_for_startup

        pause_for_startup()
    argv = list(sys.argv[1:] if argv is None else argv)
    verbose = "--verbose" in argv
    from ._config import ConfigError

    try:
        code = _run(argv, own_process=own_process)
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
