"""Session commands of the coordinator: the tree (pi's /tree, /fork, labels), the model and
thinking level, new/switch session, names, statistics, ``!cmd`` bash executions.

Each takes the call's ``args`` and returns plain data or raises ``RemoteError`` with pi's
texts. Commands that change the transcript refuse while a run is active (``busy``), except
where pi aborts the run first (new_session, switch_session).
"""

from __future__ import annotations

import os
from typing import Any

import msgspec
import trio

from ..ai import types as T
from ..choices import THINKING_LEVELS
from ..runtime import RemoteError

__all__ = ["SessionCommands"]

def _is_user_entry(entry: dict) -> bool:
    return entry.get("type") == "message" and (entry.get("message") or {}).get("role") == "user"


def _entry_text(entry: dict) -> str:
    content = (entry.get("message") or entry).get("content")
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content or [] if isinstance(b, dict) and b.get("type") == "text")



class SessionCommands:
    METHODS = frozenset({
        "tree", "navigate", "label", "fork", "fork_messages",
        "set_model", "set_thinking_level", "new_session", "switch_session", "set_session_name",
        "get_session_stats", "get_last_assistant_text", "bash", "get_available_models", "export_html",
        "set_queue_mode", "set_auto",
    })  # fmt: skip

    def __init__(self, coordinator: Any) -> None:
        self.c = coordinator

    async def handle(self, method: str, args: dict) -> Any:
        if method in ("tree", "navigate", "label", "fork", "fork_messages"):
            return await self._tree(method, args)
        return await getattr(self, method)(args)

    async def _tree(self, method: str, args: dict) -> Any:
        """Tree operations (pi's /tree, /fork, labels); refused while a run is active."""
        if method == "tree":
            return await self.c.store.call("entries")
        if method == "fork_messages":
            entries = (await self.c.store.call("entries"))["entries"]
            return {"messages": [{"entryId": e["id"], "text": _entry_text(e)} for e in entries if _is_user_entry(e) and _entry_text(e)]}
        if self.c.agent.state.is_streaming:
            raise RemoteError("busy", f"{method}: wait for the current run to end (or abort it) first")
        if method == "label":
            return await self.c.store.call("label", {"targetId": args.get("targetId"), "label": args.get("label") or None})
        tree = await self.c.store.call("entries")
        entries = {e["id"]: e for e in tree["entries"]}
        target_id = args.get("entryId") if method == "fork" else args.get("targetId")
        target = entries.get(target_id)
        if target is None:
            raise RemoteError("not_found", f"Entry {target_id} not found")
        if method == "fork":
            if not _is_user_entry(target):
                raise RemoteError("invalid_args", "Invalid entry ID for forking")
            # The new session holds the path up to, not including, the chosen user message;
            # its text goes back to the editor.
            self.c.session = await self.c.store.call("fork", {"entryId": target.get("parentId")})
            self.c.agent.session_id = self.c.session_id
            self.c.load_context(self.c.session)
            return {"text": _entry_text(target), "path": self.c.session.get("path")}
        # navigate: a user message (or custom message) is re-asked, so the leaf becomes its parent.
        editor_text = None
        new_leaf = target_id
        if _is_user_entry(target) or target.get("type") == "custom_message":
            new_leaf = target.get("parentId")
            editor_text = _entry_text(target)
        summary, details = args.get("summary"), args.get("details")
        if not summary and args.get("summarize") and target_id != tree["leafId"]:
            summary, details = await self._summarize_branch(tree, target_id, args)
        self.c.session = await self.c.store.call("branch", {"entryId": new_leaf})
        if summary:
            entry = {"type": "branch_summary", "fromId": new_leaf or "root", "summary": summary, "details": details, "fromHook": False}
            await self.c.store.call("append_entry", {"entry": entry})
            self.c.session = await self.c.store.call("context")
        self.c.load_context(self.c.session)
        return {"editorText": editor_text, "leafId": new_leaf}

    async def _summarize_branch(self, tree: dict, target_id: str, args: dict) -> tuple[str, dict | None]:
        """A summary of the branch being left (pi's /tree "Summarize"), from the session's
        model through the provider actor. Raises RemoteError if it fails or is aborted."""
        from ..coding.compaction import collect_branch_entries, summarize_branch

        model = self.c.agent.state.model
        if model is None:
            raise RemoteError("invalid_state", "No model available for summarization")
        abandoned = collect_branch_entries(tree["entries"], tree["leafId"], target_id)
        instructions = args.get("customInstructions")
        result = await summarize_branch(
            abandoned.entries,
            model,
            self.c.stream_fn,
            api_key=None,
            custom_instructions=instructions if isinstance(instructions, str) else None,
            replace_instructions=bool(args.get("replaceInstructions")),
            reserve_tokens=self.c.upkeep.compaction_settings.reserve_tokens,
            session_id=self.c.session_id,
        )
        if result.aborted:
            raise RemoteError("cancelled", "Branch summarization cancelled")
        if result.error:
            raise RemoteError("summarization_failed", f"Branch summarization failed: {result.error}")
        return result.summary, result.details

    # -- model and thinking level ------------------------------------------------------------

    def _models(self) -> list[T.Model]:
        return list(self.c.config.models)

    async def get_available_models(self, args: dict) -> dict:
        return {"models": T.to_plain(self.c.config.models)}

    async def set_model(self, args: dict) -> dict:
        """``{provider, modelId}`` (a model the CLI knows) or ``{model: <Model>}``."""
        if isinstance(args.get("model"), dict):
            try:
                model = msgspec.convert(args["model"], T.Model)
            except msgspec.ValidationError as exc:
                raise RemoteError("invalid_args", f"set_model: {exc}") from None
        else:
            provider, model_id = args.get("provider"), args.get("modelId")
            model = next((m for m in self._models() if m.provider == provider and m.id == model_id), None)
            if model is None:
                raise RemoteError("not_found", f"Model not found: {provider}/{model_id}")
        self.c.agent.set_model(model)
        await self.c.store.call("append_entry", {"entry": {"type": "model_change", "provider": model.provider, "modelId": model.id}})
        level = self.c.agent.state.thinking_level
        clamped = _clamp_level(level, model)
        if clamped != level:
            await self._set_level(clamped)
        return T.to_plain(model)

    async def set_thinking_level(self, args: dict) -> dict:
        level = args.get("level")
        if level not in THINKING_LEVELS:
            raise RemoteError("invalid_args", f"Invalid thinking level {level!r}; one of {', '.join(THINKING_LEVELS)}")
        applied = _clamp_level(level, self.c.agent.state.model)
        await self._set_level(applied)
        return {"level": applied}

    async def _set_level(self, level: str) -> None:
        self.c.agent.set_thinking_level(level)
        await self.c.store.call("append_entry", {"entry": {"type": "thinking_level_change", "thinkingLevel": level}})

    # -- sessions ------------------------------------------------------------------------------

    async def _stop_run(self) -> None:
        if self.c.agent.state.is_streaming:
            self.c.upkeep.cancel()
            self.c.agent.abort()
            await self.c.agent.wait_for_idle()

    async def new_session(self, args: dict) -> dict:
        await self._stop_run()
        self.c.agent.reset()
        current = (self.c.session or {}).get("path")
        cfg = self.c.config.session
        self.c.session = await self.c.store.call(
            "open",
            {"cwd": self.c.cwd, "sessionDir": cfg.session_dir, "agentDir": cfg.agent_dir, "noSession": cfg.no_session},
        )
        self.c.agent.session_id = self.c.session_id
        await self._set_level(self.c.agent.state.thinking_level)
        return {"cancelled": False, "previousSessionFile": current, "path": self.c.session.get("path")}

    async def switch_session(self, args: dict) -> dict:
        path = args.get("sessionPath")
        if not isinstance(path, str) or not path:
            raise RemoteError("invalid_args", "switch_session: sessionPath must be a path")
        await self._stop_run()
        self.c.agent.reset()
        cfg = self.c.config.session
        try:
            self.c.session = await self.c.store.call(
                "open", {"cwd": self.c.cwd, "sessionDir": cfg.session_dir, "agentDir": cfg.agent_dir, "resume": path}
            )
        except RemoteError:  # e.g. session_locked: the store keeps the session it had
            self.c.load_context(await self.c.store.call("context"))
            raise
        self.c.agent.session_id = self.c.session_id
        self.c.load_context(self.c.session)
        saved = (self.c.session.get("context") or {}).get("model") or {}
        model = next((m for m in self._models() if m.provider == saved.get("provider") and m.id == saved.get("modelId")), None)
        if model is not None:
            self.c.agent.set_model(model)
        level = (self.c.session.get("context") or {}).get("thinkingLevel")
        if level in THINKING_LEVELS:
            self.c.agent.set_thinking_level(_clamp_level(level, self.c.agent.state.model))
        return {"cancelled": False, "path": self.c.session.get("path"), "warnings": self.c.session.get("warnings") or []}

    async def set_queue_mode(self, args: dict) -> dict:
        """``{queue: steering|followUp, mode: all|one-at-a-time}``."""
        mode = args.get("mode")
        if mode not in ("all", "one-at-a-time"):
            raise RemoteError("invalid_args", f"Invalid mode {mode!r}; one of all, one-at-a-time")
        if args.get("queue") == "steering":
            self.c.agent.steering_mode = mode
        else:
            self.c.agent.follow_up_mode = mode
        return {}

    async def set_auto(self, args: dict) -> dict:
        """``{what: compaction|retry, enabled}``: switch auto-compaction or auto-retry."""
        import dataclasses

        enabled = bool(args.get("enabled"))
        upkeep = self.c.upkeep
        if args.get("what") == "compaction":
            upkeep.compaction_settings = dataclasses.replace(upkeep.compaction_settings, enabled=enabled)
        else:
            upkeep.retry.settings = dataclasses.replace(upkeep.retry.settings, enabled=enabled)
        return {}

    async def set_session_name(self, args: dict) -> dict:
        name = args.get("name")
        name = name.strip() if isinstance(name, str) else ""
        if not name:
            raise RemoteError("invalid_args", "Session name cannot be empty")
        await self.c.store.call("append_entry", {"entry": {"type": "session_info", "name": name}})
        return {}

    async def get_session_stats(self, args: dict) -> dict:
        messages = self.c.agent.state.messages
        tokens = {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0, "total": 0}
        cost = 0.0
        for m in messages:
            if isinstance(m, T.AssistantMessage):
                tokens["input"] += m.usage.input
                tokens["output"] += m.usage.output
                tokens["cacheRead"] += m.usage.cache_read
                tokens["cacheWrite"] += m.usage.cache_write
                cost += m.usage.cost.total
        tokens["total"] = tokens["input"] + tokens["output"] + tokens["cacheRead"] + tokens["cacheWrite"]
        count = lambda cls: sum(isinstance(m, cls) for m in messages)  # noqa: E731
        stats = {
            "sessionId": self.c.session_id,
            "userMessages": count(T.UserMessage),
            "assistantMessages": count(T.AssistantMessage),
            "toolCalls": sum(len([b for b in m.content if isinstance(b, T.ToolCall)]) for m in messages if isinstance(m, T.AssistantMessage)),
            "toolResults": count(T.ToolResultMessage),
            "totalMessages": len(messages),
            "tokens": tokens,
            "cost": cost,
        }
        path = (self.c.session or {}).get("path")
        if path:
            stats["sessionFile"] = path
        return stats

    async def get_last_assistant_text(self, args: dict) -> dict:
        for m in reversed(self.c.agent.state.messages):
            if isinstance(m, T.AssistantMessage):
                text = "".join(b.text for b in m.content if isinstance(b, T.TextContent))
                return {"text": text} if text else {}
        return {}

    async def export_html(self, args: dict) -> dict:
        """The session's current branch as a self-contained HTML file; ``{path}``.

        Without ``outputPath`` the file goes next to the session file (or, for a session the
        configuration's ``exports.dir`` names, in that directory — a served session's own
        directory), named after the session, created exclusively (``O_EXCL``; ``-1``, ``-2``,
        … are appended rather than overwrite anything) and never through a symlink. An
        ``outputPath`` is the local user's choice and is honoured unless ``exports.callerPath``
        is false (a served session: ``invalid_args``)."""
        from ..coding.export_html import export_html, render_html

        tree = await self.c.store.call("entries")
        header = (self.c.session or {}).get("header") or {}
        exports = self.c.config.exports
        path = args.get("outputPath")
        if isinstance(path, str) and path:
            if not exports.caller_path:
                raise RemoteError("invalid_args", "export_html: this session takes no outputPath; the file is written in its session directory")
            try:
                written = export_html(header, tree["entries"], path, tree.get("leafId"))
            except OSError as exc:
                raise RemoteError("write_failed", f"Cannot write {path}: {exc.strerror or exc}") from None
            return {"path": written}
        base = (self.c.session or {}).get("path")
        stem = os.path.basename(base)[: -len(".jsonl")] if base else f"pi-session-{header.get('id', 'export')}"
        directory = exports.dir if not exports.caller_path else (exports.dir or (os.path.dirname(base) if base else self.c.cwd))
        if not directory:
            raise RemoteError("write_failed", "export_html: this session has no directory to write the export in")
        html = render_html(header, tree["entries"], tree.get("leafId")).encode("utf-8")
        return {"path": await trio.to_thread.run_sync(_write_new, directory, stem, html)}

    # -- !cmd ----------------------------------------------------------------------------------

    async def bash(self, args: dict) -> dict:
        """Run a user's shell command through the tool pool (sandboxed like any tool call)
        and record it as a ``bashExecution`` message (``excludeFromContext`` for ``!!``)."""
        command = args.get("command")
        if not isinstance(command, str) or not command.strip():
            raise RemoteError("invalid_args", "bash: command must be a non-empty string")
        if self.c.agent.state.is_streaming:
            raise RemoteError("busy", "bash: wait for the current run to end (or abort it) first")
        try:
            result = await self.c.tools_peer.call("run_tool", {"toolCallId": "user-bash", "name": "bash", "args": {"command": command}, "cwd": self.c.cwd})
        except RemoteError as exc:
            raise RemoteError("bash_failed", exc.message) from None
        text = "".join(b.get("text", "") for b in result.get("content") or [] if b.get("type") == "text")
        details = result.get("details") or {}
        exit_code, cancelled = 0, False
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
        message: dict = {
            "role": "bashExecution",
            "command": command,
            "output": text,
            "exitCode": exit_code,
            "cancelled": cancelled,
            "truncated": bool(details.get("truncation")),
            "timestamp": T.now_ms(),
        }
        if details.get("fullOutputPath"):
            message["fullOutputPath"] = details["fullOutputPath"]
        if args.get("excludeFromContext"):
            message["excludeFromContext"] = True
        await self.c.store.call("append", {"message": message})
        self.c.agent.append_message(message)
        return {k: v for k, v in message.items() if k in ("output", "exitCode", "cancelled", "truncated", "fullOutputPath")}


def _clamp_level(level: str, model: T.Model | None) -> str:
    """pi's clamp: no reasoning → off; xhigh only where supported, else high."""
    from ..ai import supports_xhigh

    if model is None or not model.reasoning:
        return "off"
    if level == "xhigh" and not supports_xhigh(model):
        return "high"
    return level


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
