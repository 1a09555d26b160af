"""``pi-actors``: the command line.

Usage::

    pi-actors [options] [messages...]      interactive (plain line mode) or, with -p, print mode
    pi-actors -p "prompt"                   print the final assistant text
    pi-actors --mode json "prompt"          every AgentEvent as one JSON line (pi's shapes)
    pi-actors demo                          a real multi-process session against a bundled
                                            scripted model; needs no API key

User mistakes (unknown model, no key, bad flag) give one line on stderr and exit code 1;
a traceback is shown only with ``--verbose``. Heavy imports (trio, the actors, the SDKs) are
deferred so ``--version`` and ``--help`` stay fast.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Sequence

__all__ = ["main", "build_parser"]

VERSION = "0.1.0"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="pi-actors",
        description="A multi-process coding agent on trio, in the lineage of pi.",
        epilog="Subcommands: 'pi-actors demo' runs a scripted session that needs no API key.",
    )
    p.add_argument("messages", nargs="*", help="prompt messages; the first is sent first")
    p.add_argument("-p", "--print", dest="print_mode", action="store_true", help="non-interactive: run the prompt(s), print the answer, exit")
    p.add_argument("--mode", choices=["text", "json"], default="text", help="output mode (json: one event per line)")
    p.add_argument("--provider", help="provider of --model (anthropic, openai, or one from models.json)")
    p.add_argument("--model", help="model id, provider/id, optionally with :thinking suffix")
    p.add_argument("--api-key", help="API key for the chosen provider (not saved)")
    p.add_argument("--thinking", choices=["off", "minimal", "low", "medium", "high", "xhigh"], help="thinking level")
    p.add_argument("--system-prompt", help="replace the system prompt (text or file)")
    p.add_argument("--append-system-prompt", help="append to the system prompt (text or file)")
    p.add_argument("--tools", help="comma-separated active tools (default: read,bash,edit,write)")
    p.add_argument("--no-tools", action="store_true", help="no built-in tools")
    p.add_argument("--no-session", action="store_true", help="do not save the session")
    p.add_argument("--session-dir", help="directory for session files")
    p.add_argument("--list-models", nargs="?", const="", metavar="SEARCH", help="list models and exit")
    p.add_argument("--verbose", action="store_true", help="show tracebacks for errors")
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


def runtime_config(
    *,
    model: Any,
    thinking: str,
    tools: list[str],
    cwd: str,
    system_prompt: str,
    no_session: bool,
    session_dir: str | None,
    agent_dir: str,
    runtime_keys: dict[str, str],
    key_sources: dict[str, str],
) -> dict[str, Any]:
    """The configuration documents handed to each actor process."""
    from ..ai import types as T

    return {
        "provider": {"runtime_api_keys": runtime_keys, "api_key_sources": key_sources, "warm_api": model.api},
        # Workers warm up when the first prompt starts, overlapping the model's first reply
        # instead of competing with start-up for the CPU.
        "tools": {"max_workers": 32, "warm": 2, "warm_on_request": True},
        "store": {},
        "coordinator": {
            "cwd": cwd,
            "model": T.to_plain(model),
            "thinkingLevel": thinking,
            "systemPrompt": system_prompt,
            "tools": tools,
            "session": {"noSession": no_session, "sessionDir": session_dir, "agentDir": agent_dir},
        },
    }


async def run_prompts(config: dict[str, Any], prompts: list[str], renderer: Any) -> int:
    """Start the local runtime, send each prompt in turn, feed every event to ``renderer``."""
    from ..runtime import RemoteError
    from ._client import send_prompt
    from ._supervisor import open_local_runtime

    async with open_local_runtime(config) as coordinator:
        try:
            session = await coordinator.call("session")
        except RemoteError as exc:
            raise UsageError(exc.message) from None
        renderer.header((session or {}).get("header") or {})
        for text in prompts:
            try:
                await send_prompt(coordinator, text, renderer)
            except RemoteError as exc:
                print(f"Error: {exc.message}", file=sys.stderr)
                return 1
    return renderer.finish()


def _list_models(search: str) -> int:
    from ._config import load_model_registry

    reg = load_model_registry()
    for err in reg.errors:
        print(err, file=sys.stderr)
    rows = [m for m in reg.models if search.lower() in f"{m.provider}/{m.id}".lower()]
    print(f"{'provider':<14} {'model':<32} {'context':>8} {'max out':>8}  thinking")
    for m in rows:
        print(f"{m.provider:<14} {m.id:<32} {m.context_window:>8} {m.max_tokens:>8}  {'yes' if m.reasoning else 'no'}")
    return 0


def _run(argv: Sequence[str]) -> int:
    if argv and argv[0] == "demo":
        from .demo import main as demo_main

        return demo_main(list(argv[1:]))
    args = build_parser().parse_args(argv)
    if args.list_models is not None:
        return _list_models(args.list_models)

    from ..coding.system_prompt import build_system_prompt
    from ._config import ConfigError, agent_dir, choose_model, load_model_registry

    messages = list(args.messages)
    if not sys.stdin.isatty():
        piped = sys.stdin.read().strip()
        if piped:
            messages.insert(0, piped)
            args.print_mode = True
    interactive = not args.print_mode and args.mode == "text"
    if not messages and not interactive:
        raise UsageError("No prompt given. Pass a message, pipe one on stdin, or run without -p for interactive mode.")

    reg = load_model_registry()
    for err in reg.errors:
        print(f"Warning: {err}", file=sys.stderr)
    if args.api_key and not args.model and not args.provider:
        raise ConfigError("--api-key requires a model to be specified via --model or --provider")
    try:
        choice = choose_model(reg, provider=args.provider, model=args.model, api_key=args.api_key)
    except ConfigError:
        raise
    thinking = args.thinking or choice.thinking or "off"
    if not choice.model.reasoning:
        thinking = "off"
    tools = _tool_names(args)
    cwd = os.getcwd()
    adir = agent_dir()
    config = runtime_config(
        model=choice.model,
        thinking=thinking,
        tools=tools,
        cwd=cwd,
        system_prompt=build_system_prompt(
            cwd=cwd, tools=tools, custom=args.system_prompt, append=args.append_system_prompt, agent_dir=adir
        ),
        no_session=args.no_session,
        session_dir=args.session_dir,
        agent_dir=adir,
        runtime_keys={choice.model.provider: args.api_key} if args.api_key else {},
        key_sources=reg.key_sources,
    )

    import trio

    from ._render import JsonRenderer, LiveRenderer, PrintRenderer

    if interactive:
        from .interactive import run_interactive

        return trio.run(run_interactive, config, messages)
    renderer = JsonRenderer() if args.mode == "json" else PrintRenderer()
    return trio.run(run_prompts, config, messages, renderer)


def main(argv: Sequence[str] | None = None) -> int:
    """Console entry point; returns (and exits with) the process exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    verbose = "--verbose" in argv
    from ._config import ConfigError

    try:
        code = _run(argv)
    except (ConfigError, UsageError) as exc:
        if verbose:
            raise
        print(f"Error: {exc}", file=sys.stderr)
        code = 1
    except KeyboardInterrupt:
        code = 130
    sys.exit(code)


if __name__ == "__main__":
    main()
