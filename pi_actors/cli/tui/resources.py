"""Pure helpers of the TUI: prompt templates, skills, ``@file`` attachments, footer numbers.

Nothing here imports prompt_toolkit or rich, so it is cheap and testable on its own.

* Prompt templates and skills: found and expanded by the shared code of every mode
  (:mod:`pi_actors.coding.resources`; the places are listed in its ``discovery`` module,
  installed packages included). The TUI lists them for completion (a template's description
  says where it came from: ``(user)``, ``(project)``) and expands ``/name args`` and
  ``/skill:name args`` before sending, exactly as the coordinator does for the other modes.
* ``@path`` in a submission: each existing file is attached as
  ``<file name="/abs/path">content</file>`` before the text.
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import Any

from ...coding.resources import PromptTemplate, Skill, SkillError, expand_skill_command, split_arguments, substitute_arguments

__all__ = [
    "Template",
    "Skill",
    "load_templates",
    "load_skills",
    "expand_template",
    "expand_skill",
    "attach_files",
    "format_tokens",
    "usage_totals",
    "UsageTally",
    "context_percent",
]

Template = PromptTemplate


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError):
        return None


def _resources(agent_dir: str, cwd: str) -> Any:
    from .._resources import session_resources
    from .._settings import load_settings

    try:
        settings, _warnings = load_settings(agent_dir, cwd)
    except Exception:  # noqa: BLE001 - a bad settings file was reported when the session started
        settings = {}
    return session_resources(None, cwd=cwd, agent_dir=agent_dir, settings=settings, quiet=True)


def load_templates(agent_dir: str, cwd: str) -> dict[str, PromptTemplate]:
    """The prompt templates by name (project ones win), each description ending with where it
    was found."""
    found = _resources(agent_dir, cwd).templates
    return {t.name: dataclasses.replace(t, description=f"{t.description} ({t.scope})") for t in found}


def load_skills(agent_dir: str, cwd: str) -> dict[str, Skill]:
    """The skills by name, in precedence order."""
    return {s.name: s for s in _resources(agent_dir, cwd).skills}


def expand_template(template: PromptTemplate, arg_text: str) -> str:
    """``template`` with ``arg_text``'s arguments substituted (pi's ``$1``, ``$@``, ...)."""
    return substitute_arguments(template.content, split_arguments(arg_text))


def expand_skill(skill: Skill, args: str) -> str:
    """pi's ``<skill ...>`` block for ``skill``, then ``args``. When its file cannot be read
    any more the command is sent as typed (the coordinator tries again and logs why, as pi
    passes an unreadable skill's command through)."""
    typed = f"/skill:{skill.name} {args}".rstrip()
    try:
        return expand_skill_command(typed, [skill])
    except SkillError:
        return typed


_AT = re.compile(r"(?:(?<=\s)|^)@((?:\\ |[^\s])+)")


def attach_files(text: str, cwd: str) -> tuple[str, list[str]]:
    """``<file name=...>`` blocks for each ``@path`` naming an existing file, then the text."""
    blocks, names = [], []
    for m in _AT.finditer(text):
        rel = m.group(1).replace("\\ ", " ").rstrip(",.;:)")
        path = os.path.abspath(os.path.join(cwd, os.path.expanduser(rel)))
        if path in names or not os.path.isfile(path):
            continue
        content = _read(path)
        if content is None:
            continue
        names.append(path)
        blocks.append(f'<file name="{path}">\n{content}\n</file>')
    if not blocks:
        return text, []
    return "\n".join(blocks) + "\n" + text, names


def format_tokens(n: float) -> str:
    """pi's footer format: <1000 as is, <10k one decimal k, <1M k, <10M one decimal M, else M."""
    n = int(n)
    if n < 1000:
        return str(n)
    if n < 10_000:
        return f"{n / 1000:.1f}k"
    if n < 1_000_000:
        return f"{round(n / 1000)}k"
    if n < 10_000_000:
        return f"{n / 1_000_000:.1f}M"
    return f"{round(n / 1_000_000)}M"


def usage_totals(messages: list[dict[str, Any]]) -> dict[str, float]:
    tot: dict[str, float] = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "cost": 0.0}
    _add_usage(tot, messages)
    return tot


def _add_usage(tot: dict[str, float], messages: list[dict[str, Any]]) -> None:
    for m in messages:
        if m.get("role") != "assistant":
            continue
        u = m.get("usage") or {}
        for k in ("input", "output", "cacheRead", "cacheWrite"):
            tot[k] += u.get(k) or 0
        tot["cost"] += ((u.get("cost") or {}).get("total")) or 0.0


class UsageTally:
    """:func:`usage_totals` for the footer, which is drawn on every refresh: a transcript
    list that grows in place (``append``) is counted once, then only its new messages.
    Another list object, or a shorter one, is counted again from the start. The result is
    the full recount's, float for float (the same additions in the same order). The list
    must not have messages replaced in place (the TUI's transcripts only grow or are
    replaced whole)."""

    def __init__(self) -> None:
        self._messages: list[dict[str, Any]] | None = None
        self._totals = usage_totals([])
        #: How many messages of the current list are in the totals.
        self.counted = 0

    def totals(self, messages: list[dict[str, Any]]) -> dict[str, float]:
        if messages is not self._messages or len(messages) < self.counted:
            self._messages, self._totals, self.counted = messages, usage_totals([]), 0
        if len(messages) > self.counted:
            _add_usage(self._totals, messages[self.counted :])
            self.counted = len(messages)
        return dict(self._totals)


def context_percent(messages: list[dict[str, Any]], window: int) -> float | None:
    """Context used by the last successful assistant reply, as a percentage of ``window``."""
    for m in reversed(messages):
        if m.get("role") == "assistant" and m.get("stopReason") not in ("error", "aborted"):
            u = m.get("usage") or {}
            used = (u.get("input") or 0) + (u.get("output") or 0) + (u.get("cacheRead") or 0) + (u.get("cacheWrite") or 0)
            if not window:
                return None
            return 100.0 * used / window
    return 0.0
