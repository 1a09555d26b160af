"""settings.json in pi's format: global ``$PI_ACTORS_DIR/settings.json``, project
``<cwd>/.pi-actors/settings.json``; the project wins, nested objects merged one level deep.

A file that does not parse is reported (``Warning (settings): …``) and ignored, never
rewritten. Keys used so far: ``defaultProvider``, ``defaultModel``, ``defaultThinkingLevel``,
``steeringMode``, ``followUpMode``, ``toolExecution`` (``parallel``, the default, or
``sequential``: the agent's tool execution mode, pi's ``toolExecution``),
``compaction.{enabled,reserveTokens,keepRecentTokens}``,
``retry.{enabled,maxRetries,baseDelayMs,maxDelayMs}``, ``sandbox.{memory,tmpSize,shmSize,
fileSize,processes,homeAllow}`` — the last only from the global file: the project file lies in
the workspace, where tools write, so its ``sandbox`` object is ignored with a warning —, and
ours (not pi's)
``provider.{firstByteTimeoutMs,idleTimeoutMs}``: how long a provider stream may go without
data — before its response headers, and between two reads of its body — before it is
ended as stalled and retried (default 120000 each; 0 = no limit).

A number setting of the wrong type or below 0 is reported (``Warning (settings):
provider.idleTimeoutMs must be a number of milliseconds, 0 or more; using 120000``) and its
default used. :func:`stream_limits` gives the provider actor its limits.
"""

from __future__ import annotations

import json
import os
from typing import Any

__all__ = ["load_settings", "stream_limits", "FIRST_BYTE_TIMEOUT_MS", "IDLE_TIMEOUT_MS", "MAX_RETRY_DELAY_MS"]

FIRST_BYTE_TIMEOUT_MS = 120000
IDLE_TIMEOUT_MS = 120000
MAX_RETRY_DELAY_MS = 60000
#: (block, key, default) of the millisecond settings checked on load.
_MILLISECONDS = (
    ("provider", "firstByteTimeoutMs", FIRST_BYTE_TIMEOUT_MS),
    ("provider", "idleTimeoutMs", IDLE_TIMEOUT_MS),
    ("retry", "maxDelayMs", MAX_RETRY_DELAY_MS),
    ("retry", "baseDelayMs", 2000),
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
    """The effective settings and the warnings to show."""
    warnings: list[str] = []
    merged = _read(os.path.join(agent_dir, "settings.json"), warnings)
    project_path = os.path.join(cwd, ".pi-actors", "settings.json")
    project = _read(project_path, warnings)
    if "sandbox" in project:
        # Tools may write in the workspace: a file there must not loosen their own sandbox.
        del project["sandbox"]
        warnings.append(
            f"Warning (settings): the sandbox settings in {project_path} are ignored; "
            f"set them in {os.path.join(agent_dir, 'settings.json')}"
        )
    for key, value in project.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = {**merged[key], **value}
        else:
            merged[key] = value
    mode = merged.get("toolExecution")
    if mode is not None and mode not in ("parallel", "sequential"):
        warnings.append(f'Warning (settings): toolExecution must be "parallel" or "sequential", not {mode!r}; using "parallel"')
        del merged["toolExecution"]
    _check_milliseconds(merged, warnings)
    return merged, warnings


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


def stream_limits(settings: dict[str, Any]) -> dict[str, int]:
    """The provider actor's limits for every stream, in ms (0 = none): ``firstByteTimeoutMs``
    and ``idleTimeoutMs`` (settings ``provider.*``), ``maxRetryDelayMs`` (``retry.maxDelayMs``)."""

    def get(block: str, key: str, default: int) -> int:
        section = settings.get(block)
        value = section.get(key) if isinstance(section, dict) else None
        return int(value) if _is_ms(value) else default

    return {
        "firstByteTimeoutMs": get("provider", "firstByteTimeoutMs", FIRST_BYTE_TIMEOUT_MS),
        "idleTimeoutMs": get("provider", "idleTimeoutMs", IDLE_TIMEOUT_MS),
        "maxRetryDelayMs": get("retry", "maxDelayMs", MAX_RETRY_DELAY_MS),
    }
