"""settings.json in pi's format: global ``$PI_ACTORS_DIR/settings.json``, project
``<cwd>/.pi-actors/settings.json``; the project wins, nested objects merged one level deep.

A file that does not parse is reported (``Warning (settings): …``) and ignored, never
rewritten. Keys used so far: ``defaultProvider``, ``defaultModel``, ``defaultThinkingLevel``,
``steeringMode``, ``followUpMode``, ``toolExecution`` (``parallel``, the default, or
``sequential``: the agent's tool execution mode, pi's ``toolExecution``),
``compaction.{enabled,reserveTokens,keepRecentTokens}``,
``retry.{enabled,maxRetries,baseDelayMs,maxDelayMs}``, ``retry.provider.maxRetryDelayMs``
and ``retry.provider.{timeoutMs,maxRetries}`` (pi's: the SDK client's request timeout and its
own retries, for the SDK-based APIs; see ``ai.options``),
``thinkingBudgets.{minimal,low,medium,high}``, ``sessionDir`` (``--session-dir`` wins; ``~``
expanded, relative to the working directory), ``hideThinkingBlock`` (the TUI starts with
thinking blocks collapsed; Ctrl+T still toggles), ``doubleEscapeAction`` (``tree``, the
default, ``fork`` or ``none``: Esc Esc on the TUI's empty editor), the typed but
not yet applied ``shellPath``, ``shellCommandPrefix``,
``sandbox.{memory,tmpSize,shmSize,
fileSize,processes,homeAllow}`` — the last only from the global file: the project file lies in
the workspace, where tools write, so its ``sandbox`` object is ignored with a warning —, and
ours (not pi's)
``provider.{firstByteTimeoutMs,idleTimeoutMs}``: how long a provider stream may go without
data — before its response headers, and between two reads of its body — before it is
ended as stalled and retried (default 120000 each; 0 = no limit).

A setting of the wrong type (``"retry": {"maxRetries": "3"}``, ``"sandbox": {"memory":
true}``, an unknown sandbox key) is an error: :class:`ConfigError` with one line naming the
file and the key; the CLI prints it as ``Error: …`` and exits 1. Two kinds of bad value keep
pi's leniency and are reported as warnings, with the default used: a millisecond setting that
is not a number of 0 or more (``Warning (settings): provider.idleTimeoutMs must be a number
of milliseconds, 0 or more; using 120000``) and a ``toolExecution`` that is neither mode.

:func:`parse_settings` gives the typed form (``pi_actors.protocol.config.Settings``);
:func:`stream_limits` the provider actor's limits.
"""

from __future__ import annotations

import json
import os
from typing import Any

import msgspec

from ..ai.options import DEFAULT_FIRST_BYTE_TIMEOUT_MS, DEFAULT_IDLE_TIMEOUT_MS
from ..ai.retry_after import DEFAULT_MAX_RETRY_DELAY_MS
from ..coding.retry import RetrySettings
from ..protocol.config import Settings, StreamLimits, settings_error
from ._config import ConfigError

__all__ = ["load_settings", "parse_settings", "stream_limits"]

#: (block, key, default) of the millisecond settings checked on load.
_MILLISECONDS = (
    ("provider", "firstByteTimeoutMs", DEFAULT_FIRST_BYTE_TIMEOUT_MS),
    ("provider", "idleTimeoutMs", DEFAULT_IDLE_TIMEOUT_MS),
    ("retry", "maxDelayMs", DEFAULT_MAX_RETRY_DELAY_MS),
    ("retry", "baseDelayMs", RetrySettings.base_delay_ms),
)


def _read(path: str, warnings: list[str]) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        warnings.append(f"Warning (settings): cannot read {path}: {exc}")
        return {}
    if not isinstance(data, dict):
        warnings.append(f"Warning (settings): {path} must hold a JSON object")
        return {}
    return data


def load_settings(agent_dir: str, cwd: str) -> tuple[dict[str, Any], list[str]]:
    """The effective settings document (each file checked against :class:`Settings`) and the
    warnings to show. Raises ConfigError naming the file and the key of a mistyped setting."""
    warnings: list[str] = []
    global_path = os.path.join(agent_dir, "settings.json")
    merged = _checked(_read(global_path, warnings), global_path, warnings)
    project_path = os.path.join(cwd, ".pi-actors", "settings.json")
    project = _read(project_path, warnings)
    if "sandbox" in project:
        # Tools may write in the workspace: a file there must not loosen their own sandbox.
        del project["sandbox"]
        warnings.append(
            f"Warning (settings): the sandbox settings in {project_path} are ignored; "
            f"set them in {global_path}"
        )
    project = _checked(project, project_path, warnings)
    for key, value in project.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = {**merged[key], **value}
        else:
            merged[key] = value
    return merged, warnings


def parse_settings(doc: Settings | dict[str, Any] | None) -> Settings:
    """The typed settings of a document :func:`load_settings` gave (or of ``None``: all
    defaults). Raises ConfigError naming the key of a mistyped setting."""
    if isinstance(doc, Settings):
        return doc
    try:
        return msgspec.convert(doc or {}, Settings)
    except msgspec.ValidationError as exc:
        raise ConfigError(settings_error(exc, "settings")) from None


def _checked(doc: dict[str, Any], path: str, warnings: list[str]) -> dict[str, Any]:
    """``doc`` with the lenient values replaced (and reported), then checked against
    :class:`Settings`: a mistyped setting raises ConfigError naming ``path`` and the key."""
    mode = doc.get("toolExecution")
    if mode is not None and mode not in ("parallel", "sequential"):
        warnings.append(f'Warning (settings): toolExecution must be "parallel" or "sequential", not {mode!r}; using "parallel"')
        del doc["toolExecution"]
    _check_milliseconds(doc, warnings)
    try:
        msgspec.convert(doc, Settings)
    except msgspec.ValidationError as exc:
        raise ConfigError(settings_error(exc, path)) from None
    return doc


def _is_ms(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0 and value != float("inf")


def _check_milliseconds(settings: dict, warnings: list[str]) -> None:
    """Report bad millisecond values and put the defaults in their place."""
    for block, key, default in _MILLISECONDS:
        section = settings.get(block)
        if section is None:
            continue
        if not isinstance(section, dict):
            warnings.append(f"Warning (settings): {block} must be an object; using its defaults")
            settings[block] = {}
            continue
        if key in section and not _is_ms(section[key]):
            warnings.append(
                f"Warning (settings): {block}.{key} must be a number of milliseconds, 0 or more; using {default}"
            )
            section = settings[block] = {**section, key: default}


def stream_limits(settings: Settings | dict[str, Any]) -> StreamLimits:
    """The provider actor's limits for every stream: ``provider.firstByteTimeoutMs`` and
    ``provider.idleTimeoutMs``, and as the longest ``Retry-After`` pi's
    ``retry.provider.maxRetryDelayMs``, else ``retry.maxDelayMs``."""
    typed = parse_settings(settings)
    provider_cap = typed.retry.provider.max_retry_delay_ms if typed.retry.provider else None
    max_delay = typed.retry.max_delay_ms if provider_cap is None else provider_cap
    return StreamLimits(
        first_byte_timeout_ms=typed.provider.first_byte_timeout_ms,
        idle_timeout_ms=typed.provider.idle_timeout_ms,
        max_retry_delay_ms=DEFAULT_MAX_RETRY_DELAY_MS if max_delay is None else max_delay,
        timeout_ms=typed.retry.provider.timeout_ms if typed.retry.provider else None,
        max_retries=typed.retry.provider.max_retries if typed.retry.provider else None,
    )
