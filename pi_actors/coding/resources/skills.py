"""Skills (the Agent Skills format): a directory holding ``SKILL.md`` whose front matter has
``name`` and ``description``, or a ``*.md`` file directly in a skills root.

:func:`load_skills_from` scans one root as pi does: a directory that holds ``SKILL.md`` is a
skill (not searched further); otherwise the root's own ``*.md`` files are skills and every
subdirectory (not hidden, not ``node_modules``) is searched for ``SKILL.md``. A skill without
a description is skipped with a warning; a name that breaks the spec's rules (lowercase
letters, digits, single hyphens, at most 64 characters) is loaded with a warning, as pi does.

:func:`format_skills_for_prompt` is the system prompt's ``<available_skills>`` block (pi
0.73.1's text); :func:`expand_skill_command` turns ``/skill:name args`` into pi's
``<skill ...>`` block, reading the file when it is used.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from ._frontmatter import parse_frontmatter

__all__ = ["Skill", "load_skills_from", "load_skill_file", "format_skills_for_prompt", "expand_skill_command", "SkillError"]

_NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")


class SkillError(Exception):
    """A skill's file could not be read when ``/skill:name`` was used (one line)."""


@dataclass
class Skill:
    """One skill. ``path``: its Markdown file; ``base_dir``: the directory its relative
    references resolve against; ``scope``: ``user``, ``project`` or ``temporary`` (a
    ``--skill`` path); ``source``: ``auto`` (found in a standard place), ``local`` (a
    configured path) or the package source it came from."""

    name: str
    description: str
    path: str
    base_dir: str
    scope: str = "user"
    source: str = "auto"
    disable_model_invocation: bool = False
    warnings: list[str] = field(default_factory=list)


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as f:
        return f.read()


def load_skill_file(path: str, *, scope: str = "user", source: str = "auto") -> tuple[Skill | None, list[str]]:
    """The skill in the Markdown file ``path`` and the warnings about it; ``(None,
    warnings)`` when it cannot be read or has no description."""
    try:
        meta, _body = parse_frontmatter(_read(path))
    except (OSError, UnicodeDecodeError) as exc:
        return None, [f"skill {path}: cannot read it ({getattr(exc, 'strerror', None) or exc})"]
    base_dir = os.path.dirname(path)
    description = meta.get("description")
    if not isinstance(description, str) or not description.strip():
        return None, [f"skill {path}: no description in its front matter; skipped"]
    raw_name = meta.get("name")
    default = os.path.basename(base_dir) if os.path.basename(path) == "SKILL.md" else os.path.basename(path)[:-3]
    name = raw_name if isinstance(raw_name, str) and raw_name else default
    warnings: list[str] = []
    if len(name) > 64 or not _NAME.fullmatch(name):
        warnings.append(f"skill {path}: name {name!r} breaks the Agent Skills rules (a-z, 0-9, single hyphens, at most 64)")
    skill = Skill(
        name=name, description=description.strip(), path=path, base_dir=base_dir, scope=scope, source=source,
        disable_model_invocation=meta.get("disable-model-invocation") is True, warnings=warnings,
    )  # fmt: skip
    return skill, warnings


def load_skills_from(root: str, *, scope: str = "user", source: str = "auto") -> tuple[list[Skill], list[str]]:
    """Every skill under the directory (or ``*.md`` file) ``root``, and the warnings; a
    missing root gives none."""
    if os.path.isfile(root):
        single, said = load_skill_file(root, scope=scope, source=source)
        return ([single] if single else []), said
    skills: list[Skill] = []
    warnings: list[str] = []
    _scan(root, scope, source, True, skills, warnings)
    return skills, warnings


def _scan(directory: str, scope: str, source: str, top: bool, skills: list[Skill], warnings: list[str]) -> None:
    try:
        entries = sorted(os.listdir(directory))
    except OSError:
        return
    if "SKILL.md" in entries and os.path.isfile(os.path.join(directory, "SKILL.md")):
        skill, found = load_skill_file(os.path.join(directory, "SKILL.md"), scope=scope, source=source)
        warnings += found
        if skill:
            skills.append(skill)
        return
    for entry in entries:
        if entry.startswith(".") or entry == "node_modules":
            continue
        path = os.path.join(directory, entry)
        if os.path.isdir(path):
            _scan(path, scope, source, False, skills, warnings)
        elif top and entry.endswith(".md") and os.path.isfile(path):
            skill, found = load_skill_file(path, scope=scope, source=source)
            warnings += found
            if skill:
                skills.append(skill)


def _xml(text: str) -> str:
    return (
        text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;").replace("'", "&apos;")
    )


def format_skills_for_prompt(skills: list[Skill]) -> str:
    """The system prompt's skills section (empty without skills the model may invoke):
    pi 0.73.1's introduction, then ``<available_skills>`` with each skill's name,
    description and file, XML-escaped. It starts with two newlines, as pi's does."""
    visible = [s for s in skills if not s.disable_model_invocation]
    if not visible:
        return ""
    lines = [
        "\n\nThe following skills provide specialized instructions for specific tasks.",
        "Use the read tool to load a skill's file when the task matches its description.",
        "When a skill file references a relative path, resolve it against the skill directory "
        "(parent of SKILL.md / dirname of the path) and use that absolute path in tool commands.",
        "",
        "<available_skills>",
    ]
    for skill in visible:
        lines += [
            "  <skill>",
            f"    <name>{_xml(skill.name)}</name>",
            f"    <description>{_xml(skill.description)}</description>",
            f"    <location>{_xml(skill.path)}</location>",
            "  </skill>",
        ]
    lines.append("</available_skills>")
    return "\n".join(lines)


def expand_skill_command(text: str, skills: list[Skill]) -> str:
    """``/skill:name args`` as pi's block ``<skill name=... location=...>`` (the file's body
    without front matter, with a line saying what relative references resolve against),
    then a blank line and ``args`` if any. Other text, or an unknown skill, is returned
    unchanged. Raises SkillError when the skill's file cannot be read now."""
    if not text.startswith("/skill:"):
        return text
    head, _, rest = text.partition(" ")
    skill = next((s for s in skills if s.name == head[len("/skill:") :]), None)
    if skill is None:
        return text
    try:
        _meta, body = parse_frontmatter(_read(skill.path))
    except (OSError, UnicodeDecodeError) as exc:
        raise SkillError(f"skill {skill.name}: cannot read {skill.path} ({getattr(exc, 'strerror', None) or exc})") from None
    block = (
        f'<skill name="{skill.name}" location="{skill.path}">\n'
        f"References are relative to {skill.base_dir}.\n\n{body.strip()}\n</skill>"
    )
    args = rest.strip()
    return f"{block}\n\n{args}" if args else block
