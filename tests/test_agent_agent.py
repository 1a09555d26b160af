"""The Agent class (pi_actors.agent.agent): state, queues, one run at a time, listeners."""

from __future__ import annotations

from typing import Any

import pytest
import trio
from support.agent_loop import check_invariants, make_tool

from pi_actors.agent import Agent, AgentState, AgentToolResult
from pi_actors.agent.agent import BUSY_CONTINUE, BUSY_PROMPT
from pi_actors.agent.testing import Call, ScriptedStream, Text, done_only, fake_model, reply, until_aborted
from pi_actors.ai.types import AssistantMessage, Model, TextContent, UserMessage, new_assistant_message, now_ms
from pi_actors.testing.scripted_server import Reply

MODEL = fake_model()


def user(text: str) -> UserMessage:
    return UserMessage(content=text, timestamp=now_ms())


def assistant(text: str) -> AssistantMessage:
    message = new_assistant_message(MODEL)
    message.content.append(TextContent(text=text))
    return message


def texts(messages: list[Any]) -> list[str]:
    out = []
    for m in messages:
        content = m.content
        if isinstance(content, str):
            out.append(content)
        else:
            out.append("".join(getattr(b, "text", "") for b in content))
    return out


def make_agent(stream: ScriptedStream, **kwargs: Any) -> Agent:
    state = kwargs.pop("initial_state", {})
    return Agent(initial_state={"model": MODEL, **state}, stream_fn=stream, **kwargs)


# -- §4.2 scenarios --------------------------------------------------------------------------


def test_default_state():
    agent = Agent()
    s = agent.state
    assert (s.system_prompt, s.thinking_level, s.tools, s.messages) == ("", "off", [], [])
    assert (s.is_streaming, s.stream_message, s.pending_tool_calls, s.error) == (False, None, set(), None)


def test_custom_initial_state_is_applied():
    agent = Agent(initial_state={"system_prompt": "be brief", "model": MODEL, "thinking_level": "low"})
    assert agent.state.system_prompt == "be brief" and agent.state.model is MODEL
    assert agent.state.thinking_level == "low"
    assert Agent(initial_state=AgentState(system_prompt="x")).state.system_prompt == "x"
    with pytest.raises(TypeError):
        Agent(initial_state={"nope": 1})


def test_subscribing_and_mutating_emit_nothing():
    events: list[Any] = []
    agent = Agent()
    unsubscribe = agent.subscribe(events.append)
    agent.set_system_prompt("new")
    assert agent.state.system_prompt == "new" and events == []
    unsubscribe()
    agent.set_system_prompt("again")
    assert events == []


def test_mutators():
    agent = Agent()
    agent.set_model(MODEL)
    agent.set_thinking_level("high")
    tools = [make_tool()]
    agent.set_tools(tools)
    assert agent.state.model is MODEL and agent.state.thinking_level == "high" and agent.state.tools is tools
    messages = [user("a")]
    agent.replace_messages(messages)
    assert agent.state.messages == messages and agent.state.messages is not messages
    extra = user("b")
    agent.append_message(extra)
    assert len(agent.state.messages) == 2 and agent.state.messages[1] is extra
    agent.clear_messages()
    assert agent.state.messages == []


def test_queued_messages_stay_out_of_the_transcript_and_abort_when_idle_is_harmless():
    agent = Agent()
    agent.steer(user("s"))
    agent.follow_up(user("f"))
    assert agent.state.messages == [] and agent.has_queued_messages()
    agent.abort()
    agent.clear_all_queues()
    assert not agent.has_queued_messages()


async def test_prompt_and_continue_refuse_while_streaming_and_streaming_starts_at_once():
    started = trio.Event()
    agent = make_agent(ScriptedStream(until_aborted(Text("..."), started=started)))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(agent.prompt, "hello")
        await trio.testing.wait_all_tasks_blocked()
        assert agent.state.is_streaming
        await started.wait()
        with pytest.raises(RuntimeError) as busy:
            await agent.prompt("again")
        assert str(busy.value) == BUSY_PROMPT
        with pytest.raises(RuntimeError) as busy:
            await agent.continue_()
        assert str(busy.value) == BUSY_CONTINUE
        agent.abort()
    assert not agent.state.is_streaming
    assert agent.state.messages[-1].stop_reason == "aborted"
    assert agent.state.error == "Request was aborted"


async def test_is_streaming_is_set_before_prompt_first_yields():
    agent = make_agent(ScriptedStream(done_only(Text("ok"))))
    seen: list[bool] = []

    async def first_event(event: Any) -> None:
        if not seen:
            seen.append(agent.state.is_streaming)
            # The first place this run gives the loop back (the agent itself need not: a
            # scripted stream and a free emit lock are never waited for).
            await trio.lowlevel.checkpoint()

    agent.subscribe(first_event)
    coro = agent.prompt("hi")
    # Drive the coroutine by hand up to its first suspension point.
    try:
        coro.send(None)
    except StopIteration:
        pass
    assert agent.state.is_streaming
    assert seen == [True]
    coro.close()


