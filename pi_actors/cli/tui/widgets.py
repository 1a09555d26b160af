"""Small pieces of the TUI: the selector model, the editor's completer (slash commands,
models after /model, ``@`` file paths), and text helpers for messages and tool labels."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from prompt_toolkit.completion import Completer, Completion

if TYPE_CHECKING:
    from .app import TuiApp

__all__ = ["Selector", "TuiCompleter"]


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content or [] if isinstance(b, dict) and b.get("type") == "text")


def _tool_label(name: str, args: dict | None) -> str:
    args = args or {}
    if name == "bash":
        return f"$ {args.get('command', '')}"
    if name in ("read", "write", "edit", "ls"):
        extra = ""
        if name == "read" and (args.get("offset") or args.get("limit")):
            extra = f":{args.get('offset') or 1}" + (f"-{(args.get('offset') or 1) + args['limit'] - 1}" if args.get("limit") else "")
        return f"{name} {args.get('path', '')}{extra}"
    text = json.dumps(args, ensure_ascii=False)
    return f"{name} {text[:150] + '...' if len(text) > 150 else text}"


class Selector:
    def __init__(self, title: str, items: list[tuple[str, Any]], on_select: Callable[[Any], None], initial: str = "", index: int = 0) -> None:
        self.title, self.items, self.on_select = title, items, on_select
        self.filter = initial
        self.index = index

    def visible(self) -> list[tuple[str, Any]]:
        words = self.filter.lower().split()
        return [it for it in self.items if all(w in it[0].lower() for w in words)]


class TuiCompleter(Completer):
    def __init__(self, tui: TuiApp) -> None:
        self.tui = tui

    def get_completions(self, document: Any, complete_event: Any) -> Iterator[Completion]:
        """``/commands``, model ids after ``/model ``, and ``@`` file paths."""
        text = document.text_before_cursor
        if text.startswith("/") and " " not in text and "\n" not in text:
            yield from self._commands(text)
        elif text.startswith("/model ") and "\n" not in text:
            yield from self._models(text[len("/model ") :].lower())
        else:
            m = re.search(r"(?:^|\s)@(\S*)$", text)
            if m:
                yield from self._paths(m.group(1))

    def _commands(self, text: str) -> Iterator[Completion]:
        for name, desc in self.tui.command_list():
            if name.startswith(text[1:]):
                yield Completion("/" + name, start_position=-len(text), display="/" + name, display_meta=desc)

    def _models(self, word: str) -> Iterator[Completion]:
        for m in self.tui.models():
            full = f"{m.provider}/{m.id}"
            if word in full.lower():
                yield Completion(full, start_position=-len(word))

    def _paths(self, prefix: str) -> Iterator[Completion]:
        """Up to 20 entries of the directory typed so far; then, for a bare name of two or
        more characters, deeper paths containing it (pi searches with fd)."""
        dirpart, base = os.path.split(prefix)
        directory = os.path.join(self.tui.cwd, os.path.expanduser(dirpart))
        try:
            names = sorted(os.listdir(directory))
        except OSError:
            return
        shown = 0
        for name in names:
            if (name.startswith(".") and not base.startswith(".")) or not name.lower().startswith(base.lower()):
                continue
            full = os.path.join(dirpart, name)
            if os.path.isdir(os.path.join(directory, name)):
                full += "/"
            yield Completion("@" + full, start_position=-len(prefix) - 1, display=full)
            shown += 1
            if shown >= 20:
                return
        if not dirpart and len(base) >= 2:
            for rel in _walk_matches(self.tui.cwd, base.lower(), 20 - shown):
                yield Completion("@" + rel, start_position=-len(prefix) - 1, display=rel)


def _walk_matches(root: str, needle: str, limit: int, budget: int = 5000) -> list[str]:
    """Up to ``limit`` paths under ``root`` (below its top level) containing ``needle``;
    hidden entries and node_modules skipped, at most ``budget`` entries looked at."""
    out: list[str] = []
    seen = 0
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d != "node_modules")
        if dirpath == root:
            continue
        rel_dir = os.path.relpath(dirpath, root)
        for name in [*(d + "/" for d in dirnames), *sorted(filenames)]:
            seen += 1
            rel = os.path.join(rel_dir, name)
            if needle in rel.lower():
                out.append(rel)
                if len(out) >= limit:
                    return out
        if seen > budget:
            break
    return out
