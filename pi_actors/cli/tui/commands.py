"""The TUI's slash commands and the session views they open (/model … /fork).

:class:`SlashCommands` is a part that :class:`~.app.TuiApp` holds (``app.commands``); it is
given the app it acts on. ``run(name, rest)`` dispatches ``/name rest`` through one table
(name → handler); every handler runs on the UI loop and talks to the coordinator through
``app.call(method, args, then)``, whose callback runs on the UI loop again. The screen model,
printing and submissions stay in ``app``; the live area and key bindings are in ``screen``.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from rich.text import Text

from ...choices import THINKING_LEVELS
from .resources import format_tokens
from .widgets import Selector, _text_of

if TYPE_CHECKING:
    from .app import TuiApp

__all__ = ["SlashCommands", "THINKING_LEVELS", "HOTKEYS"]

HOTKEYS = [
    ("Enter", "send; while the agent runs: queue a steering message"),
    ("Alt+Enter", "while the agent runs: queue a follow-up message"),
    ("Ctrl+J, \\+Enter", "new line"),
    ("Esc", "abort the current run (or a !command); twice on an empty editor: /tree"),
    ("Alt+Up", "queued messages back into the editor (Esc during a run does it too)"),
    ("Ctrl+C", "clear the editor; twice quickly: quit"),
    ("Ctrl+D", "quit (empty editor)"),
    ("Ctrl+T", "show/hide thinking"),
    ("Shift+Tab", "cycle thinking level"),
    ("Ctrl+O", "expand/collapse tool output"),
    ("Ctrl+L", "select model"),
    ("Ctrl+G", "edit the message in $VISUAL / $EDITOR"),
    ("Up/Down", "history (empty or first/last line)"),
    ("Tab", "complete /commands and @files"),
    ("paste", "more than 10 lines or 1000 chars: shown as [paste #N], sent in full"),
    ("!cmd / !!cmd", "run a shell command (!! keeps it out of the context)"),
]


class SlashCommands:
    """The built-in slash commands of one TUI; ``tui`` is the TuiApp they act on (its state,
    its printing, its coordinator calls and its selector)."""

    def __init__(self, tui: TuiApp) -> None:
        self.tui = tui
        #: ``/name`` → handler taking the rest of the line (see ``BUILTINS`` in ``app``).
        self.table: dict[str, Callable[[str], None]] = {
            "model": self.cmd_model,
            "thinking": self.cmd_thinking,
            "compact": self.cmd_compact,
            "new": self.cmd_new,
            "resume": self.cmd_resume,
            "session": self.cmd_session,
            "tree": self.cmd_tree,
            "fork": self.cmd_fork,
            "name": self.cmd_name,
            "copy": self.cmd_copy,
            "export": self.cmd_export,
            "hotkeys": self.cmd_hotkeys,
            "quit": self.cmd_quit,
        }

    def run(self, name: str, rest: str) -> bool:
        """Run the built-in command ``name`` with ``rest``; False if there is none."""
        handler = self.table.get(name)
        if handler is None:
            return False
        handler(rest)
        return True

    def cmd_quit(self, rest: str) -> None:
        self.tui.exit_app()

    def cmd_hotkeys(self, rest: str) -> None:
        t = Text()
        for key, what in HOTKEYS:
            t.append(f"  {key:<18}", style="bold")
            t.append(what + "\n")
        self.tui.print_text(Text("Keyboard shortcuts", style="bold underline"), t)

    def set_model(self, m: Any) -> None:
        from ...ai import types as T

        def done(result: Any) -> None:
            self.tui.model = result if isinstance(result, dict) and result.get("id") else T.to_plain(m)
            self.tui.show_status(f"Model: {self.tui.model.get('provider')}/{self.tui.model.get('id')}")
            self.tui.call("get_state", {}, lambda st: setattr(self.tui, "thinking", (st or {}).get("thinkingLevel", self.tui.thinking)))

        self.tui.call("set_model", {"model": T.to_plain(m)}, done)

    def cmd_model(self, rest: str) -> None:
        models = self.tui.models()
        if rest:
            exact = [m for m in models if f"{m.provider}/{m.id}" == rest or m.id == rest]
            if len(exact) == 1:
                self.set_model(exact[0])
                return
        current = f"{self.tui.model.get('provider')}/{self.tui.model.get('id')}"
        items = [(f"{m.provider}/{m.id}" + ("  ✓" if f"{m.provider}/{m.id}" == current else ""), m) for m in models]
        index = next((i for i, m in enumerate(models) if f"{m.provider}/{m.id}" == current), 0)
        self.tui.open_selector(Selector("Select model", items, self.set_model, initial=rest, index=0 if rest else index))

    def cmd_thinking(self, rest: str) -> None:
        def choose(level: str) -> None:
            def done(result: Any) -> None:
                self.tui.thinking = (result or {}).get("level", level)
                self.tui.show_status(f"Thinking level: {self.tui.thinking}")

            self.tui.call("set_thinking_level", {"level": level}, done)

        if rest in THINKING_LEVELS:
            choose(rest)
        elif rest:
            self.tui.show_error(f"Unknown thinking level {rest!r}; one of {', '.join(THINKING_LEVELS)}")
        else:
            items = [(lv + ("  ✓" if lv == self.tui.thinking else ""), lv) for lv in THINKING_LEVELS]
            self.tui.open_selector(Selector("Thinking level", items, choose, index=THINKING_LEVELS.index(self.tui.thinking) if self.tui.thinking in THINKING_LEVELS else 0))

    def cmd_compact(self, rest: str) -> None:
        self.tui.status = "Compacting context..."

        def done(result: Any) -> None:
            self.tui.status = None
            before = (result or {}).get("tokensBefore")
            self.tui.print_text(Text(f"Compacted context ({format_tokens(before or 0)} tokens before).", style="dim"))
            self.reload_messages()

        self.tui.call("compact", {"customInstructions": rest} if rest else {}, done)

    def reload_messages(self, reprint: bool = False) -> None:
        def got(result: Any) -> None:
            self.tui.messages = list((result or {}).get("messages") or [])
            if reprint:
                for m in self.tui.messages[-40:]:
                    self.tui.print_message(m)

        self.tui.call("get_messages", {}, got)

    def refresh_session_info(self) -> None:
        """Session name and all-branch usage from the session's entries."""

        def got(tree: Any) -> None:
            entries = (tree or {}).get("entries") or []
            names = [e.get("name") for e in entries if e.get("type") == "session_info" and e.get("name")]
            self.tui.session_name = names[-1] if names else None
            self.tui.session_usage = [
                e["message"] for e in entries if e.get("type") == "message" and (e.get("message") or {}).get("role") == "assistant"
            ]

        self.tui.call("tree", {}, got)

    def after_session_change(self, result: Any, what: str) -> None:
        self.tui.session_path = (result or {}).get("path") or self.tui.session_path
        self.tui.session_name = None
        self.tui.session_usage = None
        self.refresh_session_info()
        self.tui.queued.clear()  # a new or switched session starts with empty queues
        self.tui.show_status(f"{what}: {self.tui.session_path or '(not saved)'}")
        for warning in (result or {}).get("warnings") or []:
            self.tui.show_error(f"Warning: {warning}")
        self.tui.call("get_state", {}, self.apply_state)
        self.reload_messages(reprint=what != "New session")

    def apply_state(self, st: Any) -> None:
        st = st or {}
        if isinstance(st.get("model"), dict):
            self.tui.model = st["model"]
        self.tui.thinking = st.get("thinkingLevel", self.tui.thinking)

    def cmd_new(self, rest: str) -> None:
        self.tui.call("new_session", {}, lambda r: self.after_session_change(r, "New session"))

    def cmd_resume(self, rest: str) -> None:
        if self.tui.remote:
            self.tui.show_error("/resume picks a session file on this machine; for another session on the server run: pi-actors attach URL --session ID")
            return
        from datetime import datetime

        from ...coding.session import list_sessions

        directory = self.tui.session_dir or (os.path.dirname(self.tui.session_path) if self.tui.session_path else None)
        sessions = list_sessions(directory) if directory else []
        if not sessions:
            self.tui.show_error("No sessions to resume here.")
            return
        items = []
        for info in sessions[:200]:
            when = datetime.fromtimestamp(info.modified_ms / 1000).strftime("%Y-%m-%d %H:%M")
            title = (info.name or info.first_message or "").replace("\n", " ")[:60]
            items.append((f"{when}  {info.message_count:>3} msgs  {title}", info.path))
        self.tui.open_selector(
            Selector("Resume session", items, lambda p: self.tui.call("switch_session", {"sessionPath": p}, lambda r: self.after_session_change(r, "Resumed")))
        )

    def cmd_session(self, rest: str) -> None:
        def show(st: Any) -> None:
            st = st or {}
            tok = st.get("tokens") or {}
            lines = [
                f"Name: {self.tui.session_name or '(none)'}",
                f"File: {st.get('sessionFile') or '(not saved)'}",
                f"ID: {st.get('sessionId')}",
                f"Messages: {st.get('userMessages', 0)} user, {st.get('assistantMessages', 0)} assistant, "
                f"{st.get('toolCalls', 0)} tool calls, {st.get('toolResults', 0)} tool results, {st.get('totalMessages', 0)} total",
                f"Tokens: {tok.get('input', 0)} in, {tok.get('output', 0)} out, {tok.get('cacheRead', 0)} cache read, "
                f"{tok.get('cacheWrite', 0)} cache write, {tok.get('total', 0)} total",
                f"Cost: ${st.get('cost', 0.0):.4f}",
            ]
            self.tui.print_text(Text("Session", style="bold underline"), Text("\n".join(lines)))

        self.tui.call("get_session_stats", {}, show)

    def cmd_name(self, rest: str) -> None:
        if not rest:
            self.tui.show_status(f"Session name: {self.tui.session_name}" if self.tui.session_name else "Usage: /name <name>")
            return

        def done(_: Any) -> None:
            self.tui.session_name = rest
            self.tui.show_status(f"Session name: {rest}")

        self.tui.call("set_session_name", {"name": rest}, done)

    def cmd_copy(self, rest: str) -> None:
        def done(result: Any) -> None:
            text = (result or {}).get("text")
            if not text:
                self.tui.show_error("No agent messages to copy yet.")
                return
            seq = "\x1b]52;c;" + base64.b64encode(text.encode()).decode() + "\x07"
            if os.environ.get("TMUX"):
                seq = "\x1bPtmux;" + seq.replace("\x1b", "\x1b\x1b") + "\x1b\\"
            self.tui.print_ansi(seq)
            self.tui.show_status("Copied last agent message to clipboard")

        self.tui.call("get_last_assistant_text", {}, done)

    def cmd_export(self, rest: str) -> None:
        args = {"outputPath": os.path.abspath(os.path.join(self.tui.cwd, os.path.expanduser(rest)))} if rest else {}
        self.tui.call("export_html", args, lambda r: self.tui.show_status(f"Session exported to: {(r or {}).get('path')}"))

    def cmd_tree(self, rest: str) -> None:
        def show(tree: Any) -> None:
            entries = (tree or {}).get("entries") or []
            leaf = (tree or {}).get("leafId")
            by_id = {e.get("id"): e for e in entries}
            depth: dict[str, int] = {}
            children: dict[Any, int] = {}
            items = []
            for e in entries:
                parent = e.get("parentId")
                children[parent] = children.get(parent, 0) + 1
                # indent only where the tree branches
                d = depth.get(parent, -1) + (1 if parent in by_id and children[parent] > 1 else 0) if parent in depth else 0
                depth[e.get("id")] = max(d, 0)
                if e.get("type") != "message":
                    label = e.get("type", "?")
                    if e.get("type") not in ("compaction", "branch_summary"):
                        continue
                else:
                    msg = e.get("message") or {}
                    role = msg.get("role")
                    text = _text_of(msg.get("content")).replace("\n", " ")
                    if role == "assistant" and not text:
                        text = "(tool calls)"
                    label = f"{role}: {text}"[:100]
                items.append(("  " * depth[e.get("id")] + label, e.get("id")))
            if not items:
                self.tui.show_status("The session is empty.")
                return
            # The active point: the deepest shown entry on the leaf's path (the leaf itself
            # may be an entry that is not shown, such as a session name).
            path, cur = set(), leaf
            while cur in by_id and cur not in path:
                path.add(cur)
                cur = by_id[cur].get("parentId")
            idx = max((i for i, it in enumerate(items) if it[1] in path), default=len(items) - 1)
            items[idx] = (items[idx][0] + "  ← active", items[idx][1])
            active = items[idx][1]

            def go(target: str) -> None:
                if target == active:
                    self.tui.show_status("Already at this point")
                    return

                def done(result: Any) -> None:
                    text = (result or {}).get("editorText")
                    if text:
                        self.tui.buffer.text = text
                    self.tui.show_status("Navigated to selected point")
                    self.reload_messages()

                self.tui.call("navigate", {"targetId": target}, done)

            self.tui.open_selector(Selector("Session tree (enter: go there)", items, go, index=idx))

        self.tui.call("tree", {}, show)

    def cmd_fork(self, rest: str) -> None:
        def show(result: Any) -> None:
            msgs = (result or {}).get("messages") or []
            if not msgs:
                self.tui.show_status("No messages to fork from")
                return
            items = [(m.get("text", "").replace("\n", " ")[:100], m.get("entryId")) for m in msgs]

            def go(entry_id: str) -> None:
                def forked(r: Any) -> None:
                    text, path = (r or {}).get("text"), (r or {}).get("path")
                    if text:
                        self.tui.buffer.text = text
                    if path:
                        self.tui.call("switch_session", {"sessionPath": path}, lambda s: self.after_session_change(s, "Forked to"))

                self.tui.call("fork", {"entryId": entry_id}, forked)

            self.tui.open_selector(Selector("Fork from message", items, go, index=len(items) - 1))

        self.tui.call("fork_messages", {}, show)