async def test_continue_takes_queued_follow_ups_after_an_assistant_reply():
    stream = ScriptedStream(done_only(Text("answer")))
    agent = make_agent(stream, initial_state={"messages": [user("q"), assistant("a")]})
    agent.follow_up(user("and then?"))
    await agent.continue_()
    assert texts(agent.state.messages) == ["q", "a", "and then?", "answer"]
    assert isinstance(agent.state.messages[-1], AssistantMessage)


async def test_continue_keeps_one_at_a_time_steering_from_an_assistant_tail():
    stream = ScriptedStream(done_only(Text("r1")), done_only(Text("r2")))
    agent = make_agent(stream, initial_state={"messages": [user("q"), assistant("a")]})
    agent.steer(user("s1"))
    agent.steer(user("s2"))
    await agent.continue_()
    roles = [type(m).__name__ for m in agent.state.messages[-4:]]
    assert roles == ["UserMessage", "AssistantMessage", "UserMessage", "AssistantMessage"]
    assert texts(agent.state.messages[-4:]) == ["s1", "r1", "s2", "r2"]
    assert len(stream.calls) == 2


async def test_continue_from_assistant_tail_with_nothing_queued_raises():
    agent = make_agent(ScriptedStream(), initial_state={"messages": [user("q"), assistant("a")]})
    with pytest.raises(RuntimeError, match="^Cannot continue from message role: assistant$"):
        await agent.continue_()
    with pytest.raises(RuntimeError, match="^No messages to continue from$"):
        await make_agent(ScriptedStream()).continue_()


async def test_continue_from_a_user_tail_runs_the_loop_continuation():
    stream = ScriptedStream(done_only(Text("late answer")))
    agent = make_agent(stream, initial_state={"messages": [user("q")]})
    await agent.continue_()
    assert texts(agent.state.messages) == ["q", "late answer"]


async def test_session_id_reaches_the_stream_function():
    stream = ScriptedStream(done_only(Text("1")), done_only(Text("2")))
    agent = make_agent(stream, session_id="session-abc")
    await agent.prompt("hi")
    agent.session_id = "session-def"
    await agent.prompt("again")
    assert [c.options.session_id for c in stream.calls] == ["session-abc", "session-def"]


async def test_thinking_level_off_passes_no_reasoning():
    stream = ScriptedStream(done_only(Text("1")), done_only(Text("2")))
    agent = make_agent(stream)
    await agent.prompt("hi")
    agent.set_thinking_level("medium")
    await agent.prompt("again")
    assert [c.options.reasoning for c in stream.calls] == [None, "medium"]


# -- state follows events ---------------------------------------------------------------------


async def test_state_grows_only_at_message_end_and_equals_previous_plus_agent_end():
    stream = ScriptedStream(reply(Call("c1", "echo", {"value": "x"})), reply(Text("done")))
    agent = make_agent(stream, initial_state={"tools": [make_tool()], "messages": [user("earlier")]})
    events: list[Any] = []
    lengths: list[tuple[str, int]] = []
    pending: list[set[str]] = []

    def listener(event: Any) -> None:
        events.append(event)
        lengths.append((event.type, len(agent.state.messages)))
        pending.append(set(agent.state.pending_tool_calls))
        if event.type == "message_update":
            assert agent.state.stream_message is event.message

    agent.subscribe(listener)
    before = list(agent.state.messages)
    await agent.prompt("go")
    check_invariants(events, events[-1].messages)
    grew = [kind for (kind, n), (_, m) in zip(lengths[1:], lengths, strict=False) if n != m]
    assert set(grew) == {"message_end"}
    assert agent.state.messages == before + events[-1].messages
    starts = [i for i, e in enumerate(events) if e.type == "tool_execution_start"]
    ends = [i for i, e in enumerate(events) if e.type == "tool_execution_end"]
    assert pending[starts[0]] == {"c1"} and pending[ends[0]] == set()
    assert agent.state.pending_tool_calls == set() and agent.state.stream_message is None


async def test_before_tool_call_sees_the_assistant_message_in_state():
    agent_ref: list[Agent] = []
    seen: list[bool] = []

    async def before(ctx: Any, signal: Any) -> None:
        seen.append(agent_ref[0].state.messages[-1] is ctx.assistant_message)

    stream = ScriptedStream(reply(Call("c1", "echo", {"value": "x"})), done_only(Text("ok")))
    agent = make_agent(stream, initial_state={"tools": [make_tool()]}, before_tool_call=before)
    agent_ref.append(agent)
    await agent.prompt("go")
    assert seen == [True]


async def test_error_is_cleared_per_run_and_set_from_an_errored_turn():
    stream = ScriptedStream(done_only(Text(""), stop_reason="error", error_message="429 rate limited"), done_only(Text("fine")))
    agent = make_agent(stream)
    await agent.prompt("one")
    assert agent.state.error == "429 rate limited"
    await agent.prompt("two")
    assert agent.state.error is None


