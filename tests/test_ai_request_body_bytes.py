"""The request body the OpenAI providers send is encoded by msgspec, not the SDK's ``json``
(a third of the provider's time per request at 300 turns): the bytes on the wire must be the
ones the SDK's own encoder gives for the same body — compact, UTF-8 unescaped, keys in order."""

from __future__ import annotations

import json

import pytest
import trio
from openai._utils._json import openapi_dumps
from support.providers import OPENAI, model_for

from pi_actors import ai
from pi_actors.testing import Reply, ScriptedLLM


def _context() -> ai.Context:
    call = ai.ToolCall(id="call_1", name="bash", arguments={"command": "printf 'é\\u2028\"\\\\/ 日本'", "n": 2.5})
    return ai.Context(
        system_prompt="Be terse — “quoted” ünïcode\ttab\x01control",
        messages=[
            ai.UserMessage(content="run it: \u2028 \U0001f600 </script>", timestamp=1),
            ai.AssistantMessage(content=[ai.TextContent(text="ok"), call], api="openai-completions", provider="openai",
                                model="test-model", usage=ai.Usage(), stop_reason="toolUse", timestamp=2),
            ai.ToolResultMessage(tool_call_id="call_1", tool_name="bash", content=[ai.TextContent(text="é 日本\n")],
                                 is_error=False, timestamp=3),
        ],
        tools=[ai.Tool(name="bash", description="Run a command", parameters={"type": "object", "properties": {"command": {"type": "string"}}})],
    )


async def _ignore(event: object) -> None:
    pass


@pytest.mark.parametrize("api", OPENAI)
async def test_the_request_body_is_the_json_the_sdk_itself_would_send(api):
    server = ScriptedLLM([Reply(text="done")])
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        final = await ai.stream(model_for(api, server), _context(), ai.StreamOptions(api_key="sk-test"), _ignore)
        nursery.cancel_scope.cancel()
    assert final.stop_reason == "stop"
    request = server.requests[-1]
    raw = request["raw"]
    assert raw == openapi_dumps(json.loads(raw))  # byte for byte the SDK encoder's output
    assert request["headers"]["content-type"] == "application/json"
    assert "日本" in raw.decode("utf-8") and "\U0001f600" in raw.decode("utf-8")  # unescaped, as the SDK sends it
