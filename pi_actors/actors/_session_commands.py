"""Session commands of the coordinator: the tree (pi's /tree, /fork, labels), the model and
thinking level, new/switch session, names, statistics, ``!cmd`` bash executions.

Each handler implements one method of :data:`pi_actors.protocol.coordinator.COORDINATOR`
(``@implements``; the coordinator's router dispatches to them, see :attr:`INTERFACE`): it
takes the typed arguments (already checked by the router) and returns the typed result or
raises ``RemoteError`` with pi's texts. Commands that change the transcript refuse while a
run is active (``busy``), except where pi aborts the run first (new_session, switch_session).
"""

from __future__ import annotations

import dataclasses
import os
from typing import TYPE_CHECKING, Any, cast

import trio

from ..agent import AgentThinkingLevel, QueueMode
from ..ai import types as T
from ..choices import THINKING_LEVELS
from ..protocol import coordinator as P
from ..protocol.pool import shell_settings
from ..runtime import Empty, Interface, RemoteError, TypedCall, implements

if TYPE_CHECKING:
    from .coordinator import Coordinator

__all__ = ["SessionCommands", "THINKING_LEVELS"]

Entry = dict[str, Any]


def _is_user_entry(entry: Entry) -> bool:
    return entry.get("type") == "message" and (entry.get("message") or {}).get("role") == "user"


def _entry_text(entry: Entry) -> str:
    content = (entry.get("message") or entry).get("content")
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content or [] if isinstance(b, dict) and b.get("type") == "text")


