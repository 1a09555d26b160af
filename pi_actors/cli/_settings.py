"""settings.json in pi's format: global ``$PI_ACTORS_DIR/settings.json``, project
``<cwd>/.pi-actors/settings.json``; the project wins, nested objects merged one level deep.

A file that does not parse is reported (``Warning (settings): …``) and ignored, never
rewritten. Keys used so far: ``defaultProvider``, ``defaultModel``, ``defaultThinkingLevel``,
``steeringMode``, ``followUpMode``, ``compaction.{enabled,reserveTokens,keepRecentTokens}``,
``retry.{enabled,maxRetries,baseDelayMs,maxDelayMs}``, ``sandbox.{memory,tmpSize,shmSize,
fileSize,processes,homeAllow}`` — the last only from the global file: the project file lies in
the workspace, where tools write, so its ``sandbox`` object is ignored with a warning.
"""

from __future__ import annotations

import json
import os
from typing import Any

__all__ = ["load_settings"]


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
    return merged, warnings
