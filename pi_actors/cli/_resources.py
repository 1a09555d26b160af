"""The session's skills and prompt templates as the CLI finds them: the command line's
``--skill``/``--no-skills``/``--prompt-template``/``--no-prompt-templates``, settings.json's
``skills``/``prompts``, the standard places and the installed packages
(:mod:`pi_actors.coding.resources.discovery`, :mod:`.packages`); and their wire form for
the coordinator."""

from __future__ import annotations

import sys
from typing import Any

from ..coding.resources import ResourceOptions, Resources, load_resources
from ..protocol.config import PromptTemplateConfig, ResourcesConfig, SkillConfig

__all__ = ["session_resources", "resources_config"]


def session_resources(args: Any, *, cwd: str, agent_dir: str, settings: dict[str, Any] | None, quiet: bool = False) -> Resources:
    """Load the resources for a session in ``cwd``; ``args``: the parsed command line (any
    object; missing flags count as not given). Each warning goes to stderr as one line
    unless ``quiet``."""
    from .packages import installed_packages

    packages, warnings = installed_packages(agent_dir, cwd)
    options = ResourceOptions(
        untrusted_paths=_project_setting(cwd, "skills"),
        skill_paths=list(getattr(args, "skill", None) or []),
        template_paths=list(getattr(args, "prompt_template", None) or []),
        skills=not getattr(args, "no_skills", False),
        templates=not getattr(args, "no_prompt_templates", False),
    )
    found = load_resources(cwd=cwd, agent_dir=agent_dir, settings=settings, options=options, packages=packages)
    if not quiet:
        for line in warnings + [f"Warning (resources): {w}" for w in found.warnings]:
            print(line, file=sys.stderr)
    return found


def _project_setting(cwd: str, key: str) -> list[str]:
    """The project settings file's list ``key`` (tools may write that file: what it adds is
    not shown to them). A file that cannot be read gives none (load_settings reports it)."""
    import json
    import os

    try:
        with open(os.path.join(cwd, ".pi-actors", "settings.json"), encoding="utf-8") as f:
            value = json.load(f).get(key)
    except (OSError, ValueError, AttributeError):
        return []
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def resources_config(resources: Resources | None) -> ResourcesConfig:
    """The coordinator's part of ``resources`` (empty for None)."""
    if resources is None:
        return ResourcesConfig()
    return ResourcesConfig(
        skills=[
            SkillConfig(
                name=s.name, description=s.description, path=s.path, base_dir=s.base_dir, scope=s.scope, source=s.source,
                disable_model_invocation=s.disable_model_invocation,
            )  # fmt: skip
            for s in resources.skills
        ],
        templates=[
            PromptTemplateConfig(
                name=t.name, description=t.description, content=t.content, path=t.path, scope=t.scope, source=t.source,
                argument_hint=t.argument_hint,
            )  # fmt: skip
            for t in resources.templates
        ],
    )
