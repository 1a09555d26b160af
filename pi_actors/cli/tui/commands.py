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
import shutil
from collections.abc import Callable
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any, cast

from prompt_toolkit.document import Document
from rich.text import Text

from ...choices import THINKING_LEVELS
from .logins import LoginCommands
from .resources import format_tokens, load_skills, load_templates
from .settings_menu import SettingsCommands
from .tree import FILTER_MODES, TreeView
from .widgets import ChoiceSelector, InputSelector, Selector, TreeSelector

if TYPE_CHECKING:
    from .app import TuiApp

__all__ = ["BUILTINS", "SlashCommands", "THINKING_LEVELS", "HOTKEYS", "available_levels"]


def available_levels(model: dict[str, Any]) -> list[str]:
    """The thinking levels ``model`` (a model as a dict) has, as pi offers them: only "off"
    without reasoning; none its ``thinkingLevelMap`` maps to null; "xhigh" only where the
    model supports it (ai.supported_thinking_levels)."""
    from ...ai.options import supported_thinking_levels

    level_map = model.get("thinkingLevelMap")
    plain = SimpleNamespace(
        id=str(model.get("id") or ""),
        reasoning=bool(model.get("reasoning")),
        thinking_level_map=level_map if isinstance(level_map, dict) else None,
    )
    return supported_thinking_levels(cast(Any, plain))


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pi-actors")
    except PackageNotFoundError:
        return "(unknown version)"


HOTKEYS = [
    ("Enter", "send; while the agent runs: queue a steering message"),
    ("Alt+Enter", "while the agent runs: queue a follow-up message"),
    ("Ctrl+J, \\+Enter", "new line"),
    ("Esc", "abort the current run (or a !command); twice on an empty editor: /tree (settings doubleEscapeAction)"),
    ("Alt+Up", "queued messages back into the editor (Esc during a run does it too)"),
    ("Ctrl+C", "clear the editor; twice quickly: quit"),
    ("Ctrl+D", "quit (empty editor)"),
    ("Ctrl+T", "show/hide thinking"),
    ("Shift+Tab", "cycle thinking level"),
    ("Ctrl+O", "expand/collapse tool output"),
    ("Ctrl+L", "select model"),
    ("Ctrl+P / Shift+Ctrl+P", "next / previous model in scope (--models, /scoped-models), else with a key"),
    ("Ctrl+G", "edit the message in $VISUAL / $EDITOR"),
    ("Up/Down", "history (empty or first/last line)"),
    ("Tab", "complete /commands and @files"),
    ("paste", "more than 10 lines or 1000 chars: shown as [paste #N], sent in full"),
    ("Ctrl+V", "paste an image from the clipboard (wl-paste or xclip): @<file> attaches it"),
    ("!cmd / !!cmd", "run a shell command (!! keeps it out of the context)"),
    ("/tree: ↑↓ ←→", "move; page"),
    ("/tree: Ctrl/Alt+←→", "fold or go up a branch; unfold or go down"),
    ("/tree: Shift+L", "set or clear the label of the entry"),
    ("/tree: Ctrl+D/T/U/L/A", "filter: default, no tools, user only, labelled only, all (Ctrl+O cycles)"),
    ("/tree: type", "search (every word must match)"),
]


#: The built-in slash commands and what the completion menu says of each (pi's wording).
BUILTINS = {
    "model": "Select model",
    "thinking": "Set thinking level",
    "compact": "Compact the context [instructions]",
    "new": "Start a new session",
    "resume": "Resume another session",
    "session": "Session info and stats",
    "tree": "Navigate the session tree",
    "fork": "Fork from a previous user message",
    "clone": "Duplicate the session at this point into a new file",
    "import": "Open a session file <path>",
    "settings": "Settings menu",
    "scoped-models": "Choose the models /model offers",
    "reload": "Reload settings, prompt templates and skills",
    "changelog": "Show the changelog",
    "login": "Log in with a subscription (Claude Pro/Max, ChatGPT Plus/Pro, GitHub Copilot)",
    "logout": "Remove stored credentials",
    "name": "Set the session name",
    "copy": "Copy the last answer to the clipboard",
    "export": "Export the session to HTML [path]",
    "hotkeys": "Keyboard shortcuts",
    "quit": "Quit",
}


