"""Starting the provider actor first thing, before the CLI's own imports; forking the tool pool.

In print mode the longest step before the first request can leave is the provider's start:
an interpreter, the runtime, the provider module and its SDK (``openai`` alone is the largest
import of the whole tree). The CLI itself needs ~0.3 s (its imports, the model registry, the
settings, the system prompt) before its event loop starts the actors. :func:`start_provider_early`
starts the provider process right after the arguments are parsed (leniently: before the
extensions are looked at, ``main._run``) — with nothing imported but the standard library —
and the process imports the provider module and prepares the SDK the model probably uses
(:func:`sdk_module_hint`; the provider module's ``prepare``: imports, a throwaway client)
while the CLI prepares its configuration; the local runtime later boots it with that
configuration (``open_local_runtime(prestarted=...)``).

The process is started exactly as ``runtime.prestart_actor`` starts one (that function needs
the runtime, i.e. trio, imported; this module must not): the same command line
(``runtime.prestart_command``; a test checks they agree), one socketpair each for the
links ``coordinator`` and ``supervisor``. Whoever holds the :class:`EarlyProvider` owns the
process: it is either handed to the runtime (:meth:`EarlyProvider.adopt`) or given up
(:meth:`EarlyProvider.abandon`: killed and reaped) — the CLI's ``finally`` does the latter
whatever happened before.

The tool pool needs no SDK, only the runtime (trio, msgspec), which the CLI imports anyway:
:func:`fork_tool_pool` forks it from the CLI (``runtime.fork_actor``), in every mode that runs
a session, right after the provider is started (print and JSON mode; in the others, at the
same point), when the CLI has parsed its arguments and imported the runtime, but has not read
``auth.json`` or the settings, resolved a model's key, or run any extension code. The pool's
interpreter start and imports (~150 ms of CPU, on two CPUs busy with the start-up of five
processes) are saved, and it launches the sandbox's zygote ~0.2 s sooner, so that the first
tool call waits for it less often. It gets the environment a started pool gets (credentials
scrubbed, from ``/proc/PID/environ`` too) and an actor's command line. Its memory is the CLI's
at the fork (the arguments, the environment, ``models.json`` as read for the SDK hint): what
the user's own unsandboxed processes can read anyway; tools never see it, since the sandbox's
zygote is a new program (bubblewrap's exec). The CLI owns the pool as it owns the early
provider: handed to the runtime, or killed and reaped.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from typing import Any

__all__ = ["EarlyProvider", "start_provider_early", "fork_tool_pool", "sdk_module_hint", "SDK_MODULES", "BUILTIN_PROVIDER_APIS"]

#: The provider module of each API (as ``ai.registry.BUILTIN_PROVIDER_MODULES``; a test checks).
SDK_MODULES = {
    "anthropic-messages": "pi_actors.ai.providers.anthropic_messages",
    "openai-completions": "pi_actors.ai.providers.openai_completions",
    "openai-responses": "pi_actors.ai.providers.openai_responses",
    "google-generative-ai": "pi_actors.ai.providers.google_generative_ai",
    "mistral-conversations": "pi_actors.ai.providers.mistral_conversations",
    "azure-openai-responses": "pi_actors.ai.providers.azure_openai_responses",
    "openai-codex-responses": "pi_actors.ai.providers.openai_codex_responses",
    "google-vertex": "pi_actors.ai.providers.google_vertex",
    "bedrock-converse-stream": "pi_actors.ai.providers.bedrock_converse_stream",
    "google-gemini-cli": "pi_actors.ai.providers.google_gemini_cli",
}
#: The API of each built-in catalog provider whose models all use one (``ai.catalog``; a test
#: checks). cloudflare-ai-gateway, github-copilot and opencode mix APIs: no hint for them.
BUILTIN_PROVIDER_APIS = {
    "amazon-bedrock": "bedrock-converse-stream", "anthropic": "anthropic-messages",
    "azure-openai-responses": "azure-openai-responses", "cerebras": "openai-completions",
    "cloudflare-workers-ai": "openai-completions", "deepseek": "openai-completions", "fireworks": "anthropic-messages",
    "google": "google-generative-ai", "google-antigravity": "google-gemini-cli",
    "google-gemini-cli": "google-gemini-cli", "google-vertex": "google-vertex", "groq": "openai-completions",
    "huggingface": "openai-completions", "kimi-coding": "anthropic-messages", "minimax": "anthropic-messages",
    "minimax-cn": "anthropic-messages", "mistral": "mistral-conversations", "moonshotai": "openai-completions",
    "moonshotai-cn": "openai-completions", "openai": "openai-responses", "openai-codex": "openai-codex-responses",
    "opencode-go": "openai-completions", "openrouter": "openai-completions", "vercel-ai-gateway": "anthropic-messages",
    "xai": "openai-completions", "xiaomi": "anthropic-messages", "xiaomi-token-plan-ams": "anthropic-messages",
    "xiaomi-token-plan-cn": "anthropic-messages", "xiaomi-token-plan-sgp": "anthropic-messages", "zai": "openai-completions",
}  # fmt: skip
_PROVIDER_MODULE = "pi_actors.actors.provider"
_TOOL_POOL_MODULE = "pi_actors.actors.tool_pool"
_LINKS = ("coordinator", "supervisor")


def sdk_module_hint(provider: str | None, model: str | None, agent_dir: str) -> str | None:
    """The provider module the session will most likely use, from ``--provider`` or the
    ``provider/`` prefix of ``--model`` and the ``api`` that ``models.json`` gives that
    provider (or the built-in one); None when the arguments do not say. Only a hint: the
    model the CLI really chooses (settings, a resumed session...) is warmed up regardless,
    and a wrong hint costs an unneeded import in the provider, nothing else."""
    name = provider or (model.partition("/")[0] if model and "/" in model else None)
    if not name:
        return None
    api: Any = None
    try:
        with open(os.path.join(agent_dir, "models.json"), encoding="utf-8") as f:
            doc = json.load(f)
        api = doc["providers"][name].get("api")
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        pass  # no models.json, or not this provider in it: the CLI reports its errors later
    if not isinstance(api, str):
        api = BUILTIN_PROVIDER_APIS.get(name.lower())
    return SDK_MODULES.get(api) if isinstance(api, str) else None


class EarlyProvider:
    """The provider process started ahead (module docstring). ``abandon`` may be called at any
    time and any number of times; after ``adopt`` it does nothing."""

    def __init__(self, popen: subprocess.Popen[bytes], ends: dict[str, socket.socket], fds: dict[str, int]) -> None:
        self.popen = popen
        self.ends = ends
        self.fds = fds
        self.handed_over = False

    def adopt(self) -> Any:
        """Hand the process over: a ``runtime.PrestartedActor`` for ``open_local_runtime``'s
        ``prestarted`` (which owns it from then on). Needs a running trio event loop."""
        from ..runtime import ChildProcess, PrestartedActor

        if self.handed_over:
            raise RuntimeError("the early provider was already handed over or given up")
        self.handed_over = True
        return PrestartedActor("provider", ChildProcess(self.popen), self.ends, self.fds)

    def abandon(self) -> None:
        """Kill and reap the process and close our link ends, unless it was handed over."""
        if self.handed_over:
            return
        self.handed_over = True
        for sock in self.ends.values():
            sock.close()
        if self.popen.stdin is not None:
            self.popen.stdin.close()  # it exits at end-of-file if it is still waiting
        self.popen.kill()
        self.popen.wait()


def start_provider_early(sdk_module: str | None) -> EarlyProvider:
    """Start the provider process now, importing its module and ``sdk_module`` while it waits
    for its configuration. Raises OSError if it cannot be started."""
    preload = ",".join([_PROVIDER_MODULE] + ([f"{sdk_module}:prepare"] if sdk_module else []))
    pairs = {link: socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM) for link in _LINKS}
    fds = {link: theirs.fileno() for link, (_ours, theirs) in pairs.items()}
    argv = [sys.executable, "-I", "-m", "pi_actors.runtime.child", "provider", "--preload", preload,
            "--parent", str(os.getpid())]  # fmt: skip
    # Started with SIGINT blocked, as ``runtime.ChildProcess.spawn`` starts every actor (see
    # there: a Ctrl-C during its imports must not kill it with a traceback).
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        popen = subprocess.Popen(argv, pass_fds=tuple(fds.values()), stdin=subprocess.PIPE, close_fds=True, cwd="/")
    except BaseException:
        for ours, _theirs in pairs.values():
            ours.close()
        raise
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        for _ours, theirs in pairs.values():
            theirs.close()
    return EarlyProvider(popen, {link: ours for link, (ours, _theirs) in pairs.items()}, fds)


def fork_tool_pool() -> Any:
    """Fork the tool pool's process now (module docstring): a ``runtime.PrestartedActor`` for
    ``open_local_runtime``'s ``prestarted``, with its tool-pool module imported while it waits.
    None when this process cannot fork one (another thread runs, a standard stream is closed,
    the fork fails): the runtime then starts the pool as usual."""
    from ..actors.local import secret_env_names
    from ..runtime import child_environment, fork_actor

    try:
        return fork_actor(name="tool-pool", links=_LINKS, env=child_environment(scrub=secret_env_names()),
                          preload=(_TOOL_POOL_MODULE,))  # fmt: skip
    except (RuntimeError, OSError):
        return None
