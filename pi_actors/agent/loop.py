"""The stateless agent loop: from input messages to idle, as AgentEvents.

``await run_agent_loop(prompts, context, config, emit, signal, stream_fn)`` and
``await run_agent_loop_continue(context, config, emit, signal, stream_fn)`` run one agent run
and return its new messages (the prompts first, for ``run_agent_loop``). ``emit`` is awaited
for every event (a sync callable works too) and is never called concurrently, so a sink that
persists or forwards events gives the caller barrier semantics.

The run is pi's double loop (pi's packages/agent, docs/architecture.md §7): turns of one LLM call plus its tool
calls; after a turn with tool calls another LLM call follows; steering messages are injected
before the next call; follow-up messages are taken when the run would otherwise end.

Contract beyond pi's snapshot (docs/architecture.md §7, and the README's "Where pi-actors deliberately differs from pi"):

* **Nothing hangs and nothing raises past the loop.** A callback that raises
  (``convert_to_llm``, ``transform_context``, ``get_api_key``, the steering and follow-up getters,
  ``after_tool_call``, ``should_stop_after_turn``, ``prepare_next_turn``) or a stream function
  that raises ends the run with an assistant message ``stopReason "error"`` (``"aborted"`` if
  the signal was aborted by then) and ``errorMessage`` = the exception text, emitted with ``message_start``/``message_end`` inside a
  turn (``turn_start`` first if no turn is open), then ``turn_end`` and ``agent_end``. A raising
  tool or ``before_tool_call`` gives that call an error result; the run goes on.
  Exceptions: the sink itself (``emit``) raising propagates to the caller unchanged (there is
  nobody left to tell), and trio cancellation of the caller's scope propagates as usual.
* **Every tool call gets exactly one result**, in the assistant's call order, whatever
  happens: unknown tool, invalid arguments, blocked, raised, skipped, aborted, truncated.
  When ``after_tool_call`` raises, that call's result is an error result with the exception
  text; in sequential mode the calls not yet started get ``Tool call was not executed: the run stopped after an error.``; in parallel
  mode the other calls, already running, finish normally. The turn ends normally, and the run
  then ends with the error message in a turn of its own.
* **Parallel mode** (the default) preflights every call in order (``tool_execution_start``,
  lookup, ``prepare_arguments``, validation, ``before_tool_call``; a call that may not run
  gets its ``tool_execution_end`` there), then starts all runnable calls at once in a
  nursery, each emitting its ``tool_execution_end`` as it finishes (pi 0.73's order), then
  the results' ``message_start``/``message_end`` in call order. Steering is
  polled after the turn, as after any turn; nothing is skipped. **Sequential mode** (the
  config's ``tool_execution="sequential"``, or any call of the batch naming a tool that
  declares ``execution_mode="sequential"``) runs call after call, each prepared once the one
  before has settled. Every call runs (pi 0.73): steering queued meanwhile is polled after
  ``turn_end`` and injected after all the tool results, before the next LLM call.
* Polling order after a turn: ``turn_end``, ``should_stop_after_turn``, steering,
  follow-ups when nothing else is pending,
  ``prepare_next_turn``, ``turn_start``.
* **Length**: tool calls of an assistant message that stopped at the output-token limit are
  never run; each gets the error result ``Tool call "<name>" was not executed: the response hit
  the output token limit, so its arguments may be truncated. Re-issue the tool call with
  complete arguments.`` and the loop makes its next LLM call as after any tool turn.
* **Terminate**: when every result of a non-empty batch has ``terminate`` True, no LLM call
  follows automatically (steering and follow-ups are still polled).
* **Abort** (``signal``): the signal reaches the stream function, ``transform_context``, the
  tool hooks and every tool. A call whose turn comes after the abort is not started
  (``Operation aborted``); tools already running decide for themselves. An LLM call with
  the signal already aborted is not made: the loop records an aborted assistant message
  (``Request was aborted``), which ends the run. An aborted run polls no steering or
  follow-up messages, so queued ones wait for the next run instead of being consumed.
* ``run_agent_loop_continue`` does not mutate the caller's message list (pi's does).
* ``stream_fn`` defaults to ``pi_actors.ai.stream_simple`` (pi's ``streamSimple``): the LLM
  layer's entry point, which picks the provider from the model's API.
"""

from __future__ import annotations

import inspect
from typing import Any

import msgspec
import trio