class SessionCommands:
    """The session-command half of the coordinator (it holds the coordinator ``c``)."""

    #: The methods implemented here.
    INTERFACE = Interface(
        "coordinator session commands",
        [
            P.TREE,
            P.NAVIGATE,
            P.LABEL,
            P.FORK,
            P.CLONE,
            P.FORK_MESSAGES,
            P.SET_MODEL,
            P.SET_THINKING_LEVEL,
            P.NEW_SESSION,
            P.SWITCH_SESSION,
            P.SET_SESSION_NAME,
            P.GET_SESSION_STATS,
            P.GET_LAST_ASSISTANT_TEXT,
            P.BASH,
            P.ABORT_BASH,
            P.GET_AVAILABLE_MODELS,
            P.EXPORT_HTML,
            P.SET_QUEUE_MODE,
            P.SET_AUTO,
        ],  # fmt: skip
    )

    def __init__(self, coordinator: Coordinator) -> None:
        self.c = coordinator
        #: The session's name (its latest session_info entry), for get_state.
        self.session_name: str | None = None
        #: A branch summary is being made (part of pi's ``isCompacting``).
        self.summarizing = False
        #: The user's !cmd that is running (abort_bash stops it), and the bashExecution
        #: messages of commands that ended during a run, recorded when the run ends (pi's order).
        self._bash_stops: set[trio.Event] = set()
        self._pending_bash: list[dict[str, Any]] = []

    async def after_open(self, *, new: bool) -> None:
        """What pi does when it opens a session: a new one (or one without messages) gets
        the initial ``model_change`` and ``thinking_level_change`` entries (no file is
        written for them alone, see the session writer); a continued one whose branch holds
        no ``thinking_level_change`` gets one. Also reads the session's name."""
        self.session_name = None
        messages = ((self.c.session or {}).get("context") or {}).get("messages") or []
        if new or not messages:
            model = self.c.agent.state.model
            if model is not None:
                await self.c.store.call(
                    "append_entry", {"entry": {"type": "model_change", "provider": model.provider, "modelId": model.id}}
                )
            await self._set_level(self.c.agent.state.thinking_level)
            return
        tree = await self._entries()
        names = [e.get("name") for e in tree["entries"] if e.get("type") == "session_info"]
        self.session_name = (names[-1] or None) if names else None
        by_id = {e.get("id"): e for e in tree["entries"]}
        entry, seen = by_id.get(tree.get("leafId")), set()
        while entry is not None and entry.get("id") not in seen:
            if entry.get("type") == "thinking_level_change":
                return
            seen.add(entry.get("id"))
            entry = by_id.get(entry.get("parentId"))
        await self._set_level(self.c.agent.state.thinking_level)

    # -- the tree (pi's /tree, /fork, labels) --------------------------------------------------

    async def _entries(self) -> dict[str, Any]:
        tree: dict[str, Any] = await self.c.store.call("entries")
        return tree

    def _refuse_during_run(self, method: str) -> None:
        if self.c.agent.state.is_streaming:
            raise RemoteError("busy", f"{method}: wait for the current run to end (or abort it) first")

    @implements(P.TREE)
    async def tree(self, args: Empty, call: TypedCall[Empty, None]) -> P.Tree:
        tree = await self._entries()
        return P.Tree(entries=tree["entries"], leaf_id=tree.get("leafId"), labels=tree.get("labels") or {})

    @implements(P.FORK_MESSAGES)
    async def fork_messages(self, args: Empty, call: TypedCall[Empty, None]) -> P.ForkMessages:
        entries = (await self._entries())["entries"]
        return P.ForkMessages(
            messages=[P.ForkMessage(entry_id=e["id"], text=_entry_text(e)) for e in entries if _is_user_entry(e) and _entry_text(e)]
        )

    @implements(P.LABEL)
    async def label(self, args: P.LabelArgs, call: TypedCall[P.LabelArgs, None]) -> P.LabelResult:
        self._refuse_during_run("label")
        stored = await self.c.store.call("label", {"targetId": args.target_id, "label": args.label or None})
        return P.LabelResult(id=stored["id"])

    async def _target(self, target_id: str | None) -> tuple[dict[str, Any], Entry]:
        """The tree and the entry ``target_id``; RemoteError ``not_found`` (pi's text)."""
        tree = await self._entries()
        target = next((e for e in tree["entries"] if e.get("id") == target_id), None)
        if target is None:
            raise RemoteError("not_found", f"Entry {target_id} not found")
        return tree, target

    @implements(P.FORK)
    async def fork(self, args: P.ForkArgs, call: TypedCall[P.ForkArgs, None]) -> P.ForkResult:
        self._refuse_during_run("fork")
        tree = await self._entries()
        target = next((e for e in tree["entries"] if e.get("id") == args.entry_id), None)
        if target is None or not _is_user_entry(target):  # pi's one text for both
            raise RemoteError("invalid_args", "Invalid entry ID for forking")
        # The new session holds the path up to, not including, the chosen user message;
        # its text goes back to the editor.
        session = await self.c.store.call("fork", {"entryId": target.get("parentId")})
        self.c.session = session
        self.c.agent.session_id = self.c.session_id
        self.c.load_context(session)
        await self.after_open(new=False)
        return P.ForkResult(text=_entry_text(target), path=session.get("path"))

    @implements(P.CLONE)
    async def clone(self, args: Empty, call: TypedCall[Empty, None]) -> P.CloneResult:
        """pi's /clone: the branch up to and including the leaf, in a new session file."""
        self._refuse_during_run("clone")
        tree = await self._entries()
        if not tree.get("leafId"):
            raise RemoteError("invalid_state", "Cannot clone session: no current entry selected")
        session = await self.c.store.call("fork", {"entryId": tree["leafId"]})
        self.c.session = session
        self.c.agent.session_id = self.c.session_id
        self.c.load_context(session)
        await self.after_open(new=False)
        return P.CloneResult(cancelled=False, path=session.get("path"))

    @implements(P.NAVIGATE)
    async def navigate(self, args: P.NavigateArgs, call: TypedCall[P.NavigateArgs, None]) -> P.NavigateResult:
        self._refuse_during_run("navigate")
        tree, target = await self._target(args.target_id)
        # A user message (or custom message) is re-asked, so the leaf becomes its parent.
        editor_text = None
        new_leaf: str | None = args.target_id
        if _is_user_entry(target) or target.get("type") == "custom_message":
            new_leaf = target.get("parentId")
            editor_text = _entry_text(target)
        summary, details = args.summary, args.details
        if not summary and args.summarize and args.target_id != tree["leafId"]:
            self.summarizing = True
            try:
                summary, details = await self._summarize_branch(tree, args)
            finally:
                self.summarizing = False
        self.c.session = await self.c.store.call("branch", {"entryId": new_leaf})
        if summary:
            entry = {"type": "branch_summary", "fromId": new_leaf or "root", "summary": summary, "details": details, "fromHook": False}
            await self.c.store.call("append_entry", {"entry": entry})
            self.c.session = await self.c.store.call("context")
        self.c.load_context(self.c.session)
        return P.NavigateResult(editor_text=editor_text, leaf_id=new_leaf)

    async def _summarize_branch(self, tree: dict[str, Any], args: P.NavigateArgs) -> tuple[str, Any]:
        """A summary of the branch being left (pi's /tree "Summarize"), from the session's
        model through the provider actor. Raises RemoteError if it fails or is aborted."""
        from ..coding.compaction import collect_branch_entries, summarize_branch

        model = self.c.agent.state.model
        if model is None:
            raise RemoteError("invalid_state", "No model available for summarization")
        abandoned = collect_branch_entries(tree["entries"], tree["leafId"], args.target_id)
        result = await summarize_branch(
            abandoned.entries,
            model,
            self.c.stream_fn,
            api_key=None,
            custom_instructions=args.custom_instructions,
            replace_instructions=args.replace_instructions,
            reserve_tokens=self.c.upkeep.compaction_settings.reserve_tokens,
            session_id=self.c.session_id,
        )
        if result.aborted:
            raise RemoteError("cancelled", "Branch summarization cancelled")
        if result.error or result.summary is None:
            raise RemoteError("summarization_failed", f"Branch summarization failed: {result.error}")
        return result.summary, result.details

    # -- model and thinking level ------------------------------------------------------------

    def _models(self) -> list[T.Model]:
        return list(self.c.config.models)

    @implements(P.GET_AVAILABLE_MODELS)
    async def get_available_models(self, args: Empty, call: TypedCall[Empty, None]) -> P.Models:
        return P.Models(models=T.to_plain(self.c.config.models))

    @implements(P.SET_MODEL)
    async def set_model(self, args: P.SetModelArgs, call: TypedCall[P.SetModelArgs, None]) -> T.Model:
        """``{provider, modelId}`` (a model the CLI knows) or ``{model: <Model>}``."""
        model = args.model
        if model is None:
            model = next((m for m in self._models() if m.provider == args.provider and m.id == args.model_id), None)
            if model is None:
                raise RemoteError("not_found", f"Model not found: {args.provider}/{args.model_id}")
        self.c.agent.set_model(model)
        await self.c.store.call("append_entry", {"entry": {"type": "model_change", "provider": model.provider, "modelId": model.id}})
        level = self.c.agent.state.thinking_level
        clamped = _clamp_level(level, model)
        if clamped != level:
            await self._set_level(clamped)
        return model

    @implements(P.SET_THINKING_LEVEL)
    async def set_thinking_level(self, args: P.ThinkingLevelArgs, call: TypedCall[P.ThinkingLevelArgs, None]) -> P.ThinkingLevelResult:
        if args.level not in THINKING_LEVELS:
            raise RemoteError("invalid_args", f"Invalid thinking level {args.level!r}; one of {', '.join(THINKING_LEVELS)}")
        applied = _clamp_level(args.level, self.c.agent.state.model)
        await self._set_level(applied)
        return P.ThinkingLevelResult(level=applied)

    async def _set_level(self, level: AgentThinkingLevel) -> None:
        self.c.agent.set_thinking_level(level)
        await self.c.store.call("append_entry", {"entry": {"type": "thinking_level_change", "thinkingLevel": level}})

    # -- sessions ------------------------------------------------------------------------------

    async def _stop_run(self) -> None:
        if self.c.agent.state.is_streaming:
            self.c.upkeep.cancel()
            self.c.agent.abort()
            await self.c.agent.wait_for_idle()

    def _session_dirs(self) -> dict[str, Any]:
        cfg = self.c.config.session
        return {"cwd": self.c.cwd, "sessionDir": cfg.session_dir, "agentDir": cfg.agent_dir}

    @implements(P.NEW_SESSION)
    async def new_session(self, args: P.NewSessionArgs, call: TypedCall[P.NewSessionArgs, None]) -> P.NewSessionResult:
        await self._stop_run()
        self.c.agent.reset()
        current = (self.c.session or {}).get("path")
        no_session = self.c.config.session.no_session
        session = await self.c.store.call("open", {**self._session_dirs(), "noSession": no_session})
        self.c.session = session
        self.c.agent.session_id = self.c.session_id
        await self.after_open(new=True)
        return P.NewSessionResult(cancelled=False, previous_session_file=current, path=session.get("path"))

    @implements(P.SWITCH_SESSION)
    async def switch_session(self, args: P.SwitchSessionArgs, call: TypedCall[P.SwitchSessionArgs, None]) -> P.SwitchSessionResult:
        if not args.session_path:
            raise RemoteError("invalid_args", "switch_session: sessionPath must be a path")
        await self._stop_run()
        self.c.agent.reset()
        try:
            session = await self.c.store.call("open", {**self._session_dirs(), "resume": args.session_path})
        except RemoteError:  # e.g. session_locked: the store keeps the session it had
            self.c.load_context(await self.c.store.call("context"))
            raise
        self.c.session = session
        self.c.agent.session_id = self.c.session_id
        self.c.load_context(session)
        context = session.get("context") or {}
        saved = context.get("model") or {}
        model = next((m for m in self._models() if m.provider == saved.get("provider") and m.id == saved.get("modelId")), None)
        if model is not None:
            self.c.agent.set_model(model)
        level = context.get("thinkingLevel")
        if level in THINKING_LEVELS:
            self.c.agent.set_thinking_level(_clamp_level(level, self.c.agent.state.model))
        await self.after_open(new=False)
        warnings = list(session.get("warnings") or [])
        elsewhere = _saved_elsewhere(session, self.c.cwd)
        if elsewhere is not None:
            warnings.append(elsewhere)
        return P.SwitchSessionResult(cancelled=False, path=session.get("path"), warnings=warnings)

    @implements(P.SET_QUEUE_MODE)
    async def set_queue_mode(self, args: P.SetQueueModeArgs, call: TypedCall[P.SetQueueModeArgs, None]) -> None:
        """``{queue: steering|followUp, mode: all|one-at-a-time}``."""
        if args.mode not in ("all", "one-at-a-time"):
            raise RemoteError("invalid_args", f"Invalid mode {args.mode!r}; one of all, one-at-a-time")
        mode = cast(QueueMode, args.mode)
        if args.queue == "steering":
            self.c.agent.steering_mode = mode
        else:
            self.c.agent.follow_up_mode = mode

    @implements(P.SET_AUTO)
    async def set_auto(self, args: P.SetAutoArgs, call: TypedCall[P.SetAutoArgs, None]) -> None:
        """``{what: compaction|retry, enabled}``: switch auto-compaction or auto-retry."""
        upkeep = self.c.upkeep
        if args.what == "compaction":
            upkeep.compaction_settings = dataclasses.replace(upkeep.compaction_settings, enabled=args.enabled)
        else:
            upkeep.retry.settings = dataclasses.replace(upkeep.retry.settings, enabled=args.enabled)

    @implements(P.SET_SESSION_NAME)
    async def set_session_name(self, args: P.SessionNameArgs, call: TypedCall[P.SessionNameArgs, None]) -> None:
        name = args.name.strip()
        if not name:
            raise RemoteError("invalid_args", "Session name cannot be empty")
        await self.c.store.call("append_entry", {"entry": {"type": "session_info", "name": name}})
        self.session_name = name
        await self.c._emit_session_event({"type": "session_info_changed", "name": name})

    @implements(P.GET_SESSION_STATS)
    async def get_session_stats(self, args: Empty, call: TypedCall[Empty, None]) -> P.SessionStats:
        messages = self.c.agent.state.messages
        replies = [m for m in messages if isinstance(m, T.AssistantMessage)]
        tokens = P.TokenStats(
            input=sum(m.usage.input for m in replies),
            output=sum(m.usage.output for m in replies),
            cache_read=sum(m.usage.cache_read for m in replies),
            cache_write=sum(m.usage.cache_write for m in replies),
            total=0,
        )
        tokens.total = tokens.input + tokens.output + tokens.cache_read + tokens.cache_write
        cost = 0.0
        for m in replies:
            cost += m.usage.cost.total
        return P.SessionStats(
            session_id=self.c.session_id,
            user_messages=sum(isinstance(m, T.UserMessage) for m in messages),
            assistant_messages=len(replies),
            tool_calls=sum(len([b for b in m.content if isinstance(b, T.ToolCall)]) for m in replies),
            tool_results=sum(isinstance(m, T.ToolResultMessage) for m in messages),
            total_messages=len(messages),
            tokens=tokens,
            cost=cost,
            session_file=(self.c.session or {}).get("path") or None,
            context_usage=_context_usage(messages, self.c.agent.state.model),
        )

    @implements(P.GET_LAST_ASSISTANT_TEXT)
    async def get_last_assistant_text(self, args: Empty, call: TypedCall[Empty, None]) -> P.LastAssistantText:
        for m in reversed(self.c.agent.state.messages):
            if isinstance(m, T.AssistantMessage):
                text = "".join(b.text for b in m.content if isinstance(b, T.TextContent))
                return P.LastAssistantText(text=text or None)
        return P.LastAssistantText()

    @implements(P.EXPORT_HTML)
    async def export_html(self, args: P.ExportHtmlArgs, call: TypedCall[P.ExportHtmlArgs, None]) -> P.ExportHtmlResult:
        """The session (its tree, the current branch shown) as a self-contained HTML file;
        ``{path}``.

        Without ``outputPath`` the file is pi's default, ``pi-session-<session file
        name>.html``, in the session's working directory — the place ``pi-actors --export
        FILE`` writes to when started there — or in ``exports.dir`` when the configuration
        names one; an existing file is replaced, as pi does. A session whose
        ``exports.callerPath`` is false (a served session) refuses an ``outputPath``
        (``invalid_args``) and writes only in ``exports.dir``, creating the file exclusively
        (``O_EXCL``; ``-1``, ``-2``, … are appended rather than overwrite anything) and never
        through a symlink."""
        from ..coding.export_html import default_export_name, export_html, render_html

        tree = await self._entries()
        header = (self.c.session or {}).get("header") or {}
        exports = self.c.config.exports
        name = default_export_name((self.c.session or {}).get("path"), header.get("id"))
        if exports.caller_path:
            target = args.output_path or os.path.join(exports.dir or self.c.cwd or os.getcwd(), name)
            try:
                written = await trio.to_thread.run_sync(export_html, header, tree["entries"], target, tree.get("leafId"))
            except OSError as exc:
                raise RemoteError("write_failed", f"Cannot write {target}: {exc.strerror or exc}") from None
            return P.ExportHtmlResult(path=written)
        if args.output_path:
            raise RemoteError("invalid_args", "export_html: this session takes no outputPath; the file is written in its session directory")
        if not exports.dir:
            raise RemoteError("write_failed", "export_html: this session has no directory to write the export in")
        html = render_html(header, tree["entries"], tree.get("leafId")).encode("utf-8")
        return P.ExportHtmlResult(path=await trio.to_thread.run_sync(_write_new, exports.dir, name[: -len(".html")], html))

    # -- !cmd ----------------------------------------------------------------------------------

    @implements(P.BASH)
    async def bash(self, args: P.BashArgs, call: TypedCall[P.BashArgs, None]) -> P.BashResult:
        """Run a user's shell command through the tool pool (sandboxed like any tool call)
        and record it as a ``bashExecution`` message (``excludeFromContext`` for ``!!``).
        Allowed during a run, as in pi: the message is then recorded when the run ends.
        ``abort_bash`` stops it (``cancelled: true``, the output printed so far)."""
        command = args.command
        if not command.strip():
            raise RemoteError("invalid_args", "bash: command must be a non-empty string")
        stop = trio.Event()
        self._bash_stops.add(stop)
        try:
            args_ = {"toolCallId": "user-bash", "name": "bash", "args": {"command": command}, "cwd": self.c.cwd}
            args_.update(shell_settings(self.c.config.settings))  # pi's user bash uses them too
            async with self.c.tools_peer.open_call("run_tool", args_) as running:
                # abort_bash cancels the call cooperatively: the pool kills the command and
                # answers with what it printed so far ("Command aborted").
                async with running.cancel_when(stop.wait):
                    async for _ in running:
                        pass
                result = await running.result()
        except RemoteError as exc:
            raise RemoteError("bash_failed", exc.message) from None
        finally:
            self._bash_stops.discard(stop)
        outcome = _bash_outcome(result)
        # pi's bashExecution message, keys in pi's order.
        message: dict[str, Any] = {
            "role": "bashExecution",
            "command": command,
            "output": outcome.output,
            "exitCode": outcome.exit_code,
            "cancelled": outcome.cancelled,
            "truncated": outcome.truncated,
            "timestamp": T.now_ms(),
        }
        if outcome.full_output_path:
            message["fullOutputPath"] = outcome.full_output_path
        if args.exclude_from_context:
            message["excludeFromContext"] = True
        if self.c.agent.state.is_streaming:
            # As pi: recorded when the run ends, so a reply's tool calls and results stay together.
            self._pending_bash.append(message)
        else:
            await self._record_bash(message)
        return outcome

    async def _record_bash(self, message: dict[str, Any]) -> None:
        await self.c.store.call("append", {"message": message})
        self.c.agent.append_message(message)

    async def flush_pending_bash(self) -> None:
        """Record the bashExecution messages of commands that ended during the run (agent_end)."""
        pending, self._pending_bash = self._pending_bash, []
        for message in pending:
            await self._record_bash(message)

    @implements(P.ABORT_BASH)
    async def abort_bash(self, args: Empty, call: TypedCall[Empty, None]) -> None:
        """Stop the running !cmd (its tool call is cancelled, which kills the command)."""
        for stop in list(self._bash_stops):
            stop.set()


