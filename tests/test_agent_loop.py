"""The agent loop (pi_actors.agent.loop): event orders, tools, rules, failures and aborts.

Every test drives the real loop with a scripted stream function emitting real provider event
sequences; nothing sleeps: concurrency is shown with trio.Events.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
import trio
import trio.lowlevel
from support.agent_loop import MODEL, Recorder, check_invariants, make_tool, role_of, run, text_of, user

from pi_actors.agent import (
    AfterToolCallResult,
    AgentContext,
    AgentLoopConfig,
    AgentLoopTurnUpdate,
    AgentToolResult,
    BeforeToolCallResult,
    run_agent_loop,
    run_agent_loop_continue,
)
from pi_actors.agent.testing import Call, ScriptedStream, Text, done_only, fake_model, reply, until_aborted
from pi_actors.ai.abort import AbortSignal
from pi_actors.ai.types import (
    AssistantMessage,
    StartEvent,
    TextContent,
    TextDeltaEvent,
    ToolCall,
    ToolResultMessage,
    UserMessage,
    new_assistant_message,
)

# -- canonical sequences (§3.9) ----------------------------------------------------------------


async def test_plain_prompt_emits_the_canonical_sequence_with_updates_between_start_and_end():
    stream = ScriptedStream(reply(Text("hello")))
    result, rec = await run([user("hi")], stream)
    assert rec.trace() == [
        "agent_start",
        "turn_start",
        "message_start:user",
        "message_end:user",
        "message_start:assistant",
        "message_end:assistant",
        "turn_end",
        "agent_end",
    ]
    # text_start, two deltas, text_end: one update per provider delta event.
    updates = rec.of("message_update")
    assert [u.assistant_message_event.__struct_config__.tag for u in updates] == [
        "text_start",
        "text_delta",
        "text_delta",
        "text_end",
    ]
    assert [role_of(m) for m in result] == ["user", "assistant"]
    assert result[1].content[0].text == "hello"
    assert rec.of("turn_end")[0].tool_results == []


async def test_message_update_carries_a_shallow_copy_of_the_partial_and_the_raw_event():
    stream = ScriptedStream(reply(Text("hello")))
    _, rec = await run([user("hi")], stream)
    final = rec.of("message_end")[-1].message
    for update in rec.of("message_update"):
        raw = update.assistant_message_event
        assert raw.partial is final  # the live object the provider built
        assert update.message is not raw.partial  # a copy ...
        assert update.message.content is raw.partial.content  # ... a shallow one
    assert rec.of("message_start")[-1].message is not final


async def test_tool_call_then_answer_emits_the_canonical_sequence():
    stream = ScriptedStream(reply(Call("c1", "echo", {"value": "x"})), reply(Text("done")))
    result, rec = await run([user("hi")], stream, tools=[make_tool()])
    assert rec.trace() == [
        "agent_start",
        "turn_start",
        "message_start:user",
        "message_end:user",
        "message_start:assistant",
        "message_end:assistant",
        "tool_execution_start:c1",
        "tool_execution_end:c1",
        "message_start:toolResult",
        "message_end:toolResult",
        "turn_end",
        "turn_start",
        "message_start:assistant",
        "message_end:assistant",
        "turn_end",
        "agent_end",
    ]
    assert [role_of(m) for m in result] == ["user", "assistant", "toolResult", "assistant"]
    turn_end = rec.of("turn_end")[0]
    assert turn_end.message is result[1] and turn_end.tool_results == [result[2]]
    # The second LLM call sees the tool result.
    second = stream.calls[1].context.messages
    assert isinstance(second[-1], ToolResultMessage) and text_of(second[-1]) == "echo: x"


async def test_stream_with_only_done_gives_one_start_and_one_end_without_updates():
    stream = ScriptedStream(done_only(Text("hello")))
    result, rec = await run([user("hi")], stream)
    assert rec.trace(updates=True)[4:7] == ["message_start:assistant", "message_end:assistant", "turn_end"]
    assert result[-1].content[0].text == "hello"


async def test_deltas_before_start_are_dropped():
    async def early_delta(model, context, options, emit):
        message = new_assistant_message(model)
        message.content.append(TextContent(text="x"))
        await emit(TextDeltaEvent(content_index=0, delta="x", partial=message))
        await emit(StartEvent(partial=message))
        await emit(TextDeltaEvent(content_index=0, delta="", partial=message))
        from pi_actors.ai.types import DoneEvent

        await emit(DoneEvent(reason="stop", message=message))
        return message

    _, rec = await run([user("hi")], ScriptedStream(early_delta))
    assert len(rec.of("message_update")) == 1


async def test_events_encode_to_pi_json_shapes():
    stream = ScriptedStream(reply(Call("c1", "echo", {"value": "x"})), reply(Text("ok")))
    _, rec = await run([user("hi")], stream, tools=[make_tool()])
    plain = [msgspec.to_builtins(e) for e in rec.events]
    start = next(p for p in plain if p["type"] == "tool_execution_start")
    assert start == {"type": "tool_execution_start", "toolCallId": "c1", "toolName": "echo", "args": {"value": "x"}}
    end = next(p for p in plain if p["type"] == "tool_execution_end")
    assert end == {
        "type": "tool_execution_end",
        "toolCallId": "c1",
        "toolName": "echo",
        "result": {"content": [{"type": "text", "text": "echo: x"}], "details": {"value": "x"}},
        "isError": False,
    }
    turn_end = next(p for p in plain if p["type"] == "turn_end")
    assert set(turn_end) == {"type", "message", "toolResults"}
    update = next(p for p in plain if p["type"] == "message_update")
    assert set(update) == {"type", "message", "assistantMessageEvent"}
    assert set(plain[-1]) == {"type", "messages"}
    assert msgspec.json.decode(msgspec.json.encode(rec.events[-1]))["type"] == "agent_end"


# -- §4.1 scenarios ----------------------------------------------------------------------------


async def test_custom_messages_reach_only_convert_to_llm():
    seen: list[Any] = []

    class Notification(msgspec.Struct):
        role: str
        text: str

    def convert(messages):
        seen.append(list(messages))
        return [m for m in messages if role_of(m) in ("user", "assistant", "toolResult")]

    note = Notification(role="notification", text="fyi")
    stream = ScriptedStream(done_only(Text("ok")))
    result, _ = await run([user("hi")], stream, messages=[note], convert_to_llm=convert)
    assert seen[0][0] is note
    assert [role_of(m) for m in stream.calls[0].context.messages] == ["user"]
    assert [role_of(m) for m in result] == ["user", "assistant"]


async def test_transform_context_runs_before_convert_to_llm_and_does_not_replace_the_context():
    order: list[str] = []
    old = [user(f"old {i}") for i in range(4)]

    async def transform(messages, signal):
        order.append("transform")
        return messages[-2:]

    def convert(messages):
        order.append("convert")
        assert [m.content for m in messages] == ["old 3", "new"]
        return list(messages)

    stream = ScriptedStream(done_only(Text("ok")))
    result, _ = await run([user("new")], stream, messages=old, transform_context=transform, convert_to_llm=convert)
    assert order == ["transform", "convert"]
    assert [m.content for m in stream.calls[0].context.messages] == ["old 3", "new"]
    assert [role_of(m) for m in result] == ["user", "assistant"]


async def test_tool_runs_once_with_coerced_arguments_and_events_carry_raw_arguments():
    received: list[Any] = []

    async def execute(tool_call_id, params, signal, on_update):
        received.append((tool_call_id, params))
        return AgentToolResult(content=[TextContent(text="ok")], details=None)

    tool = make_tool(
        execute=execute,
        parameters={"type": "object", "properties": {"count": {"type": "integer"}, "flag": {"type": "boolean"}}},
    )
    raw = {"count": "5", "flag": "true"}
    stream = ScriptedStream(reply(Call("c1", "echo", raw)), done_only(Text("done")))
    result, rec = await run([user("go")], stream, tools=[tool])
    assert received == [("c1", {"count": 5, "flag": True})]
    assert rec.of("tool_execution_start")[0].args == raw
    assert result[1].content[0].arguments == raw  # the model's arguments are never mutated
    end = rec.of("tool_execution_end")[0]
    assert end.is_error is False and text_of(end.result) == "ok"


async def test_parallel_tools_run_concurrently_and_results_keep_call_order():
    release = trio.Event()
    seen_first_running: list[bool] = []
    first_done = False

    async def execute(tool_call_id, params, signal, on_update):
        nonlocal first_done
        if tool_call_id == "tool-1":
            await release.wait()
            first_done = True
        else:
            seen_first_running.append(not first_done)
            release.set()
        return AgentToolResult(content=[TextContent(text=tool_call_id)])

    stream = ScriptedStream(
        reply(Call("tool-1", "echo", {"value": "a"}), Call("tool-2", "echo", {"value": "b"})), done_only(Text("ok"))
    )
    result, rec = await run([user("go")], stream, tools=[make_tool(execute=execute)])
    assert seen_first_running == [True]
    ids = [e.message.tool_call_id for e in rec.of("message_end") if isinstance(e.message, ToolResultMessage)]
    assert ids == ["tool-1", "tool-2"]


async def test_parallel_calls_with_the_same_exclusive_key_run_one_after_another_in_call_order():
    """Calls a, b, c on key "x" run in that order, each after the one before it has finished,
    however trio schedules them; d on key "y" runs alongside a (a waits for it)."""
    started: list[str] = []
    d_running = trio.Event()

    async def execute(tool_call_id, params, signal, on_update):
        started.append(tool_call_id)
        if tool_call_id == "a":
            await d_running.wait()  # d is not held back by a
        if tool_call_id == "d":
            d_running.set()
        for _ in range(5):  # give any wrongly started call of key "x" the chance to run now
            await trio.lowlevel.checkpoint()
        started.append(f"/{tool_call_id}")
        return AgentToolResult(content=[TextContent(text=tool_call_id)])

    tool = make_tool(execute=execute, exclusive_key=lambda args: args["value"])
    stream = ScriptedStream(
        reply(Call("a", "echo", {"value": "x"}), Call("b", "echo", {"value": "x"}),
              Call("d", "echo", {"value": "y"}), Call("c", "echo", {"value": "x"})),
        done_only(Text("ok")),
    )  # fmt: skip
    _, rec = await run([user("go")], stream, tools=[tool])
    keyed = [s for s in started if s.strip("/") in "abc"]
    assert keyed == ["a", "/a", "b", "/b", "c", "/c"]
    assert started.index("d") < started.index("/a")
    # Each call ends as it finishes (pi 0.73): the keyed ones in their order, d whenever it is done.
    assert [e.tool_call_id for e in rec.of("tool_execution_end") if e.tool_call_id != "d"] == ["a", "b", "c"]


async def test_parallel_outcomes_follow_call_order_even_when_a_call_fails_preflight():
    """Pinned (pi 0.73's order): [slow A, unknown B, fast C] → B ends in preflight, C and then A
    as they finish; the results are A, B, C."""
    c_finished = trio.Event()
    finished: list[str] = []

    async def execute(tool_call_id, params, signal, on_update):
        if tool_call_id == "A":
            await c_finished.wait()  # A is slow: it finishes only after C has
        finished.append(tool_call_id)
        if tool_call_id == "C":
            c_finished.set()
        return AgentToolResult(content=[TextContent(text=f"done {tool_call_id}")])

    stream = ScriptedStream(
        reply(Call("A", "echo", {"value": "a"}), Call("B", "nope", {}), Call("C", "echo", {"value": "c"})),
        done_only(Text("ok")),
    )
    result, rec = await run([user("go")], stream, tools=[make_tool(execute=execute)])
    assert finished == ["C", "A"]
    tool_trace = [t for t in rec.trace() if t.startswith("tool_execution")]
    assert tool_trace == [
        "tool_execution_start:A",
        "tool_execution_start:B",
        "tool_execution_end:B",
        "tool_execution_start:C",
        "tool_execution_end:C",
        "tool_execution_end:A",
    ]
    # The tool result messages come after every end, in call order.
    trace = rec.trace()
    assert trace.index("tool_execution_end:A") < min(i for i, t in enumerate(trace) if t.startswith("message_start") and i > trace.index("tool_execution_start:A"))
    results = [m for m in result if isinstance(m, ToolResultMessage)]
    assert [r.tool_call_id for r in results] == ["A", "B", "C"]
    assert text_of(results[1]) == "Tool nope not found" and results[1].is_error
    assert results[1].details == {}
    assert [r.tool_call_id for r in rec.of("turn_end")[0].tool_results] == ["A", "B", "C"]
    # The context of the next call has them in the same order.
    assert [m.tool_call_id for m in stream.calls[1].context.messages if isinstance(m, ToolResultMessage)] == ["A", "B", "C"]


async def test_sequential_steering_runs_every_call_and_is_injected_after_all_tool_results():
    executed: list[str] = []

    async def execute(tool_call_id, params, signal, on_update):
        executed.append(params["value"])
        return AgentToolResult(content=[TextContent(text="ok")])

    interrupt = user("interrupt")
    polls: list[list[str]] = []

    async def steering():
        # The steer is queued as soon as a call has run: pi 0.73 still runs the second call.
        polls.append(list(executed))
        return [interrupt] if len(polls) == 2 else []

    stream = ScriptedStream(
        reply(Call("c1", "echo", {"value": "first"}), Call("c2", "echo", {"value": "second"})), done_only(Text("ok"))
    )
    result, rec = await run(
        [user("go")], stream, tools=[make_tool(execute=execute)], tool_execution="sequential", get_steering_messages=steering
    )
    assert executed == ["first", "second"]
    # Steering is polled at the start and after the turn, never between the calls.
    assert polls[:2] == [[], ["first", "second"]]
    ends = rec.of("tool_execution_end")
    assert [e.is_error for e in ends] == [False, False]
    trace = rec.trace()
    second_turn = trace[trace.index("turn_end") + 1 :]
    assert second_turn[:3] == ["turn_start", "message_start:user", "message_end:user"]
    assert any(m is interrupt for m in stream.calls[1].context.messages)
    assert [role_of(m) for m in result] == ["user", "assistant", "toolResult", "toolResult", "user", "assistant"]


async def test_a_tool_declaring_sequential_execution_makes_the_whole_batch_run_in_call_order():
    log: list[str] = []

    async def execute(tool_call_id, params, signal, on_update):
        log.append(f"start {tool_call_id}")
        # Parallel execution would start every call before any finishes.
        await trio.lowlevel.checkpoint()
        log.append(f"end {tool_call_id}")
        return AgentToolResult(content=[TextContent(text="ok")])

    echo = make_tool(execute=execute)
    serial = make_tool("serial", execute=execute, execution_mode="sequential")
    stream = ScriptedStream(
        reply(Call("a", "echo", {"value": "1"}), Call("b", "serial", {"value": "2"}), Call("c", "echo", {"value": "3"})),
        done_only(Text("ok")),
    )
    result, rec = await run([user("go")], stream, tools=[echo, serial])
    assert log == ["start a", "end a", "start b", "end b", "start c", "end c"]
    assert [e.tool_call_id for e in rec.of("tool_execution_end")] == ["a", "b", "c"]


async def test_a_batch_without_a_sequential_tool_still_runs_in_parallel():
    started: list[str] = []
    both = trio.Event()

    async def execute(tool_call_id, params, signal, on_update):
        started.append(tool_call_id)
        if len(started) == 2:
            both.set()
        with trio.fail_after(5):
            await both.wait()  # deadlocks unless both calls run at once
        return AgentToolResult(content=[TextContent(text="ok")])

    serial = make_tool("serial", execute=execute, execution_mode="sequential")
    stream = ScriptedStream(reply(Call("a", "echo", {"value": "1"}), Call("b", "echo", {"value": "2"})), done_only(Text("ok")))
    result, rec = await run([user("go")], stream, tools=[make_tool(execute=execute), serial])
    assert sorted(started) == ["a", "b"]


async def test_sequential_mode_finishes_each_call_before_preparing_the_next():
    log: list[str] = []

    async def before(ctx, signal):
        log.append(f"before {ctx.tool_call.id}")

    async def execute(tool_call_id, params, signal, on_update):
        log.append(f"run {tool_call_id}")
        return AgentToolResult(content=[TextContent(text="ok")])

    async def after(ctx, signal):
        log.append(f"after {ctx.tool_call.id}")

    stream = ScriptedStream(
        reply(Call("a", "echo", {"value": "1"}), Call("b", "nope", {}), Call("c", "echo", {"value": "3"})),
        done_only(Text("ok")),
    )
    result, rec = await run(
        [user("go")], stream, tools=[make_tool(execute=execute)], tool_execution="sequential",
        before_tool_call=before, after_tool_call=after,
    )
    assert log == ["before a", "run a", "after a", "before c", "run c", "after c"]
    tool_trace = [t for t in rec.trace() if t.startswith("tool_execution")]
    assert tool_trace == [
        "tool_execution_start:a", "tool_execution_end:a",
        "tool_execution_start:b", "tool_execution_end:b",
        "tool_execution_start:c", "tool_execution_end:c",
    ]


async def test_parallel_preflight_runs_every_before_hook_before_any_tool_starts():
    log: list[str] = []

    async def before(ctx, signal):
        log.append(f"before {ctx.tool_call.id}")

    async def execute(tool_call_id, params, signal, on_update):
        log.append(f"run {tool_call_id}")
        return AgentToolResult(content=[TextContent(text="ok")])

    stream = ScriptedStream(reply(Call("a", "echo", {"value": "1"}), Call("b", "echo", {"value": "2"})), done_only(Text("ok")))
    await run([user("go")], stream, tools=[make_tool(execute=execute)], before_tool_call=before)
    assert log[:2] == ["before a", "before b"]
    assert sorted(log[2:]) == ["run a", "run b"]


async def test_steering_during_parallel_execution_skips_nothing_and_arrives_next_turn():
    queue: list[Any] = []
    steer = user("steer")

    async def execute(tool_call_id, params, signal, on_update):
        if tool_call_id == "a":
            queue.append(steer)
        return AgentToolResult(content=[TextContent(text="ok")])

    async def steering():
        taken = list(queue)
        queue.clear()
        return taken

    stream = ScriptedStream(reply(Call("a", "echo", {"value": "1"}), Call("b", "echo", {"value": "2"})), done_only(Text("ok")))
    result, rec = await run([user("go")], stream, tools=[make_tool(execute=execute)], get_steering_messages=steering)
    assert [e.is_error for e in rec.of("tool_execution_end")] == [False, False]
    assert [role_of(m) for m in result] == ["user", "assistant", "toolResult", "toolResult", "user", "assistant"]
    assert result[4] is steer


async def test_initial_steering_is_injected_in_the_first_turn_without_another_turn_start():
    early = user("early")
    polls = iter([[early]])

    async def steering():
        return next(polls, [])

    stream = ScriptedStream(done_only(Text("ok")))
    result, rec = await run([user("hi")], stream, get_steering_messages=steering)
    assert rec.trace()[:7] == [
        "agent_start", "turn_start", "message_start:user", "message_end:user",
        "message_start:user", "message_end:user", "message_start:assistant",
    ]
    assert result[1] is early


async def test_follow_up_starts_another_turn_only_when_the_agent_would_stop():
    follow = user("follow")
    polls: list[str] = []
    pending = [follow]

    async def follow_ups():
        polls.append("poll")
        taken = list(pending)
        pending.clear()
        return taken

    stream = ScriptedStream(reply(Call("c1", "echo", {"value": "x"})), done_only(Text("one")), done_only(Text("two")))
    result, rec = await run([user("hi")], stream, tools=[make_tool()], get_follow_up_messages=follow_ups)
    # Not polled after the tool turn; polled after "one" (gives follow) and after "two" (empty).
    assert polls == ["poll", "poll"]
    assert [role_of(m) for m in result] == ["user", "assistant", "toolResult", "assistant", "user", "assistant"]
    trace = rec.trace()
    assert trace.count("turn_start") == 3
    third = trace[len(trace) - 1 - trace[::-1].index("turn_start") :]
    assert third[:3] == ["turn_start", "message_start:user", "message_end:user"]


async def test_continue_raises_on_empty_and_assistant_last_contexts_before_any_event():
    rec = Recorder()
    config = AgentLoopConfig(model=MODEL)
    with pytest.raises(ValueError, match="^Cannot continue: no messages in context$"):
        await run_agent_loop_continue(AgentContext(), config, rec, None, ScriptedStream())
    assistant = new_assistant_message(MODEL)
    with pytest.raises(ValueError, match="^Cannot continue from message role: assistant$"):
        await run_agent_loop_continue(AgentContext(messages=[user("x"), assistant]), config, rec, None, ScriptedStream())
    assert rec.events == []


async def test_continue_emits_no_prompt_events_and_returns_only_new_messages():
    rec = Recorder()
    existing = [user("hi")]
    context = AgentContext(messages=existing)
    stream = ScriptedStream(done_only(Text("ok")))
    result = await run_agent_loop_continue(context, AgentLoopConfig(model=MODEL), rec, None, stream)
    check_invariants(rec.events, result)
    assert [role_of(m) for m in result] == ["assistant"]
    assert len(rec.of("message_end")) == 1
    assert rec.trace()[:3] == ["agent_start", "turn_start", "message_start:assistant"]
    assert existing == context.messages and len(existing) == 1  # the caller's list is untouched


async def test_continue_allows_a_custom_last_message_that_convert_to_llm_maps():
    class Custom(msgspec.Struct):
        role: str
        text: str

    def convert(messages):
        return [user(m.text) if role_of(m) == "custom" else m for m in messages]

    rec = Recorder()
    stream = ScriptedStream(done_only(Text("ok")))
    result = await run_agent_loop_continue(
        AgentContext(messages=[Custom(role="custom", text="hello")]), AgentLoopConfig(model=MODEL, convert_to_llm=convert), rec, None, stream
    )
    assert [role_of(m) for m in result] == ["assistant"]
    assert stream.calls[0].context.messages[0].content == "hello"


async def test_run_agent_loop_does_not_mutate_the_callers_messages():
    existing = [user("old")]
    context = AgentContext(messages=existing)
    rec = Recorder()
    await run_agent_loop([user("new")], context, AgentLoopConfig(model=MODEL), rec, None, ScriptedStream(done_only(Text("ok"))))
    assert len(existing) == 1 and context.messages is existing


# -- options handed to the stream function -----------------------------------------------------


async def test_stream_options_carry_key_signal_reasoning_and_session():
    signal = AbortSignal()
    stream = ScriptedStream(done_only(Text("a")), done_only(Text("b")))
    keys = iter(["dynamic-key", None])

    async def get_key(provider):
        assert provider == "fake"
        return next(keys)

    follow = [user("more")]

    async def follow_ups():
        taken = list(follow)
        follow.clear()
        return taken

    await run(
        [user("hi")], stream, signal=signal, get_api_key=get_key, api_key="static-key", reasoning="high",
        session_id="s-1", max_tokens=123, temperature=0.5, get_follow_up_messages=follow_ups,
    )
    first, second = (c.options for c in stream.calls)
    assert first.api_key == "dynamic-key" and second.api_key == "static-key"
    assert first.signal is signal and first.reasoning == "high" and first.session_id == "s-1"
    assert first.max_tokens == 123 and first.temperature == 0.5
    assert stream.calls[0].context.system_prompt == "sys"


async def test_llm_context_lists_tools_as_plain_tool_specs():
    stream = ScriptedStream(done_only(Text("ok")))
    await run([user("hi")], stream, tools=[make_tool()])
    tools = stream.calls[0].context.tools
    assert [msgspec.to_builtins(t)["name"] for t in tools] == ["echo"]
    msgspec.json.encode(stream.calls[0].context)  # pure data: it can cross a process boundary


# -- tool results: errors, validation, hooks -----------------------------------------------------


async def test_a_raising_tool_gives_an_error_result_and_the_run_goes_on():
    async def execute(tool_call_id, params, signal, on_update):
        raise RuntimeError("disk on fire")

    stream = ScriptedStream(reply(Call("c1", "echo", {"value": "x"})), done_only(Text("recovered")))
    result, rec = await run([user("go")], stream, tools=[make_tool(execute=execute)])
    end = rec.of("tool_execution_end")[0]
    assert end.is_error is True
    assert msgspec.to_builtins(end.result) == {"content": [{"type": "text", "text": "disk on fire"}], "details": {}}
    assert result[-1].content[0].text == "recovered"
    assert len(stream.calls) == 2


async def test_invalid_arguments_give_pis_validation_text_and_skip_hooks_and_execute():
    calls: list[str] = []

    async def execute(*args):
        calls.append("execute")
        return AgentToolResult()

    async def before(ctx, signal):
        calls.append("before")

    tool = make_tool(
        execute=execute,
        parameters={
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "object", "properties": {"c": {"type": "string"}}, "required": ["c"]}},
            "required": ["a", "b"],
        },
    )
    stream = ScriptedStream(reply(Call("c1", "echo", {"a": "not a number", "b": {}})), done_only(Text("ok")))
    _, rec = await run([user("go")], stream, tools=[tool], before_tool_call=before)
    assert calls == []
    end = rec.of("tool_execution_end")[0]
    assert end.is_error
    assert text_of(end.result) == (
        'Validation failed for tool "echo":\n'
        "  - a: must be number\n"
        "  - b: must have required property 'c'\n"
        "\n"
        "Received arguments:\n"
        "{\n"
        '  "a": "not a number",\n'
        '  "b": {}\n'
        "}"
    )


async def test_before_tool_call_can_block_with_default_or_given_reason():
    executed: list[str] = []
    after_calls: list[str] = []

    async def execute(tool_call_id, params, signal, on_update):
        executed.append(tool_call_id)
        return AgentToolResult(content=[TextContent(text="ran")])

    async def before(ctx, signal):
        assert ctx.assistant_message.content[0] is ctx.tool_call or ctx.tool_call in ctx.assistant_message.content
        assert ctx.args == {"value": ctx.tool_call.arguments["value"]}
        if ctx.tool_call.id == "a":
            return BeforeToolCallResult(block=True)
        if ctx.tool_call.id == "b":
            return BeforeToolCallResult(block=True, reason="not in this directory")
        return None

    async def after(ctx, signal):
        after_calls.append(ctx.tool_call.id)

    stream = ScriptedStream(
        reply(Call("a", "echo", {"value": "1"}), Call("b", "echo", {"value": "2"}), Call("c", "echo", {"value": "3"})),
        done_only(Text("ok")),
    )
    _, rec = await run([user("go")], stream, tools=[make_tool(execute=execute)], before_tool_call=before, after_tool_call=after)
    assert executed == ["c"] and after_calls == ["c"]
    ends = rec.of("tool_execution_end")
    assert [(text_of(e.result), e.is_error) for e in ends] == [
        ("Tool execution was blocked", True),
        ("not in this directory", True),
        ("ran", False),
    ]


async def test_a_raising_before_tool_call_is_that_calls_error_result():
    async def before(ctx, signal):
        raise PermissionError("hook says no")

    stream = ScriptedStream(reply(Call("a", "echo", {"value": "1"})), done_only(Text("ok")))
    result, rec = await run([user("go")], stream, tools=[make_tool()], before_tool_call=before)
    assert text_of(rec.of("tool_execution_end")[0].result) == "hook says no"
    assert result[-1].stop_reason == "stop"


async def test_after_tool_call_overrides_field_by_field():
    async def execute(tool_call_id, params, signal, on_update):
        return AgentToolResult(content=[TextContent(text="original")], details={"d": 1})

    async def after(ctx, signal):
        assert text_of(ctx.result) == "original" and ctx.is_error is False
        if ctx.tool_call.id == "a":
            return AfterToolCallResult(content=[TextContent(text="rewritten")])
        return AfterToolCallResult(details={"d": 2}, is_error=True)

    stream = ScriptedStream(reply(Call("a", "echo", {"value": "1"}), Call("b", "echo", {"value": "2"})), done_only(Text("ok")))
    result, rec = await run([user("go")], stream, tools=[make_tool(execute=execute)], after_tool_call=after)
    ends = sorted(rec.of("tool_execution_end"), key=lambda e: e.tool_call_id)  # each ends as it finishes
    assert (text_of(ends[0].result), ends[0].result.details, ends[0].is_error) == ("rewritten", {"d": 1}, False)
    assert (text_of(ends[1].result), ends[1].result.details, ends[1].is_error) == ("original", {"d": 2}, True)
    results = [m for m in result if isinstance(m, ToolResultMessage)]
    assert (text_of(results[0]), results[1].details, results[1].is_error) == ("rewritten", {"d": 2}, True)


async def test_prepare_arguments_adapts_raw_arguments_before_validation():
    received: list[Any] = []

    async def execute(tool_call_id, params, signal, on_update):
        received.append(params)
        return AgentToolResult(content=[TextContent(text="ok")])

    def prepare(raw):
        return {"value": raw["old_name"]} if "old_name" in raw else raw

    tool = make_tool(execute=execute, prepare_arguments=prepare)
    stream = ScriptedStream(reply(Call("a", "echo", {"old_name": 7})), done_only(Text("ok")))
    _, rec = await run([user("go")], stream, tools=[tool])
    assert received == [{"value": "7"}]
    assert rec.of("tool_execution_start")[0].args == {"old_name": 7}


async def test_tool_updates_come_between_start_and_end_and_late_updates_are_ignored():
    saved: list[Any] = []

    async def execute(tool_call_id, params, signal, on_update):
        await on_update(AgentToolResult(content=[TextContent(text="1/2")]))
        await on_update(AgentToolResult(content=[TextContent(text="2/2")]))
        saved.append(on_update)
        return AgentToolResult(content=[TextContent(text="done")])

    stream = ScriptedStream(reply(Call("a", "echo", {"value": "1"})), done_only(Text("ok")))
    _, rec = await run([user("go")], stream, tools=[make_tool(execute=execute)])
    tool_trace = [t for t in rec.trace() if t.startswith("tool_execution")]
    assert tool_trace == ["tool_execution_start:a", "tool_execution_update:a", "tool_execution_update:a", "tool_execution_end:a"]
    update = rec.of("tool_execution_update")[0]
    assert update.args == {"value": "1"} and text_of(update.partial_result) == "1/2"
    before = len(rec.events)
    await saved[0](AgentToolResult(content=[TextContent(text="late")]))
    assert len(rec.events) == before


async def test_a_tool_returning_a_plain_dict_is_accepted():
    async def execute(tool_call_id, params, signal, on_update):
        return {"content": [{"type": "text", "text": "from dict"}], "details": {"k": 1}}

    stream = ScriptedStream(reply(Call("a", "echo", {"value": "1"})), done_only(Text("ok")))
    _, rec = await run([user("go")], stream, tools=[make_tool(execute=execute)])
    end = rec.of("tool_execution_end")[0]
    assert (text_of(end.result), end.result.details, end.is_error) == ("from dict", {"k": 1}, False)


# -- the length and terminate rules ---------------------------------------------------------------


async def test_tool_calls_of_a_truncated_message_are_not_run_and_the_loop_continues():
    executed: list[str] = []

    async def execute(tool_call_id, params, signal, on_update):
        executed.append(tool_call_id)
        return AgentToolResult()

    stream = ScriptedStream(
        reply(Text("writing"), Call("a", "echo", {"value": "trunc"}), stop_reason="length"), done_only(Text("again"))
    )
    result, rec = await run([user("go")], stream, tools=[make_tool(execute=execute)])
    assert executed == []
    end = rec.of("tool_execution_end")[0]
    assert end.is_error
    assert text_of(end.result) == (
        'Tool call "echo" was not executed: the response hit the output token limit, so its arguments may be '
        "truncated. Re-issue the tool call with complete arguments."
    )
    assert len(stream.calls) == 2 and result[-1].content[0].text == "again"


async def test_length_without_tool_calls_ends_like_stop():
    stream = ScriptedStream(reply(Text("cut off"), stop_reason="length"))
    result, _ = await run([user("go")], stream)
    assert result[-1].stop_reason == "length" and len(stream.calls) == 1


@pytest.mark.parametrize(
    "flags, llm_calls",
    [((True, True), 1), ((True, False), 2), ((False, False), 2)],
)
async def test_a_batch_terminates_only_if_every_result_says_so(flags, llm_calls):
    async def execute(tool_call_id, params, signal, on_update):
        return AgentToolResult(content=[TextContent(text="ok")], terminate=flags[0 if tool_call_id == "a" else 1])

    stream = ScriptedStream(reply(Call("a", "echo", {"value": "1"}), Call("b", "echo", {"value": "2"})), done_only(Text("ok")))
    result, _ = await run([user("go")], stream, tools=[make_tool(execute=execute)])
    assert len(stream.calls) == llm_calls
    if llm_calls == 1:
        assert isinstance(result[-1], ToolResultMessage)


async def test_after_tool_call_and_blocked_results_take_part_in_terminate():
    async def before(ctx, signal):
        if ctx.tool_call.id == "b":
            return BeforeToolCallResult(block=True, reason="done here", terminate=True)

    async def after(ctx, signal):
        return AfterToolCallResult(terminate=True)

    polled: list[str] = []

    async def follow_ups():
        polled.append("follow")
        return []

    stream = ScriptedStream(reply(Call("a", "echo", {"value": "1"}), Call("b", "echo", {"value": "2"})), done_only(Text("ok")))
    _, _ = await run(
        [user("go")], stream, tools=[make_tool()], before_tool_call=before, after_tool_call=after, get_follow_up_messages=follow_ups
    )
    assert len(stream.calls) == 1
    assert polled == ["follow"]  # terminate stops the automatic LLM call, not the follow-up poll


# -- should_stop_after_turn / prepare_next_turn ---------------------------------------------------


async def test_should_stop_after_turn_ends_the_run_before_polling_queues():
    polled: list[str] = []

    async def steering():
        polled.append("steer")
        return []

    seen: list[Any] = []

    def stop(ctx):
        seen.append((ctx.message.stop_reason, [r.tool_call_id for r in ctx.tool_results], len(ctx.new_messages)))
        return True

    stream = ScriptedStream(reply(Call("a", "echo", {"value": "1"})), done_only(Text("never")))
    result, rec = await run([user("go")], stream, tools=[make_tool()], get_steering_messages=steering, should_stop_after_turn=stop)
    assert polled == ["steer"]  # only the initial poll
    assert seen == [("toolUse", ["a"], 3)]
    assert len(stream.calls) == 1 and rec.trace()[-2:] == ["turn_end", "agent_end"]


async def test_prepare_next_turn_can_swap_model_and_thinking_level():
    other = fake_model(id="other-model")

    def prepare(ctx):
        assert ctx.tool_results and ctx.message.stop_reason == "toolUse"
        return AgentLoopTurnUpdate(model=other, thinking_level="off")

    stream = ScriptedStream(reply(Call("a", "echo", {"value": "1"})), done_only(Text("ok")))
    await run([user("go")], stream, tools=[make_tool()], reasoning="high", prepare_next_turn=prepare)
    assert [c.model.id for c in stream.calls] == ["fake-model", "other-model"]
    assert [c.options.reasoning for c in stream.calls] == ["high", None]


# -- a raising callback never hangs and always ends with agent_end --------------------------------


def _boom(name: str):
    def raiser(*args: Any) -> Any:
        raise RuntimeError(f"boom {name}")

    return raiser


def _nth(name: str, n: int, ok: Any = None):
    count = 0

    async def hook(*args: Any) -> Any:
        nonlocal count
        count += 1
        if count == n:
            raise RuntimeError(f"boom {name}")
        return ok

    return hook


async def _raising_stream_before_start(model, context, options, emit):
    raise RuntimeError("boom stream_fn")


async def _raising_stream_after_start(model, context, options, emit):
    message = new_assistant_message(model)
    message.content.append(TextContent(text="half"))
    await emit(StartEvent(partial=message))
    raise RuntimeError("boom stream_fn")


CALLBACK_CASES = {
    "convert_to_llm": dict(config=dict(convert_to_llm=_boom("convert_to_llm"))),
    "transform_context": dict(config=dict(transform_context=_boom("transform_context"))),
    "get_api_key": dict(config=dict(get_api_key=_boom("get_api_key"))),
    "steering_initial": dict(config=dict(get_steering_messages=_boom("steering_initial"))),
    "steering_after_turn": dict(config=dict(get_steering_messages=_nth("steering_after_turn", 2, []))),
    "follow_up": dict(config=dict(get_follow_up_messages=_boom("follow_up"))),
    "should_stop_after_turn": dict(config=dict(should_stop_after_turn=_boom("should_stop_after_turn"))),
    "prepare_next_turn": dict(config=dict(prepare_next_turn=_boom("prepare_next_turn")), tools=True),
    "after_tool_call": dict(config=dict(after_tool_call=_boom("after_tool_call")), tools=True),
    "after_tool_call_sequential": dict(
        config=dict(after_tool_call=_nth("after_tool_call_sequential", 1), tool_execution="sequential"), tools=True
    ),
    "stream_fn": dict(stream=_raising_stream_before_start),
    "stream_fn_after_start": dict(stream=_raising_stream_after_start),
}


@pytest.mark.parametrize("case", list(CALLBACK_CASES))
async def test_a_raising_callback_ends_the_run_with_an_error_message_and_agent_end(case):
    spec = CALLBACK_CASES[case]
    name = case.removesuffix("_after_start")
    if "stream" in spec:
        stream = ScriptedStream(spec["stream"])
    elif spec.get("tools"):
        stream = ScriptedStream(reply(Call("a", "echo", {"value": "1"}), Call("b", "echo", {"value": "2"})), done_only(Text("ok")))
    else:
        stream = ScriptedStream(done_only(Text("ok")))
    result, rec = await run([user("go")], stream, tools=[make_tool()], **spec.get("config", {}))
    last = result[-1]
    assert isinstance(last, AssistantMessage)
    assert last.stop_reason == "error" and last.error_message == f"boom {name}"
    assert rec.trace()[-4:] == ["message_start:assistant", "message_end:assistant", "turn_end", "agent_end"]
    assert rec.of("turn_end")[-1].message is last
    if case == "stream_fn_after_start":
        assert last.content[0].text == "half"  # the partial content is kept
        assert rec.trace().count("message_start:assistant") == 1
    if spec.get("tools"):
        # Both calls of the batch have exactly one result (check_invariants), in call order.
        results = [m for m in result if isinstance(m, ToolResultMessage)]
        assert [r.tool_call_id for r in results] == ["a", "b"]
    if case == "after_tool_call":
        results = [m for m in result if isinstance(m, ToolResultMessage)]
        assert [text_of(r) for r in results] == ["boom after_tool_call", "boom after_tool_call"]
    if case in ("after_tool_call_sequential", "steering_during_sequential_tools"):
        results = [m for m in result if isinstance(m, ToolResultMessage)]
        assert text_of(results[1]) == "Tool call was not executed: the run stopped after an error."


async def test_stream_function_ending_without_terminal_event_uses_its_returned_message():
    async def quiet(model, context, options, emit):
        message = new_assistant_message(model)
        message.content.append(TextContent(text="returned"))
        await emit(StartEvent(partial=message))
        return message

    result, rec = await run([user("go")], ScriptedStream(quiet))
    assert result[-1].content[0].text == "returned" and result[-1].stop_reason == "stop"


async def test_a_raising_sink_propagates_the_original_exception_and_stops_the_stream():
    class SinkBroken(Exception):
        pass

    reached_end = False

    async def stream(model, context, options, emit):
        nonlocal reached_end
        message = new_assistant_message(model)
        try:
            await emit(StartEvent(partial=message))
            await emit(TextDeltaEvent(content_index=0, delta="x", partial=message))
        except Exception:  # a provider that swallows errors must not see the sink's
            raise AssertionError("the sink failure leaked into the stream function") from None
        reached_end = True
        return message

    async def sink(event):
        if event.type == "message_start" and isinstance(event.message, AssistantMessage):
            raise SinkBroken("sink is gone")

    with trio.fail_after(5):
        with pytest.raises(SinkBroken, match="sink is gone"):
            await run_agent_loop([user("go")], AgentContext(), AgentLoopConfig(model=MODEL), sink, None, stream)
    assert not reached_end


async def test_a_sync_sink_works():
    events: list[Any] = []
    await run_agent_loop([user("go")], AgentContext(), AgentLoopConfig(model=MODEL), events.append, None, ScriptedStream(done_only(Text("x"))))
    assert events[-1].type == "agent_end"


# -- aborts ------------------------------------------------------------------------------------


async def test_abort_mid_stream_ends_the_run_with_the_aborted_partial_and_runs_no_tools():
    started = trio.Event()
    signal = AbortSignal()
    executed: list[str] = []

    async def execute(tool_call_id, params, signal, on_update):
        executed.append(tool_call_id)
        return AgentToolResult()

    stream = ScriptedStream(until_aborted(Text("partial"), Call("a", "echo", {"value": "1"}), started=started))
    async with trio.open_nursery() as nursery:

        async def abort_when_streaming():
            await started.wait()
            signal.abort()

        nursery.start_soon(abort_when_streaming)
        result, rec = await run([user("go")], stream, tools=[make_tool(execute=execute)], signal=signal)
    last = result[-1]
    assert last.stop_reason == "aborted" and last.content[0].text == "partial"
    assert executed == [] and rec.of("tool_execution_start") == []
    assert rec.trace()[-3:] == ["message_end:assistant", "turn_end", "agent_end"]
    assert rec.of("turn_end")[-1].tool_results == []


async def test_abort_while_tools_run_gives_every_call_a_result_and_makes_no_further_llm_call():
    signal = AbortSignal()
    running = {"a": trio.Event(), "b": trio.Event()}

    async def execute(tool_call_id, params, sig, on_update):
        assert sig is signal
        running[tool_call_id].set()
        await sig.wait()
        if tool_call_id == "a":
            raise RuntimeError("a: killed by abort")
        return AgentToolResult(content=[TextContent(text="b stopped cleanly")])

    stream = ScriptedStream(reply(Call("a", "echo", {"value": "1"}), Call("b", "echo", {"value": "2"})), done_only(Text("never")))
    async with trio.open_nursery() as nursery:

        async def abort_when_running():
            await running["a"].wait()
            await running["b"].wait()
            signal.abort()

        nursery.start_soon(abort_when_running)
        result, rec = await run([user("go")], stream, tools=[make_tool(execute=execute)], signal=signal)
    results = [m for m in result if isinstance(m, ToolResultMessage)]
    assert [(r.tool_call_id, text_of(r), r.is_error) for r in results] == [
        ("a", "a: killed by abort", True),
        ("b", "b stopped cleanly", False),
    ]
    assert len(stream.calls) == 1
    last = result[-1]
    assert last.stop_reason == "aborted" and last.error_message == "Request was aborted"
    trace = rec.trace()
    assert trace[-6:] == ["turn_end", "turn_start", "message_start:assistant", "message_end:assistant", "turn_end", "agent_end"]


async def test_sequential_calls_after_an_abort_are_not_started():
    signal = AbortSignal()
    executed: list[str] = []

    async def execute(tool_call_id, params, sig, on_update):
        executed.append(tool_call_id)
        signal.abort()  # e.g. the user pressed Esc while the first call ran
        return AgentToolResult(content=[TextContent(text="first done")])

    stream = ScriptedStream(reply(Call("a", "echo", {"value": "1"}), Call("b", "echo", {"value": "2"})))
    result, rec = await run([user("go")], stream, tools=[make_tool(execute=execute)], signal=signal, tool_execution="sequential")
    assert executed == ["a"]
    results = [m for m in result if isinstance(m, ToolResultMessage)]
    assert [(text_of(r), r.is_error) for r in results] == [("first done", False), ("Operation aborted", True)]
    assert result[-1].stop_reason == "aborted"


async def test_a_pre_aborted_signal_makes_no_llm_call():
    signal = AbortSignal()
    signal.abort()
    stream = ScriptedStream(done_only(Text("never")))
    result, rec = await run([user("go")], stream, signal=signal)
    assert stream.calls == []
    assert result[-1].stop_reason == "aborted"
    assert rec.trace()[-4:] == ["message_start:assistant", "message_end:assistant", "turn_end", "agent_end"]


async def test_an_error_assistant_message_ends_the_run_without_running_its_tool_calls():
    polled: list[str] = []

    async def follow_ups():
        polled.append("x")
        return [user("more")]

    stream = ScriptedStream(reply(Call("a", "echo", {"value": "1"}), stop_reason="error", error_message="overloaded"))
    result, rec = await run([user("go")], stream, tools=[make_tool()], get_follow_up_messages=follow_ups)
    assert result[-1].error_message == "overloaded"
    assert rec.of("tool_execution_start") == [] and polled == []
    assert rec.of("turn_end")[-1].tool_results == []


async def test_an_aborted_run_takes_no_queued_messages():
    signal = AbortSignal()
    polls: list[str] = []

    async def execute(tool_call_id, params, sig, on_update):
        signal.abort()
        return AgentToolResult(content=[TextContent(text="ok")])

    async def steering():
        polls.append("steer")
        return [user("queued")]

    async def follow_ups():
        polls.append("follow")
        return [user("queued")]

    stream = ScriptedStream(reply(Call("a", "echo", {"value": "1"})))
    result, _ = await run(
        [user("go")], stream, tools=[make_tool(execute=execute)], signal=signal,
        get_steering_messages=steering, get_follow_up_messages=follow_ups,
    )
    assert polls == ["steer"]  # only the initial poll, before the abort
    assert [m.content for m in result if isinstance(m, UserMessage)] == ["go", "queued"]
    assert result[-1].stop_reason == "aborted"


async def test_abort_between_turns_makes_no_further_llm_call_and_keeps_every_tool_result():
    signal = AbortSignal()

    def abort_after_the_turn() -> list:
        # Polled after turn_end and before the next turn: the user pressed Esc right then.
        if any(isinstance(m, ToolResultMessage) for m in turns_seen):
            signal.abort()
        return []

    turns_seen: list[Any] = []

    async def execute(tool_call_id, params, sig, on_update):
        return AgentToolResult(content=[TextContent(text=f"done {tool_call_id}")])

    async def record(event: Any) -> None:
        if event.type == "message_end":
            turns_seen.append(event.message)

    stream = ScriptedStream(reply(Call("a", "echo", {"value": "1"}), Call("b", "echo", {"value": "2"})), done_only(Text("never")))
    rec = Recorder()

    async def sink(event: Any) -> None:
        await record(event)
        await rec(event)

    context = AgentContext(system_prompt="sys", messages=[], tools=[make_tool(execute=execute)])
    config = AgentLoopConfig(model=MODEL, get_steering_messages=abort_after_the_turn)
    with trio.fail_after(5):
        result = await run_agent_loop([user("go")], context, config, sink, signal, stream)
    check_invariants(rec.events, result)
    assert len(stream.calls) == 1
    calls = [b.id for m in result if isinstance(m, AssistantMessage) for b in m.content if isinstance(b, ToolCall)]
    assert [m.tool_call_id for m in result if isinstance(m, ToolResultMessage)] == calls == ["a", "b"]
    assert result[-1].stop_reason == "aborted"
