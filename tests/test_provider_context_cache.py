"""The provider keeps each session's context: after the first request of a session, the
coordinator sends only the messages appended since, while the model still gets the whole
conversation; whenever the two ends could disagree (restarted provider, compaction, branch
switch, a caller naming a base the provider lacks) the context goes whole, once.

Observed in the JSON log (the provider's ``stream_start`` says ``received``/``reused``, a
refused base is ``stream_refused``, the coordinator's resend is ``context_resent``) and in the
request bodies the scripted server received."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st
from support.prompts import send_prompt
from support.providers import call_stream, plain_model, provider_peer

from pi_actors.actors import open_local_runtime
from pi_actors.actors._context_cache import STALE_CONTEXT, ContextCache, ContextSender, IncrementalConversion
from pi_actors.ai import types as T
from pi_actors.cli.main import runtime_config
from pi_actors.coding.messages import convert_to_llm
from pi_actors.runtime import RemoteError, RestartPolicy
from pi_actors.testing import Reply, ScriptToolCall

SUMMARY = "## Goal\nShip it\n\n## Constraints & Preferences\n(none)\n\n## Progress\n### Done\n- [x] talked\n"


class _Quiet:
    def event(self, event: dict) -> None:
        pass


def _config(server: Any, tmp_path: Path, log: Path, *, session: bool = False, tools: tuple[str, ...] = ()) -> Any:
    model = T.Model(id="scripted-model", api="openai-completions", provider="scripted", base_url=server.base_url_openai)
    return runtime_config(
        settings={"retry": {"enabled": False}},
        model=model,
        thinking="off",
        tools=list(tools),
        cwd=str(tmp_path),
        system_prompt="cache test",
        agent_dir=str(tmp_path),
        no_session=not session,
        session={"sessionDir": str(tmp_path / "sessions"), "agentDir": str(tmp_path)} if session else None,
        runtime_keys={"scripted": "k"},
        key_sources={},
        log_file=str(log),
    )


def _log(path: Path, event: str, actor: str | None = None) -> list[dict]:
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return [line for line in lines if line["event"] == event and (actor is None or line["actor"] == actor)]


def _starts(path: Path) -> list[tuple[int, int]]:
    """(received, reused) of every stream the provider started, in order."""
    return [(line["received"], line["reused"]) for line in _log(path, "stream_start", "provider")]


def _texts(request: dict) -> list[str]:
    """The conversation the model was sent (system prompt left out), one text per message."""
    out = []
    for m in request["body"]["messages"][1:]:
        content = m.get("content")
        if isinstance(content, list):
            content = " ".join(p.get("text", "") for p in content)
        out.append(content if content else ",".join(c["function"]["arguments"] for c in m.get("tool_calls", [])))
    return out


async def _run_bash_turns(scripted: Any, env: Any, turns: int) -> tuple[Any, Any]:
    """A `-p` run of ``turns`` bash calls, then a final text, logged; returns the finished
    process and the log's path (the run must have succeeded)."""
    scripted.script += [Reply(tool_calls=[ScriptToolCall(name="bash", arguments={"command": f"echo out-{n}"})]) for n in range(turns)]
    scripted.script.append(Reply(text="all done"))
    log = env.work / "run.log"
    done = await env.run("--model", "scripted/scripted-model", "--session-dir", str(env.sessions), "--log-file", str(log), "-p", "go")
    assert done.returncode == 0, done.stderr.decode()
    return done, log


async def test_later_turns_send_only_new_messages_while_the_model_sees_the_whole_conversation(scripted, env):
    turns = 4
    done, log = await _run_bash_turns(scripted, env, turns)
    assert "all done" in done.stdout.decode()
    # The first request carries the prompt; each later one only the tool call and its result.
    assert _starts(log) == [(1, 0)] + [(2, 2 * k - 1) for k in range(1, turns + 1)]
    # ... and the model was still sent everything, each time.
    assert [len(r["body"]["messages"]) for r in scripted.requests] == [2 + 2 * k for k in range(turns + 1)]
    last = _texts(scripted.requests[-1])
    assert last[0] == "go" and all(any(f"out-{n}" in t for t in last) for n in range(turns))
    assert not _log(log, "stream_refused") and not _log(log, "context_resent")


