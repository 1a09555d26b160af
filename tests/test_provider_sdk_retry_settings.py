"""Settings ``retry.provider.maxRetries`` / ``.timeoutMs`` reach the provider SDK client as
pi passes them (the real SDKs against the scripted server): the SDK retries a failed request
itself, and gives up on a server that sends no response headers within the timeout."""

from __future__ import annotations

import importlib

import pytest
from support.providers import run

from pi_actors import ai
from pi_actors.cli import stream_limits
from pi_actors.testing.scripted_server import Reply

#: One API per SDK (openai-responses and azure use the same OpenAI client call).
SDK_APIS = ["anthropic-messages", "openai-completions"]
#: The SDKs honour a server's retry-after-ms: the retry comes at once.
BUSY = Reply(status=503, error_body={"error": {"message": "busy, try again"}}, headers={"retry-after-ms": "1"})


def _import_sdk(api: str) -> None:
    """Import the API's provider module (and its SDK) before the call: on a loaded machine the
    import alone can take seconds, which are not the call's time limit's business."""
    importlib.import_module(f"pi_actors.ai.providers.{api.replace('-', '_')}")


@pytest.mark.parametrize("api", SDK_APIS)
async def test_max_retries_lets_the_sdk_retry_a_failed_request_itself(api, scripted):
    _import_sdk(api)
    scripted.script += [BUSY, Reply(text="second try worked")]
    options = ai.StreamOptions(api_key="sk-test", extra={"max_retries": 1})
    result, _ = await run(api, scripted, options)
    assert result.stop_reason == "stop" and result.content[0].text == "second try worked"
    assert len(scripted.requests) == 2


async def test_without_max_retries_the_first_failure_is_the_calls_error(scripted):
    scripted.script += [BUSY, Reply(text="not reached")]
    result, _ = await run("openai-completions", scripted)
    assert result.stop_reason == "error" and "busy, try again" in (result.error_message or "")
    assert len(scripted.requests) == 1


async def test_timeout_ms_ends_a_request_whose_headers_never_come(scripted):
    _import_sdk("anthropic-messages")
    scripted.script.append(Reply(text="never", hang_before_headers=True))
    options = ai.StreamOptions(api_key="sk-test", extra={"timeout_ms": 300, "max_retries": 0})
    result, _ = await run("anthropic-messages", scripted, options)
    assert result.stop_reason == "error" and "timed out" in (result.error_message or "").lower()


def test_the_settings_become_the_provider_limits_and_a_bad_value_is_refused_naming_it():
    limits = stream_limits({"retry": {"provider": {"timeoutMs": 5000, "maxRetries": 2}}})
    assert (limits.timeout_ms, limits.max_retries) == (5000, 2)
    assert (stream_limits({}).timeout_ms, stream_limits({}).max_retries) == (None, None)
    assert ai.options.sdk_client_options(ai.StreamOptions(extra={"timeout_ms": 5000, "max_retries": 2})) == {
        "timeout": 5.0, "max_retries": 2,
    }  # fmt: skip
    with pytest.raises(ValueError, match="max_retries must be a number of 0 or more, not 'x'"):
        ai.options.sdk_client_options(ai.StreamOptions(extra={"max_retries": "x"}))
