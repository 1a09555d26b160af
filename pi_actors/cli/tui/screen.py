"""The TUI's screen: the live area at the bottom (the reply being streamed, running tools,
queued messages, spinner, selector), the editor, the footer and the key bindings.

:class:`ScreenLayout` is a part that :class:`~.app.TuiApp` holds (``tui.screen``): it is given
the app whose state it shows and whose actions its keys trigger, and builds the
prompt_toolkit ``Application`` (``screen.application``). See ``app`` for the screen model and
the threads. Everything here runs on the UI thread.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

from prompt_toolkit.application import Application
from prompt_toolkit.buffer import Buffer
from prompt_toolkit.filters import Condition, has_focus
from prompt_toolkit.formatted_text import ANSI, StyleAndTextTuples, to_formatted_text
from prompt_toolkit.formatted_text.utils import split_lines
from prompt_toolkit.input.ansi_escape_sequences import ANSI_SEQUENCES
from prompt_toolkit.key_binding import KeyBindings, merge_key_bindings
from prompt_toolkit.key_binding.defaults import load_key_bindings
from prompt_toolkit.keys import Keys
from prompt_toolkit.layout import ConditionalContainer, HSplit, Layout, Window
from prompt_toolkit.layout.controls import BufferControl, FormattedTextControl
from prompt_toolkit.layout.dimension import Dimension
from prompt_toolkit.renderer import CPR_Support

from ._markdown import PiMarkdown
from .commands import available_levels
from .resources import UsageTally, context_percent, format_tokens
from .themes import current_theme, prompt_toolkit_style, style
from .widgets import _tool_label, completion_view

if TYPE_CHECKING:
    from .app import TuiApp

__all__ = ["ScreenLayout"]

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
#: Every key an open selector may handle itself (see ``Selector.keys``).
#: Shift+Ctrl+P (pi's cycleModelBackward) as the terminals that tell it from Ctrl+P send it:
#: the kitty keyboard protocol's CSI u and xterm's modifyOtherKeys form. prompt_toolkit has
#: no key for it, so both are read as F24 (which no keyboard sends). A terminal without
#: either sends plain Ctrl+P for it (forward).
SHIFT_CTRL_P = Keys.F24
ANSI_SEQUENCES.setdefault("\x1b[112;6u", SHIFT_CTRL_P)
ANSI_SEQUENCES.setdefault("\x1b[27;6;112~", SHIFT_CTRL_P)

SELECTOR_KEYS = frozenset(
    {"up", "down", "left", "right", "enter", "escape", "c-left", "c-right", "escape left", "escape right", "L", "c-d", "c-t", "c-u", "c-l", "c-a", "c-o"}
)


class ScreenLayout:
    """The live area, footer, key bindings and the prompt_toolkit Application of ``tui``.

    Build it once ``tui.buffer`` (the editor) exists; ``application`` is then ready to run."""

    def __init__(self, tui: TuiApp) -> None:
        self.tui = tui
        self._md_cache: tuple[tuple[str, int], StyleAndTextTuples] | None = None
        self._last_ctrl_c = 0.0
        self._last_esc = 0.0
        #: The footer's token and cost totals, counted as messages arrive (not per redraw).
        self._usage = UsageTally()
        #: The selector's filter line (one Buffer; its text is the open selector's filter).
        self.selector_buffer = _SelectorBuffer(tui)
        self.git_branch = _git_branch(tui.cwd)
        self.application = self._build()

    def width(self) -> int:
        """The terminal's width in columns (80 when it cannot be read; at least 20)."""
        try:
            return max(20, self.application.output.get_size().columns)
        except Exception:  # noqa: BLE001 - no terminal (yet): a usable default
            return 80

    def rows(self) -> int:
        """The terminal's height in rows (24 when it cannot be read)."""
        try:
            return max(1, self.application.output.get_size().rows)
        except Exception:  # noqa: BLE001 - no terminal (yet): a usable default
            return 24

    def _completions(self) -> StyleAndTextTuples:
        return completion_view(self.tui.buffer.complete_state, self.tui.commands.autocomplete_rows(), self.width())

    def _markdown_fragments(self, text: str, width: int) -> list[Any]:
        """The streaming text rendered as Markdown (cached: redraws without new text are free)."""
        key = (text, width)
        if self._md_cache is None or self._md_cache[0] != key:
            ansi = self.tui.render(PiMarkdown(text, code_theme="monokai"))
            self._md_cache = (key, to_formatted_text(ANSI(ansi)))
        return list(self._md_cache[1])

    def _live(self) -> list[Any]:
        """The live area: the reply being streamed, running tools with their last output
        lines, a running ``!command``; only the tail that fits (18 wrapped lines)."""
        width = self.width()
        frags = self._stream_fragments(width)
        for tc in self.tui.tools.values():
            frags.append(("bold", "● " + _tool_label(tc["name"] or "?", tc["args"]) + "\n"))
            out = (tc.get("output") or "").rstrip("\n").splitlines()[-5:]
            if out:
                frags.append((style("toolOutput"), "".join("  " + ln[: width - 3] + "\n" for ln in out)))
        if self.tui.bash_running:
            frags.append((style("bashMode"), f"$ {self.tui.bash_running}  (running, esc to cancel)\n"))
        # Keep only the tail that fits: the finished message is printed in full at its end.
        wrapped = _wrap(frags, width)
        while wrapped and not any(f[1].strip() for f in wrapped[-1]):
            wrapped.pop()
        result: list[Any] = []
        for n, line in enumerate(wrapped[-18:]):
            if n:
                result.append(("", "\n"))
            result.extend(line)
        return result

    def _stream_fragments(self, width: int) -> list[Any]:
        """The assistant message being streamed: thinking dimmed, text as Markdown, tool calls."""
        frags: list[Any] = []
        for b in (self.tui.stream or {}).get("content") or []:
            if b.get("type") == "thinking" and b.get("thinking"):
                frags.append(("italic " + style("thinkingText"), (b["thinking"] if self.tui.show_thinking else "Thinking...") + "\n"))
            elif b.get("type") == "text" and b.get("text"):
                frags += self._markdown_fragments(b["text"], width)
            elif b.get("type") == "toolCall":
                frags.append(("bold", "● " + _tool_label(b.get("name", "?"), b.get("arguments")) + "\n"))
        return frags

    def _queued(self) -> StyleAndTextTuples:
        """The queued messages above the editor, as pi shows them, with pi's hint."""
        frags: StyleAndTextTuples = []
        for kind, _sent, shown in self.tui.queued:
            frags.append((style("accent"), f"{kind}: {shown.splitlines()[0] if shown else ''}\n"))
        frags.append((style("muted"), "↳ alt+up to edit all queued messages"))
        return frags

    def _status(self) -> StyleAndTextTuples:
        spin = SPINNER[int(time.monotonic() * 10) % len(SPINNER)]
        if self.tui.status:
            return [(style("accent"), f"{spin} {self.tui.status}")]
        secs = int(time.monotonic() - self.tui._started)
        return [(style("accent"), f"{spin} Working... ({secs}s, esc to abort)")]

    def _selector_view(self) -> StyleAndTextTuples:
        sel = self.tui.selector
        if sel is None:
            return []
        own = sel.view(self.width(), self.rows())
        if own is not None:
            return own
        items = sel.visible()
        sel.index = max(0, min(sel.index, len(items) - 1))
        start = max(0, min(sel.index - 5, len(items) - 10))
        frags: StyleAndTextTuples = [("bold", sel.title + "\n")]
        for i, (label, _) in enumerate(items[start : start + 10], start):
            frags.append(("reverse" if i == sel.index else "", ("→ " if i == sel.index else "  ") + label + "\n"))
        if not items:
            frags.append((style("muted"), "  (no match)\n"))
        frags.append((style("muted"), f"  ({len(items)} items; type to filter, ↑↓ move, enter select, esc cancel)"))
        return frags

    def _footer(self) -> StyleAndTextTuples:
        width = self.width()
        home = os.path.expanduser("~")
        cwd = "~" + self.tui.cwd[len(home) :] if self.tui.cwd.startswith(home) else self.tui.cwd
        line1 = (f"remote {self.tui.remote}" if self.tui.remote else cwd + (f" ({self.git_branch})" if self.git_branch else "")) + (
            f" • {self.tui.session_name}" if self.tui.session_name else ""
        )
        tot = self._usage.totals(self.tui.session_usage if self.tui.session_usage is not None else self.tui.messages)
        parts = []
        for key, sym in (("input", "↑"), ("output", "↓"), ("cacheRead", "R"), ("cacheWrite", "W")):
            if tot[key]:
                parts.append(f"{sym}{format_tokens(tot[key])}")
        if not parts:
            parts = ["↑0", "↓0"]
        parts.append(f"${tot['cost']:.3f}")
        window = int(self.tui.model.get("contextWindow") or 0)
        pct = context_percent(self.tui.messages, window)
        parts.append((f"{pct:.1f}%/{format_tokens(window)}" if pct is not None else f"?/{format_tokens(window)}") + (" (auto)" if self.tui.auto_compaction else ""))
        left = " ".join(parts)
        right = f"({self.tui.model.get('provider')}) {self.tui.model.get('id')}"
        right += f" • {self.tui.thinking}" if self.tui.model.get("reasoning") and self.tui.thinking != "off" else (" • thinking off" if self.tui.model.get("reasoning") else "")
        pad = max(2, width - len(left) - len(right))
        pct_style = style("error") if (pct or 0) > 90 else style("warning") if (pct or 0) > 70 else style("dim")
        return [(style("dim"), line1[:width] + "\n"), (pct_style, left), ("", " " * pad), (style("dim"), right)]

    def _extension_status(self) -> StyleAndTextTuples:
        """The extensions' status lines (``ctx.ui.set_status``), under the footer as pi's."""
        return [(style("text"), self.tui.extensions.status_line()[: self.width()])]

    def _build(self) -> Application:
        """The prompt_toolkit application: the layout and the key bindings."""
        # The completion list is part of the layout, below the editor: it pushes the footer
        # down instead of being drawn over it (a float would cover the footer).
        root = self._body()
        app: Application = Application(
            layout=Layout(root, focused_element=self.tui.buffer),
            # Extensions' keys come last: they win over the editor's defaults (emacs keys),
            # never over the TUI's own (``extension_ui.BUILTIN_KEYS`` are not bound).
            key_bindings=merge_key_bindings([load_key_bindings(), self._key_bindings(), self.tui.extensions.key_bindings]),
            style=prompt_toolkit_style(current_theme(self.tui.agent_dir, self.tui.cwd)),
            full_screen=False,
            mouse_support=False,
            erase_when_done=False,
        )
        # A lone Esc is flushed after ttimeoutlen; a key sequence starting with Esc (Alt+key)
        # waits timeoutlen for its next key: short, so Esc (abort, double-Esc) feels immediate.
        app.ttimeoutlen = 0.05
        app.timeoutlen = 0.25
        # The live area is drawn at its own height right below the printed lines, never
        # stretched to the screen's bottom from a cursor-position report: a report answers
        # the cursor row at the time it was asked, and when lines are printed before it
        # arrives (a run's first messages come fast) the stale row made the live area taller
        # than the rows left, which scrolled the printed lines off the screen.
        app.renderer.cpr_support = CPR_Support.NOT_SUPPORTED
        app.before_render += self.clear_on_shrink
        return app

    def clear_on_shrink(self, app: Any) -> None:
        """settings ``terminal.clearOnShrink`` (pi's; default false). prompt_toolkit draws the
        live area at the tallest height it has had since the last print, so when it shrinks
        (a selector closes, the tool rows of a run go) empty rows stay below the footer, as
        in pi without the setting. With it, the area is erased first and drawn at its own
        height, which clears those rows (and may flicker, as pi warns)."""
        renderer = app.renderer
        last = renderer._last_screen  # prompt_toolkit's record of what it drew last
        if last is None or not self.tui.terminal_setting("clearOnShrink"):
            return
        size = app.output.get_size()
        wanted = app.layout.container.preferred_height(size.columns, size.rows).preferred
        if wanted < min(last.height, size.rows):
            renderer.erase(leave_alternate_screen=False)

    def _key_bindings(self) -> KeyBindings:
        """Keys of the editor, of the open selector, and global ones (see ``HOTKEYS``)."""
        editor = has_focus(self.tui.buffer)
        selecting = Condition(lambda: self.tui.selector is not None)
        kb = KeyBindings()
        for keys, handler, when in [
            (("enter",), self._on_enter, editor),
            (("escape", "enter"), lambda _: self.tui.submit("follow_up"), editor),
            (("escape", "up"), lambda _: self.tui.dequeue(abort=False), editor),
            ((Keys.BracketedPaste,), lambda event: self.tui.paste(event.data), editor),
            # $VISUAL or $EDITOR on a temporary .pi.md file; the text is replaced on exit 0.
            (("c-g",), lambda _: self.tui.buffer.open_in_editor(validate_and_handle=False), editor),
            (("c-j",), lambda _: self.tui.buffer.insert_text("\n"), editor),
            (("c-v",), lambda _: self.tui.paste_image(), editor),  # pi's app.clipboard.pasteImage
            (("tab",), self._on_tab, editor),
            (("escape",), self._on_escape, ~selecting),
            (("c-d",), self._on_ctrl_d, editor),
            (("s-tab",), self._on_cycle_thinking, editor),
            (("c-l",), lambda _: self.tui.commands.cmd_model(""), editor),
            (("c-p",), lambda _: self.tui.commands.cycle_model(), editor),
            ((SHIFT_CTRL_P,), lambda _: self.tui.commands.cycle_model(backward=True), editor),
            (("up",), self._on_selector_up, selecting),
            (("down",), self._on_selector_down, selecting),
            (("enter",), self._on_selector_enter, selecting),
            (("escape",), lambda _: self.tui.close_selector(), selecting),
        ]:
            kb.add(*keys, filter=when)(handler)
        kb.add("c-c")(self._on_ctrl_c)
        kb.add("c-t")(self._on_toggle_thinking)
        kb.add("c-o")(self._on_toggle_tools)
        # Keys an open selector handles itself (the tree's filters, fold, label ...): added
        # last, so they win over the bindings above while that selector is open.
        for name in sorted(SELECTOR_KEYS):
            owns = Condition(lambda n=name: self.tui.selector is not None and n in self.tui.selector.keys)  # type: ignore[misc]
            kb.add(*name.split(), filter=owns)(lambda _, n=name: self.tui.selector.key(n) if self.tui.selector is not None else None)
        return kb

    def _on_enter(self, event: Any) -> None:
        b = self.tui.buffer
        if b.complete_state and b.complete_state.current_completion:
            b.apply_completion(b.complete_state.current_completion)
        elif b.document.text_before_cursor.endswith("\\"):
            b.delete_before_cursor(1)
            b.insert_text("\n")
        else:
            self.tui.submit("steer")

    def _on_tab(self, event: Any) -> None:
        b = self.tui.buffer
        if b.complete_state:
            b.complete_next()
        else:
            b.start_completion(select_first=True)

    def _on_escape(self, event: Any) -> None:
        tui = self.tui
        if tui.buffer.complete_state:
            tui.buffer.cancel_completion()
        elif tui.running:
            # As pi: the queued messages come back into the editor, then the run is aborted.
            tui.dequeue(abort=True)
        elif tui.bash_running:
            tui.ctl.submit("abort")
        elif tui.buffer.text.startswith("!"):
            tui.buffer.reset()
        elif not tui.buffer.text:
            # Double Esc on an empty editor: settings doubleEscapeAction, as pi's: "tree"
            # (the default) opens /tree, "fork" opens /fork, "none" does nothing.
            now = time.monotonic()
            if now - self._last_esc < 0.6:
                self._last_esc = 0.0
                action = tui.commands.settings().get("doubleEscapeAction") or "tree"
                if action == "fork":
                    tui.commands.cmd_fork("")
                elif action == "tree":
                    tui.commands.cmd_tree("")
                elif action != "none":
                    tui.show_error(f"settings doubleEscapeAction must be tree, fork or none, not {action!r}")
            else:
                self._last_esc = now

    def _on_ctrl_c(self, event: Any) -> None:
        now = time.monotonic()
        if self.tui.selector is not None:
            self.tui.close_selector()
        elif now - self._last_ctrl_c < 1.0:
            self.tui.exit_app()
            return
        else:
            self.tui.buffer.reset()
        self._last_ctrl_c = now

    def _on_ctrl_d(self, event: Any) -> None:
        if not self.tui.buffer.text:
            self.tui.exit_app()
        else:
            self.tui.buffer.delete()

    def _on_toggle_thinking(self, event: Any) -> None:
        self.tui.show_thinking = not self.tui.show_thinking
        self.tui.reprint()  # what is already on screen too, as pi re-renders its chat
        self.tui.show_status(f"Thinking blocks: {'shown' if self.tui.show_thinking else 'hidden'}")

    def _on_cycle_thinking(self, event: Any) -> None:
        if not self.tui.model.get("reasoning"):
            self.tui.show_status("Current model does not support thinking")
            return
        levels = available_levels(self.tui.model)  # as pi: the levels this model offers
        thinking = self.tui.thinking
        nxt = levels[(levels.index(thinking) + 1) % len(levels)] if thinking in levels else "off"
        self.tui.commands.cmd_thinking(nxt)

    def _on_toggle_tools(self, event: Any) -> None:
        self.tui.expand_tools = not self.tui.expand_tools
        self.tui.reprint()  # what is already on screen too, as pi re-renders its chat
        self.tui.show_status(f"Tool output: {'expanded' if self.tui.expand_tools else 'collapsed'}")

    def _on_selector_up(self, event: Any) -> None:
        if self.tui.selector is not None:
            self.tui.selector.index = max(0, self.tui.selector.index - 1)

    def _on_selector_down(self, event: Any) -> None:
        if self.tui.selector is not None:
            self.tui.selector.index += 1

    def _on_selector_enter(self, event: Any) -> None:
        sel = self.tui.selector
        if sel is None:
            return
        items = sel.visible()
        self.tui.close_selector()
        if items:
            sel.on_select(items[min(sel.index, len(items) - 1)][1])

    def _rule(self) -> Window:
        """A horizontal rule around the editor, coloured by mode: bash, else thinking level."""

        def rule_style() -> str:
            if self.tui.buffer.text.startswith("!"):
                return style("bashMode")
            return style("thinking" + str(self.tui.thinking).capitalize())  # as pi: by thinking level

        return Window(height=1, char="─", style=rule_style)

    def _body(self) -> HSplit:
        """Live area, queued messages, spinner, selector, editor between rules, footer."""
        selecting = Condition(lambda: self.tui.selector is not None)

        def editor_prefix(lineno: int, wrap: int) -> StyleAndTextTuples:
            return [("bold", "› " if lineno == 0 and wrap == 0 else "  ")]

        return HSplit(
            [
                ConditionalContainer(
                    Window(FormattedTextControl(self._live), dont_extend_height=True, wrap_lines=False),
                    filter=Condition(lambda: bool(self.tui.stream or self.tui.tools or self.tui.bash_running)),
                ),
                ConditionalContainer(
                    Window(FormattedTextControl(self._queued), dont_extend_height=True, wrap_lines=True),
                    filter=Condition(lambda: bool(self.tui.queued)),
                ),
                ConditionalContainer(
                    Window(FormattedTextControl(self._status), height=1),
                    filter=Condition(lambda: self.tui.running or self.tui.status is not None),
                ),
                ConditionalContainer(
                    HSplit(
                        [
                            Window(FormattedTextControl(self._selector_view), dont_extend_height=True),
                            Window(BufferControl(self.selector_buffer), height=1, get_line_prefix=lambda *_: [("bold", self.tui.selector.prompt if self.tui.selector else "")]),
                        ]
                    ),
                    filter=selecting,
                ),
                self._rule(),
                Window(BufferControl(self.tui.buffer), height=Dimension(min=1, max=10), wrap_lines=True, get_line_prefix=editor_prefix, dont_extend_height=True),
                self._rule(),
                ConditionalContainer(
                    Window(FormattedTextControl(self._completions), dont_extend_height=True, wrap_lines=False),
                    filter=Condition(lambda: bool(self.tui.buffer.complete_state and self.tui.buffer.complete_state.completions)),
                ),
                Window(FormattedTextControl(self._footer), height=2),
                ConditionalContainer(
                    Window(FormattedTextControl(self._extension_status), height=1),
                    filter=Condition(lambda: bool(self.tui.extensions.status_line())),
                ),
            ]
        )



