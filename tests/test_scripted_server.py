"""The scripted LLM server itself: script handling, request recording, raw wire shape, CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from pi_actors.testing import Reply, ScriptedLLM, ScriptToolCall, load_script
from pi_actors.testing.wire_formats import anthropic_frames, openai_frames, split_text

ROOT = Path(__file__).resolve().parents[1]


async def raw_post(port: int, path: str, body: dict | bytes, headers: dict | None = None) -> tuple[int, bytes]:
    """One HTTP/1.1 POST over a plain socket; returns (status, decoded body)."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    head = [f"POST {path} HTTP/1.1", f"host: 127.0.0.1:{port}", "content-type: application/json",
            f"content-length: {len(data)}", "connection: close"]
    head += [f"{k}: {v}" for k, v in (headers or {}).items()]
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    async with stream:
        await stream.send_all(("\r\n".join(head) + "\r\n\r\n").encode() + data)
        raw = b""
        while chunk := await stream.receive_some(65536):
            raw += chunk
    header, _, payload = raw.partition(b"\r\n\r\n")
    status = int(header.split(b" ", 2)[1])
    if b"transfer-encoding: chunked" in header.lower():
        out = b""
        while payload:
            size_line, _, payload = payload.partition(b"\r\n")
            size = int(size_line, 16)
            if size == 0:
                break
            out, payload = out + payload[:size], payload[size + 2:]
        payload = out
    return status, payload


def sse_data(payload: bytes) -> list[tuple[str | None, str]]:
    events = []
    for block in payload.decode().split("\n\n"):
        if not block.strip():
            continue
        name = None
        data = []
        for line in block.split("\n"):
            if line.startswith("event: "):
                name = line[7:]
            elif line.startswith("data: "):
                data.append(line[6:])
        events.append((name, "\n".join(data)))
    return events


@pytest.fixture
def start_llm(nursery):
    async def start(replies) -> ScriptedLLM:
        server = ScriptedLLM(replies)
        await nursery.start(server.serve)
        return server

    return start


async def test_replies_are_served_in_order_then_the_script_is_exhausted(start_llm):
    server = await start_llm([Reply(text="first"), Reply(status=429)])
    status, body = await raw_post(server.port, "/v1/chat/completions", {"model": "m", "messages": []})
    assert status == 200
    events = sse_data(body)
    assert events[-1] == (None, "[DONE]")
    text = "".join(json.loads(d)["choices"][0]["delta"].get("content") or "" for _, d in events[:-1]
                   if json.loads(d)["choices"])
    assert text == "first"
    status, body = await raw_post(server.port, "/v1/chat/completions", {"model": "m"})
    assert status == 429
    status, body = await raw_post(server.port, "/v1/messages", {"model": "m"})
    assert status == 500 and json.loads(body)["error"]["message"] == "script exhausted"


async def test_every_request_is_recorded_with_path_headers_and_body(start_llm):
    server = await start_llm([Reply(text="x")])
    await raw_post(server.port, "/v1/messages", {"model": "claude", "max_tokens": 5}, {"x-api-key": "secret"})
    await raw_post(server.port, "/elsewhere", b"not json")
    first, second = server.requests
    assert first["path"] == "/v1/messages" and first["headers"]["x-api-key"] == "secret"
    assert first["body"] == {"model": "claude", "max_tokens": 5}
    assert second["path"] == "/elsewhere" and second["body"] is None


async def test_unknown_paths_get_404(start_llm):
    server = await start_llm([])
    status, _ = await raw_post(server.port, "/v1/embeddings", {})
    assert status == 404


async def test_a_callable_script_sees_the_request_body(start_llm):
    server = await start_llm(lambda body: Reply(text=f"echo {body['messages'][-1]['content']}"))
    status, payload = await raw_post(server.port, "/v1/messages", {"model": "m", "messages": [
        {"role": "user", "content": "ping"}]})
    deltas = [json.loads(d)["delta"] for name, d in sse_data(payload) if name == "content_block_delta"]
    assert status == 200 and "".join(d["text"] for d in deltas) == "echo ping"


async def test_anthropic_stream_has_the_full_event_sequence(start_llm):
    server = await start_llm([Reply(thinking="t", text="x", tool_calls=[ScriptToolCall(name="f")])])
    _, payload = await raw_post(server.port, "/v1/messages", {"model": "m"})
    names = [name for name, _ in sse_data(payload)]
    assert names[:2] == ["message_start", "ping"] and names[-2:] == ["message_delta", "message_stop"]
    assert names.count("content_block_start") == names.count("content_block_stop") == 3


async def test_error_bodies_verbatim_json_or_provider_shaped(start_llm):
    server = await start_llm([Reply(status=502, error_body="<html>bad</html>"),
                              Reply(status=400, error_body={"custom": 1}),
                              Reply(status=401)])
    assert await raw_post(server.port, "/v1/messages", {}) == (502, b"<html>bad</html>")
    assert await raw_post(server.port, "/v1/messages", {}) == (400, b'{"custom": 1}')
    status, body = await raw_post(server.port, "/v1/messages", {})
    assert status == 401 and json.loads(body)["error"]["type"] == "authentication_error"