from .. import _ready
from ..ai.abort import AbortSignal
from ..ai.types import (
    AssistantMessage,
    Context,
    DoneEvent,
    ErrorEvent,
    StartEvent,
    Tool,
    ToolCall,
    ToolResultMessage,
    new_assistant_message,
)
from ._support import SinkFailed, call_maybe_async, error_text
from ._tools import (
    TOOL_ABORTED,
    TOOL_BLOCKED,
    TOOL_NOT_FOUND,
    TOOL_NOT_RUN_AFTER_ERROR,
    TOOL_TRUNCATED,
    ToolPhase,
)
from .types import (
    AgentContext,
    AgentEndEvent,
    AgentLoopConfig,
    AgentLoopTurnUpdate,
    AgentMessage,
    AgentStartEvent,
    LoopStreamOptions,
    MessageEndEvent,
    MessageStartEvent,
    MessageUpdateEvent,
    StreamFn,
    TurnContext,
    TurnEndEvent,
    TurnStartEvent,
    message_role,
)

__all__ = [
    "run_agent_loop",
    "run_agent_loop_continue",
    "TOOL_NOT_FOUND",
    "TOOL_BLOCKED",
    "TOOL_ABORTED",
    "TOOL_NOT_RUN_AFTER_ERROR",
    "TOOL_TRUNCATED",
    "REQUEST_ABORTED",
]

REQUEST_ABORTED = "Request was aborted"


async def run_agent_loop(
    prompts: list[AgentMessage],
    context: AgentContext,
    config: AgentLoopConfig,
    emit: Any,
    signal: AbortSignal | None = None,
    stream_fn: StreamFn | None = None,
) -> list[AgentMessage]:
    """Run from ``prompts``; return the prompts followed by every message the run added.

    The caller's ``context`` is not mutated: the run works on a new message list.
    """
    stream_fn = _stream_fn_or_default(stream_fn)
    working = AgentContext(
        system_prompt=context.system_prompt,
        messages=[*context.messages, *prompts],
        tools=context.tools,
    )
    run = _Run(working, config, emit, signal, stream_fn)
    run.new_messages = list(prompts)
    await run.main(prompts_to_announce=list(prompts))
    return run.new_messages


async def run_agent_loop_continue(
    context: AgentContext,
    config: AgentLoopConfig,
    emit: Any,
    signal: AbortSignal | None = None,
    stream_fn: StreamFn | None = None,
) -> list[AgentMessage]:
    """Run from the existing context (its last message must not be an assistant message);
    return only the messages the run added.

    Raises ``ValueError`` before emitting anything for an empty context
    (``Cannot continue: no messages in context``) or an assistant-last one
    (``Cannot continue from message role: assistant``).
    """
    stream_fn = _stream_fn_or_default(stream_fn)
    if not context.messages:
        raise ValueError("Cannot continue: no messages in context")
    if message_role(context.messages[-1]) == "assistant":
        raise ValueError("Cannot continue from message role: assistant")
    working = AgentContext(
        system_prompt=context.system_prompt,
        messages=list(context.messages),
        tools=context.tools,
    )
    run = _Run(working, config, emit, signal, stream_fn)
    await run.main(prompts_to_announce=None)
    return run.new_messages


def _stream_fn_or_default(stream_fn: StreamFn | None) -> StreamFn:
    """``stream_fn``, or the LLM layer's ``stream_simple`` (pi's default) when None."""
    return stream_fn if stream_fn is not None else _stream_simple


async def _stream_simple(model: Any, context: Context, options: Any, emit: Any) -> AssistantMessage:
    """The default stream function: ``ai.stream_simple`` with the loop's options."""
    from ..ai.options import StreamOptions
    from ..ai.stream import stream_simple

    return await stream_simple(
        model,
        context,
        StreamOptions(
            api_key=options.api_key,
            signal=options.signal,
            reasoning=options.reasoning,
            session_id=options.session_id,
            max_tokens=options.max_tokens,
            temperature=options.temperature,
            thinking_budgets=getattr(options, "thinking_budgets", None),
        ),
        emit,
    )


# ---------------------------------------------------------------------------------------------


