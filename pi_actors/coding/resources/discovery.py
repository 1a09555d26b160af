"""Where skills and prompt templates are found, and the one entry point that loads them all.

Skills, first found wins on a name (later ones are reported as collisions):

1. ``--skill PATH`` (a directory or a ``.md`` file), scope ``temporary``;
2. project: for the working directory and each ancestor up to the git repository's root (or
   ``/``): ``.pi-actors/skills``, ``.pi/skills``, ``.agents/skills``;
3. user: ``<agentDir>/skills`` (``~/.pi-actors/skills``), ``~/.pi/agent/skills``,
   ``~/.agents/skills``;
4. the ``skills`` setting (paths, ``~`` expanded, relative to the working directory);
5. installed packages' skill directories (:mod:`pi_actors.cli.packages` finds them).

Prompt templates come from the same places with ``prompts`` for ``skills`` (``.pi-actors/
prompts``, ``.pi/prompts``; ``<agentDir>/prompts``, ``~/.pi/agent/prompts``), the
``prompts`` setting, ``--prompt-template PATH`` and packages. ``--no-skills`` /
``--no-prompt-templates`` (``ResourceOptions.skills = False``) turn off the discovery of 2-5;
explicit paths still load, as in pi.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .skills import Skill, SkillError, expand_skill_command, load_skills_from
from .templates import PromptTemplate, expand_prompt_template, load_templates_from

__all__ = ["ResourceOptions", "Resources", "PackageResources", "SkillError", "load_resources", "expand_input", "project_dirs"]


@dataclass
class PackageResources:
    """What one installed package contributes: directories (or files) of skills, prompt
    templates, themes and extensions; ``source`` is the package's source as installed;
    ``scope`` ``user`` or ``project``."""

    source: str
    scope: str = "user"
    skills: list[str] = field(default_factory=list)
    prompts: list[str] = field(default_factory=list)
    themes: list[str] = field(default_factory=list)
    extensions: list[str] = field(default_factory=list)
    modules: list[str] = field(default_factory=list)


@dataclass
class ResourceOptions:
    """The command line's choices: explicit paths and whether to discover the rest."""

    skill_paths: Sequence[str] = ()
    template_paths: Sequence[str] = ()
    skills: bool = True
    templates: bool = True
    #: Setting paths that came from the project's settings file, which tools may write: their
    #: skills are listed and usable, but not added to :attr:`Resources.readable`.
    untrusted_paths: Sequence[str] = ()


@dataclass
class Resources:
    """The loaded skills and templates (in precedence order) and what went wrong loading
    them (one line each, for stderr)."""

    skills: list[Skill] = field(default_factory=list)
    templates: list[PromptTemplate] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    #: The skill directories sandboxed tools may read (so that the model can ``read`` a
    #: listed skill): every skill's but those found through :attr:`ResourceOptions.untrusted_paths`.
    readable: list[str] = field(default_factory=list)


def _git_root(start: str) -> str | None:
    directory = start
    while True:
        if os.path.exists(os.path.join(directory, ".git")):
            return directory
        parent = os.path.dirname(directory)
        if parent == directory:
            return None
        directory = parent


def project_dirs(cwd: str) -> list[str]:
    """The working directory and its ancestors up to the git root (or ``/``), nearest first."""
    start = os.path.abspath(cwd)
    stop = _git_root(start)
    out = [start]
    directory = start
    while directory != stop:
        parent = os.path.dirname(directory)
        if parent == directory:
            break
        out.append(parent)
        directory = parent
    return out


