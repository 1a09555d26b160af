"""Pure helpers of the TUI: prompt templates, skills, ``@file`` attachments, footer numbers.

Nothing here imports prompt_toolkit or rich, so it is cheap and testable on its own.

* Prompt templates: ``*.md`` in ``<agentDir>/prompts`` and ``<cwd>/.pi-actors/prompts``
  (project first, so it wins); ``/name args`` expands ``$1..$N``, ``${@:N}``, ``${@:N:L}``,
  ``$ARGUMENTS`` and ``$@`` (pi's prompt-templates.ts, spec §6.7).
* Skills: ``<agentDir>/skills``, ``~/.agents/skills``, ``<cwd>/.pi-actors/skills``,
  ``<cwd>/.agents/skills``: a directory with ``SKILL.md`` or a root-level ``*.md``; a skill
  needs a ``description``. ``/skill:name args`` expands to pi's ``<skill ...>`` block (§4.3).
* ``@path`` in a submission: each existing file is attached as
  ``<file name="/abs/path">content</file>`` before the text.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass
from typing import Any

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


@dataclass
class Template:
    name: str
    description: str
    body: str
    path: str


@dataclass
class Skill:
    name: str
    description: str
    body: str
    path: str


def _frontmatter(text: str) -> tuple[dict[str, str], str]:
    if not text.startswith("---"):
        return {}, text
    end = text.find("\n---", 3)
    if end < 0:
        return {}, text
    meta: dict[str, str] = {}
    for line in text[3:end].splitlines():
        if ":" in line:
            k, v = line.split(":", 1)
            meta[k.strip()] = v.strip().strip("\"'")
    rest = text[end + 4 :]
    return meta, rest.lstrip("\n")


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except (OSError, UnicodeDecodeError):
        return None


def load_templates(agent_dir: str, cwd: str) -> dict[str, Template]:
    out: dict[str, Template] = {}
    for where, directory in (("project", os.path.join(cwd, ".pi-actors", "prompts")), ("user", os.path.join(agent_dir, "prompts"))):
        try:
            names = sorted(os.listdir(directory))
        except OSError:
            continue
        for name in names:
            if not name.endswith(".md"):
                continue
            text = _read(os.path.join(directory, name))
            if text is None:
                continue
            meta, body = _frontmatter(text)
            desc = meta.get("description") or next((ln.strip() for ln in body.splitlines() if ln.strip()), "")
            if len(desc) > 60:
                desc = desc[:60] + "..."
            tname = name[:-3]
            out.setdefault(tname, Template(tname, f"{desc} ({where})", body, os.path.join(directory, name)))
    return out


def load_skills(agent_dir: str, cwd: str) -> dict[str, Skill]:
    out: dict[str, Skill] = {}
    roots = [
        os.path.join(cwd, ".pi-actors", "skills"),
        os.path.join(cwd, ".agents", "skills"),
        os.path.join(agent_dir, "skills"),
        os.path.expanduser("~/.agents/skills"),
    ]
    for root in roots:
        try:
            entries = sorted(os.listdir(root))
        except OSError:
            continue
        if os.path.isfile(os.path.join(root, "SKILL.md")):
            candidates = [(os.path.join(root, "SKILL.md"), os.path.basename(root))]
        else:
            candidates = []
            for e in entries:
                if e.startswith(".") or e == "node_modules":
                    continue
                p = os.path.join(root, e)
                if os.path.isdir(p) and os.path.isfile(os.path.join(p, "SKILL.md")):
                    candidates.append((os.path.join(p, "SKILL.md"), e))
                elif e.endswith(".md") and os.path.isfile(p):
                    candidates.append((p, e[:-3]))
        for path, default_name in candidates:
            text = _read(path)
            if text is None:
                continue
            meta, body = _frontmatter(text)
            if not meta.get("description"):
                continue
            name = meta.get("name") or default_name
            out.setdefault(name, Skill(name, meta["description"], body.strip(), path))
    return out


def _split_args(text: str) -> list[str]:
    try:
        return shlex.split(text, posix=True)
    except ValueError:
        return text.split()


def expand_template(template: Template, arg_text: str) -> str:
    args = _split_args(arg_text)

    def slice_(m: re.Match) -> str:
        start = max(int(m.group(1)), 1) - 1
        if m.group(2) is not None:
            return " ".join(args[start : start + int(m.group(2))])
        return " ".join(args[start:])

    def sub(m: re.Match) -> str:
        whole = m.group(0)
        if whole.startswith("${@:"):
            return slice_(re.match(r"\$\{@:(\d+)(?::(\d+))?\}", whole))  # type: ignore[arg-type]
        if whole in ("$ARGUMENTS", "$@"):
            return " ".join(args)
        i = int(whole[1:]) - 1
        return args[i] if 0 <= i < len(args) else ""

    return re.sub(r"\$\{@:\d+(?::\d+)?\}|\$ARGUMENTS|\$@|\$\d+", sub, template.body)


def expand_skill(skill: Skill, args: str) -> str:
    block = (
        f'<skill name="{skill.name}" location="{skill.path}">\n'
        f"References are relative to {os.path.dirname(skill.path)}.\n\n{skill.body}\n</skill>"
    )
    return f"{block}\n\n{args}" if args.strip() else block


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