class _Run:
    """One agent run: its working context, its event sink (serialized; a failure of the sink
    ends the run at once), the open turn, and the messages it added. Each turn's tool calls
    are run by a :class:`~._tools.ToolPhase` it creates for the batch."""

    def __init__(
        self,
        context: AgentContext,
        config: AgentLoopConfig,
        sink: Any,
        signal: AbortSignal | None,
        stream_fn: StreamFn,
    ) -> None:
        self.context = context
        self.config = config
        self.sink = sink
        self.signal = signal
        self.stream_fn = stream_fn
        self.model = config.model
        self.reasoning = config.reasoning
        self.new_messages: list[AgentMessage] = []
        self._lock = trio.Lock()
        self._sink_failure: SinkFailed | None = None
        # The open turn: True between turn_start and turn_end.
        self._turn_open = False
        self._turn_message: AssistantMessage | None = None
        self._turn_results: list[ToolResultMessage] = []

    # -- events ----------------------------------------------------------------------------

    async def emit(self, event: Any) -> None:
        if self._sink_failure is not None:
            raise self._sink_failure
        await _ready.acquire(self._lock)  # free unless tools emit at once: no schedule point then
        try:
            result = self.sink(event)
            if inspect.isawaitable(result):
                await result
        except Exception as exc:
            self._sink_failure = SinkFailed(exc)
            raise self._sink_failure from exc
        finally:
            self._lock.release()

    async def _announce(self, message: AgentMessage) -> None:
        """message_start + message_end, then the message joins the context and the result."""
        await self.emit(MessageStartEvent(message=message))
        await self.emit(MessageEndEvent(message=message))
        self.context.messages.append(message)
        self.new_messages.append(message)

    async def _record_tool_result(self, message: ToolResultMessage) -> None:
        await self._announce(message)
        self._turn_results.append(message)

    def _tool_phase(self) -> ToolPhase:
        """The tool phase of the current turn, given the run's parts it needs."""
        return ToolPhase(
            context=self.context,
            config=self.config,
            signal=self.signal,
            emit=self.emit,
            record=self._record_tool_result,
            sink_failure=lambda: self._sink_failure,
        )

    def _aborted(self) -> bool:
        return self.signal is not None and self.signal.aborted

    async def _start_turn(self) -> None:
        self._turn_open = True
        self._turn_message = None
        self._turn_results = []
        await self.emit(TurnStartEvent())

    async def _end_turn(self, message: AssistantMessage, results: list[ToolResultMessage]) -> None:
        self._turn_open = False
        await self.emit(TurnEndEvent(message=message, tool_results=list(results)))

    # -- the run ---------------------------------------------------------------------------

    async def main(self, prompts_to_announce: list[AgentMessage] | None) -> None:
        try:
            await self.emit(AgentStartEvent())
            await self._start_turn()
            if prompts_to_announce:
                for message in prompts_to_announce:
                    await self.emit(MessageStartEvent(message=message))
                    await self.emit(MessageEndEvent(message=message))
            try:
                await self._turns()
            except Exception as exc:
                if self._sink_failure is not None:
                    raise
                await self._fail(exc)
            await self.emit(AgentEndEvent(messages=list(self.new_messages)))
        except Exception:
            if self._sink_failure is not None:
                raise self._sink_failure.error from None
            raise

    async def _turns(self) -> None:
        pending = await self._poll(self.config.get_steering_messages)
        first = True
        while True:
            more_tool_calls = True
            while more_tool_calls or pending:
                if not first:
                    await self._prepare_next_turn()
                    await self._start_turn()
                first = False
                for message in pending:
                    await self._announce(message)
                pending = []

                message = await self._assistant_response()
                self._turn_message = message
                if message.stop_reason in ("error", "aborted"):
                    await self._end_turn(message, [])
                    return

                calls = [block for block in message.content if isinstance(block, ToolCall)]
                results: list[ToolResultMessage] = []
                terminate = False
                failure: Exception | None = None
                if calls:
                    batch = await self._tool_phase().run(message, calls)
                    results = batch.results
                    terminate, failure = batch.terminate, batch.failure
                more_tool_calls = bool(calls) and not terminate
                await self._end_turn(message, results)
                if failure is not None:
                    raise failure
                if await self._should_stop(message, results):
                    return
                pending = await self._poll(self.config.get_steering_messages)
            follow_ups = await self._poll(self.config.get_follow_up_messages)
            if not follow_ups:
                return
            pending = follow_ups

    async def _fail(self, exc: Exception) -> None:
        """End the run after a callback raised: an error assistant message in a turn."""
        if self._turn_open and self._turn_message is not None:
            # Failed between the assistant message and turn_end: close that turn first.
            await self._end_turn(self._turn_message, self._turn_results)
        if not self._turn_open:
            await self._start_turn()
        message = new_assistant_message(self.model)
        message.stop_reason = "aborted" if self.signal is not None and self.signal.aborted else "error"
        message.error_message = error_text(exc)
        await self._announce(message)
        await self._end_turn(message, [])

    async def _poll(self, getter: Any) -> list[AgentMessage]:
        if getter is None or self._aborted():
            return []  # an aborted run takes no queued messages: they wait for the next run
        return list(await call_maybe_async(getter) or [])

    def _turn_context(self, message: AssistantMessage, results: list[ToolResultMessage]) -> TurnContext:
        return TurnContext(
            message=message, tool_results=list(results), context=self.context, new_messages=list(self.new_messages)
        )

    async def _should_stop(self, message: AssistantMessage, results: list[ToolResultMessage]) -> bool:
        hook = self.config.should_stop_after_turn
        if hook is None:
            return False
        return bool(await call_maybe_async(hook, self._turn_context(message, results)))

    async def _prepare_next_turn(self) -> None:
        hook = self.config.prepare_next_turn
        if hook is None or self._turn_message is None:
            return
        update = await call_maybe_async(hook, self._turn_context(self._turn_message, self._turn_results))
        if update is None:
            return
        if not isinstance(update, AgentLoopTurnUpdate):
            raise TypeError(f"prepare_next_turn returned {type(update).__name__}, expected AgentLoopTurnUpdate")
        if update.context is not None:
            self.context = update.context
        if update.model is not None:
            self.model = update.model
        if update.thinking_level is not None:
            self.reasoning = None if update.thinking_level == "off" else update.thinking_level

    # -- one LLM call (§3.6) ---------------------------------------------------------------

    async def _assistant_response(self) -> AssistantMessage:
        model = self.model
        signal = self.signal
        if signal is not None and signal.aborted:
            message = new_assistant_message(model)
            message.stop_reason = "aborted"
            message.error_message = REQUEST_ABORTED
            await self._announce(message)
            return message

        config = self.config
        messages = self.context.messages
        if config.transform_context is not None:
            messages = await call_maybe_async(config.transform_context, messages, signal)
        llm_messages = await call_maybe_async(config.convert_to_llm, messages)
        tools = [Tool(name=t.name, description=t.description, parameters=t.parameters) for t in self.context.tools or ()]
        llm_context = Context(
            system_prompt=self.context.system_prompt,
            messages=list(llm_messages),
            tools=tools or None,
        )
        api_key = None
        if config.get_api_key is not None:
            api_key = await call_maybe_async(config.get_api_key, model.provider)
        options = LoopStreamOptions(
            api_key=api_key or config.api_key,
            signal=signal,
            reasoning=self.reasoning,
            session_id=config.session_id,
            max_tokens=config.max_tokens,
            temperature=config.temperature,
            thinking_budgets=config.thinking_budgets,
        )
        return await self._consume_stream(model, llm_context, options)

    async def _consume_stream(self, model: Any, llm_context: Context, options: LoopStreamOptions) -> AssistantMessage:
        partial: AssistantMessage | None = None  # the live partial, once a start was seen
        final: AssistantMessage | None = None  # from the terminal event
        sink_failed = False
        scope = trio.CancelScope()

        async def on_event(event: Any) -> None:
            nonlocal partial, final, sink_failed
            if final is not None or sink_failed:
                return  # after the terminal event (or a dead sink) nothing counts
            try:
                if isinstance(event, StartEvent):
                    if partial is not None:
                        return
                    partial = event.partial if event.partial is not None else new_assistant_message(model)
                    self.context.messages.append(partial)
                    await self.emit(MessageStartEvent(message=msgspec.structs.replace(partial)))
                elif isinstance(event, DoneEvent):
                    final = event.message
                elif isinstance(event, ErrorEvent):
                    final = event.error
                elif partial is not None:  # a delta; deltas before start are dropped
                    if getattr(event, "partial", None) is not None:
                        partial = event.partial
                        self.context.messages[-1] = partial
                    await self.emit(
                        MessageUpdateEvent(message=msgspec.structs.replace(partial), assistant_message_event=event)
                    )
            except SinkFailed:
                # Stop the stream function without letting it turn our failure into an
                # error event: cancel it (Cancelled is not an Exception it would catch).
                sink_failed = True
                scope.cancel()
                await trio.lowlevel.checkpoint()

        returned: Any = None
        raised: Exception | None = None
        with scope:
            try:
                returned = await self.stream_fn(model, llm_context, options, on_event)
            except Exception as exc:
                raised = exc
        if self._sink_failure is not None:
            raise self._sink_failure

        if final is None:
            if raised is None and isinstance(returned, AssistantMessage):
                final = returned  # the stream ended without a terminal event: use its result
            else:
                final = msgspec.structs.replace(partial) if partial is not None else new_assistant_message(model)
                final.stop_reason = "aborted" if options.signal is not None and options.signal.aborted else "error"
                final.error_message = (
                    error_text(raised)
                    if raised is not None
                    else "Stream function ended without a final message"
                )

        if partial is not None:
            self.context.messages[-1] = final
        else:
            self.context.messages.append(final)
            await self.emit(MessageStartEvent(message=msgspec.structs.replace(final)))
        await self.emit(MessageEndEvent(message=final))
        self.new_messages.append(final)
        return final
