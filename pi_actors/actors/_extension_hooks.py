"""The coordinator's side of the extension host: hooks, extension tools, UI requests.

:class:`ExtensionHooks` is what the coordinator knows of extensions. It holds the host's link
(a supervised :class:`~._relink.PeerSlot`: a host that dies is restarted by the supervisor
and the next call reaches the new one) and:

* after start-up, asks the host what was registered (``describe``): extension tools join the
  agent's tools (each call is a ``run_tool`` call to the host; the agent runs a reply's calls
  together and keeps their results in call order), and the agent's ``before_tool_call`` /
  ``after_tool_call`` / ``transform_context`` hooks are set for the events some extension
  handles;
* runs each event through the host (:meth:`emit`) with the hook timeout
  (``ExtensionHostConfig.hookTimeout``; time spent waiting for the user's answer to a
  ``ctx.ui`` request is not counted). A timeout, a dead host or a handler that raised never
  stops the session: it is reported as pi's ``extension_error`` event (one line: extension,
  event, error) and the event counts as unhandled;
* serves the host's calls the other way (:data:`~pi_actors.protocol.extension_host.EXTENSION_CLIENT`):
  ``ui`` becomes an ``extension_ui_request`` session event (pi's RPC shape) that the attached
  UI answers with the coordinator's ``extension_ui_response`` (every attached client hears
  it; the first answer wins; with no UI listening, the default answer of no UI at once); ``append`` writes a custom
  entry to the session — a custom message (``pi.send_message``) also goes to every UI as
  ``message_start`` / ``message_end``, as pi's ``sendCustomMessage`` does; a data entry
  (``pi.append_entry``) is not shown, as in pi.

Errors found while no UI is listening (load errors, at start-up) are kept and told at the
start of the next run.
"""

from __future__ import annotations

import math
import uuid
from typing import Any

import msgspec
import trio

from ..agent import AgentTool, AgentToolResult
from ..agent.types import AfterToolCallResult, BeforeToolCallResult
from ..ai import types as T
from ..coding.messages import from_session_messages
from ..protocol import extension_host as X
from ..runtime import RemoteError, Router, TypedCall, call_method, implements
from ._coordinator_remote import result_blocks

__all__ = ["ExtensionHooks", "FIRE_AND_FORGET"]

#: UI methods that are shown, not answered (pi's fire-and-forget methods).
FIRE_AND_FORGET = frozenset({"notify", "setStatus", "setWidget", "setTitle", "set_editor_text"})


class ExtensionToolFailure(Exception):
    """An extension tool's error result: the message is what the model sees."""


