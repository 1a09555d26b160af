"""The real CLI on a Gemini model named in models.json (google-generative-ai): a turn with a
tool call and its result round-trips through the provider actor, the SDK and the scripted
server's Gemini wire."""

from __future__ import annotations

import json

from pi_actors.testing import Reply, ScriptToolCall


async def test_print_mode_runs_a_tool_turn_on_a_gemini_model(env, scripted):
    models = json.loads((env.home / "models.json").read_text())
    models["providers"]["gem"] = {"baseUrl": scripted.base_url_gemini, "api": "google-generative-ai",
                                  "apiKey": "g-key", "models": [{"id": "gemini-2.5-flash", "reasoning": True}]}
    (env.home / "models.json").write_text(json.dumps(models))
    scripted.script += [
        Reply(thinking="List it.", thinking_signature="c2ln", tool_calls=[
            ScriptToolCall(name="bash", arguments={"command": "echo gemini-tool-ran"})]),
        Reply(text="All done on Gemini."),
    ]
    result = await env.run("-p", "run it", "--model", "gem/gemini-2.5-flash", "--no-session")
    assert result.returncode == 0, result.stderr.decode()
    assert "All done on Gemini." in result.stdout.decode()
    first, second = scripted.requests
    assert first["path"] == second["path"] == "/v1beta/models/gemini-2.5-flash:streamGenerateContent"
    assert first["headers"]["x-goog-api-key"] == "g-key"
    contents = second["body"]["contents"]
    model_turn = contents[-2]["parts"]
    assert model_turn[0]["thought"] is True and model_turn[-1]["functionCall"]["name"] == "bash"
    assert model_turn[-1]["thoughtSignature"] == "c2ln"  # its own signature goes back to it
    response = contents[-1]["parts"][0]["functionResponse"]
    assert response["name"] == "bash" and "gemini-tool-ran" in response["response"]["output"]
