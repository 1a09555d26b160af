"""The loop coordinator actor: one session's agent — context, run lifecycle, event fan-out.

It runs the stateless agent loop (``pi_actors.agent``) with three remote capabilities:

* the stream function is a ``stream`` call to the provider actor (events rebuilt from the
  wire, see ``_event_wire``); an abort cancels that call cooperatively, so the aborted
  message still arrives with its partial content;
* every tool's ``execute`` is a ``run_tool`` call to the tool pool; the loop starts all calls
  of a message together and collects their results in call order;
* every ``message_end`` is appended to the session store and acknowledged (durable) before
  the loop goes on, so no LLM request is sent before the previous message is on disk.

Calls served (from a UI):

``session {}``            → ``{header, path}`` of the open session.
``prompt {text}``         → chunks: every AgentEvent in pi's JSON shape (``message_update``
                            without its ``message``, rebuilt by the UI); result ``{}`` when
                            the run is over. A prompt while a run is active fails ``busy``.
``abort {}``              → aborts the active run (no-op when idle).
``get_state {}``          → model, isStreaming, messageCount, session.
"""

from __future__ import annotations

import os
from contextlib import AsyncExitStack
from typing import Any

import msgspec
import trio

from ..agent import AgentContext, AgentLoopConfig, AgentTool, AgentToolResult, run_agent_loop
from ..ai import types as T
from ..ai.abort import AbortSignal
from ..runtime import ConnectionLost, IncomingCall, Peer, RemoteError, open_peer
from ._event_wire import StreamRebuilder, strip_agent_event

__all__ = ["run_coordinator", "Coordinator"]


class ToolFailure(Exception):
    """A remote tool call ended with isError: the message is what the model sees."""


def _error_message(model: T.Model, text: str) -> T.AssistantMessage:
    msg = T.new_assistant_message(model)
    msg.stop_reason = "error"
    msg.error_message = text
    return msg


def _convert_to_llm(messages: list[Any]) -> list[T.Message]:
    return [m for m in messages if isinstance(m, (T.UserMessage, T.AssistantMessage, T.ToolResultMessage))]