def _bash_outcome(result: dict[str, Any]) -> P.BashResult:
    """The ``bash`` tool's result as pi's BashResult (output, exit code, cancelled, ...)."""
    text = "".join(b.get("text", "") for b in result.get("content") or [] if b.get("type") == "text")
    details = result.get("details") or {}
    exit_code: int | None = 0
    cancelled = False
    if result.get("isError"):
        marker = "\n\nCommand exited with code "
        if marker in text:
            text, _, code = text.rpartition(marker)
            exit_code = int(code) if code.strip().lstrip("-").isdigit() else None
        elif text.endswith("Command aborted"):
            cancelled, exit_code = True, None
            text = text[: -len("Command aborted")].rstrip("\n")
    if text == "(no output)":
        text = ""
    return P.BashResult(
        output=text,
        exit_code=exit_code,
        cancelled=cancelled,
        truncated=bool(details.get("truncation")),
        full_output_path=details.get("fullOutputPath") or None,
    )


def _context_usage(messages: list[Any], model: T.Model | None) -> P.ContextUsage | None:
    """pi's ``getContextUsage``: the estimated context size against the model's window.
    After a compaction the size is unknown (null) until a reply has reported its usage."""
    from ..agent.types import message_role
    from ..coding.compaction.tokens import calculate_context_tokens, estimate_context_tokens

    window = model.context_window if model is not None else 0
    if not window or window <= 0:
        return None
    summaries = [m for m in messages if message_role(m) == "compactionSummary" and isinstance(m, dict)]
    if summaries:
        # The compaction entry comes after the messages it keeps: only a reply newer than it
        # has measured the compacted context.
        since = summaries[-1].get("timestamp")
        since_ms = since if isinstance(since, int | float) else 0
        known = False
        for m in reversed(messages):
            if isinstance(m, T.AssistantMessage) and m.timestamp > since_ms and m.stop_reason not in ("aborted", "error"):
                known = calculate_context_tokens(m.usage) > 0
                break
        if not known:
            return P.ContextUsage(tokens=None, context_window=window, percent=None)
    tokens = estimate_context_tokens(messages).tokens
    return P.ContextUsage(tokens=tokens, context_window=window, percent=tokens / window * 100)


