"""The tool phase of a turn (pi's packages/agent, docs/architecture.md §7 with our differences; see loop.py).

A ``ToolPhase`` is the tool phase of one turn, an object the loop's run creates for the
batch and calls (``await ToolPhase(...).run(message, calls)``), given what it needs
explicitly: the context, the config, the abort signal, the run's event sink, the callback
that records a tool result message, and a view of the sink's failure. It runs the tool calls
of one assistant message — preflight (lookup, ``prepare_arguments``, validation, ``before_tool_call``),
execution (all runnable calls at once in parallel mode, one after another in sequential
mode — the agent's setting, or forced for the batch by a tool declaring
``execution_mode="sequential"``), ``after_tool_call`` — and emits every call's outcome: in
parallel mode each ``tool_execution_end`` as its call finishes and then the result messages
in call order (pi 0.73), in sequential mode call after call. Every call ends
with exactly one result. A callback failure is returned in the batch (``failure``) for the
loop to end the run after ``turn_end``; a sink failure is raised at once.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import msgspec
import trio

from ..ai.abort import AbortSignal
from ..ai.types import AssistantMessage, TextContent, ToolCall, ToolResultMessage, now_ms
from ._support import SinkFailed, call_maybe_async, error_text
from .types import (
    AfterToolCallContext,
    AfterToolCallResult,
    AgentContext,
    AgentLoopConfig,
    AgentToolResult,
    BeforeToolCallContext,
    BeforeToolCallResult,
    ToolExecutionEndEvent,
    ToolExecutionStartEvent,
    ToolExecutionUpdateEvent,
)
from .validation import validate_tool_arguments

__all__ = [
    "ToolPhase",
    "Batch",
    "TOOL_NOT_FOUND",
    "TOOL_BLOCKED",
    "TOOL_ABORTED",
    "TOOL_NOT_RUN_AFTER_ERROR",
    "TOOL_TRUNCATED",
]

TOOL_NOT_FOUND = "Tool {name} not found"
TOOL_BLOCKED = "Tool execution was blocked"
TOOL_ABORTED = "Operation aborted"
TOOL_NOT_RUN_AFTER_ERROR = "Tool call was not executed: the run stopped after an error."
TOOL_TRUNCATED = (
    'Tool call "{name}" was not executed: the response hit the output token limit, so its '
    "arguments may be truncated. Re-issue the tool call with complete arguments."
)


def _text_result(text: str) -> AgentToolResult:
    return AgentToolResult(content=[TextContent(text=text)], details={})


def _normalize_result(value: Any) -> AgentToolResult:
    """A tool's return value as an AgentToolResult (a ``{content, details}`` dict is accepted)."""
    if isinstance(value, AgentToolResult):
        return value
    if isinstance(value, dict) and "content" in value:
        return msgspec.convert(
            {"content": value.get("content") or [], "details": value.get("details"), "terminate": value.get("terminate")},
            AgentToolResult,
        )
    raise TypeError(f"tool returned {type(value).__name__}, expected AgentToolResult")


@dataclass
class _Outcome:
    result: AgentToolResult
    is_error: bool


@dataclass
class _Call:
    """One tool call's way through the tool phase."""

    block: ToolCall
    tool: Any = None
    args: Any = None
    outcome: _Outcome | None = None  # set when settled (immediately or after execution)
    runnable: bool = False
    key: str | None = None  # the tool's exclusive_key for these arguments
    executed: bool = False
    done: trio.Event = field(default_factory=trio.Event)


@dataclass
class Batch:
    results: list[ToolResultMessage]
    terminate: bool
    failure: Exception | None