async def test_a_raising_listener_fails_the_run_through_the_catch_path():
    agent = make_agent(ScriptedStream(done_only(Text("never seen"))))
    events: list[Any] = []

    def broken(event: Any) -> None:
        if event.type == "message_start" and isinstance(event.message, AssistantMessage):
            raise ValueError("listener broke")

    agent.subscribe(events.append)
    agent.subscribe(broken)
    with trio.fail_after(5):
        await agent.prompt("go")
    last = agent.state.messages[-1]
    assert isinstance(last, AssistantMessage) and last.stop_reason == "error" and last.error_message == "listener broke"
    assert agent.state.error == "listener broke" and not agent.state.is_streaming
    assert events[-1].type == "agent_end" and events[-1].messages == [last]
    assert [e.type for e in events].count("agent_end") == 1


async def test_one_at_a_time_queues_give_each_message_its_own_turn():
    """§3.9: S1, S2 steering and F1 follow-up queued during a tool → turns S1, S2, F1."""
    agent_ref: list[Agent] = []

    async def execute(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> AgentToolResult:
        agent = agent_ref[0]
        agent.steer(user("S1"))
        agent.steer(user("S2"))
        agent.follow_up(user("F1"))
        return AgentToolResult(content=[TextContent(text="tool ok")])

    stream = ScriptedStream(
        reply(Call("c1", "echo", {"value": "x"})), done_only(Text("r1")), done_only(Text("r2")), done_only(Text("r3"))
    )
    agent = make_agent(stream, initial_state={"tools": [make_tool(execute=execute)]})
    agent_ref.append(agent)
    turns: list[list[str]] = []

    def listener(event: Any) -> None:
        if event.type == "turn_start":
            turns.append([])
        elif event.type == "message_end":
            turns[-1].append(texts([event.message])[0])

    agent.subscribe(listener)
    await agent.prompt("go")
    assert turns == [["go", "", "tool ok"], ["S1", "r1"], ["S2", "r2"], ["F1", "r3"]]
    assert len(stream.calls) == 4


async def test_steering_mode_all_drains_the_queue_at_once():
    agent_ref: list[Agent] = []

    async def execute(tool_call_id: str, params: Any, signal: Any, on_update: Any) -> AgentToolResult:
        agent_ref[0].steer(user("S1"))
        agent_ref[0].steer(user("S2"))
        return AgentToolResult(content=[TextContent(text="ok")])

    stream = ScriptedStream(reply(Call("c1", "echo", {"value": "x"})), done_only(Text("r")))
    agent = make_agent(stream, initial_state={"tools": [make_tool(execute=execute)]}, steering_mode="all")
    agent_ref.append(agent)
    await agent.prompt("go")
    assert texts(agent.state.messages)[-3:] == ["S1", "S2", "r"] and len(stream.calls) == 2


async def test_wait_for_idle_and_abort_from_another_task():
    started = trio.Event()
    agent = make_agent(ScriptedStream(until_aborted(Text("long"), started=started)))
    await agent.wait_for_idle()  # idle: returns at once
    async with trio.open_nursery() as nursery:
        nursery.start_soon(agent.prompt, "go")
        await started.wait()
        agent.abort()
        with trio.fail_after(5):
            await agent.wait_for_idle()
        assert not agent.state.is_streaming


async def test_prompt_accepts_a_message_a_list_and_images():
    from pi_actors.ai.types import ImageContent

    stream = ScriptedStream(done_only(Text("1")), done_only(Text("2")), done_only(Text("3")))
    agent = make_agent(stream)
    await agent.prompt("look", images=[ImageContent(data="AAAA", mime_type="image/png")])
    first = agent.state.messages[0]
    assert isinstance(first.content, list) and [type(b).__name__ for b in first.content] == ["TextContent", "ImageContent"]
    await agent.prompt(user("single"))
    await agent.prompt([user("a"), user("b")])
    assert texts(agent.state.messages)[-3:] == ["a", "b", "3"]


async def test_reset_clears_everything_but_does_not_abort():
    agent = make_agent(ScriptedStream(done_only(Text("x"))))
    await agent.prompt("hi")
    agent.steer(user("s"))
    agent.reset()
    s = agent.state
    assert (s.messages, s.is_streaming, s.error, agent.has_queued_messages()) == ([], False, None, False)


async def test_prompt_without_model_refuses():
    with pytest.raises(RuntimeError, match="^No model configured$"):
        await Agent(stream_fn=ScriptedStream()).prompt("hi")


async def test_without_a_stream_function_the_agent_calls_the_llm_layer(start_llm):
    # pi's default streamFn is streamSimple: an Agent built without one calls the model
    # through pi_actors.ai (here the scripted server, through the real SDK).
    server = await start_llm([Reply(text="from the real llm layer")])
    model = Model(id="m", api="openai-completions", provider="scripted", base_url=server.base_url_openai)
    agent = Agent(initial_state={"model": model}, get_api_key=lambda provider: "k")
    await agent.prompt("hi")
    assert agent.state.messages[-1].content[0].text == "from the real llm layer"
    assert not agent.state.is_streaming