def test_replies_load_from_json():
    reply = msgspec.convert({"text": "hi", "tool_calls": [{"name": "f", "arguments": {"a": 1}}],
                             "usage": {"input": 5}, "stop_reason": "length"}, Reply)
    assert reply.tool_calls[0].arguments == {"a": 1} and reply.usage.input == 5 and reply.chunks == 3


def test_load_script_accepts_a_list_or_an_object(tmp_path):
    a = tmp_path / "a.json"
    a.write_text(json.dumps([{"text": "one"}]))
    b = tmp_path / "b.json"
    b.write_text(json.dumps({"replies": [{"text": "two"}], "cycle": True}))
    assert load_script(str(a)) == ([Reply(text="one")], False)
    assert load_script(str(b)) == ([Reply(text="two")], True)


def test_split_text_covers_the_text_in_order():
    assert split_text("abcdefg", 3) == ["abc", "de", "fg"]
    assert split_text("ab", 5) == ["a", "b"]
    assert split_text("", 3) == []


@settings(max_examples=100, deadline=None)
@given(text=st.one_of(st.none(), st.text(min_size=1, max_size=40)),
       thinking=st.one_of(st.none(), st.text(min_size=1, max_size=40)),
       args=st.lists(st.dictionaries(st.text(max_size=5), st.integers() | st.text(max_size=5), max_size=3),
                     max_size=3),
       chunks=st.integers(min_value=1, max_value=8))
def test_generated_frames_carry_exactly_the_scripted_content(text, thinking, args, chunks):
    reply = Reply(text=text, thinking=thinking, chunks=chunks,
                  tool_calls=[ScriptToolCall(name=f"t{i}", arguments=a, chunks=chunks) for i, a in enumerate(args)])
    frames = openai_frames(reply, "m")
    chunks_json = [json.loads(d) for _, d in sse_data(b"".join(frames.content + frames.closing)) if d != "[DONE]"]
    deltas = [c["choices"][0]["delta"] for c in chunks_json if c["choices"]]
    assert "".join(d.get("content") or "" for d in deltas) == (text or "")
    assert "".join(d.get("reasoning_content") or "" for d in deltas) == (thinking or "")
    calls: dict[int, str] = {}
    for d in deltas:
        for tc in d.get("tool_calls") or []:
            calls[tc["index"]] = calls.get(tc["index"], "") + tc["function"]["arguments"]
    assert [json.loads(calls[i]) for i in sorted(calls)] == args

    frames = anthropic_frames(reply, "m")
    events = [(n, json.loads(d)) for n, d in sse_data(b"".join(frames.content + frames.closing))]
    assert all(n == d["type"] for n, d in events)
    texts: dict[int, str] = {}
    for _, d in events:
        if d["type"] == "content_block_delta":
            delta = d["delta"]
            piece = delta.get("text") or delta.get("thinking") or delta.get("partial_json") or ""
            texts[d["index"]] = texts.get(d["index"], "") + piece
    expected = ([thinking] if thinking is not None else []) + ([text] if text is not None else [])
    expected += [json.dumps(a, ensure_ascii=False) for a in args]
    assert [texts.get(i, "") for i in range(len(expected))] == expected


def test_command_line_prints_the_port_and_serves(tmp_path):
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"replies": [{"text": "from the cli"}], "cycle": True}))
    proc = subprocess.Popen([sys.executable, "-m", "pi_actors.testing.scripted_server", "--script", str(script)],
                            stdout=subprocess.PIPE, text=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT),
                                                                            "PATH": "/usr/bin:/bin"})
    try:
        port = int(proc.stdout.readline())

        async def two_requests():
            for _ in range(2):
                status, payload = await raw_post(port, "/v1/chat/completions", {"model": "m"})
                assert status == 200 and b"from" in payload  # the text arrives split into deltas

        trio.run(two_requests)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


async def test_a_reply_list_is_read_live_so_tests_can_append(start_llm):
    script: list[Reply] = []
    server = await start_llm(script)
    script.append(Reply(text="late", chunks=1))
    status, payload = await raw_post(server.port, "/v1/chat/completions", {"model": "m"})
    assert status == 200 and b'"content": "late"' in payload


async def test_a_raising_script_callable_is_answered_with_500(start_llm):
    def broken(body):
        raise KeyError("no such turn")

    server = await start_llm(broken)
    status, payload = await raw_post(server.port, "/v1/messages", {"model": "m"})
    assert status == 500 and b"no such turn" in payload


async def test_the_end_of_each_complete_reply_is_reported_once_with_its_request(nursery):
    done: list[dict] = []
    replied = trio.Event()

    def on_replied(record: dict) -> None:
        done.append(record)
        replied.set()

    server = ScriptedLLM([Reply(text="whole"), Reply(text="cut", truncate=True)], on_replied=on_replied)
    await nursery.start(server.serve)
    await raw_post(server.port, "/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "one"}]})
    with trio.fail_after(5):
        await replied.wait()
    assert done == [server.requests[0]]
    assert isinstance(done[0]["received"], float)
    await raw_post(server.port, "/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": "two"}]})
    await server.wait_requests(2)
    await trio.testing.wait_all_tasks_blocked()
    assert done == [server.requests[0]], "a reply dropped mid-body is not a reply written to its end"