class ToolPhase:
    """The tool phase of one turn.

    ``context`` supplies the tools (and is handed to the hooks); ``emit(event)`` is the run's
    serialized event sink (it raises the run's ``SinkFailed`` once the sink has failed);
    ``record(result)`` announces a tool result message (``message_start``/``message_end``) and
    adds it to the run's messages and the turn's results; ``sink_failure()`` is the run's sink
    failure, if any, which no callback error may hide."""

    def __init__(
        self,
        *,
        context: AgentContext,
        config: AgentLoopConfig,
        signal: AbortSignal | None,
        emit: Callable[[Any], Awaitable[None]],
        record: Callable[[ToolResultMessage], Awaitable[None]],
        sink_failure: Callable[[], SinkFailed | None],
    ) -> None:
        self.context = context
        self.config = config
        self.signal = signal
        self.emit = emit
        self._record = record
        self._sink_failure = sink_failure

    async def run(self, message: AssistantMessage, blocks: list[ToolCall]) -> Batch:
        """Run the tool calls ``blocks`` of ``message``; every call gets exactly one result,
        in call order. A callback failure is returned in the batch; a sink failure raises."""
        calls = [_Call(block=b) for b in blocks]
        if message.stop_reason == "length":
            for call in calls:
                await self._emit_start(call)
                call.outcome = _Outcome(_text_result(TOOL_TRUNCATED.format(name=call.block.name)), True)
            results = [await self._finalize(message, call) for call in calls]
            return Batch(results, False, None)
        if self.config.tool_execution == "sequential" or self._any_sequential_tool(calls):
            return await self._run_sequential(message, calls)
        return await self._run_parallel(message, calls)

    async def _run_sequential(self, message: AssistantMessage, calls: list[_Call]) -> Batch:
        """Call after call, each prepared only once the one before it has settled. Every call
        runs (pi 0.73): steering queued meanwhile waits for the poll after ``turn_end`` and
        is injected after all the tool results."""
        results: list[ToolResultMessage] = []
        failure: Exception | None = None
        for index, call in enumerate(calls):
            await self._emit_start(call)
            if self._aborted():
                call.outcome = _Outcome(_text_result(TOOL_ABORTED), True)
            else:
                await self._prepare(message, call)
                if call.runnable:
                    await self._execute(call)
            try:
                results.append(await self._finalize(message, call))
            except Exception as exc:
                failure = self._check_failure(exc)
                results.append(await self._emit_outcome(call, _Outcome(_text_result(error_text(exc)), True)))
            if failure is not None:
                for skipped in calls[index + 1 :]:
                    await self._emit_start(skipped)
                    results.append(await self._emit_outcome(skipped, _Outcome(_text_result(TOOL_NOT_RUN_AFTER_ERROR), True)))
                break
        return Batch(results, self._all_terminate(calls), failure)

    async def _run_parallel(self, message: AssistantMessage, calls: list[_Call]) -> Batch:
        """pi 0.73's order: preflight in call order (a call that may not run ends at once),
        every runnable call started together, each ``tool_execution_end`` emitted as its call
        finishes, then the tool result messages in call order."""
        failures: list[Exception] = []

        async def conclude(call: _Call) -> None:
            try:
                await self._conclude(message, call)
            except Exception as exc:
                failures.append(self._check_failure(exc))
                await self._emit_end(call, _Outcome(_text_result(error_text(exc)), True))

        # Phase 1: preflight in call order.
        for call in calls:
            await self._emit_start(call)
            await self._prepare(message, call)
            if not call.runnable:
                await conclude(call)
        # Phase 2: start every runnable call at once (a call whose exclusive key an earlier
        # call holds waits for that one to settle); each ends as soon as it is done.
        holders: dict[str, _Call] = {}

        async def run_one(call: _Call, before: _Call | None) -> None:
            await self._execute(call, before)
            await conclude(call)

        runnable = [call for call in calls if call.runnable]
        if len(runnable) == 1:
            await run_one(runnable[0], None)  # alone: no task of its own (most turns)
        else:
            async with trio.open_nursery() as nursery:
                for call in runnable:
                    before = holders.get(call.key) if call.key is not None else None
                    if call.key is not None:
                        holders[call.key] = call
                    nursery.start_soon(run_one, call, before)
        # Phase 3: the results, in call order. Steering is polled after turn_end, as after
        # any turn; nothing is skipped.
        results = [await self._record_result(call) for call in calls]
        return Batch(results, self._all_terminate(calls), failures[0] if failures else None)

    def _check_failure(self, exc: Exception) -> Exception:
        """A callback failure in the tool phase; a sink failure is re-raised at once."""
        failure = self._sink_failure()
        if failure is not None:
            raise failure
        return exc

    def _any_sequential_tool(self, calls: list[_Call]) -> bool:
        """Whether a call of the batch names a tool declaring ``execution_mode="sequential"``
        (pi's ``executionMode``): then the whole batch runs one call after another."""
        names = {call.block.name for call in calls}
        return any(
            getattr(tool, "name", None) in names and getattr(tool, "execution_mode", None) == "sequential"
            for tool in self.context.tools or ()
        )

    def _aborted(self) -> bool:
        return self.signal is not None and self.signal.aborted

    def _all_terminate(self, calls: list[_Call]) -> bool:
        return bool(calls) and all(c.outcome is not None and c.outcome.result.terminate is True for c in calls)

    async def _emit_start(self, call: _Call) -> None:
        block = call.block
        await self.emit(ToolExecutionStartEvent(tool_call_id=block.id, tool_name=block.name, args=block.arguments))

    async def _prepare(self, message: AssistantMessage, call: _Call) -> None:
        """Lookup, argument preparation, validation, before_tool_call. Sets the outcome for a
        call that must not run, else marks it runnable."""
        block = call.block
        tool = next((t for t in self.context.tools or () if t.name == block.name), None)
        if tool is None:
            self._settle(call, _Outcome(_text_result(TOOL_NOT_FOUND.format(name=block.name)), True))
            return
        try:
            raw = block.arguments
            prepare = getattr(tool, "prepare_arguments", None)
            if prepare is not None:
                raw = await call_maybe_async(prepare, raw)
            args = validate_tool_arguments(tool, raw)
            exclusive_key = getattr(tool, "exclusive_key", None)
            key = exclusive_key(args) if exclusive_key is not None else None
            hook = self.config.before_tool_call
            if hook is not None:
                verdict = await call_maybe_async(hook, BeforeToolCallContext(message, block, args, self.context), self.signal)
                if isinstance(verdict, BeforeToolCallResult) and verdict.block:
                    result = _text_result(verdict.reason or TOOL_BLOCKED)
                    result.terminate = verdict.terminate
                    self._settle(call, _Outcome(result, True))
                    return
        except Exception as exc:
            self._check_failure(exc)
            self._settle(call, _Outcome(_text_result(error_text(exc)), True))
            return
        if self._aborted():
            self._settle(call, _Outcome(_text_result(TOOL_ABORTED), True))
            return
        call.tool, call.args, call.key, call.runnable = tool, args, key, True

    def _settle(self, call: _Call, outcome: _Outcome) -> None:
        call.outcome = outcome
        call.done.set()

    async def _execute(self, call: _Call, after: _Call | None = None) -> None:
        """Run one call and settle it; with ``after``, only once that call has settled."""
        block = call.block
        settled = False
        if after is not None:
            await after.done.wait()

        async def on_update(partial: Any) -> None:
            if settled:
                return  # updates after the call settled are ignored
            await self.emit(
                ToolExecutionUpdateEvent(
                    tool_call_id=block.id, tool_name=block.name, args=block.arguments, partial_result=partial
                )
            )

        try:
            value = await call.tool.execute(block.id, call.args, self.signal, on_update)
            outcome = _Outcome(_normalize_result(value), False)
        except Exception as exc:
            self._check_failure(exc)
            outcome = _Outcome(_text_result(error_text(exc)), True)
        finally:
            settled = True
        call.executed = True
        self._settle(call, outcome)

    async def _finalize(self, message: AssistantMessage, call: _Call) -> ToolResultMessage:
        """after_tool_call (executed calls only), then emit the outcome. A raising hook
        propagates; the caller gives the call an error result instead."""
        await self._conclude(message, call)
        return await self._record_result(call)

    async def _conclude(self, message: AssistantMessage, call: _Call) -> None:
        """after_tool_call (executed calls only), then ``tool_execution_end``. A raising hook
        propagates (nothing emitted)."""
        assert call.outcome is not None
        outcome = call.outcome
        hook = self.config.after_tool_call
        if call.executed and hook is not None:
            override = await call_maybe_async(
                hook,
                AfterToolCallContext(message, call.block, call.args, outcome.result, outcome.is_error, self.context),
                self.signal,
            )
            if isinstance(override, AfterToolCallResult):
                result = AgentToolResult(
                    content=override.content if override.content is not None else outcome.result.content,
                    details=override.details if override.details is not None else outcome.result.details,
                    terminate=override.terminate if override.terminate is not None else outcome.result.terminate,
                )
                is_error = override.is_error if override.is_error is not None else outcome.is_error
                outcome = _Outcome(result, is_error)
        await self._emit_end(call, outcome)

    async def _emit_outcome(self, call: _Call, outcome: _Outcome) -> ToolResultMessage:
        await self._emit_end(call, outcome)
        return await self._record_result(call)

    async def _emit_end(self, call: _Call, outcome: _Outcome) -> None:
        block = call.block
        call.outcome = outcome
        await self.emit(
            ToolExecutionEndEvent(
                tool_call_id=block.id, tool_name=block.name, result=outcome.result, is_error=outcome.is_error
            )
        )

    async def _record_result(self, call: _Call) -> ToolResultMessage:
        """The call's tool result message (``message_start``/``message_end``)."""
        block, outcome = call.block, call.outcome
        assert outcome is not None
        message = ToolResultMessage(
            tool_call_id=block.id,
            tool_name=block.name,
            content=list(outcome.result.content),
            details=outcome.result.details,
            is_error=outcome.is_error,
            timestamp=now_ms(),
        )
        await self._record(message)
        return message