async def test_a_restarted_provider_refuses_the_old_base_and_gets_the_whole_context_once(scripted, tmp_path):
    scripted.script += [Reply(text="A"), Reply(text="B"), Reply(text="C")]
    log = tmp_path / "run.log"
    processes: dict = {}
    policy = RestartPolicy(heartbeat_interval=0.1, heartbeat_timeout=1.5, max_restarts=20)
    with trio.fail_after(60):
        async with open_local_runtime(_config(scripted, tmp_path, log), processes=processes, policy=policy) as coordinator:
            await send_prompt(coordinator, "one", _Quiet())
            processes["provider"].kill()
            await coordinator.wait_note("provider restarted", 1)
            await send_prompt(coordinator, "two", _Quiet())
            await send_prompt(coordinator, "three", _Quiet())
    refused = _log(log, "stream_refused", "provider")
    assert [r["code"] for r in refused] == [STALE_CONTEXT]
    assert len(_log(log, "context_resent", "coordinator")) == 1
    # Refused before anything reached the model; resent whole (3 messages); then deltas again.
    assert _starts(log) == [(1, 0), (3, 0), (2, 3)]
    assert len(scripted.requests) == 3
    assert _texts(scripted.requests[1]) == ["one", "A", "two"]
    assert _texts(scripted.requests[2]) == ["one", "A", "two", "B", "three"]


def _frame(request: dict) -> tuple[Any, Any]:
    """The system prompt and the tools a request to the model carried."""
    body = request["body"]
    return body["messages"][0], body.get("tools")


async def test_later_turns_leave_out_the_system_prompt_and_tools_while_the_model_gets_them_every_time(scripted, env):
    turns = 4
    done, log = await _run_bash_turns(scripted, env, turns)
    sent = [line["bytes"] for line in _log(log, "stream_start", "provider")]
    first = _frame(scripted.requests[0])
    assert first[0]["role"] == "system" and len(first[1]) == 4  # the default tools: read, bash, edit, write
    tools_bytes = len(json.dumps(first[1]))
    assert tools_bytes > 2000
    # The first request carries the system prompt and the tools' schemas; the later ones do not ...
    assert all(later < sent[0] - tools_bytes for later in sent[1:]), sent
    # ... and the model was sent both with every request.
    assert all(_frame(r) == first for r in scripted.requests), [_frame(r) for r in scripted.requests]
    assert len(scripted.requests) == turns + 1


async def test_a_restarted_provider_gets_the_system_prompt_and_tools_again(scripted, tmp_path):
    scripted.script += [Reply(text="A"), Reply(text="B"), Reply(text="C")]
    log = tmp_path / "run.log"
    processes: dict = {}
    policy = RestartPolicy(heartbeat_interval=0.1, heartbeat_timeout=1.5, max_restarts=20)
    with trio.fail_after(60):
        config = _config(scripted, tmp_path, log, tools=("read", "bash"))
        async with open_local_runtime(config, processes=processes, policy=policy) as coordinator:
            await send_prompt(coordinator, "one", _Quiet())
            await send_prompt(coordinator, "two", _Quiet())
            processes["provider"].kill()
            await coordinator.wait_note("provider restarted", 1)
            await send_prompt(coordinator, "three", _Quiet())
    assert len(scripted.requests) == 3
    first = _frame(scripted.requests[0])
    assert first[0] == {"role": "system", "content": "cache test"} and [t["function"]["name"] for t in first[1]] == ["read", "bash"]
    assert all(_frame(r) == first for r in scripted.requests)
    # The delta before the restart left the frame out; the restarted provider refused the
    # next delta, which was resent whole, frame included.
    starts = _log(log, "stream_start", "provider")
    assert [(s["received"], s["reused"]) for s in starts] == [(1, 0), (2, 1), (5, 0)]
    assert starts[1]["bytes"] < starts[0]["bytes"] < starts[2]["bytes"]
    assert [r["code"] for r in _log(log, "stream_refused", "provider")] == [STALE_CONTEXT]


