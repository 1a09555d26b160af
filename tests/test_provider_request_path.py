"""The chat-completions request path (``openai_completions._post``): what the model gets, and
the response's release when a call fails after the response was opened.

Real SDK clients against the scripted server on 127.0.0.1.
"""

from __future__ import annotations

import socket
import struct

import httpx2
import pytest
import trio
from support.providers import hello_context

from pi_actors import ai
from pi_actors.ai.providers import openai_completions as oc
from pi_actors.ai.providers._common import reuse_clients
from pi_actors.ai.providers.openai_compat import get_compat
from pi_actors.testing import Reply

pytestmark = pytest.mark.trio


def _model(server, **kw) -> ai.Model:
    return ai.Model(id="gpt-test", api=oc.API, provider="openai", base_url=server.base_url_openai,
                    headers={"X-From-Model": "m"}, **kw)


def _tool_context() -> ai.Context:
    tool = ai.Tool(name="bash", description="Run a command.",
                   parameters={"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]})
    return hello_context(tools=[tool])


async def _ignore(_event) -> None:
    pass


@pytest.mark.parametrize("options", [
    ai.StreamOptions(api_key="sk-a"),
    ai.StreamOptions(api_key="sk-b", max_tokens=50, temperature=0.25, headers={"X-Call": "c"},
                     extra={"tool_choice": "auto"}),
], ids=["plain", "with-options"])
async def test_the_model_gets_the_request_the_sdks_own_create_sends(start_llm, options):
    """The same body, and the same headers, as ``chat.completions.create`` with the same
    arguments on the same client (nothing of our own added or missing); the body's keys in
    the order our requests always had (``model``, ``stream``, then as built)."""
    server = await start_llm([Reply(text="one"), Reply(text="two")])
    model, context = _model(server, max_tokens=100), _tool_context()
    result = await ai.stream(model, context, options, _ignore)
    assert result.stop_reason == "stop" and result.content[0].text == "one"

    params = oc.build_params(model, context, options, get_compat(model))
    client = oc.make_client(model, options, options.api_key)
    try:
        stream = await client.chat.completions.create(**params)
        async for _chunk in stream:
            pass
    finally:
        await client.close()

    ours, sdks = server.requests
    assert ours["body"] == sdks["body"]
    assert ours["raw"].startswith(b'{"model":"gpt-test","stream":true,"messages":[')
    drop = {"host"}  # the client's own connection
    assert {k: v for k, v in ours["headers"].items() if k not in drop} == \
        {k: v for k, v in sdks["headers"].items() if k not in drop}
    assert ours["headers"]["authorization"] == f"Bearer {options.api_key}"
    assert ours["headers"]["x-from-model"] == "m"


@pytest.mark.parametrize("api", [oc.API, "mistral-conversations"])
async def test_a_response_whose_call_fails_at_its_start_is_closed_while_clients_are_kept(start_llm, api):
    """The response was opened, then the call failed before its body was read (here: the
    ``start`` event's handler raised): the HTTP response is closed at once — the server sees
    the connection go — though the client and its pool live on (``reuse_clients``)."""
    server = await start_llm([Reply(text="never read", hang_after_start=True)])
    if api == oc.API:
        model = _model(server)
    else:
        model = ai.Model(id="magistral-medium-latest", api=api, provider="mistral", base_url=server.base_url_mistral)

    async def fail_at_start(event) -> None:
        if type(event).__name__ == "StartEvent":
            raise RuntimeError("the consumer went away")

    async with reuse_clients():
        with trio.fail_after(20):
            result = await ai.stream(model, hello_context(), ai.StreamOptions(api_key="k"), fail_at_start)
        assert result.stop_reason == "error" and "the consumer went away" in (result.error_message or "")
        with trio.fail_after(10):
            await server.wait_hung_up(1)  # closed by the call, not by the kept client's end


def _data_segments_sent(sock) -> int:
    """``tcpi_data_segs_out`` of a connected TCP socket (Linux ``struct tcp_info``)."""
    info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 256)
    return struct.unpack_from("I", info, 156)[0]


@pytest.mark.parametrize("api", [oc.API, "anthropic-messages"])
async def test_each_request_leaves_in_one_tcp_segment(start_llm, api):
    """Head and body in one write, so one data segment per request (as Node's client sends
    it), not one for the head and one for the body; the connection is kept for the next."""
    server = await start_llm([Reply(text="one"), Reply(text="two"), Reply(text="three")])
    options = ai.StreamOptions(api_key="k")
    if api == oc.API:
        model = _model(server)
        body = oc._wire_body(oc.build_params(model, _tool_context(), options, get_compat(model)))
        client, path = oc.make_client(model, options, "k"), "/chat/completions"
    else:
        from pi_actors.ai.providers import anthropic_messages as am

        model = ai.Model(id="claude-test", api=api, provider="anthropic", base_url=server.base_url_anthropic)
        body = {"model": model.id, "max_tokens": 100, "stream": True, "messages": [{"role": "user", "content": "hi"}]}
        client, path = am._make_client(model, options, "k", False), "/v1/messages"
    try:
        sockets, sent = [], []
        for _ in range(3):
            response = await client.post(path, cast_to=httpx2.Response, body=body, stream=True)
            try:
                sock = response.extensions["network_stream"].get_extra_info("socket")
                sockets.append(sock)
                sent.append(_data_segments_sent(sock))
                await response.aread()
            finally:
                await response.aclose()
    finally:
        await client.close()
    assert len(server.requests) == 3 and server.requests[2]["body"] == server.requests[0]["body"]
    assert sockets[0] is sockets[1] is sockets[2]  # one kept-alive connection
    assert [sent[1] - sent[0], sent[2] - sent[1]] == [1, 1]


async def test_a_client_whose_base_url_changes_sends_its_next_request_to_the_new_one(start_llm):
    """The prepared URL kept between requests is for one base URL only."""
    first = await start_llm([Reply(text="one"), Reply(text="two")])
    second = await start_llm([Reply(text="three")])
    model, options = _model(first), ai.StreamOptions(api_key="k")
    body = oc._wire_body(oc.build_params(model, hello_context(), options, get_compat(model)))
    client = oc.make_client(model, options, "k")
    try:
        for where in (first, first, second):
            client.base_url = where.base_url_openai
            response = await oc._post(client, body)
            await response.aread()
            await response.aclose()
    finally:
        await client.close()
    assert [r["path"] for r in first.requests] == ["/v1/chat/completions"] * 2
    assert [r["path"] for r in second.requests] == ["/v1/chat/completions"]
