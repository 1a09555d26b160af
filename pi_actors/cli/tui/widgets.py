"""Small pieces of the TUI: the selector model, the editor's completer (slash commands,
models after /model, ``@`` file paths), and text helpers for messages and tool labels."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from prompt_toolkit.completion import Completer, Completion
from prompt_toolkit.formatted_text import StyleAndTextTuples

if TYPE_CHECKING:
    from .app import TuiApp
    from .tree import TreeView

__all__ = ["Selector", "TreeSelector", "InputSelector", "ChoiceSelector", "TuiCompleter", "completion_view", "session_message_view"]


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


def session_message_view(m: dict[str, Any], expanded: bool) -> list[Any] | None:
    """What the transcript shows for pi's session-made messages (as pi's components do), as
    rich renderables; None for other roles, [] for one not shown:

    * ``custom`` (an extension's message): shown only with ``display: true``, as a bold
      ``[customType]`` label over its text as Markdown;
    * ``compactionSummary``: ``[compaction]`` and "Compacted from N tokens (ctrl+o to expand)",
      or the summary in full when tool output is expanded;
    * ``branchSummary``: ``[branch]`` and "Branch summary (ctrl+o to expand)", or in full."""
    from rich.markdown import Markdown
    from rich.text import Text

    role = m.get("role")
    label_style, text_style = "theme.label", "theme.muted"
    if role == "custom":
        if not m.get("display"):
            return []
        content = m.get("content")
        text = content if isinstance(content, str) else "\n".join(b.get("text", "") for b in content or [] if isinstance(b, dict) and b.get("type") == "text")
        return [Text(f"[{m.get('customType')}]", style=label_style), Markdown(text)]
    if role == "compactionSummary":
        tokens = f"{int(m.get('tokensBefore') or 0):,}"
        if expanded:
            return [Text("[compaction]", style=label_style), Markdown(f"**Compacted from {tokens} tokens**\n\n" + (m.get("summary") or ""))]
        return [Text("[compaction]", style=label_style), Text.assemble((f"Compacted from {tokens} tokens (", text_style), ("ctrl+o", "theme.dim"), (" to expand)", text_style))]
    if role == "branchSummary":
        if expanded:
            return [Text("[branch]", style=label_style), Markdown("**Branch Summary**\n\n" + (m.get("summary") or ""))]
        return [Text("[branch]", style=label_style), Text.assemble(("Branch summary (", text_style), ("ctrl+o", "theme.dim"), (" to expand)", text_style))]
    return None


class Selector:
    """A list to pick from, drawn in the live area with a filter line below it.

    ``items`` are (label, value); Enter calls ``on_select(value)`` after the selector closed.
    The screen asks a selector three more things, whose defaults here make the plain list:
    ``keys`` (the key names it handles itself through :meth:`key`, before the screen's own
    bindings), :meth:`view` (its own drawing, or None for the plain list) and ``prompt``
    (the filter line's prefix); typing in the filter line calls :meth:`set_filter`."""

    #: Key names (prompt_toolkit's) this selector handles in :meth:`key`.
    keys: frozenset[str] = frozenset()
    prompt = "search: "

    def __init__(self, title: str, items: list[tuple[str, Any]], on_select: Callable[[Any], None], initial: str = "", index: int = 0) -> None:
        self.title, self.items, self.on_select = title, items, on_select
        self.filter = initial
        self.index = index

    def visible(self) -> list[tuple[str, Any]]:
        words = self.filter.lower().split()
        return [it for it in self.items if all(w in it[0].lower() for w in words)]

    def set_filter(self, text: str) -> None:
        """The filter line's text changed to ``text``."""
        self.filter = text
        self.index = 0

    def view(self, width: int, rows: int) -> StyleAndTextTuples | None:
        """Fragments to draw instead of the plain list (None: the plain list)."""
        return None

    def key(self, name: str) -> None:
        """React to the key ``name`` (one of ``keys``)."""


#: How each kind of tree row (:func:`.tree.entry_text`) is coloured.
_TREE_STYLES = {
    "user": "fg:ansicyan",
    "assistant": "fg:ansigreen",
    "error": "fg:ansired",
    "muted": "fg:ansibrightblack",
    "dim": "fg:ansibrightblack",
    "custom": "fg:ansimagenta",
    "summary": "fg:ansiyellow",
    "compaction": "fg:ansiblue",
}
_TREE_HINT = "↑/↓ move, ←/→ page, ^←/^→ or Alt+←/→ fold/branch, Shift+L label, ^D/^T/^U/^L/^A filters (^O cycle), enter go, esc close"


def _fit(frags: list[tuple[str, str]], width: int) -> StyleAndTextTuples:
    """``frags`` (one line) cut to ``width`` characters."""
    out: StyleAndTextTuples = []
    used = 0
    for style, text in frags:
        if used + len(text) > width:
            text = text[: max(0, width - used - 1)] + "…"
            out.append((style, text))
            break
        out.append((style, text))
        used += len(text)
    return out


class TreeSelector(Selector):
    """``/tree``: a :class:`~.tree.TreeView` drawn and driven as pi's tree selector. The filter
    line is the search; ``on_choose(entry_id)`` after Enter, ``on_label(entry_id, label)``
    after Shift+L, ``on_cancel()`` after Esc (with an empty search). The selector closes itself
    (``tui.close_selector``) before it calls any of them."""

    keys = frozenset(
        {"up", "down", "left", "right", "enter", "escape", "c-left", "c-right", "escape left", "escape right", "L", "c-d", "c-t", "c-u", "c-l", "c-a", "c-o"}
    )
    prompt = "Type to search: "
    _FILTER_KEYS = {"c-d": "default", "c-t": "no-tools", "c-u": "user-only", "c-l": "labeled-only", "c-a": "all"}

    def __init__(
        self,
        tui: TuiApp,
        view: TreeView,
        on_choose: Callable[[str], None],
        on_label: Callable[[str, str | None], None],
        on_cancel: Callable[[], None] | None = None,
    ) -> None:
        self.tui, self.tree = tui, view
        self.title = "Session tree"
        self.items: list[tuple[str, Any]] = []
        self.on_select = on_choose
        self.on_label, self.on_cancel = on_label, on_cancel
        self.index = 0
        self.rows = 20
        self.filter = view.search

    def set_filter(self, text: str) -> None:
        self.filter = text
        self.tree.set_search(text)

    def view(self, width: int, rows: int) -> StyleAndTextTuples:
        """Title, keys, the rows around the cursor (half the terminal, at least 5), ``(i/N)``."""
        self.rows = max(5, rows // 2)
        frags: StyleAndTextTuples = [("bold", self.title + "\n")]
        frags += _fit([("fg:ansibrightblack", _TREE_HINT)], width) + [("", "\n")]
        shown = self.tree.rows(self.rows)
        if not shown:
            frags.append(("fg:ansibrightblack", "  No entries found\n"))
        for row in shown:
            sel = " bold bg:#303030" if row.selected else ""
            line: list[tuple[str, str]] = [("fg:ansicyan" + sel, "› " if row.selected else "  "), ("fg:ansibrightblack" + sel, row.prefix)]
            if row.folded and "⊞" not in row.prefix:
                line.append(("fg:ansicyan" + sel, "⊞ "))
            if row.on_path:
                line.append(("fg:ansicyan" + sel, "• "))
            if row.label:
                line.append(("fg:ansiyellow" + sel, f"[{row.label}] "))
            line.append((_TREE_STYLES.get(row.kind, "") + sel, row.text))
            if row.active:
                line.append(("fg:ansicyan" + sel, "  ← active"))
            frags += _fit(line, width) + [("", "\n")]
        frags.append(("fg:ansibrightblack", "  " + self.tree.status()))
        return frags

    def key(self, name: str) -> None:
        tree = self.tree
        if name in ("up", "down"):
            tree.move(-1 if name == "up" else 1)
        elif name in ("left", "right"):
            tree.page(-1 if name == "left" else 1, self.rows)
        elif name in ("c-left", "escape left"):
            tree.fold_or_up()
        elif name in ("c-right", "escape right"):
            tree.unfold_or_down()
        elif name in self._FILTER_KEYS:
            tree.set_filter(self._FILTER_KEYS[name])
        elif name == "c-o":
            tree.cycle_filter()
        elif name == "escape":
            if tree.search:
                self.tui.screen.selector_buffer.text = ""  # (the buffer clears the search)
            else:
                self.tui.close_selector()
                if self.on_cancel is not None:
                    self.on_cancel()
        elif name in ("enter", "L") and tree.selected is not None:
            target = tree.selected
            self.tui.close_selector()
            if name == "enter":
                self.on_select(target)
            else:
                self.on_label(target, tree.labels.get(target))


class InputSelector(Selector):
    """One line of text to enter (a label, summary instructions): ``title`` above, the
    filter line is the input (starting with ``initial``); Enter closes and calls
    ``on_submit(text)``, Esc closes and calls ``on_cancel()``."""

    keys = frozenset({"enter", "escape"})
    prompt = "> "

    def __init__(self, tui: TuiApp, title: str, on_submit: Callable[[str], None], on_cancel: Callable[[], None], initial: str = "", hint: str = "enter save, esc cancel") -> None:
        super().__init__(title, [], on_submit, initial=initial)
        self.tui, self.on_cancel, self.hint = tui, on_cancel, hint

    def view(self, width: int, rows: int) -> StyleAndTextTuples:
        return [("bold", self.title + "\n"), ("fg:ansibrightblack", "  " + self.hint)]

    def key(self, name: str) -> None:
        text = self.filter
        self.tui.close_selector()
        if name == "enter":
            self.on_select(text)
        else:
            self.on_cancel()


class ChoiceSelector(Selector):
    """A plain list whose Esc calls ``on_cancel()`` (after closing), e.g. to go back."""

    keys = frozenset({"escape"})

    def __init__(self, tui: TuiApp, title: str, items: list[tuple[str, Any]], on_select: Callable[[Any], None], on_cancel: Callable[[], None]) -> None:
        super().__init__(title, items, on_select)
        self.tui, self.on_cancel = tui, on_cancel

    def key(self, name: str) -> None:
        self.tui.close_selector()
        self.on_cancel()


def completion_view(state: Any, max_visible: int, width: int) -> StyleAndTextTuples:
    """The completion list drawn below the editor (above the footer, never over it): up to
    ``max_visible`` rows around the selected one and an ``(i/N)`` line. ``state`` is the
    editor buffer's ``complete_state`` (None or no completions: nothing)."""
    items = list(getattr(state, "completions", None) or [])
    if not items:
        return []
    index = state.complete_index
    n = len(items)
    visible = max(1, min(max_visible, n))
    at = index if index is not None else 0
    start = max(0, min(at - visible // 2, n - visible))
    name_width = min(32, max(len(c.display_text) for c in items[start : start + visible]) + 2)
    frags: StyleAndTextTuples = []
    for i in range(start, start + visible):
        c = items[i]
        chosen = i == index
        style = "fg:ansicyan bold" if chosen else ""
        line = [(style, ("→ " if chosen else "  ") + c.display_text.ljust(name_width))]
        if c.display_meta_text:
            line.append(("fg:ansibrightblack", c.display_meta_text))
        frags += _fit(line, width) + [("", "\n")]
    frags.append(("fg:ansibrightblack", f"  ({at + 1}/{n})"))
    return frags


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