async def test_compaction_sends_the_compacted_context_whole_once_then_deltas_again(scripted, tmp_path):
    scripted.script += [Reply(text="one"), Reply(text="two"), Reply(text=SUMMARY), Reply(text="3"), Reply(text="4")]
    log = tmp_path / "run.log"
    with trio.fail_after(60):
        async with open_local_runtime(_config(scripted, tmp_path, log, session=True)) as coordinator:
            await send_prompt(coordinator, "first", _Quiet())
            await send_prompt(coordinator, "second", _Quiet())
            await coordinator.call("compact", {})
            await send_prompt(coordinator, "third", _Quiet())
            await send_prompt(coordinator, "fourth", _Quiet())
    starts = _starts(log)
    # first, second (delta), the summary request and "third" whole, then "fourth" as a delta
    assert starts[:2] == [(1, 0), (2, 1)]
    assert starts[2][1] == 0 and starts[3][1] == 0 and starts[4] == (2, starts[3][0])
    assert _texts(scripted.requests[3])[0].startswith("The conversation history before this point was compacted")
    assert _texts(scripted.requests[4])[0] == _texts(scripted.requests[3])[0]
    assert _texts(scripted.requests[4])[-3:] == ["third", "3", "fourth"]
    assert not _log(log, "stream_refused")  # the coordinator saw the mismatch itself


async def test_navigating_the_tree_sends_the_new_branch_whole_never_a_wrong_delta(scripted, tmp_path):
    scripted.script += [Reply(text="A1"), Reply(text="A2"), Reply(text="B2"), Reply(text="B3")]
    log = tmp_path / "run.log"
    with trio.fail_after(60):
        async with open_local_runtime(_config(scripted, tmp_path, log, session=True)) as coordinator:
            await send_prompt(coordinator, "first", _Quiet())
            await send_prompt(coordinator, "second", _Quiet())
            tree = await coordinator.call("tree")
            second = next(
                e for e in tree["entries"] if e["type"] == "message" and e["message"]["content"] == [{"type": "text", "text": "second"}]
            )
            await coordinator.call("navigate", {"targetId": second["id"]})
            await send_prompt(coordinator, "second, differently", _Quiet())
            await send_prompt(coordinator, "third", _Quiet())
    assert _starts(log) == [(1, 0), (2, 1), (3, 0), (2, 3)]
    assert _texts(scripted.requests[2]) == ["first", "A1", "second, differently"]
    assert _texts(scripted.requests[3]) == ["first", "A1", "second, differently", "B2", "third"]


def _user(text: str) -> dict:
    return T.to_plain(T.UserMessage(content=text, timestamp=1))


async def test_a_caller_naming_a_base_the_provider_lacks_is_refused_and_nothing_reaches_the_model(start_llm):
    server = await start_llm([Reply(text="first"), Reply(text="second")])
    model = plain_model(server)

    def args(messages: list[str], **cached: Any) -> dict:
        return {"model": model, "context": {"messages": [_user(m) for m in messages]}, "cached": cached}

    async with provider_peer({"runtime_api_keys": {"scripted": "k"}}) as peer:
        for bad in (
            {"key": "s:1", "version": 2, "baseVersion": 1, "baseCount": 1},  # nothing kept at all
        ):
            with pytest.raises(RemoteError) as info:
                await call_stream(peer, args(["appended"], **bad))
            assert info.value.code == STALE_CONTEXT
        _, final, _ = await call_stream(peer, args(["hello"], key="s:1", version=1))
        assert final.stop_reason == "stop", final.error_message
        for bad in (
            {"key": "s:2", "version": 2, "baseVersion": 1, "baseCount": 1},  # another key
            {"key": "s:1", "version": 2, "baseVersion": 7, "baseCount": 1},  # another version
            {"key": "s:1", "version": 2, "baseVersion": 1, "baseCount": 3},  # another length
            {"key": "s:1", "version": 2, "baseVersion": 1, "baseCount": 0},
        ):
            with pytest.raises(RemoteError) as info:
                await call_stream(peer, args(["appended"], **bad))
            assert info.value.code == STALE_CONTEXT, bad
        with pytest.raises(RemoteError) as info:  # the frame of a base it does not name
            await call_stream(peer, args(["appended"], key="s:1", version=2, keepFrame=True))
        assert info.value.code == STALE_CONTEXT
        assert len(server.requests) == 1
        # A refusal keeps nothing: the right base still works, and the model gets it all.
        await call_stream(peer, args(["more"], key="s:1", version=2, baseVersion=1, baseCount=1))
    assert [m["content"] for m in server.requests[1]["body"]["messages"]] == ["hello", "more"]


