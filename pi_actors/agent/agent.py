"""Agent: a stateful holder around the loop — state, queues, one run at a time, listeners.

(pi's packages/agent, docs/architecture.md §7) ``await agent.prompt(...)`` / ``await agent.continue_()`` run one
agent run to its end in the calling task (trio: the caller chooses where the run lives) and
never raise for run failures, which land in ``state.error`` and the transcript. Other tasks
may meanwhile ``steer``, ``follow_up``, ``abort`` or ``await wait_for_idle()``.

State changes only through loop events, *before* listeners hear of them: ``message_end``
appends to ``state.messages`` (the only way messages grow during a run), ``message_start`` /
``message_update`` set ``state.stream_message``, ``tool_execution_start`` / ``_end`` maintain
``state.pending_tool_calls``, ``turn_end`` records an assistant ``error_message`` in
``state.error``. ``state.messages`` is replaced by a new list on every change (as in pi) and
never mutated in place, so a listener may keep the list it saw as a snapshot without copying.

Listeners (``subscribe``) are called in order for each event; a listener returning an
awaitable is awaited, so the loop waits for it. A raising listener fails the run through the
catch path: one synthetic assistant message (``stopReason`` "error", or "aborted" when the
run's signal was aborted; ``errorMessage`` the exception text) is appended, ``state.error`` is
set and ``agent_end`` carrying that message goes to the listeners (their failures ignored).

Differences from pi's snapshot: ``state.is_streaming`` stays True until the run has fully
finished (listeners of ``agent_end`` included), as in later pi, so a listener cannot start an
overlapping run; there is no default model or stream function yet (``prompt`` says
``No model configured`` / raises TypeError for a missing stream function).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any

import trio

from ..ai.abort import AbortSignal
from ..ai.types import AssistantMessage, ImageContent, Model, TextContent, Usage, UserMessage, now_ms
from ..choices import QueueMode
from .loop import run_agent_loop, run_agent_loop_continue
from .types import (
    AgentContext,
    AgentEndEvent,
    AgentLoopConfig,
    AgentMessage,
    AgentThinkingLevel,
    ToolExecutionMode,
    default_convert_to_llm,
    message_role,
)

__all__ = ["Agent", "AgentState", "QueueMode", "BUSY_PROMPT", "BUSY_CONTINUE"]


BUSY_PROMPT = (
    "Agent is already processing a prompt. Use steer() or followUp() to queue messages, or wait for completion."
)
BUSY_CONTINUE = "Agent is already processing. Wait for completion before continuing."


@dataclass
class AgentState:
    system_prompt: str = ""
    model: Model | None = None
    thinking_level: AgentThinkingLevel = "off"
    tools: list[Any] = field(default_factory=list)
    messages: list[AgentMessage] = field(default_factory=list)
    is_streaming: bool = False
    stream_message: AgentMessage | None = None
    pending_tool_calls: set[str] = field(default_factory=set)
    error: str | None = None


class Agent:
    def __init__(
        self,
        *,
        initial_state: AgentState | dict[str, Any] | None = None,
        stream_fn: Any = None,
        convert_to_llm: Callable[[list[AgentMessage]], Any] = default_convert_to_llm,
        transform_context: Any = None,
        get_api_key: Any = None,
        steering_mode: QueueMode = "one-at-a-time",
        follow_up_mode: QueueMode = "one-at-a-time",
        session_id: str | None = None,
        tool_execution: ToolExecutionMode = "parallel",
        before_tool_call: Any = None,
        after_tool_call: Any = None,
        should_stop_after_turn: Any = None,
        prepare_next_turn: Any = None,
        thinking_budgets: dict[str, int] | None = None,
    ) -> None:
        self._state = AgentState()
        if isinstance(initial_state, AgentState):
            initial_state = {f.name: getattr(initial_state, f.name) for f in fields(AgentState)}
        for name, value in (initial_state or {}).items():
            if not hasattr(self._state, name):
                raise TypeError(f"unknown AgentState field {name!r}")
            setattr(self._state, name, value)
        self.stream_fn = stream_fn
        self.convert_to_llm = convert_to_llm
        self.transform_context = transform_context
        self.get_api_key = get_api_key
        self.steering_mode: QueueMode = steering_mode
        self.follow_up_mode: QueueMode = follow_up_mode
        self.session_id = session_id
        self.tool_execution: ToolExecutionMode = tool_execution
        self.before_tool_call = before_tool_call
        self.after_tool_call = after_tool_call
        self.should_stop_after_turn = should_stop_after_turn
        self.prepare_next_turn = prepare_next_turn
        #: Thinking tokens per level (settings ``thinkingBudgets``), for every stream call.
        self.thinking_budgets = thinking_budgets
        self._listeners: list[Callable[[Any], Any]] = []
        self._steering: list[AgentMessage] = []
        self._follow_ups: list[AgentMessage] = []
        self._signal: AbortSignal | None = None
        self._idle: trio.Event | None = None

    # -- state and mutators (none of these emit events) --------------------------------------

    @property
    def state(self) -> AgentState:
        return self._state

    def set_system_prompt(self, text: str) -> None:
        self._state.system_prompt = text

    def set_model(self, model: Model) -> None:
        self._state.model = model

    def set_thinking_level(self, level: AgentThinkingLevel) -> None:
        self._state.thinking_level = level

    def set_tools(self, tools: list[Any]) -> None:
        self._state.tools = tools

    def replace_messages(self, messages: list[AgentMessage]) -> None:
        self._state.messages = list(messages)

    def append_message(self, message: AgentMessage) -> None:
        self._state.messages = [*self._state.messages, message]

    def clear_messages(self) -> None:
        self._state.messages = []

    # -- queues ---------------------------------------------------------------------------

    def steer(self, message: AgentMessage) -> None:
        """Queue a message to be injected before the next LLM call of the current run."""
        self._steering.append(message)

    def follow_up(self, message: AgentMessage) -> None:
        """Queue a message to be handled when the current run would otherwise end."""
        self._follow_ups.append(message)

    def clear_steering_queue(self) -> None:
        self._steering = []

    def clear_follow_up_queue(self) -> None:
        self._follow_ups = []

    def clear_all_queues(self) -> None:
        self.clear_steering_queue()
        self.clear_follow_up_queue()

    def has_queued_messages(self) -> bool:
        return bool(self._steering or self._follow_ups)

    def _dequeue(self, queue: list[AgentMessage], mode: QueueMode) -> list[AgentMessage]:
        if not queue:
            return []
        if mode == "one-at-a-time":
            return [queue.pop(0)]
        taken = list(queue)
        queue.clear()
        return taken

    # -- listeners ------------------------------------------------------------------------

    def subscribe(self, listener: Callable[[Any], Any]) -> Callable[[], None]:
        """Add a listener for every AgentEvent; returns the function that removes it."""
        self._listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return unsubscribe

    async def _notify(self, event: Any) -> None:
        for listener in list(self._listeners):
            result = listener(event)
            if inspect.isawaitable(result):
                await result

    async def _process_event(self, event: Any) -> None:
        state = self._state
        kind = event.type
        if kind in ("message_start", "message_update"):
            state.stream_message = event.message
        elif kind == "message_end":
            state.stream_message = None
            self.append_message(event.message)
        elif kind == "tool_execution_start":
            state.pending_tool_calls = {*state.pending_tool_calls, event.tool_call_id}
        elif kind == "tool_execution_end":
            state.pending_tool_calls = state.pending_tool_calls - {event.tool_call_id}
        elif kind == "turn_end":
            if isinstance(event.message, AssistantMessage) and event.message.error_message:
                state.error = event.message.error_message
        elif kind == "agent_end":
            state.stream_message = None
        await self._notify(event)

    # -- runs -----------------------------------------------------------------------------

    async def prompt(
        self, input: str | AgentMessage | list[AgentMessage], images: list[ImageContent] | None = None
    ) -> None:
        """Run from a new prompt; returns when the run has ended (failures go into state)."""
        if self._state.is_streaming:
            raise RuntimeError(BUSY_PROMPT)
        if self._state.model is None:
            raise RuntimeError("No model configured")
        if isinstance(input, str):
            content: list[Any] = [TextContent(text=input), *(images or [])]
            messages = [UserMessage(content=content, timestamp=now_ms())]
        elif isinstance(input, list):
            messages = list(input)
        else:
            messages = [input]
        await self._run(messages)

    async def continue_(self) -> None:
        """Continue from the current transcript (e.g. after an error, or to take queued
        messages after an assistant reply); returns when the run has ended."""
        if self._state.is_streaming:
            raise RuntimeError(BUSY_CONTINUE)
        messages = self._state.messages
        if not messages:
            raise RuntimeError("No messages to continue from")
        if message_role(messages[-1]) == "assistant":
            steering = self._dequeue(self._steering, self.steering_mode)
            if steering:
                await self._run(steering, skip_initial_steering_poll=True)
                return
            follow_ups = self._dequeue(self._follow_ups, self.follow_up_mode)
            if follow_ups:
                await self._run(follow_ups)
                return
            raise RuntimeError("Cannot continue from message role: assistant")
        await self._run(None)

    def abort(self) -> None:
        """Abort the current run (no-op when idle)."""
        if self._signal is not None:
            self._signal.abort()

    async def wait_for_idle(self) -> None:
        """Return once no run is active."""
        if self._idle is not None:
            await self._idle.wait()

    def reset(self) -> None:
        """Clear transcript, run state, error and queues. Does not abort a running run."""
        state = self._state
        state.messages = []
        state.is_streaming = False
        state.stream_message = None
        state.pending_tool_calls = set()
        state.error = None
        self.clear_all_queues()

    async def _run(self, messages: list[AgentMessage] | None, skip_initial_steering_poll: bool = False) -> None:
        state = self._state
        model = state.model
        if model is None:
            raise RuntimeError("No model configured")
        # Everything up to the first await runs at once: the agent is busy from here on.
        signal = AbortSignal()
        idle = trio.Event()
        self._signal, self._idle = signal, idle
        state.is_streaming = True
        state.stream_message = None
        state.error = None

        skip = skip_initial_steering_poll

        def steering() -> list[AgentMessage]:
            nonlocal skip
            if skip:
                skip = False
                return []
            return self._dequeue(self._steering, self.steering_mode)

        def follow_ups() -> list[AgentMessage]:
            return self._dequeue(self._follow_ups, self.follow_up_mode)

        config = AgentLoopConfig(
            model=model,
            convert_to_llm=self.convert_to_llm,
            transform_context=self.transform_context,
            get_api_key=self.get_api_key,
            get_steering_messages=steering,
            get_follow_up_messages=follow_ups,
            before_tool_call=self.before_tool_call,
            after_tool_call=self.after_tool_call,
            should_stop_after_turn=self.should_stop_after_turn,
            prepare_next_turn=self.prepare_next_turn,
            tool_execution=self.tool_execution,
            reasoning=None if state.thinking_level == "off" else state.thinking_level,
            session_id=self.session_id,
            thinking_budgets=self.thinking_budgets,
        )
        context = AgentContext(system_prompt=state.system_prompt, messages=list(state.messages), tools=state.tools)
        try:
            if messages is not None:
                await run_agent_loop(messages, context, config, self._process_event, signal, self.stream_fn)
            else:
                await run_agent_loop_continue(context, config, self._process_event, signal, self.stream_fn)
        except Exception as exc:
            text = str(exc) or type(exc).__name__
            failed = AssistantMessage(
                content=[TextContent(text="")],
                api=model.api,
                provider=model.provider,
                model=model.id,
                usage=Usage(),
                stop_reason="aborted" if signal.aborted else "error",
                error_message=text,
                timestamp=now_ms(),
            )
            self.append_message(failed)
            state.error = text
            for listener in list(self._listeners):
                try:
                    result = listener(AgentEndEvent(messages=[failed]))
                    if inspect.isawaitable(result):
                        await result
                except Exception:
                    pass  # the run has already failed; a second failure has nowhere to go
        finally:
            state.is_streaming = False
            state.stream_message = None
            state.pending_tool_calls = set()
            if self._signal is signal:
                self._signal = None
            idle.set()