def _clamp_level(level: str, model: T.Model | None) -> AgentThinkingLevel:
    """pi's clamp: no reasoning → off; else the nearest level the model offers (its
    ``thinkingLevelMap``; xhigh only where supported) — ai.clamp_thinking_level."""
    from ..ai import clamp_thinking_level

    if model is None or not model.reasoning:
        return "off"
    return cast(AgentThinkingLevel, clamp_thinking_level(model, level))


def _write_new(directory: str, stem: str, data: bytes) -> str:
    """Write ``data`` to a new file ``directory/stem[-N].html`` (O_EXCL, no symlink followed
    at the last component); RemoteError ``write_failed`` if that cannot be done."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW
    for n in range(100):
        path = os.path.join(directory, f"{stem}{'' if n == 0 else f'-{n}'}.html")
        try:
            fd = os.open(path, flags, 0o600)
        except FileExistsError:
            continue
        except OSError as exc:
            raise RemoteError("write_failed", f"Cannot write {path}: {exc.strerror or exc}") from None
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
        except OSError as exc:
            raise RemoteError("write_failed", f"Cannot write {path}: {exc.strerror or exc}") from None
        return path
    raise RemoteError("write_failed", f"export_html: {directory} already holds 100 exports named {stem}")


def _saved_elsewhere(session: dict[str, Any], cwd: str) -> str | None:
    """The warning for a session switched to that was saved in another directory, or None.

    pi 0.73 rebuilds its whole runtime in the session's directory on a switch; here the actors
    were started for ``cwd`` (the tools' directory and sandbox, the system prompt's project
    files, the project settings and extensions), so the session goes on in ``cwd``, and the
    user is told so rather than finding out from a tool run in the wrong project. Opening
    it with ``--session`` runs it where it was saved."""
    saved = (session.get("header") or {}).get("cwd")
    path = session.get("path")
    if not isinstance(saved, str) or not saved or os.path.realpath(saved) == os.path.realpath(cwd):
        return None
    how = f"; to run it there: pi-actors --session {path}" if path else ""
    return (f"this session was saved in {saved}; it goes on in {cwd}, with this directory's tools, "
            f"project settings and resources{how}")  # fmt: skip