@st.composite
def _histories(draw: Any) -> list[tuple[str, Any]]:
    """Steps a session's transcript can take between requests, and provider restarts."""
    ops = st.one_of(
        st.tuples(st.just("append"), st.integers(0, 3)),
        st.tuples(st.just("drop"), st.integers(1, 3)),  # a retry dropping the failed reply
        st.tuples(st.just("replace"), st.integers(0, 4)),  # compaction, branch switch
        st.tuples(st.just("rebuild"), st.integers(0, 0)),  # equal but new objects (convert_to_llm)
        st.tuples(st.just("restart"), st.integers(0, 0)),  # a fresh provider
        st.tuples(st.just("session"), st.integers(0, 0)),  # another session id
        st.tuples(st.just("reframe"), st.integers(0, 2)),  # another system prompt or tools
    )
    return draw(st.lists(ops, max_size=30))


@settings(max_examples=200, deadline=None)
@given(_histories())
def test_whatever_happens_between_requests_the_provider_rebuilds_exactly_the_senders_messages(history):
    sender, cache = ContextSender(), ContextCache(capacity=2)
    messages: list[Any] = []
    session, counter = "s", 0
    frame: tuple[Any, Any] = ("prompt", [T.Tool(name="t", description="d", parameters={"type": "object"})])

    def resolve(sent: list[Any], label: Any) -> T.Context:
        if label.keep_frame:  # what the coordinator leaves out
            return cache.resolve_context(label, T.Context(messages=sent))
        return cache.resolve_context(label, T.Context(system_prompt=frame[0], messages=sent, tools=frame[1]))

    def new(n: int) -> list[Any]:
        nonlocal counter
        counter += n
        return [T.UserMessage(content=f"m{counter - i}", timestamp=1) for i in range(n)]

    for op, n in history:
        if op == "append":
            messages = messages + new(n)
        elif op == "drop":
            messages = messages[:-n]
        elif op == "replace":
            messages = new(n)
        elif op == "rebuild":
            messages = [T.UserMessage(content=m.content, timestamp=m.timestamp) for m in messages]
        elif op == "restart":
            cache = ContextCache(capacity=2)
        elif op == "reframe":  # equal but new objects (n=0), or another prompt / tool
            tools = [T.Tool(name=t.name, description=t.description, parameters=dict(t.parameters)) for t in frame[1]]
            frame = (frame[0] + "!" * (n == 1), tools + [T.Tool(name=f"t{len(tools)}", description="", parameters={})] * (n == 2))
        else:
            session += "x"
        sent, label = sender.plan(session, messages, frame)
        try:
            full = resolve(sent, label)
        except RemoteError as exc:
            assert exc.code == STALE_CONTEXT and label.base_version is not None
            sender.forget()
            sent, label = sender.plan(session, messages, frame)
            assert label.base_version is None and not label.keep_frame  # the resend is whole: no second refusal
            full = resolve(sent, label)
        assert full.messages == messages
        assert (full.system_prompt, full.tools) == frame


async def test_the_bytes_a_turn_sends_to_the_provider_stay_flat_while_the_context_grows(scripted, env):
    # Each turn adds ~2 kB of bash output to the context. The model must get the whole,
    # growing context every time; the coordinator–provider link carries only the new turn.
    turns = 10
    command = "head -c 2000 /dev/zero | tr '\\0' x; echo {n}"
    scripted.script += [Reply(tool_calls=[ScriptToolCall(name="bash", arguments={"command": command.format(n=n)})]) for n in range(turns)]
    scripted.script.append(Reply(text="all done"))
    log = env.work / "run.log"
    done = await env.run("--model", "scripted/scripted-model", "--session-dir", str(env.sessions), "--log-file", str(log), "-p", "go")
    assert done.returncode == 0, done.stderr.decode()
    sent = [line["bytes"] for line in _log(log, "stream_start", "provider")]
    to_model = [len(json.dumps(r["body"])) for r in scripted.requests]
    assert len(sent) == len(to_model) == turns + 1
    grows_by = (to_model[-1] - to_model[1]) / (turns - 1)
    assert grows_by > 2000, to_model  # what the model is sent grows by a turn's output each turn
    # ... while every request after the first costs the link the same, give or take a few bytes
    # of numbering: far less than one turn's growth (sending the context whole would add it).
    later = sent[1:]
    assert max(later) - min(later) < grows_by / 4, sent
    assert max(later) < sent[0] + 2 * grows_by, sent


