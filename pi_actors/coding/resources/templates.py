"""Prompt templates: ``*.md`` files whose body becomes the prompt when the user types
``/name args`` (pi's prompt-templates).

Arguments are split as a shell would split quoted words (``"a b"`` and ``'a b'`` are one
argument, no escapes). In the body, ``$1``..``$N`` are single arguments (missing ones are
empty), ``${@:N}`` the arguments from the N-th on, ``${@:N:L}`` L of them, ``$@`` and
``$ARGUMENTS`` all of them joined by spaces. Substitution happens once, on the template's
text only: an argument containing ``$1`` is not substituted again.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from ._frontmatter import parse_frontmatter

__all__ = ["PromptTemplate", "load_template_file", "load_templates_from", "split_arguments", "substitute_arguments", "expand_prompt_template"]


@dataclass
class PromptTemplate:
    """One template: ``content`` is the body (front matter removed); ``description`` the
    front matter's, else the body's first non-empty line cut at 60 characters; ``scope`` and
    ``source`` as for skills."""

    name: str
    description: str
    content: str
    path: str
    scope: str = "user"
    source: str = "auto"
    argument_hint: str | None = None


def load_template_file(path: str, *, scope: str = "user", source: str = "auto") -> PromptTemplate | None:
    """The template in ``path``; None if it cannot be read as UTF-8 text."""
    try:
        with open(path, encoding="utf-8") as f:
            meta, body = parse_frontmatter(f.read())
    except (OSError, UnicodeDecodeError):
        return None
    description = meta.get("description")
    if not isinstance(description, str) or not description:
        first = next((line.strip() for line in body.splitlines() if line.strip()), "")
        description = first[:60] + ("..." if len(first) > 60 else "")
    hint = meta.get("argument-hint")
    return PromptTemplate(
        name=os.path.basename(path)[:-3], description=description, content=body, path=path, scope=scope, source=source,
        argument_hint=hint if isinstance(hint, str) and hint else None,
    )  # fmt: skip


def load_templates_from(root: str, *, scope: str = "user", source: str = "auto") -> list[PromptTemplate]:
    """The templates of the directory ``root`` (its ``*.md`` files, not recursive) or of the
    single file ``root``; none for a missing path."""
    if os.path.isfile(root):
        found = load_template_file(root, scope=scope, source=source) if root.endswith(".md") else None
        return [found] if found else []
    try:
        names = sorted(os.listdir(root))
    except OSError:
        return []
    out = []
    for name in names:
        path = os.path.join(root, name)
        if name.endswith(".md") and os.path.isfile(path):
            template = load_template_file(path, scope=scope, source=source)
            if template:
                out.append(template)
    return out


def split_arguments(text: str) -> list[str]:
    """``text`` split on spaces and tabs, quotes grouping words (and removed); an unclosed
    quote runs to the end."""
    args: list[str] = []
    current: list[str] = []
    quote: str | None = None
    started = False
    for ch in text:
        if quote:
            if ch == quote:
                quote = None
            else:
                current.append(ch)
        elif ch in "\"'":
            quote, started = ch, True
        elif ch in " \t":
            if current or started:
                args.append("".join(current))
            current, started = [], False
        else:
            current.append(ch)
    if current or started:
        args.append("".join(current))
    return [a for a in args if a]


_PLACEHOLDER = re.compile(r"\$\{@:(\d+)(?::(\d+))?\}|\$ARGUMENTS|\$@|\$(\d+)")


def substitute_arguments(content: str, args: list[str]) -> str:
    """``content`` with its placeholders (module docstring) replaced by ``args``."""

    def one(m: re.Match[str]) -> str:
        if m.group(3) is not None:
            i = int(m.group(3)) - 1
            return args[i] if 0 <= i < len(args) else ""
        if m.group(1) is not None:
            start = max(int(m.group(1)) - 1, 0)
            if m.group(2) is not None:
                return " ".join(args[start : start + int(m.group(2))])
            return " ".join(args[start:])
        return " ".join(args)

    return _PLACEHOLDER.sub(one, content)


def expand_prompt_template(text: str, templates: list[PromptTemplate]) -> str:
    """``/name args`` expanded by the first template called ``name``; any other text
    unchanged."""
    if not text.startswith("/"):
        return text
    head, _, rest = text.partition(" ")
    template = next((t for t in templates if t.name == head[1:]), None)
    if template is None:
        return text
    return substitute_arguments(template.content, split_arguments(rest))