class Coordinator:
    def __init__(self, config: dict[str, Any], provider: Peer, tools: Peer, store: Peer) -> None:
        self.config = config
        self.provider = provider
        self.tools_peer = tools
        self.store = store
        self.cwd: str = config.get("cwd") or os.getcwd()
        self.model = msgspec.convert(config["model"], T.Model)
        self.thinking_level: str = config.get("thinkingLevel") or "off"
        self.messages: list[Any] = []
        self.system_prompt: str = config.get("systemPrompt") or ""
        self.tool_names: list[str] = list(config.get("tools") or [])
        self.session: dict | None = None
        self._signal: AbortSignal | None = None
        self._running = False
        self._store_error: str | None = None
        self._tools_warmed = False

    # -- remote capabilities -----------------------------------------------------------------

    async def stream_fn(self, model: T.Model, context: T.Context, options: Any, emit: Any) -> T.AssistantMessage:
        """The agent loop's stream function, served by the provider actor. Never raises."""
        rebuild = StreamRebuilder()
        signal: AbortSignal | None = getattr(options, "signal", None)
        args = {
            "model": T.to_plain(model),
            "context": T.to_plain(context),
            "options": {
                "reasoning": getattr(options, "reasoning", None),
                "sessionId": getattr(options, "session_id", None),
            },
        }
        try:
            async with self.provider.open_call("stream", args) as call:
                async with call.cancel_when(signal.wait if signal else None):
                    async for data in call:
                        await emit(rebuild.apply(data))
                return msgspec.convert(await call.result(), T.AssistantMessage)
        except (RemoteError, msgspec.ValidationError, ValueError) as exc:
            final = _error_message(model, f"provider actor: {exc}")
            if signal is not None and signal.aborted:
                final.stop_reason = "aborted"
            await emit(T.ErrorEvent(reason=final.stop_reason, error=final))  # type: ignore[arg-type]
            return final

    def make_tool(self, spec: Any) -> AgentTool:
        async def execute(tool_call_id: str, params: dict, signal: AbortSignal | None = None, on_update: Any = None) -> AgentToolResult:
            args = {"toolCallId": tool_call_id, "name": spec.name, "args": params, "cwd": self.cwd}
            try:
                async with self.tools_peer.open_call("run_tool", args) as call:
                    async with call.cancel_when(signal.wait if signal else None):
                        async for partial in call:
                            if on_update is not None:
                                await on_update(AgentToolResult(content=_blocks(partial.get("content")), details=partial.get("details")))
                    result = await call.result()
            except ConnectionLost as exc:
                raise ToolFailure(f"tool pool unavailable: {exc.message}") from None
            except RemoteError as exc:
                raise ToolFailure(exc.message) from None
            content = _blocks(result.get("content"))
            if result.get("isError"):
                text = "\n".join(b.text for b in content if isinstance(b, T.TextContent)) or "Tool failed"
                raise ToolFailure(text)
            return AgentToolResult(content=content, details=result.get("details"))

        return AgentTool(
            name=spec.name,
            label=spec.label,
            description=spec.description,
            parameters=spec.parameters,
            execute=execute,
        )

    # -- serving the UI ----------------------------------------------------------------------

    async def handle(self, call: IncomingCall) -> Any:
        args = call.args or {}
        if call.method == "session":
            return self.session
        if call.method == "prompt":
            return await self._prompt(call, args)
        if call.method == "abort":
            if self._signal is not None:
                self._signal.abort("aborted by the user")
            return {}
        if call.method == "get_state":
            return {
                "model": T.to_plain(self.model),
                "thinkingLevel": self.thinking_level,
                "isStreaming": self._running,
                "messageCount": len(self.messages),
                "sessionFile": (self.session or {}).get("path"),
                "sessionId": ((self.session or {}).get("header") or {}).get("id"),
            }
        raise RemoteError("not_found", f"coordinator: unknown method {call.method!r}")

    async def _prompt(self, call: IncomingCall, args: dict) -> Any:
        text = args.get("text")
        if not isinstance(text, str):
            raise RemoteError("invalid_args", "prompt: text must be a string")
        if self._running:
            raise RemoteError("busy", "Agent is already processing a prompt. Use steer or follow_up, or wait.")
        self._running = True
        self._signal = signal = AbortSignal()
        call.cooperative = True
        self._store_error = None
        from ..coding.tools import TOOL_SPECS

        tools = [self.make_tool(TOOL_SPECS[n]) for n in self.tool_names if n in TOOL_SPECS]
        context = AgentContext(system_prompt=self.system_prompt, messages=list(self.messages), tools=tools)

        run_nursery: list[trio.Nursery] = []

        async def emit(event: Any) -> None:
            kind = getattr(event, "type", None)
            if kind == "message_end":
                await self._persist(event.message, signal)
            elif kind == "message_start" and tools and not self._tools_warmed and isinstance(event.message, T.AssistantMessage):
                # The model has started answering, so the provider's start-up is over: a good
                # moment for the pool to start its warm workers, before the first tool call.
                self._tools_warmed = True
                run_nursery[0].start_soon(self._warm_tools)
            await call.send_chunk(strip_agent_event(event))

        loop_config = AgentLoopConfig(
            model=self.model,
            convert_to_llm=_convert_to_llm,
            reasoning=None if self.thinking_level == "off" else self.thinking_level,
            session_id=((self.session or {}).get("header") or {}).get("id"),
        )
        prompt = T.UserMessage(content=text, timestamp=T.now_ms())
        try:
            async with trio.open_nursery() as nursery:

                async def pass_cancel() -> None:
                    await call.cancel_requested.wait()
                    signal.abort("prompt call cancelled")

                nursery.start_soon(pass_cancel)
                run_nursery.append(nursery)
                new_messages = await run_agent_loop([prompt], context, loop_config, emit, signal, self.stream_fn)
                nursery.cancel_scope.cancel()
            self.messages.extend(new_messages)
        finally:
            self._running = False
            self._signal = None
        if self._store_error:
            raise RemoteError("write_failed", self._store_error)
        return {}

    async def _warm_tools(self) -> None:
        """Ask the pool to start its warm workers (idempotent; errors show on first use)."""
        try:
            await self.tools_peer.call("warm")
        except RemoteError:
            pass

    async def _persist(self, message: Any, signal: AbortSignal) -> None:
        """Append a finished message to the session; a failure stops the run, loudly."""
        if self._store_error is not None:
            return
        try:
            await self.store.call("append", {"message": T.to_plain(message)})
        except RemoteError as exc:
            self._store_error = f"session not saved: {exc.message}"
            signal.abort(self._store_error)


def _blocks(content: Any) -> list[Any]:
    if not content:
        return []
    try:
        return msgspec.convert(content, list[T.ToolResultContent])
    except msgspec.ValidationError:
        return [T.TextContent(text=str(content))]


async def run_coordinator(links: dict[str, trio.SocketStream], config: dict[str, Any]) -> None:
    """Actor entry: answer the UI's hello at once, connect to provider, tool pool and store,
    then serve the UI until it disconnects. A start-up failure is reported to every UI call."""
    ready = trio.Event()
    state: dict[str, Any] = {}

    async def handle(call: IncomingCall) -> Any:
        await ready.wait()
        if "error" in state:
            raise RemoteError("startup_failed", state["error"])
        return await state["coord"].handle(call)

    async with open_peer(links["ui"], side="server", role="coordinator", name="ui", handler=handle) as ui:
        async with AsyncExitStack() as stack:
            try:
                peers: dict[str, Peer] = {}
                # The three children start in parallel; each answers its hello once running.
                for name in ("store", "provider", "tools"):
                    peers[name] = await stack.enter_async_context(
                        open_peer(links[name], side="client", role="coordinator", name=name)
                    )
                coord = Coordinator(config, peers["provider"], peers["tools"], peers["store"])
                session_cfg = config.get("session") or {}
                coord.session = await peers["store"].call(
                    "open",
                    {
                        "cwd": coord.cwd,
                        "sessionDir": session_cfg.get("sessionDir"),
                        "agentDir": session_cfg.get("agentDir"),
                        "noSession": bool(session_cfg.get("noSession")),
                    },
                )
                state["coord"] = coord
            except RemoteError as exc:
                state["error"] = exc.message
            finally:
                ready.set()
            await ui.closed_event.wait()