def _within(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _paths(value: Any, cwd: str) -> list[str]:
    if not isinstance(value, list):
        return []
    return [os.path.abspath(os.path.join(cwd, os.path.expanduser(p))) for p in value if isinstance(p, str) and p]


def _roots(kind: str, *, cwd: str, agent_dir: str, home: str, settings: dict[str, Any], explicit: Sequence[str],
           discover: bool, packages: Sequence[PackageResources]) -> list[tuple[str, str, str]]:
    """``(path, scope, source)`` of every place to look for ``kind`` (``skills`` or
    ``prompts``), in precedence order."""
    subs = (".pi-actors", ".pi", ".agents") if kind == "skills" else (".pi-actors", ".pi")
    user = [os.path.join(agent_dir, kind), os.path.join(home, ".pi", "agent", kind)]
    if kind == "skills":
        user.append(os.path.join(home, ".agents", "skills"))
    roots = [(p, "temporary", "local") for p in _paths(list(explicit), cwd)]
    if not discover:
        return roots
    for d in project_dirs(cwd):
        roots += [(os.path.join(d, sub, kind), "project", "auto") for sub in subs if os.path.join(d, sub, kind) not in user]
    roots += [(d, "user", "auto") for d in user]
    roots += [(p, "user", "local") for p in _paths(settings.get(kind), cwd)]
    for pkg in packages:
        roots += [(p, pkg.scope, pkg.source) for p in getattr(pkg, kind)]
    return roots


def load_resources(
    *,
    cwd: str,
    agent_dir: str,
    settings: dict[str, Any] | None = None,
    options: ResourceOptions | None = None,
    packages: Sequence[PackageResources] = (),
    home: str | None = None,
) -> Resources:
    """Skills and prompt templates for a session in ``cwd`` (module docstring for where they
    are looked for). ``settings``: settings.json as loaded (its ``skills`` and ``prompts``
    lists); ``home``: the home directory (default ``~``). Never raises for a bad file: it
    is skipped and named in ``warnings``."""
    options = options or ResourceOptions()
    where = dict(
        cwd=os.path.abspath(cwd), agent_dir=os.path.abspath(agent_dir), home=home or os.path.expanduser("~"),
        settings=settings or {}, packages=packages,
    )  # fmt: skip
    skill_roots = _roots("skills", explicit=options.skill_paths, discover=options.skills, **where)  # type: ignore[arg-type]
    prompt_roots = _roots("prompts", explicit=options.template_paths, discover=options.templates, **where)  # type: ignore[arg-type]
    out = Resources()
    out.warnings += [f"{p}: no such file or directory" for p, scope, _ in skill_roots + prompt_roots if scope == "temporary" and not os.path.exists(p)]
    seen: set[str] = set()
    by_name: dict[str, Skill] = {}
    for root, scope, source in skill_roots:
        found, warnings = load_skills_from(root, scope=scope, source=source)
        out.warnings += warnings
        for skill in found:
            real = os.path.realpath(skill.path)
            if real in seen:
                continue
            seen.add(real)
            if skill.name in by_name:
                out.warnings.append(f"skill {skill.path}: name {skill.name!r} already taken by {by_name[skill.name].path}; skipped")
                continue
            by_name[skill.name] = skill
            out.skills.append(skill)
    untrusted = _paths(list(options.untrusted_paths), where["cwd"])  # type: ignore[arg-type]
    out.readable = list(dict.fromkeys(s.base_dir for s in out.skills if not any(_within(s.path, u) for u in untrusted)))
    names: set[str] = set()
    for root, scope, source in prompt_roots:
        for template in load_templates_from(root, scope=scope, source=source):
            real = os.path.realpath(template.path)
            if real not in seen and template.name not in names:
                seen.add(real)
                names.add(template.name)
                out.templates.append(template)
    return out


def expand_input(text: str, skills: Sequence[Skill], templates: Sequence[PromptTemplate]) -> str:
    """What a prompt the user typed becomes: ``/skill:name args`` → the skill's block,
    ``/template args`` → the expanded template; anything else unchanged. Raises SkillError
    (one line) when a skill's file can no longer be read."""
    if not text.startswith("/"):
        return text
    expanded = expand_skill_command(text, list(skills))
    if expanded is not text:
        return expanded
    return expand_prompt_template(text, list(templates))