class _SelectorBuffer(Buffer):
    """One Buffer object for the filter line; its text is the open selector's filter."""

    def __init__(self, tui: TuiApp) -> None:
        super().__init__(multiline=False)
        self.tui = tui
        self.on_text_changed += lambda _: self._sync()

    def _sync(self) -> None:
        sel = self.tui.selector
        if sel is not None:
            sel.set_filter(self.text)


def _git_branch(cwd: str) -> str | None:
    """The git branch checked out at ``cwd`` or above (``detached`` for a detached HEAD), or None."""
    d = cwd
    while True:
        head = os.path.join(d, ".git", "HEAD")
        if os.path.isfile(head):
            try:
                ref = open(head, encoding="utf-8").read().strip()
            except OSError:
                return None
            return ref.rpartition("/")[2] if ref.startswith("ref:") else "detached"
        parent = os.path.dirname(d)
        if parent == d:
            return None
        d = parent


def _wrap(frags: list[Any], width: int) -> list[list[Any]]:
    """``frags`` as lines of at most ``width`` characters (hard wrap, styles kept)."""
    wrapped: list[list[Any]] = []
    for line in split_lines(frags):
        cur: list[Any] = []
        used = 0
        for frag in line:
            style, text = frag[0], frag[1]
            while text:
                if used >= width:
                    wrapped.append(cur)
                    cur, used = [], 0
                piece, text = text[: width - used], text[width - used :]
                cur.append((style, piece))
                used += len(piece)
        wrapped.append(cur)
    return wrapped
