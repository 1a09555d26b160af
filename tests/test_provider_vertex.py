"""The google-vertex API (Gemini on Vertex AI) through the real google-genai SDK with
``vertexai=True`` against the scripted server: an API key (express mode) or a project and
location with application default credentials refreshed at the scripted token endpoint; the
paths Vertex uses; missing project/location as one-line errors; thinking, parallel tool calls,
usage, HTTP errors, cut streams and aborts."""

from __future__ import annotations

import base64
import json

import pytest
import trio
from support.providers import abort_at_first_text_delta, hello_context, run

from pi_actors import ai
from pi_actors.ai import catalog
from pi_actors.testing import ScriptedLLM
from pi_actors.testing.scripted_server import SCRIPTED_ACCESS_TOKEN
from pi_actors.testing.wire_formats import Reply, ScriptToolCall, ScriptUsage

API = "google-vertex"


@pytest.fixture(autouse=True)
def _no_ambient_google(monkeypatch):
    for name in ("GOOGLE_CLOUD_API_KEY", "GOOGLE_CLOUD_PROJECT", "GCLOUD_PROJECT", "GOOGLE_CLOUD_LOCATION",
                 "GOOGLE_APPLICATION_CREDENTIALS"):
        monkeypatch.delenv(name, raising=False)


def _private_key_pem() -> str:
    """A fresh RSA key for the service account that signs its token request."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption()).decode()


def vertex_model(server: ScriptedLLM, **kw) -> ai.Model:
    fields = dict(id="gemini-2.5-pro", api=API, provider="google-vertex", base_url=server.base_url_vertex,
                  reasoning=True, input=["text", "image"],
                  cost=ai.ModelCost(input=1.25, output=10, cache_read=0.125, cache_write=0), max_tokens=65536)
    fields.update(kw)
    return ai.Model(**fields)


async def one_call(replies, options, *, context=None, simple=False):
    server = ScriptedLLM(replies)
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        result, rec = await run(API, server, options, context=context, simple=simple, model=vertex_model(server))
        nursery.cancel_scope.cancel()
    return result, rec, server


async def test_vertex_with_an_api_key_streams_thinking_parallel_calls_and_usage_on_the_publisher_path():
    signature = base64.b64encode(b"thought state").decode()
    reply = Reply(thinking="Plan.", text="Both.", thinking_signature=signature,
                  tool_calls=[ScriptToolCall(name="ls", arguments={"path": "."}),
                              ScriptToolCall(name="read", arguments={"path": "a"}, id="given")],
                  usage=ScriptUsage(input=50, cache_read=10, output=20, reasoning=5))
    tools = [ai.Tool(name="ls", description="List", parameters={"type": "object"}),
             ai.Tool(name="read", description="Read", parameters={"type": "object"})]
    msg, rec, server = await one_call([reply], ai.StreamOptions(api_key="vx-key", reasoning="high"),
                                      context=hello_context(tools=tools), simple=True)
    assert rec.types[0] == "start" and rec.types[-1] == "done" and msg.stop_reason == "toolUse"
    assert [type(b).__name__ for b in msg.content] == ["ThinkingContent", "TextContent", "ToolCall", "ToolCall"]
    assert msg.content[2].name == "ls" and msg.content[2].thought_signature == signature
    assert msg.content[3].id == "given" and msg.api == API
    u = msg.usage
    assert (u.input, u.cache_read, u.output, u.total_tokens) == (50, 10, 25, 85) and u.cost.total > 0
    request = server.requests[0]
    assert request["path"] == "/v1/publishers/google/models/gemini-2.5-pro:streamGenerateContent"
    assert request["headers"]["x-goog-api-key"] == "vx-key" and "authorization" not in request["headers"]
    body = request["body"]
    assert body["generationConfig"]["thinkingConfig"] in ({"includeThoughts": True, "thinkingBudget": 32768},
                                                          {"include_thoughts": True, "thinking_budget": 32768})
    assert [d["name"] for d in body["tools"][0]["functionDeclarations"]] == ["ls", "read"]


async def test_vertex_with_project_and_location_uses_application_default_credentials(tmp_path, monkeypatch):
    server = ScriptedLLM([Reply(text="hello from vertex"), Reply(text="again")])
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        adc = tmp_path / "adc.json"
        adc.write_text(json.dumps({"type": "service_account", "project_id": "my-project",
                                   "private_key_id": "k1", "private_key": _private_key_pem(),
                                   "client_email": "pi@my-project.iam.gserviceaccount.com", "client_id": "1",
                                   "token_uri": f"http://127.0.0.1:{server.port}/token"}))
        monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(adc))
        monkeypatch.setenv("GOOGLE_CLOUD_PROJECT", "my-project")
        monkeypatch.setenv("GOOGLE_CLOUD_LOCATION", "europe-west4")
        assert ai.get_env_api_key("google-vertex") == "<authenticated>"
        for _ in range(2):  # the catalog's marker is not a key; the token is refreshed once
            msg, _ = await run(API, server, ai.StreamOptions(api_key="<authenticated>"), model=vertex_model(server))
            assert msg.stop_reason == "stop", msg.error_message
            assert msg.content[0].text in ("hello from vertex", "again")
        nursery.cancel_scope.cancel()
    paths = [r["path"] for r in server.requests]
    stream_path = "/v1/projects/my-project/locations/europe-west4/publishers/google/models/gemini-2.5-pro" \
                  ":streamGenerateContent"
    assert paths.count("/token") == 1 and paths.count(stream_path) == 2
    streamed = [r for r in server.requests if r["path"] == stream_path][0]
    assert streamed["headers"]["authorization"] == f"Bearer {SCRIPTED_ACCESS_TOKEN}"


async def test_vertex_without_key_names_the_missing_project_or_location(monkeypatch):
    msg, rec, _ = await one_call([], ai.StreamOptions(api_key="<authenticated>"))
    assert rec.types == ["error"]
    assert msg.error_message == ("Vertex AI requires a project ID. Set GOOGLE_CLOUD_PROJECT/GCLOUD_PROJECT "
                                 "or pass project in options.")
    monkeypatch.setenv("GCLOUD_PROJECT", "p")
    msg, rec, _ = await one_call([], ai.StreamOptions())
    assert msg.error_message == "Vertex AI requires a location. Set GOOGLE_CLOUD_LOCATION or pass location in options."


async def test_vertex_http_errors_cut_streams_and_abort_are_error_events():
    msg, rec, _ = await one_call([Reply(status=403, error_body={"error": {"code": 403, "message": "denied",
                                                                          "status": "PERMISSION_DENIED"}})],
                                 ai.StreamOptions(api_key="k"))
    assert rec.types == ["error"] and msg.error_message.startswith("403") and "denied" in msg.error_message
    msg, rec, _ = await one_call([Reply(text="one two three four", chunks=4, truncate=True, truncate_style="clean")],
                                 ai.StreamOptions(api_key="k"))
    assert rec.types[0] == "start" and msg.stop_reason == "error"
    assert msg.error_message == "Stream ended without a finish reason (the response was cut short)"

    msg, rec = await abort_at_first_text_delta(vertex_model, api_key="k")
    assert msg.stop_reason == "aborted" and msg.content[0].text


def test_catalog_vertex_models_are_usable():
    models = catalog.get_models("google-vertex")
    assert models and all(m.api == API for m in models)
    assert all(catalog.unsupported_api_message(m) is None for m in models)
