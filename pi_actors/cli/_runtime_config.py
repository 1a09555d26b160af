"""The configuration a session's actor processes get (``pi_actors.protocol.config``), built
from what the command line and the settings chose: :func:`runtime_config`. The CLI, ``demo``
and ``serve`` build theirs here.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..protocol.config import RuntimeConfig, SessionConfig, Settings

__all__ = ["runtime_config", "_create_hidden_paths"]


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