class ExtensionHooks:
    """See the module docstring. ``coordinator``: the Coordinator (set by :meth:`attach`);
    ``slot``: the host's link; ``config``: the host's configuration."""

    def __init__(self, slot: Any, config: X.ExtensionHostConfig) -> None:
        self.slot = slot
        self.config = config
        self.has_ui = config.has_ui
        self.coordinator: Any = None
        self.registry = X.Registry()
        self._untold: list[dict[str, Any]] = []
        self._answers: dict[str, trio.MemorySendChannel[X.UiAnswer]] = {}
        self._timed: set[trio.CancelScope] = set()
        self._asking = 0
        #: The status lines the extensions set (``ctx.ui.set_status``) and did not clear, by
        #: key: a UI that attaches later (the TUI after ``session_start``) shows them too.
        self.statuses: dict[str, str] = {}

    def handler(self) -> Router:
        """Serves the host's calls (``ui``, ``append``) on its link."""
        return Router.serving(self, X.EXTENSION_CLIENT, name="coordinator")

    # -- start-up -------------------------------------------------------------------------------

    async def attach(self, coordinator: Any) -> None:
        """Learn what the extensions registered and wire it into ``coordinator``'s agent."""
        self.coordinator = coordinator
        try:
            self.registry = await call_method(self.slot, X.DESCRIBE)
        except RemoteError as exc:
            self._report({"extensionPath": "", "event": "load", "error": f"extension host: {exc.message}"})
            return
        for error in self.registry.errors:
            self._report(msgspec.to_builtins(error))
        agent = coordinator.agent
        ours = {spec.name: self._tool(spec) for spec in self.registry.tools}
        agent.set_tools([t for t in agent.state.tools if t.name not in ours] + list(ours.values()))
        events = set(self.registry.events)
        if "tool_call" in events:
            agent.before_tool_call = self.before_tool_call
        if "tool_result" in events:
            agent.after_tool_call = self.after_tool_call
        if "context" in events:
            agent.transform_context = self.transform_context
        await self.emit("session_start", {"reason": "startup"})

    def command_names(self) -> set[str]:
        return {c.name for c in self.registry.commands}

    # -- events ---------------------------------------------------------------------------------

    async def emit(self, event: str, payload: dict[str, Any]) -> dict[str, Any] | None:
        """Run ``event`` through the extensions' handlers; their combined result, or None
        (no handler, nothing changed, or the call failed: reported)."""
        if event not in self.registry.events:
            return None
        timeout = self.config.hook_timeout
        result: X.EmitResult | None = None
        try:
            with trio.CancelScope() as scope:
                scope.deadline = trio.current_time() + timeout if not self._asking else math.inf
                self._timed.add(scope)
                try:
                    result = await call_method(self.slot, X.EMIT, X.EmitArgs(event=event, payload=payload, has_ui=self.has_ui))
                finally:
                    self._timed.discard(scope)
        except RemoteError as exc:
            self._report({"extensionPath": "", "event": event, "error": f"extension host: {exc.message}"})
            await self.flush()
            return None
        if result is None:
            self._report({"extensionPath": "", "event": event, "error": f"the {event} handlers did not finish within {timeout:g} s"})
            await self.flush()
            return None
        for error in result.errors:
            self._report(msgspec.to_builtins(error))
        await self.flush()
        return result.result

    def _report(self, error: dict[str, Any]) -> None:
        event = {"type": "extension_error", "extensionPath": error.get("extensionPath", ""),
                 "event": error.get("event", ""), "error": error.get("error", "")}  # fmt: skip
        self._untold.append(event)
        if self.coordinator is not None:
            self.coordinator.log.event("extension_error", **{k: v for k, v in event.items() if k != "type"})

    async def flush(self) -> None:
        """Tell the errors not yet told (as ``extension_error`` session events), once a UI
        hears the session's events (a served session's start-up has no client yet)."""
        if self.coordinator is None or not self._ui_listens():
            return
        while self._untold:
            await self.coordinator._emit_session_event(self._untold.pop(0))

    # -- the agent's hooks ----------------------------------------------------------------------

    async def before_tool_call(self, ctx: Any, signal: Any = None) -> BeforeToolCallResult | None:
        block = ctx.tool_call
        answer = await self.emit("tool_call", {"toolName": block.name, "toolCallId": block.id, "input": ctx.args})
        if not answer:
            return None
        if answer.get("block"):
            return BeforeToolCallResult(block=True, reason=answer.get("reason") or "Blocked by an extension")
        rewritten = answer.get("input")
        if isinstance(rewritten, dict) and isinstance(ctx.args, dict):
            ctx.args.clear()  # the loop runs the call with this very dict
            ctx.args.update(rewritten)
        return None

    async def after_tool_call(self, ctx: Any, signal: Any = None) -> AfterToolCallResult | None:
        block = ctx.tool_call
        payload = {"toolName": block.name, "toolCallId": block.id, "input": ctx.args,
                   "content": T.to_plain(list(ctx.result.content)), "details": ctx.result.details,
                   "isError": ctx.is_error}  # fmt: skip
        answer = await self.emit("tool_result", payload)
        if not answer:
            return None
        content = None
        if "content" in answer:
            try:
                content = msgspec.convert(answer["content"], list[T.ToolResultContent])
            except msgspec.ValidationError as exc:
                self._report({"event": "tool_result", "error": f"a rewritten content is not a list of blocks: {exc}"})
                await self.flush()
        is_error = answer.get("isError")
        return AfterToolCallResult(
            content=content, details=answer.get("details"), is_error=is_error if isinstance(is_error, bool) else None
        )

    async def transform_context(self, messages: list[Any], signal: Any = None) -> list[Any]:
        answer = await self.emit("context", {"messages": [m if isinstance(m, dict) else T.to_plain(m) for m in messages]})
        if answer and isinstance(answer.get("messages"), list):
            return from_session_messages(answer["messages"])
        return messages

    async def before_prompt(self, prompt: T.UserMessage) -> T.UserMessage | None:
        """A prompt about to run: ``/command`` runs the extension command (None: no run),
        then ``input`` (may transform it, or handle it: None), then ``before_agent_start``
        (may set the run's system prompt, inject messages). Returns the prompt to run."""
        text = _prompt_text(prompt)
        await self.flush()
        if text is not None and text.startswith("/"):
            name, _, args = text[1:].partition(" ")
            if name in self.command_names():
                await self.run_command(name, args.strip())
                return None
        if text is not None:
            answer = await self.emit("input", {"text": text, "source": "user"})
            if answer and answer.get("action") == "handled":
                return None
            if answer and answer.get("action") == "transform" and isinstance(answer.get("text"), str):
                text = answer["text"]
                prompt = T.UserMessage(content=[T.TextContent(text=text)], timestamp=prompt.timestamp)
        agent = self.coordinator.agent
        answer = await self.emit("before_agent_start", {"prompt": text or "", "systemPrompt": agent.state.system_prompt})
        if answer:
            if isinstance(answer.get("systemPrompt"), str):
                agent.set_system_prompt(answer["systemPrompt"])
            for message in answer.get("messages") or ():
                await self._inject(message)
        return prompt

    async def _inject(self, message: Any) -> None:
        if not isinstance(message, dict) or not isinstance(message.get("customType"), str):
            self._report({"event": "before_agent_start", "error": "an injected message needs a string customType"})
            await self.flush()
            return
        await self.serve_append(X.AppendArgs(kind="message", custom_type=message["customType"],
                                             content=message.get("content"), display=bool(message.get("display", True)),
                                             details=message.get("details")), None)  # fmt: skip

    async def run_command(self, name: str, args: str) -> None:
        try:
            result = await call_method(self.slot, X.RUN_COMMAND, X.CommandArgs(name=name, args=args, has_ui=self.has_ui))
        except RemoteError as exc:
            self._report({"event": f"command:{name}", "error": f"extension host: {exc.message}"})
        else:
            if result.error is not None:
                spec = next((c for c in self.registry.commands if c.name == name), None)
                self._report({"extensionPath": spec.extension if spec else "", "event": f"command:{name}", "error": result.error})
        await self.flush()

    async def run_shortcut(self, key: str) -> str | None:
        """Run the handler of an extension's key ``key`` in the host; its error's line (or
        the host's) is returned for the UI that pressed it, not told as an event."""
        if key not in {s.key for s in self.registry.shortcuts}:
            raise RemoteError("not_found", f"no extension bound the key {key!r}")
        try:
            result = await call_method(self.slot, X.RUN_SHORTCUT, X.ShortcutArgs(key=key, has_ui=self.has_ui))
        except RemoteError as exc:
            return f"extension host: {exc.message}"
        return result.error

    async def render(self, message: dict[str, Any], expanded: bool, width: int) -> X.Rendered:
        """A custom message through its type's renderer (null lines: none, use the default)."""
        if str(message.get("customType")) not in self.registry.renderers:
            return X.Rendered()
        try:
            return await call_method(self.slot, X.RENDER_MESSAGE, X.RenderArgs(message=message, expanded=expanded, width=width))
        except RemoteError as exc:
            return X.Rendered(error=f"extension host: {exc.message}")

    async def before_compact(self, preparation: Any, instructions: str | None) -> dict[str, Any] | None:
        payload = {"messagesToSummarize": preparation.messages_to_summarize,
                   "turnPrefixMessages": preparation.turn_prefix_messages, "customInstructions": instructions,
                   "tokensBefore": preparation.tokens_before, "firstKeptEntryId": preparation.first_kept_entry_id}  # fmt: skip
        return await self.emit("session_before_compact", payload)

    # -- tools ------------------------------------------------------------------------------------

    def _tool(self, spec: X.ToolSpec) -> AgentTool:
        async def execute(tool_call_id: str, params: Any, signal: Any = None, on_update: Any = None) -> AgentToolResult:
            args = {"toolCallId": tool_call_id, "name": spec.name, "args": params if isinstance(params, dict) else {},
                    "hasUi": self.has_ui}  # fmt: skip
            try:
                async with self.slot.open_call(X.RUN_TOOL.name, args) as call:
                    async with call.cancel_when(signal):
                        async for partial in call:
                            if on_update is not None:
                                await on_update(AgentToolResult(content=result_blocks(partial.get("content")), details=partial.get("details")))
                    result = await call.result()
            except RemoteError as exc:
                raise ExtensionToolFailure(f"extension host: {exc.message}") from None
            content = result_blocks(result.get("content"))
            if result.get("isError"):
                raise ExtensionToolFailure("\n".join(b.text for b in content if isinstance(b, T.TextContent)) or "Tool failed")
            return AgentToolResult(content=content, details=result.get("details"))

        return AgentTool(name=spec.name, label=spec.label, description=spec.description, parameters=spec.parameters,
                         execute=execute)  # fmt: skip

    # -- what the host asks of us -------------------------------------------------------------------

    @implements(X.UI)
    async def serve_ui(self, args: X.UiArgs, call: TypedCall[X.UiArgs, None] | None) -> X.UiAnswer:
        request_id = str(uuid.uuid4())
        event: dict[str, Any] = {"type": "extension_ui_request", "id": request_id,
                                 **{k: v for k, v in msgspec.to_builtins(args).items() if v is not None}}  # fmt: skip
        if args.method == "setStatus" and args.status_key is not None:
            if args.status_text is None:
                self.statuses.pop(args.status_key, None)
            else:
                self.statuses[args.status_key] = args.status_text
        if args.method in FIRE_AND_FORGET:
            await self.coordinator._emit_session_event(event)
            return X.UiAnswer()
        if not self.has_ui or not self._ui_listens():
            return X.UiAnswer(cancelled=True)  # pi's answer when no UI can ask the user
        send, receive = trio.open_memory_channel[X.UiAnswer](1)
        self._answers[request_id] = send
        self._pause()
        try:
            await self.coordinator._emit_session_event(event)
            with trio.move_on_after(args.timeout / 1000 if args.timeout else math.inf):
                return await receive.receive()
            return X.UiAnswer(cancelled=True)
        finally:
            del self._answers[request_id]
            self._resume()

    def _ui_listens(self) -> bool:
        """Whether a UI hears the session's events now: a subscriber (a remote client
        attached to a served session, a UI following the session) or the running prompt's
        caller. The first answer wins (:meth:`answer`)."""
        c = self.coordinator
        return bool(c._subscribers) or (c._sink is not None and not c._sink_quiet)

    def answer(self, request_id: str, answer: X.UiAnswer) -> None:
        """The UI's ``extension_ui_response``. Raises RemoteError ``not_found`` for an id no
        request is waiting for (answered already, timed out, or never asked)."""
        channel = self._answers.get(request_id)
        if channel is None:
            raise RemoteError("not_found", f"no extension UI request {request_id!r} is waiting for an answer")
        try:
            channel.send_nowait(answer)
        except trio.WouldBlock:
            raise RemoteError("not_found", f"extension UI request {request_id!r} was answered already") from None

    def _pause(self) -> None:
        """A user is being asked: hook deadlines stop running until the answer."""
        self._asking += 1
        for scope in self._timed:
            scope.deadline = math.inf

    def _resume(self) -> None:
        self._asking -= 1
        if not self._asking:
            for scope in self._timed:
                scope.deadline = trio.current_time() + self.config.hook_timeout

    @implements(X.APPEND)
    async def serve_append(self, args: X.AppendArgs, call: TypedCall[X.AppendArgs, None] | None) -> None:
        c = self.coordinator
        if args.kind == "message":
            content = args.content if isinstance(args.content, (str, list)) else ("" if args.content is None else str(args.content))
            entry = {"type": "custom_message", "customType": args.custom_type, "content": content,
                     "display": args.display, **({"details": args.details} if args.details is not None else {})}  # fmt: skip
            await c.store.call("append_entry", {"entry": entry})
            message = {"role": "custom", **{k: v for k, v in entry.items() if k != "type"}, "timestamp": T.now_ms()}
            c.agent.append_message(message)
            # pi's sendCustomMessage: every UI hears of it as a message that starts and ends.
            if c._sink is not None:
                c._published = c.agent.state.messages
            await c._emit_session_event({"type": "message_start", "message": message})
            await c._emit_session_event({"type": "message_end", "message": message})
        else:
            await c.store.call("append_entry", {"entry": {"type": "custom", "customType": args.custom_type, "data": args.data}})

    async def shutdown(self) -> None:
        """``session_shutdown``, bounded by the hook timeout, at the end of the session."""
        await self.emit("session_shutdown", {})





def _prompt_text(prompt: T.UserMessage) -> str | None:
    """The text of a prompt made only of text (a string, or text parts as pi writes a user's
    prompt); None when it carries anything else (an image), which no command or ``input``
    handler takes."""
    if isinstance(prompt.content, str):
        return prompt.content
    texts = [part.text for part in prompt.content if isinstance(part, T.TextContent)]
    return "".join(texts) if len(texts) == len(prompt.content) else None