@st.composite
def _transcripts(draw: Any) -> list[tuple[str, int]]:
    """Steps of a transcript between two conversions: appends of any kind of entry (some
    convert to nothing), drops, replacements, equal-but-rebuilt lists."""
    ops = st.one_of(
        st.tuples(st.just("append"), st.integers(0, 4)),
        st.tuples(st.just("drop"), st.integers(1, 3)),
        st.tuples(st.just("replace"), st.integers(0, 5)),
        st.tuples(st.just("rebuild"), st.integers(0, 0)),
    )
    return draw(st.lists(ops, max_size=25))


def _entry(n: int) -> Any:
    kinds = [
        lambda: T.UserMessage(content=f"u{n}", timestamp=n),
        lambda: {"role": "bashExecution", "command": f"echo {n}", "output": str(n), "exitCode": 0, "timestamp": n},
        lambda: {"role": "bashExecution", "command": "x", "output": "", "excludeFromContext": True, "timestamp": n},
        lambda: {"role": "custom", "customType": "note", "content": f"c{n}", "display": True, "timestamp": n},
        lambda: {"role": "compactionSummary", "summary": f"s{n}", "tokensBefore": 1, "timestamp": n},
        lambda: {"role": "unknown-kind", "timestamp": n},
    ]
    return kinds[n % len(kinds)]()


@settings(max_examples=200, deadline=None)
@given(_transcripts())
def test_the_transcript_converted_turn_by_turn_is_what_converting_it_whole_gives(steps):
    convert = IncrementalConversion(convert_to_llm)
    messages: list[Any] = []
    counter = 0
    for op, n in steps:
        if op == "append":
            messages = messages + [_entry(counter + i) for i in range(n)]
            counter += n
        elif op == "drop":
            messages = messages[:-n]
        elif op == "replace":
            messages = [_entry(counter + i) for i in range(n)]
            counter += n
        else:
            messages = [dict(m) if isinstance(m, dict) else T.UserMessage(content=m.content, timestamp=m.timestamp) for m in messages]
        assert convert(messages) == convert_to_llm(messages)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.tuples(st.just("append"), st.integers(0, 3)),  # the loop's appends
            st.tuples(st.just("last"), st.integers(0, 0)),  # the streamed reply replaced by its final form
            st.tuples(st.just("set"), st.integers(0, 50)),  # a message replaced anywhere (a context hook)
            st.tuples(st.just("first"), st.integers(0, 0)),  # one put in front (a compaction summary)
            st.tuples(st.just("drop"), st.integers(1, 3)),
        ),
        max_size=25,
    )
)
def test_a_transcript_changed_in_place_between_conversions_converts_as_a_whole(steps):
    # The agent loop hands over its working list and then changes that very list (appends,
    # the last message replaced, and a context hook may replace any message): the
    # conversion must notice every change since the previous call, not only new lengths.
    convert = IncrementalConversion(convert_to_llm)
    messages: list[Any] = []
    counter = 0
    for op, n in steps:
        counter += 1
        if op == "append":
            messages.extend(_entry(counter * 10 + i) for i in range(n))
        elif op == "last" and messages:
            messages[-1] = _entry(counter * 10)
        elif op == "set" and messages:
            messages[n % len(messages)] = _entry(counter * 10)
        elif op == "first":
            messages.insert(0, _entry(counter * 10))
        elif op == "drop":
            del messages[-n:]
        converted = convert(messages)
        assert converted == convert_to_llm(messages)
        assert converted is not messages
