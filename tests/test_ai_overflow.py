"""Context-overflow detection (pi's packages/ai, docs/architecture.md §7), from each API's real error replies and from
usage: ``is_context_overflow(message, context_window)``."""

from __future__ import annotations

import pytest
from support.providers import run

from pi_actors import ai
from pi_actors.testing import Reply, ScriptUsage


def failed(text: str | None, reason: str = "error") -> ai.AssistantMessage:
    return ai.AssistantMessage(content=[], api="x", provider="x", model="m", usage=ai.Usage(),
                               stop_reason=reason, error_message=text, timestamp=1)  # type: ignore[arg-type]


def finished(reason: str, input: int, output: int = 0, cache_read: int = 0) -> ai.AssistantMessage:
    msg = failed(None, reason)
    msg.usage = ai.Usage(input=input, output=output, cache_read=cache_read)
    return msg


PROVIDER_TEXTS = [
    "400 prompt is too long: 213462 tokens > 200000 maximum",
    "input is too long for requested model",
    "400 Your input exceeds the context window of this model. Please adjust your input and try again.",
    "The input token count (1196265) exceeds the maximum number of tokens allowed (1048575).",
    "This model's maximum prompt length is 131072 but the request contains 537812 tokens.",
    "Please reduce the length of the messages or completion.",
    "This endpoint's maximum context length is 128000 tokens. However, you requested about 200000 tokens",
    "prompt token count of 250000 exceeds the limit of 128000",
    "the request exceeds the available context size, try increasing it",
    "tokens to keep from the initial prompt is greater than the context length",
    "invalid params, context window exceeds limit (2013)",
    "Invalid request: Your request exceeded model token limit: 262144",
    "Prompt contains 300000 tokens, too large for model with 131072 maximum context length",
    "model_context_window_exceeded",
    "context_length_exceeded", "Context length exceeded", "Too many tokens in request", "token limit exceeded",
    "400 status code (no body)", "413 (no body)",
]


@pytest.mark.parametrize("text", PROVIDER_TEXTS)
def test_every_provider_error_text_is_an_overflow(text):
    assert ai.is_context_overflow(failed(text))
    assert ai.is_context_overflow(failed(text.upper()))  # case-insensitive


@pytest.mark.parametrize("text", ["429 status code (no body)", "401 invalid api key", "Connection error.", "", None])
def test_other_errors_are_not(text):
    assert not ai.is_context_overflow(failed(text))


def test_overflow_texts_only_count_on_errors():
    assert not ai.is_context_overflow(failed("prompt is too long", reason="aborted"))
    assert not ai.is_context_overflow(failed("prompt is too long", reason="stop"), 1000)


def test_silent_overflow_on_stop_needs_the_window():
    assert ai.is_context_overflow(finished("stop", input=900, cache_read=200), 1000)
    assert not ai.is_context_overflow(finished("stop", input=900, cache_read=100), 1000)
    assert not ai.is_context_overflow(finished("stop", input=5000))


def test_length_counts_only_when_the_window_was_used_up():
    assert ai.is_context_overflow(finished("length", input=120_000, output=7_000, cache_read=1_000), 128_000)
    assert not ai.is_context_overflow(finished("length", input=1_000, output=4_096), 128_000)
    assert not ai.is_context_overflow(finished("length", input=120_000, output=7_000))  # no window given
    assert not ai.is_context_overflow(finished("aborted", input=200_000), 128_000)


def test_patterns_are_a_copy():
    patterns = ai.get_overflow_patterns()
    patterns.clear()
    assert ai.get_overflow_patterns()


OVERFLOW_BODIES = {
    "anthropic-messages": {"type": "error", "error": {"type": "invalid_request_error",
                                                      "message": "prompt is too long: 213462 tokens > 200000 maximum"}},
    "openai-completions": {"error": {"message": "This model's maximum context length is 128000 tokens. However, your "
                                                "messages resulted in 130000 tokens.", "type": "invalid_request_error",
                                     "code": "context_length_exceeded"}},
    "openai-responses": {"error": {"message": "Your input exceeds the context window of this model.",
                                   "type": "invalid_request_error", "code": "context_length_exceeded"}},
}


@pytest.mark.parametrize("api", sorted(OVERFLOW_BODIES))
async def test_each_api_overflow_reply_is_detected(api, start_llm):
    server = await start_llm([Reply(status=400, error_body=OVERFLOW_BODIES[api]),
                              Reply(text="fine", usage=ScriptUsage(input=1200, output=3)),
                              Reply(text="cut", stop_reason="length", usage=ScriptUsage(input=1000, output=95))])
    window = 1100
    overflowed, _ = await run(api, server)
    assert overflowed.stop_reason == "error" and overflowed.error_message.startswith("400 ")
    assert ai.is_context_overflow(overflowed, window)
    silent, _ = await run(api, server)  # the server answered although the prompt did not fit
    assert silent.stop_reason == "stop" and ai.is_context_overflow(silent, window)
    assert not ai.is_context_overflow(silent, 100_000)
    cut, _ = await run(api, server)
    assert cut.stop_reason == "length" and ai.is_context_overflow(cut, window)