class SlashCommands(SettingsCommands, LoginCommands):
    """The built-in slash commands of one TUI; ``tui`` is the TuiApp they act on (its state,
    its printing, its coordinator calls and its selector)."""

    def __init__(self, tui: TuiApp) -> None:
        self.tui = tui
        self._autocomplete_rows: int | None = None
        #: ``/name`` → handler taking the rest of the line (see ``BUILTINS``).
        self.table: dict[str, Callable[[str], None]] = {
            "model": self.cmd_model,
            "thinking": self.cmd_thinking,
            "compact": self.cmd_compact,
            "new": self.cmd_new,
            "resume": self.cmd_resume,
            "session": self.cmd_session,
            "tree": self.cmd_tree,
            "fork": self.cmd_fork,
            "clone": self.cmd_clone,
            "import": self.cmd_import,
            "settings": self.cmd_settings,
            "scoped-models": self.cmd_scoped_models,
            "reload": self.cmd_reload,
            "changelog": self.cmd_changelog,
            "login": self.cmd_login,
            "logout": self.cmd_logout,
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
        for key, what in [*HOTKEYS, *self.tui.extensions.hotkeys()]:
            t.append(f"  {key:<22}", style="bold")
            t.append(what + "\n")
        self.tui.print_text(Text("Keyboard shortcuts", style="bold underline"), t)

    def set_model(self, m: Any) -> None:
        from ...ai import types as T

        def done(result: Any) -> None:
            self.tui.model = result if isinstance(result, dict) and result.get("id") else T.to_plain(m)
            self.tui.show_status(f"Model: {self.tui.model.get('provider')}/{self.tui.model.get('id')}")
            self.tui.call("get_state", {}, lambda st: setattr(self.tui, "thinking", (st or {}).get("thinkingLevel", self.tui.thinking)))

        self.tui.call("set_model", {"model": T.to_plain(m)}, done)

    def cycle_model(self, backward: bool = False) -> None:
        """Ctrl+P (Shift+Ctrl+P: ``backward``), as pi's: the next scoped model with
        credentials (``--models`` / ``enabledModels`` / ``/scoped-models``) with its
        ``:level``, else the next model with credentials; "Only one model in scope" (or
        "available") when there is nothing to switch to."""
        from ..model_scope import cycle_target

        def chosen(available: Any) -> None:
            models = (available or {}).get("models") or []
            target = cycle_target(self.tui.scoped_models, models, self.tui.model, backward)
            if target is None:
                self.tui.show_status("Only one model in scope" if self.tui.scoped_models else "Only one model available")
                return
            model, level, _ = target

            def switched(result: Any) -> None:
                self.tui.model = result if isinstance(result, dict) and result.get("id") else model
                if level:
                    self.tui.call("set_thinking_level", {"level": level}, lambda r: announce((r or {}).get("level", level)))
                else:
                    self.tui.call("get_state", {}, lambda st: announce((st or {}).get("thinkingLevel", self.tui.thinking)))

            def announce(thinking: str) -> None:
                self.tui.thinking = thinking
                shown = self.tui.model
                suffix = f" (thinking: {thinking})" if shown.get("reasoning") and thinking != "off" else ""
                self.tui.show_status(f"Switched to {shown.get('name') or shown.get('id')}{suffix}")

            self.tui.call("set_model", {"provider": model["provider"], "modelId": model["id"]}, switched)

        self.tui.call("get_available_models", {}, chosen)

    def cmd_model(self, rest: str) -> None:
        models = self.tui.models()  # only providers with credentials, and the session's model
        if len(models) <= 1:
            from .._config import no_models_message

            # Nothing to switch to: say how to add a provider (pi's hint under its selector).
            self.tui.show_status(no_models_message().replace("No models available", "No other models available", 1))
            if not models:
                return
        if rest:
            exact = [m for m in models if f"{m.provider}/{m.id}" == rest or m.id == rest]
            if len(exact) == 1:
                self.set_model(exact[0])
                return
        current = f"{self.tui.model.get('provider')}/{self.tui.model.get('id')}"
        # The scoped models (--models, enabledModels, /scoped-models) when there are any.
        scoped = {f"{s.provider}/{s.model_id}" for s in self.tui.scoped_models}
        if scoped:
            models = [m for m in models if f"{m.provider}/{m.id}" in scoped or f"{m.provider}/{m.id}" == current] or models
        items = [(f"{m.provider}/{m.id}" + ("  ✓" if f"{m.provider}/{m.id}" == current else ""), m) for m in models]
        index = next((i for i, m in enumerate(models) if f"{m.provider}/{m.id}" == current), 0)
        self.tui.open_selector(Selector("Select model", items, self.set_model, initial=rest, index=0 if rest else index))

    def cmd_thinking(self, rest: str) -> None:
        def choose(level: str) -> None:
            def done(result: Any) -> None:
                self.tui.thinking = (result or {}).get("level", level)
                self.tui.show_status(f"Thinking level: {self.tui.thinking}")

            self.tui.call("set_thinking_level", {"level": level}, done)

        levels = available_levels(self.tui.model)
        if rest in THINKING_LEVELS:
            choose(rest)
        elif rest:
            self.tui.show_error(f"Unknown thinking level {rest!r}; one of {', '.join(levels)}")
        else:
            # Only the levels the model has (pi): "off" alone for a model without reasoning.
            items = [(lv + ("  ✓" if lv == self.tui.thinking else ""), lv) for lv in levels]
            self.tui.open_selector(Selector("Thinking level", items, choose, index=levels.index(self.tui.thinking) if self.tui.thinking in levels else 0))

    def cmd_compact(self, rest: str) -> None:
        self.tui.status = "Compacting context..."

        def done(result: Any) -> None:
            self.tui.status = None
            before = (result or {}).get("tokensBefore")
            self.tui.print_text(Text(f"Compacted context ({format_tokens(before or 0)} tokens before).", style="theme.dim"))
            self.reload_messages()

        self.tui.call("compact", {"customInstructions": rest} if rest else {}, done)

    def reload_messages(self, reprint: bool = False, then: Callable[[], None] | None = None) -> None:
        def got(result: Any) -> None:
            self.tui.messages = list((result or {}).get("messages") or [])
            if reprint:
                for m in self.tui.messages[-40:]:
                    self.tui.print_message(m)
            if then is not None:
                then()

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
        # The footer starts from nothing at once; the session's own numbers follow.
        self.tui.messages = []
        self.tui.session_usage = []
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

    # -- /tree -------------------------------------------------------------------------------

    def cmd_tree(self, rest: str) -> None:
        """pi's tree selector over the session's entries (see ``tree.TreeView``), starting in
        settings ``treeFilterMode``; Enter goes to the chosen entry (asking whether to
        summarize the branch left), Shift+L edits a label."""

        def show(tree: Any) -> None:
            entries = (tree or {}).get("entries") or []
            if not entries:
                self.tui.show_status("No entries in session")
                return
            mode = self.settings().get("treeFilterMode")
            view = TreeView(
                entries,
                (tree or {}).get("leafId"),
                dict((tree or {}).get("labels") or {}),
                filter_mode=mode if mode in FILTER_MODES else "default",
            )
            self.open_tree(view)

        self.tui.call("tree", {}, show)

    def open_tree(self, view: TreeView) -> None:
        self.tui.open_selector(TreeSelector(self.tui, view, lambda eid: self._tree_chosen(view, eid), lambda eid, cur: self._edit_label(view, eid, cur)))

    def _edit_label(self, view: TreeView, entry_id: str, current: str | None) -> None:
        """Shift+L: the label of ``entry_id`` (empty removes it), written as pi's label entry."""

        def save(text: str) -> None:
            label = text.strip()

            def done(_: Any) -> None:
                view.set_label(entry_id, label or None)
                self.open_tree(view)

            self.tui.call("label", {"targetId": entry_id, "label": label or None}, done)

        self.tui.open_selector(InputSelector(self.tui, "Label (empty to remove):", save, lambda: self.open_tree(view), initial=current or ""))

    def _tree_chosen(self, view: TreeView, entry_id: str) -> None:
        if view.is_current(entry_id):
            self.tui.show_status("Already at this point")
            return
        if (self.settings().get("branchSummary") or {}).get("skipPrompt") is True:
            self._navigate(view, entry_id, summarize=False)
            return

        def choose(what: str) -> None:
            if what == "custom":
                self.tui.open_selector(
                    InputSelector(
                        self.tui,
                        "Custom summarization instructions",
                        lambda text: self._navigate(view, entry_id, summarize=True, instructions=text.strip() or None),
                        lambda: self._tree_chosen(view, entry_id),
                        hint="enter summarize, esc back",
                    )
                )
            else:
                self._navigate(view, entry_id, summarize=what == "summarize")

        items = [("No summary", "none"), ("Summarize", "summarize"), ("Summarize with custom prompt", "custom")]
        # Esc goes back to the tree, on the same entry (pi).
        self.tui.open_selector(ChoiceSelector(self.tui, "Summarize branch?", items, choose, lambda: self.open_tree(view)))

    def _navigate(self, view: TreeView, entry_id: str, *, summarize: bool, instructions: str | None = None) -> None:
        """Move the session to ``entry_id``: the transcript of that branch is shown again, a
        user message chosen goes back into an empty editor, with the cursor at its end."""
        args: dict[str, Any] = {"targetId": entry_id}
        if summarize:
            args["summarize"] = True
            self.tui.status = "Summarizing branch..."
            if instructions:
                args["customInstructions"] = instructions

        def done(result: Any) -> None:
            self.tui.status = None
            text = (result or {}).get("editorText")
            if text and not self.tui.buffer.text.strip():
                self.set_editor_text(text)
            self.refresh_session_info()
            self.reload_messages(reprint=True, then=lambda: self.tui.show_status("Navigated to selected point"))

        def failed(_: Any) -> None:
            self.tui.status = None

        self.tui.call("navigate", args, done, on_error=failed)

    def set_editor_text(self, text: str) -> None:
        """Put ``text`` in the editor with the cursor at its end."""
        self.tui.buffer.document = Document(text, len(text))

    # -- /fork, /clone, /import ------------------------------------------------------------------

    def cmd_fork(self, rest: str) -> None:
        """A new session holding the history before a chosen user message, whose text goes
        to the editor. The coordinator has switched to the new session when ``fork`` answers
        (a fork from the first message has no file yet: pi writes it with the first answer)."""

        def show(result: Any) -> None:
            msgs = (result or {}).get("messages") or []
            if not msgs:
                self.tui.show_status("No messages to fork from")
                return
            items = [(m.get("text", "").replace("\n", " ")[:100], m.get("entryId")) for m in msgs]

            def go(entry_id: str) -> None:
                def forked(r: Any) -> None:
                    self.after_session_change(r, "Forked to")
                    text = (r or {}).get("text")
                    if text:
                        self.set_editor_text(text)

                self.tui.call("fork", {"entryId": entry_id}, forked)

            self.tui.open_selector(Selector("Fork from message", items, go, index=len(items) - 1))

        self.tui.call("fork_messages", {}, show)

    def cmd_clone(self, rest: str) -> None:
        """pi's /clone: the session as it is now (its current branch) into a new file, then
        that file is the session."""

        def cloned(r: Any) -> None:
            if (r or {}).get("cancelled"):
                return
            self.tui.call("get_state", {}, lambda st: self.after_session_change({"path": (st or {}).get("sessionFile")}, "Cloned to new session"))
            self.tui.buffer.reset()

        self.tui.call("clone", {}, cloned)

    def cmd_import(self, rest: str) -> None:
        """pi's /import: after a confirmation, copy the session file at ``rest`` into the
        session directory (unless it is there already) and resume it."""
        if not rest:
            self.tui.show_error("Usage: /import <path.jsonl>")
            return
        if self.tui.remote:
            self.tui.show_error("/import opens a session file on this machine; attached to a server it is not available")
            return
        source = os.path.abspath(os.path.join(self.tui.cwd, os.path.expanduser(rest.strip("'\""))))
        if not os.path.isfile(source):
            self.tui.show_error(f"Failed to import session: File not found: {source}")
            return
        directory = self.tui.session_dir or (os.path.dirname(self.tui.session_path) if self.tui.session_path else None)

        def confirmed(yes: bool) -> None:
            if not yes:
                self.tui.show_status("Import cancelled")
                return
            target = source
            if directory:
                target = os.path.join(directory, os.path.basename(source))
                if os.path.abspath(target) != source:
                    try:
                        os.makedirs(directory, exist_ok=True)
                        shutil.copyfile(source, target)
                    except OSError as exc:
                        self.tui.show_error(f"Failed to import session: {exc.strerror or exc}")
                        return
            self.tui.call("switch_session", {"sessionPath": target}, lambda r: self.after_session_change(r, f"Session imported from: {rest}"))

        self.tui.open_selector(Selector(f"Replace current session with {rest}?", [("Yes", True), ("No", False)], confirmed))

    # -- /reload, /changelog -----------------------------------------------------------------

    def cmd_reload(self, rest: str) -> None:
        """Read settings, prompt templates and skills again (refused while a run goes on)."""
        if self.tui.running:
            self.tui.show_error("Wait for the current run to finish before reloading")
            return
        self.tui.templates = load_templates(self.tui.agent_dir, self.tui.cwd)
        self.tui.skills = load_skills(self.tui.agent_dir, self.tui.cwd)
        self.settings(report=True)
        self._autocomplete_rows = None
        self.tui.show_status(f"Reloaded settings, {len(self.tui.templates)} prompt templates and {len(self.tui.skills)} skills")

    def cmd_changelog(self, rest: str) -> None:
        """The package's CHANGELOG.md (newest first, as it is written), or its version."""
        from rich.markdown import Markdown

        here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the package
        for candidate in (os.path.join(here, "CHANGELOG.md"), os.path.join(os.path.dirname(here), "CHANGELOG.md")):
            try:
                with open(candidate, encoding="utf-8") as f:
                    text = f.read()
            except OSError:
                continue
            self.tui.print_text(Text("What's New", style="bold"), Markdown(text))
            return
        self.tui.print_text(Text("What's New", style="bold"), Text(f"pi-actors {_version()}: no changelog entries found.", style="theme.dim"))
