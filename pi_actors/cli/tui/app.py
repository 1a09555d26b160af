"""The prompt_toolkit side of the TUI: its state, the threads' doors, what is printed above
the live area, and the reactions to events and submissions. It holds two parts and calls
them: the live area, editor, footer and key bindings (``self.screen``, a
:class:`~.screen.ScreenLayout`, which builds the prompt_toolkit application) and the slash
commands (``self.commands``, a :class:`~.commands.SlashCommands`).

Threads and loops: trio stays the core. ``run_tui`` (in ``__init__``) runs in the trio
thread, owns the coordinator Peer through a :class:`Controller`, and starts this
application in a thread of its own with its own asyncio loop (prompt_toolkit's). The two
sides never share objects across threads except through two doors:

* UI → trio: ``Controller.submit(*cmd)`` (``TrioToken.run_sync_soon`` into a memory channel);
* trio → UI: ``TuiApp.post(fn, *args)`` (``loop.call_soon_threadsafe``), so every UI state
  change happens on the UI loop.

Why a thread rather than trio-asyncio or running prompt_toolkit on the main thread: the
actors' protocol and the runtime stay pure trio, and prompt_toolkit keeps the loop it was
written for. Signals need no special care: the terminal is in raw mode, so Ctrl-C arrives
as a key; outside the main thread prompt_toolkit gets no SIGWINCH and polls the terminal
size instead (every 0.5 s, its default).

Screen model (as pi's differential renderer, without a full-screen app): finished things —
user messages, assistant messages rendered by rich as Markdown with highlighted code, tool
calls with their results (edit: the diff), status lines — are printed above the application
(``print_ansi``) and stay in the terminal's scrollback; the application itself is a
small live area at the bottom: the message being streamed (plain text, thinking dimmed),
running tool calls with their live output, queued steering/follow-up messages, a spinner,
a selector when one is open, the editor and the footer. Every printed item is also kept
(``transcript``) as a function that renders it with the current display settings, so that
Ctrl+O (tool output) and Ctrl+T (thinking) reprint what is already on screen, as pi
re-renders its chat.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import queue
import re
import sys
import time
from collections.abc import Callable
from typing import Any

from prompt_toolkit.buffer import Buffer
from prompt_toolkit.document import Document
from prompt_toolkit.history import FileHistory
from rich.console import Console
from rich.text import Text

from ._parts import assistant_parts, bash_parts, tool_parts
from .commands import BUILTINS, SlashCommands
from .extension_ui import ExtensionUi
from .resources import attach_files, expand_skill, expand_template, load_skills, load_templates
from .screen import ScreenLayout
from .themes import current_theme, rich_theme
from .widgets import Selector, TuiCompleter, _text_of, session_message_view

__all__ = ["TuiApp"]

_FILE_BLOCK = re.compile(r'<file name="([^"]*)">\n.*?\n</file>\n?', re.S)
#: How many printed items are kept for reprinting (Ctrl+O, Ctrl+T); older ones are dropped.
_TRANSCRIPT_LIMIT = 2000


class TuiApp:
    """The TUI's state and reactions; it holds the screen and the slash commands as parts.

    ``controller`` is the trio side (``submit(*cmd)``); ``info`` the session as it opened
    (``cwd``, ``agentDir``, ``model``, ``thinkingLevel``, optionally ``sessionPath``,
    ``sessionDir``, ``sessionName``, ``messages``, ``autoCompaction``, ``remote``)."""

    def __init__(self, controller: Any, info: dict[str, Any]) -> None:
        self.ctl = controller
        controller.ui = self
        self.cwd: str = info["cwd"]
        self.agent_dir: str = info["agentDir"]
        self.model: dict[str, Any] = info["model"]
        self.thinking: str = info["thinkingLevel"]
        self.session_path: str | None = info.get("sessionPath")
        self.session_dir: str | None = info.get("sessionDir")
        self.session_name: str | None = info.get("sessionName")
        self.messages: list[dict[str, Any]] = list(info.get("messages") or [])
        self.auto_compaction = bool(info.get("autoCompaction", True))
        #: What the extensions registered (``extension_commands``), when read before start.
        self._registry: dict[str, Any] | None = info.get("extensions")
        #: "URL · session ID" when attached to a server's session (``pi-actors attach``).
        self.remote: str | None = info.get("remote")
        #: Large pastes shown as ``[paste #N ...]`` markers, expanded on submit (as pi).
        self.pastes: dict[str, str] = {}
        self._restored = list(self.messages)  # the transcript the session opened with
        #: Assistant messages of every branch of the session file (the footer's totals, as
        #: pi's); None until the tree has been read (then the transcript is used).
        self.session_usage: list[dict[str, Any]] | None = None
        self._models: list[Any] | None = None
        #: The models Ctrl+P cycles among (``ScopedModel``s: ``--models``, ``enabledModels``,
        #: then ``/scoped-models``); empty: every model with credentials.
        self.scoped_models: list[Any] = list(info.get("scopedModels") or [])
        self.templates = load_templates(self.agent_dir, self.cwd)
        self.skills = load_skills(self.agent_dir, self.cwd)
        self.running = False
        self.show_thinking = not info.get("hideThinkingBlock")  # settings hideThinkingBlock; Ctrl+T toggles
        self.expand_tools = False
        #: settings terminal.showImages / terminal.clearOnShrink (pi's), read when first used;
        #: /settings changes them for the running TUI.
        self._terminal: dict[str, bool] = {}
        self.stream: dict[str, Any] | None = None  # the assistant message being streamed
        self.tools: dict[str, dict[str, Any]] = {}  # running tool calls by id
        self.queued: list[tuple[str, str, str]] = []  # (kind, text sent, text shown)
        self.bash_running: str | None = None
        self.status: str | None = None
        self.selector: Selector | None = None
        self._call_args: dict[str, Any] = {}  # tool call arguments by id, for reprinted results
        #: Everything printed above the live area, in order, each as a function that renders
        #: it with the current settings: Ctrl+O and Ctrl+T reprint the screen from it.
        self.transcript: list[Callable[[], list[Any]]] = []
        self._dropped = 0  # items dropped from the front of ``transcript``
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pending: queue.SimpleQueue[tuple[Callable[..., object], tuple[Any, ...]]] = queue.SimpleQueue()
        self._started = time.monotonic()
        os.makedirs(self.agent_dir, exist_ok=True)
        self.buffer = Buffer(
            multiline=True,
            history=FileHistory(os.path.join(self.agent_dir, "prompt-history")),
            completer=TuiCompleter(self),
            complete_while_typing=True,
            tempfile_suffix=".pi.md",
        )
        #: AgentEvent type → how it changes the screen.
        self._event_handlers: dict[str, Callable[[dict[str, Any]], None]] = {
            "message_start": self._on_message_start,
            "message_update": self._on_message_update,
            "message_end": self._on_message_end,
            "tool_execution_start": self._on_tool_start,
            "tool_execution_update": self._on_tool_update,
            "tool_execution_end": self._on_tool_end,
            "auto_compaction_start": self._on_compaction_start,
            "auto_compaction_end": self._on_compaction_end,
            "compaction_start": self._on_compaction_start,
            "compaction_end": self._on_compaction_end,
            "auto_retry_start": self._on_retry_start,
            "auto_retry_end": self._on_retry_end,
            "extension_error": self._on_extension_error,
            "extension_ui_request": self._on_extension_ui,
        }
        self.commands = SlashCommands(self)
        #: Extensions' dialogs, key bindings, status lines and renderers.
        self.extensions = ExtensionUi(self)
        self.screen = ScreenLayout(self)
        self.app = self.screen.application

    # -- threads -----------------------------------------------------------------------------

    def post(self, fn: Callable[..., object], *args: Any) -> None:
        """Run ``fn(*args)`` on the UI loop (callable from any thread)."""
        self._pending.put((fn, args))
        loop = self._loop
        if loop is not None:
            try:
                loop.call_soon_threadsafe(self._drain)
            except RuntimeError:  # the loop has closed: the UI is gone
                pass

    def _drain(self) -> None:
        while True:
            try:
                fn, args = self._pending.get_nowait()
            except queue.Empty:
                break
            try:
                fn(*args)
            except Exception as exc:  # noqa: BLE001 - a rendering bug must not kill the UI
                self.print_text(Text(f"(display error: {exc!r})", style="theme.error"))
        self.app.invalidate()

    def run(self) -> None:
        """Thread entry: run the application on a fresh asyncio loop until it exits."""
        asyncio.run(self._main())

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        if self._registry is not None:  # known before the restored transcript is printed
            self.extensions.registered(self._registry)
        self._print_banner()
        self._loop.call_soon(self._drain)
        self.commands.refresh_session_info()
        self.extensions.load_registry()
        ticker = asyncio.ensure_future(self._tick())
        try:
            await self.app.run_async()
        finally:
            ticker.cancel()

    def later(self, seconds: float, fn: Callable[[], object]) -> None:
        """Run ``fn()`` on the UI loop in ``seconds`` (UI loop only)."""
        if self._loop is not None:
            self._loop.call_later(seconds, self.post, fn)

    async def _tick(self) -> None:
        """Redraw for the spinner only while something runs (no redraws when idle)."""
        while True:
            await asyncio.sleep(0.15)
            if self.running or self.status is not None or self.bash_running:
                self.app.invalidate()

    # -- printing above the live area -----------------------------------------------------------

    def render(self, *renderables: Any) -> str:
        out = io.StringIO()
        # The theme's colours: what is printed above the live area follows it too.
        theme = rich_theme(current_theme(self.agent_dir, self.cwd))
        con = Console(file=out, force_terminal=True, color_system="256", width=self.screen.width(), highlight=False, theme=theme)
        for r in renderables:
            con.print(r)
        return out.getvalue()

    def print_ansi(self, text: str) -> None:
        """Print ``text`` above the live area (into the scrollback), then redraw the area below.

        Not prompt_toolkit's ``run_in_terminal``: that puts the terminal in cooked mode while it
        prints, and a key pressed meanwhile goes through the tty's line discipline — Enter
        arrives as a line feed (ICRNL), which the editor takes as Ctrl-J, a new line, so the
        submission was lost. Here the terminal stays raw and keys wait in the input as usual.
        Called on the UI loop only (the controller posts through ``post``)."""
        if not (self.app.is_running and not self.app.is_done):
            sys.stdout.write(text)
            sys.stdout.flush()
            return
        renderer = self.app.renderer
        renderer.erase()  # the live area, and the cursor back to where it began
        sys.stdout.write(text)
        sys.stdout.flush()
        renderer.reset()  # the live area is drawn anew below what was printed
        self.app.invalidate()

    def print_text(self, *renderables: Any) -> None:
        """Print fixed renderables (a status, an error, a table) above the live area."""
        self.print_item(lambda: list(renderables))

    def print_item(self, parts: Callable[[], list[Any]]) -> None:
        """Print what ``parts()`` renders, and keep ``parts`` in the transcript: a later
        :meth:`reprint` calls it again, so it must read the display settings (tool output
        expanded, thinking shown) when called, not when it was made."""
        self.transcript.append(parts)
        if len(self.transcript) > _TRANSCRIPT_LIMIT:
            del self.transcript[0]
            self._dropped += 1
        rendered = parts()
        if rendered:
            self.print_ansi(self.render(*rendered))

    def reprint(self) -> None:
        """Clear the screen and the terminal's scrollback and print the transcript again with
        the current settings, then the live area below it (as pi re-renders its whole chat
        when tool output is expanded or thinking hidden). Why clear the scrollback: what we
        printed lives there, and a terminal offers no way to change lines already printed,
        so the old rendering would otherwise stay above the new one."""
        chunks = ["\x1b[H\x1b[2J\x1b[3J"]  # home, clear the screen, clear the scrollback
        if self._dropped:
            chunks.append(self.render(Text(f"({self._dropped} earlier items not shown)", style="theme.dim")))
        for parts in self.transcript:
            rendered = parts()
            if rendered:
                chunks.append(self.render(*rendered))
        self.print_ansi("".join(chunks))

    def _print_banner(self) -> None:
        self.print_text(
            Text.assemble(("pi-actors", "bold"), f"  {self.model.get('provider')}/{self.model.get('id')}", ("  /hotkeys for keys, /quit to exit", "theme.dim"))
        )
        if self._restored:
            self.print_text(Text(f"Session with {len(self._restored)} messages:", style="theme.dim"))
            for m in self._restored[-40:]:
                self.print_message(m)

    def show_error(self, text: str) -> None:
        self.print_text(Text(text, style="theme.error"))

    def show_status(self, text: str) -> None:
        self.print_text(Text(text, style="theme.dim"))

    def show_user_submission(self, text: str) -> None:
        pass  # user messages are printed when the coordinator starts them (message_start)

    def print_message(self, m: dict[str, Any]) -> None:
        """Print a finished message above the live area, as its role is shown."""
        role = m.get("role")
        if role == "user":
            shown = _FILE_BLOCK.sub(lambda x: f"[attached {os.path.relpath(x.group(1), self.cwd)}]\n", _text_of(m.get("content")))
            self.print_text(Text("› " + shown.strip(), style="theme.user"))
        elif role == "assistant":
            for b in m.get("content") or []:
                if b.get("type") == "toolCall":  # kept for the results printed later
                    self._call_args[b.get("id")] = b.get("arguments")
            self.print_item(lambda: assistant_parts(m, self.show_thinking))
        elif role == "toolResult":
            self.print_tool(m.get("toolName", "?"), self._call_args.get(m.get("toolCallId") or ""), {"content": m.get("content"), "details": m.get("details")}, bool(m.get("isError")))
        elif role == "bashExecution":
            self._print_bash(m.get("command", ""), m, bool(m.get("excludeFromContext")))
        elif role == "custom":
            self.extensions.print_custom(m, lambda: session_message_view(m, self.expand_tools) or [])
        elif role in ("compactionSummary", "branchSummary"):
            parts = session_message_view(m, self.expand_tools)
            if parts:
                self.print_text(*parts)

    def print_tool(self, name: str, args: dict | None, result: dict, is_error: bool, took: float | None = None) -> None:
        """Print a finished tool call: its label, then the edit's diff, the written content
        (``write``) or the result's text, collapsed unless Ctrl+O expanded tool output;
        ``took``: the seconds a ``bash`` call ran, shown as pi's ``Took 1.2s``."""
        self.print_item(lambda: tool_parts(name, args, result, is_error, took, expanded=self.expand_tools,
                                           show_images=self.terminal_setting("showImages")))

    def terminal_setting(self, name: str) -> bool:
        """settings ``terminal.<name>``: ``showImages`` (default true: images inline where the
        terminal draws them, else pi's ``[Image: ...]`` line; false: always that line) and
        ``clearOnShrink`` (default false: see ``screen``). A value that is not true or false is
        one error line, then the default."""
        if name not in self._terminal:
            default = name == "showImages"
            raw = (self.commands.settings().get("terminal") or {})
            value = raw.get(name, default) if isinstance(raw, dict) else default
            if not isinstance(value, bool):
                self.post(self.show_error, f"settings terminal.{name} must be true or false, not {json.dumps(value)}")
                value = default
            self._terminal[name] = value
        return self._terminal[name]

    # -- events from the controller -------------------------------------------------------------

    def run_started(self) -> None:
        self.running = True
        self._started = time.monotonic()

    def run_finished(self) -> None:
        self.running = False
        self.stream = None
        for tc in self.tools.values():
            self.print_tool(tc["name"], tc["args"], {"content": [{"type": "text", "text": "(interrupted)"}]}, True)
        self.tools.clear()
        self.status = None

    def on_event(self, event: dict[str, Any]) -> None:
        """Show one AgentEvent (pi's shape): the handler for its ``type``; others are ignored."""
        handler = self._event_handlers.get(event.get("type") or "")
        if handler is not None:
            handler(event)

    def _on_message_start(self, event: dict[str, Any]) -> None:
        msg = event.get("message") or {}
        if msg.get("role") == "assistant":
            self.stream = msg
        elif msg.get("role") == "user":
            text = _text_of(msg.get("content"))
            for i, q in enumerate(self.queued):
                if q[1] == text:
                    del self.queued[i]
                    break
            self.print_message(msg)

    def _on_message_update(self, event: dict[str, Any]) -> None:
        if event.get("message"):
            self.stream = event["message"]

    def _on_message_end(self, event: dict[str, Any]) -> None:
        msg = event.get("message") or {}
        if msg.get("role") == "assistant":
            self.stream = None
            self.messages.append(msg)
            if self.session_usage is not None:
                self.session_usage.append(msg)
            self.print_message(msg)
        elif msg.get("role") in ("user", "toolResult"):
            self.messages.append(msg)
        elif msg.get("role") == "custom":  # an extension's message (pi.send_message)
            self.messages.append(msg)
            self.print_message(msg)

    def _on_tool_start(self, event: dict[str, Any]) -> None:
        self.tools[event.get("toolCallId", "")] = {"name": event.get("toolName"), "args": event.get("args"), "output": "", "started": time.monotonic()}

    def _on_tool_update(self, event: dict[str, Any]) -> None:
        tc = self.tools.get(event.get("toolCallId", ""))
        if tc is not None:
            tc["output"] = _text_of((event.get("partialResult") or {}).get("content"))

    def _on_tool_end(self, event: dict[str, Any]) -> None:
        tc = self.tools.pop(event.get("toolCallId", ""), None) or {"name": event.get("toolName"), "args": event.get("args")}
        took = time.monotonic() - tc["started"] if "started" in tc else None
        self.print_tool(tc["name"] or "?", tc.get("args"), event.get("result") or {}, bool(event.get("isError")), took)

    def _on_compaction_start(self, event: dict[str, Any]) -> None:
        if event.get("reason") == "manual":
            return  # /compact shows its own progress and result
        self.status = "Auto-compacting... (esc to cancel)"

    def _on_retry_start(self, event: dict[str, Any]) -> None:
        self.status = f"Retrying ({event.get('attempt')}/{event.get('maxAttempts')}) in {round((event.get('delayMs') or 0) / 1000)}s... (esc to cancel)"

    def _on_compaction_end(self, event: dict[str, Any]) -> None:
        if event.get("reason") == "manual":
            return
        self.status = None
        self.print_text(Text("Context compacted automatically.", style="theme.dim"))
        self.commands.reload_messages()  # the footer's context use follows the new transcript

    def _on_retry_end(self, event: dict[str, Any]) -> None:
        self.status = None

    def resync(self, snap: dict) -> None:
        """After a reconnect (remote): the session as the server now has it. The transcript
        is reprinted from the snapshot; a reply being streamed continues from it."""
        self.tools.clear()
        self.queued.clear()
        self.status = None
        self.messages = list(snap.get("messages") or [])
        self.session_usage = None
        if isinstance(snap.get("model"), dict):
            self.model = snap["model"]
        self.thinking = snap.get("thinkingLevel") or self.thinking
        self.running = bool(snap.get("isStreaming"))
        self.stream = snap.get("streamMessage") if self.running else None
        self.print_text(Text(f"Re-attached; the session has {len(self.messages)} messages:", style="theme.dim"))
        for m in self.messages[-40:]:
            self.print_message(m)

    def bash_started(self, command: str) -> None:
        self.bash_running = command

    def bash_finished(self, command: str, result: dict, exclude: bool) -> None:
        self.bash_running = None
        if result.get("error"):
            self.show_error(f"!{command}: {result.get('output')}")
            return
        self._print_bash(command, result, exclude)

    def _print_bash(self, command: str, result: dict, exclude: bool) -> None:
        self.print_item(lambda: bash_parts(command, result, exclude, self.expand_tools))

    # -- submissions --------------------------------------------------------------------------

    def models(self) -> list[Any]:
        if self._models is None:
            from .._config import load_model_registry

            self._models = load_model_registry().models
        return self._models

    def command_list(self) -> list[tuple[str, str]]:
        out = list(BUILTINS.items())
        out += [(n, t.description) for n, t in sorted(self.templates.items())]
        out += [(f"skill:{n}", s.description[:60]) for n, s in sorted(self.skills.items())]
        return out

    def paste(self, data: str) -> None:
        data = data.replace("\r\n", "\n").replace("\r", "\n")
        lines = data.count("\n") + 1
        if lines > 10 or len(data) > 1000:
            marker = f"[paste #{len(self.pastes) + 1} " + (f"+{lines} lines]" if lines > 10 else f"{len(data)} chars]")
            self.pastes[marker] = data
            self.buffer.insert_text(marker)
        else:
            self.buffer.insert_text(data)

    def paste_image(self) -> None:
        """Ctrl+V: read an image from the clipboard (``clipboard``, in a thread: the tools may
        take seconds), save it as a temporary file and put ``@<path>`` into the editor at the
        cursor, the marker that attaches it to the prompt when it is sent (as any ``@image``
        word). No image, or no clipboard tool: one status line."""
        import threading

        def work() -> None:
            from .clipboard import ClipboardUnavailable, read_clipboard_image, save_clipboard_image

            try:
                image = read_clipboard_image()
                if image is None:
                    self.post(self.show_status, "No image in the clipboard")
                    return
                image = _as_supported_image(image)
                path = save_clipboard_image(image)
            except ClipboardUnavailable as exc:
                self.post(self.show_error, str(exc))
                return
            except (OSError, ValueError) as exc:
                self.post(self.show_error, f"Cannot paste the clipboard image: {exc}")
                return
            self.post(insert, path)

        def insert(path: str) -> None:
            before = self.buffer.document.text_before_cursor
            self.buffer.insert_text(("" if not before or before[-1].isspace() else " ") + f"@{path} ")

        threading.Thread(target=work, name="pi-actors-paste-image", daemon=True).start()

    def submit(self, mode: str) -> None:
        text = self.buffer.text.strip()
        if not text:
            return
        self.buffer.append_to_history()
        self.buffer.reset()
        for marker, data in self.pastes.items():
            text = text.replace(marker, data)
        self.pastes.clear()
        self.handle_submission(text, mode)

    def handle_submission(self, text: str, mode: str = "steer") -> None:
        if text.startswith("/"):
            name, _, rest = text[1:].partition(" ")
            name, rest = name.strip(), rest.strip()
            if self.commands.run(name, rest):
                return
            if name.startswith("skill:") and name[6:] in self.skills:
                text = expand_skill(self.skills[name[6:]], rest)
            elif name in self.templates:
                text = expand_template(self.templates[name], rest)
        elif text.startswith("!"):
            exclude = text.startswith("!!")
            command = text[2:].strip() if exclude else text[1:].strip()
            if not command:
                return
            if self.bash_running:
                self.show_error("A bash command is already running. Press Esc to cancel it first.")
                return
            if self.running:
                self.show_error("Wait for the agent to finish (or press Esc) before running a command.")
                return
            self.ctl.submit("bash", command, exclude)
            return
        sent, attached = attach_files(text, self.cwd)
        if attached:
            self.show_status("Attached: " + ", ".join(os.path.relpath(p, self.cwd) for p in attached))
        if self.running:
            kind = "follow_up" if mode == "follow_up" else "steer"
            self.queued.append(("Follow-up" if kind == "follow_up" else "Steering", sent, text))
            self.ctl.submit(kind, sent)
        else:
            self.running = True
            self._started = time.monotonic()
            self.ctl.submit("prompt", sent)

    def dequeue(self, abort: bool) -> None:
        """Take the queued steering and follow-up messages back into the editor (pi's Esc
        during a run, with ``abort``, and Alt+Up, without). The coordinator's queues are
        emptied first — so none of them reaches this run or leaks into the next prompt —
        then the run is aborted if ``abort``; ``restore_queued`` gets the texts."""
        self.ctl.submit("dequeue", abort)

    def restore_queued(self, queued: Any, abort: bool) -> None:
        """Put the texts the coordinator's ``clear_queue`` answered (``{steering, followUp}``)
        into the editor before what is typed there, separated by blank lines, as pi does.
        Each comes back as the user typed it (before ``@file`` expansion) when it was queued
        here; the queue shown above the editor is emptied. ``queued`` is None when the call
        failed (the error is shown): then nothing changes."""
        if queued is None:
            return
        texts: list[str] = []
        for sent in [*(queued.get("steering") or []), *(queued.get("followUp") or [])]:
            for i, (_kind, q_sent, shown) in enumerate(self.queued):
                if q_sent == sent:
                    del self.queued[i]
                    sent = shown
                    break
            texts.append(sent)
        self.queued.clear()
        if texts:
            current = self.buffer.text
            combined = "\n\n".join(t for t in [*texts, current] if t.strip())
            self.buffer.set_document(Document(combined, len(combined)), bypass_readonly=True)
        if not abort:
            n = len(texts)
            self.show_status(f"Restored {n} queued message{'s' if n > 1 else ''} to editor" if n else "No queued messages to restore")

    def call(self, method: str, args: dict, then: Callable[[Any], None] | None = None, on_error: Callable[[Any], None] | None = None) -> None:
        """Call ``method`` of the coordinator; ``then(result)`` on the UI loop, or after an
        error (which is shown) ``on_error(error)``."""
        self.ctl.submit("call", method, args, then, on_error)

    # -- slash commands -------------------------------------------------------------------------

    def open_selector(self, selector: Selector) -> None:
        proxy = self.screen.selector_buffer
        self.selector = None
        proxy.reset()
        proxy.text = selector.filter
        proxy.cursor_position = len(proxy.text)
        self.selector = selector
        self.app.layout.focus(proxy)

    def close_selector(self) -> None:
        closed, self.selector = self.selector, None
        self.app.layout.focus(self.buffer)
        on_close = getattr(closed, "on_close", None)
        if on_close is not None:
            self.post(on_close)  # after the selection (if any) is handled

    # -- extensions (ctx.ui; docs/extensions.md) --------------------------------------------------

    def _on_extension_error(self, event: dict[str, Any]) -> None:
        from .._render import extension_line

        self.print_text(Text(extension_line(event), style="theme.error"))

    def _on_extension_ui(self, event: dict[str, Any]) -> None:
        """An extension's ``ctx.ui`` request (see ``extension_ui``)."""
        self.extensions.request(event)

    def set_extension_status(self, status: dict[str, str]) -> None:
        """The extensions' status lines as the session has them (a snapshot's)."""
        self.extensions.set_status(status)

    def exit_app(self) -> None:
        if self.app.is_running and not self.app.is_done:
            self.app.exit()


def _as_supported_image(image: Any) -> Any:
    """A clipboard image in a type the prompt attaches (PNG, JPEG, WebP, GIF): another type
    (BMP from some clipboards) is converted to PNG with Pillow, as pi converts it. Raises
    ValueError (one line) when it cannot be."""
    from .clipboard import ClipboardImage

    if image.mime_type in ("image/png", "image/jpeg", "image/webp", "image/gif"):
        return image
    try:
        from PIL import Image, UnidentifiedImageError

        out = io.BytesIO()
        with Image.open(io.BytesIO(image.data)) as img:
            img.save(out, "PNG")
    except ImportError:
        raise ValueError(f"{image.mime_type} needs Pillow to convert to PNG") from None
    except (UnidentifiedImageError, OSError) as exc:
        raise ValueError(f"{image.mime_type} could not be decoded ({exc})") from None
    return ClipboardImage(out.getvalue(), "image/png")
