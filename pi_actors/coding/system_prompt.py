"""The system prompt, built as pi builds it (pi's packages/coding-agent, docs/architecture.md §7), first cut.

Base: ``--system-prompt`` (a file's contents if the value names a file), else the first of
``<cwd>/.pi-actors/SYSTEM.md`` and ``<agent_dir>/SYSTEM.md`` that exists (pi's discovery, with
our project directory), else the default prompt listing the active tools and guidelines; then
``--append-system-prompt``, else the first of ``<cwd>/.pi-actors/APPEND_SYSTEM.md`` and
``<agent_dir>/APPEND_SYSTEM.md``; then the
project context files (AGENTS.md, else CLAUDE.md, from the agent dir and from / down to cwd);
then the current date and working directory.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import date

from .resources import Skill, format_skills_for_prompt

__all__ = ["build_system_prompt", "TOOL_GUIDELINES", "TOOL_SNIPPETS"]

#: Each tool's line under "Available tools" (pi 0.73.1's ``promptSnippet``).
TOOL_SNIPPETS = {
    "read": "Read file contents",
    "bash": "Execute bash commands (ls, grep, find, etc.)",
    "edit": "Make precise file edits with exact text replacement, including multiple disjoint edits in one call",
    "write": "Create or overwrite files",
    "grep": "Search file contents for patterns (respects .gitignore)",
    "find": "Find files by glob pattern (respects .gitignore)",
    "ls": "List directory contents",
}


#: The guidelines each active tool adds, in tool order (pi 0.73.1's ``promptGuidelines``).
TOOL_GUIDELINES = {
    "read": ["Use read to examine files instead of cat or sed."],
    "edit": [
        "Use edit for precise changes (edits[].oldText must match exactly)",
        "When changing multiple separate locations in one file, use one edit call with multiple entries in "
        "edits[] instead of multiple edit calls",
        "Each edits[].oldText is matched against the original file, not after earlier edits are applied. "
        "Do not emit overlapping or nested edits. Merge nearby changes into one edit.",
        "Keep edits[].oldText as small as possible while still being unique in the file. "
        "Do not pad with large unchanged regions.",
    ],
    "write": ["Use write only for new files or complete rewrites."],
}


def _text_or_file(value: str) -> str:
    if value and os.path.isfile(value):
        with open(value, encoding="utf-8") as f:
            return f.read()
    return value


def _discover(name: str, cwd: str, agent_dir: str | None) -> str | None:
    """The project's ``.pi-actors/<name>``, else the agent directory's, if either exists (pi's
    SYSTEM.md / APPEND_SYSTEM.md discovery; the agent directory only when one is given)."""
    for directory in (os.path.join(cwd, ".pi-actors"), agent_dir):
        if directory and os.path.isfile(os.path.join(directory, name)):
            return os.path.join(directory, name)
    return None


def _guidelines(tools: list[str]) -> list[str]:
    """pi 0.73.1's list: the exploration hint, each active tool's guidelines in tool order,
    then the two that are always there; a repeated line is kept once."""
    out: list[str] = []
    has = set(tools)

    def add(line: str) -> None:
        if line not in out:
            out.append(line)

    explore = has & {"grep", "find", "ls"}
    if "bash" in has and not explore:
        add("Use bash for file operations like ls, rg, find")
    if "bash" in has and explore:
        add("Prefer grep/find/ls tools over bash for file exploration (faster, respects .gitignore)")
    for tool in tools:
        for line in TOOL_GUIDELINES.get(tool, ()):
            add(line)
    add("Be concise in your responses")
    add("Show file paths clearly when working with files")
    return out


def _context_files(cwd: str, agent_dir: str | None) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    seen: set[str] = set()

    def take(directory: str) -> None:
        for name in ("AGENTS.md", "CLAUDE.md"):
            path = os.path.join(directory, name)
            if os.path.isfile(path):
                real = os.path.realpath(path)
                if real not in seen:
                    seen.add(real)
                    try:
                        with open(path, encoding="utf-8") as f:
                            found.append((path, f.read()))
                    except OSError:
                        pass
                return

    if agent_dir:
        take(agent_dir)
    parts = os.path.abspath(cwd).split(os.sep)
    for i in range(1, len(parts) + 1):
        take(os.sep + os.path.join(*parts[1:i]) if i > 1 else os.sep)
    return found


def build_system_prompt(
    *,
    cwd: str,
    tools: list[str],
    custom: str | None = None,
    append: str | None = None,
    agent_dir: str | None = None,
    today: date | None = None,
    skills: Sequence[Skill] = (),
) -> str:
    """The full system prompt for a session in ``cwd`` with ``tools`` active; ``skills``
    are listed for the model when it has the ``read`` tool to load them (as pi)."""
    custom = custom or _discover("SYSTEM.md", cwd, agent_dir)
    append = append or _discover("APPEND_SYSTEM.md", cwd, agent_dir)
    if custom:
        prompt = _text_or_file(custom)
    else:
        lines = [
            "You are an expert coding assistant operating inside pi-actors, a coding agent harness. "
            "You help users by reading files, executing commands, editing code, and writing new files.",
            "",
            "Available tools:",
        ]
        lines += [f"- {t}: {TOOL_SNIPPETS.get(t, t)}" for t in tools] or ["(none)"]
        lines += ["", "In addition to the tools above, you may have access to other custom tools depending on the project.", ""]
        lines.append("Guidelines:")
        lines += [f"- {g}" for g in _guidelines(tools)]
        prompt = "\n".join(lines)
    if append:
        prompt += "\n\n" + _text_or_file(append)
    files = _context_files(cwd, agent_dir)
    if files:
        prompt += "\n\n# Project Context\n\nProject-specific instructions and guidelines:\n\n"
        for path, content in files:
            prompt += f"## {path}\n\n{content}\n\n"
    if "read" in tools:
        prompt += format_skills_for_prompt(list(skills))
    prompt += f"\nCurrent date: {(today or date.today()).isoformat()}"
    prompt += f"\nCurrent working directory: {cwd.replace(os.sep, '/')}"
    return prompt
