"""Provider stalls and Retry-After, through the real SDKs against the scripted server.

Every stream call here goes through the real anthropic/openai SDKs over a real socket on
127.0.0.1 to the scripted server, and failed calls are retried by the retry policy the
coordinator uses (``coding.retry.run_with_retry``). Time is trio's ``MockClock``: the SDKs
run on trio (through anyio), so their waits, our first-byte and idle timeouts and the retry
back-off all run on it. The clock moves only when a test says so — it jumps by a known
amount, or autojumps only while the one thing left to happen is the stall itself — so a
normal request over the real socket is never overtaken by virtual time.
"""

from __future__ import annotations

import email.utils
import json
import math
import time

import pytest
import trio
import trio.testing

from pi_actors import ai
from pi_actors.ai.retry_after import delay_exceeds_maximum, parse_retry_after, requested_delay_ms
from pi_actors.coding.retry import RetrySettings, is_retryable_error, run_with_retry
from pi_actors.testing import Reply, ScriptedLLM

APIS = ["openai-completions", "openai-responses", "anthropic-messages"]
PROVIDER = {"openai-completions": "openai", "openai-responses": "openai", "anthropic-messages": "anthropic"}
OPENAI = ("openai-completions", "openai-responses")


def model_for(api: str, server: ScriptedLLM) -> ai.Model:
    url = server.base_url_openai if api in OPENAI else server.base_url_anthropic
    return ai.Model(id="test-model", api=api, provider=PROVIDER[api], base_url=url, max_tokens=1000)


def context() -> ai.Context:
    return ai.Context(messages=[ai.UserMessage(content="hi", timestamp=1)])


async def start_server(nursery, replies) -> ScriptedLLM:
    server = ScriptedLLM(replies)
    await nursery.start(server.serve)
    return server


def text_of(message: ai.AssistantMessage) -> str:
    return "".join(block.text for block in message.content if isinstance(block, ai.TextContent))


class RetryingCall:
    """One stream call retried by ``run_with_retry``, run in the background; records the
    retry events with the (virtual) time they came at.

    On ``auto_retry_start`` the clock's autojump is turned off before the retry waits, so the
    test decides how far the back-off goes and the next request runs in real time."""

    def __init__(self, api: str, server: ScriptedLLM, clock: trio.testing.MockClock, *,
                 extra: dict | None = None, settings: RetrySettings | None = None, on_event=None,
                 forbid_retry: bool = False) -> None:
        self.forbid_retry = forbid_retry
        self.model = model_for(api, server)
        self.options = ai.StreamOptions(api_key="sk-test", extra=dict(extra or {}))
        self.clock = clock
        self.settings = settings or RetrySettings()
        self.on_event = on_event
        self.events: list[tuple[float, dict]] = []
        self.failed: list[ai.AssistantMessage] = []
        self.result: ai.AssistantMessage | None = None
        self.done = trio.Event()
        self._changed = trio.Event()

    async def _stream(self) -> ai.AssistantMessage:
        async def emit(event) -> None:
            if self.on_event is not None:
                await self.on_event(event)

        return await ai.stream(self.model, context(), self.options, emit)

    async def _emit(self, event: dict) -> None:
        if event["type"] == "auto_retry_start":
            self.clock.autojump_threshold = math.inf
            assert not self.forbid_retry, f"retried: {event}"
        self.events.append((trio.current_time(), event))
        self._changed.set()
        self._changed = trio.Event()

    async def run(self) -> None:
        try:
            self.result = await run_with_retry(self._stream, settings=self.settings, emit=self._emit,
                                               before_retry=self.failed.append)
        finally:
            self.done.set()
            self._changed.set()

    async def next_event(self, kind: str, index: int = 0) -> tuple[float, dict]:
        """The ``index``-th event of type ``kind`` (waiting for it), with its time."""
        while True:
            found = [(t, e) for t, e in self.events if e["type"] == kind]
            if len(found) > index:
                return found[index]
            if self.done.is_set():
                pytest.fail(f"the call ended without {kind}: {self.result and self.result.error_message}")
            await self._changed.wait()


# -- stalls ------------------------------------------------------------------------------------


@pytest.mark.parametrize("api", APIS)
async def test_a_provider_that_never_answers_is_reported_stalled_and_the_retry_succeeds(api, mock_clock, nursery):
    server = await start_server(nursery, [Reply(hang_before_headers=True), Reply(text="recovered")])
    call = RetryingCall(api, server, mock_clock, extra={"first_byte_timeout_ms": 60000})
    began = trio.current_time()
    nursery.start_soon(call.run)
    await server.wait_requests(1)
    # The request is at the server, which will never answer: only the stall can happen now.
    mock_clock.autojump_threshold = 0
    at, start = await call.next_event("auto_retry_start")
    assert start["errorMessage"] == (
        "Provider stalled: no data for 60 s waiting for the response (provider.firstByteTimeoutMs)"
    )
    assert at - began == pytest.approx(60)
    assert start["attempt"] == 1 and start["delayMs"] == 2000
    with trio.fail_after(5):
        await server.wait_hung_up(1)  # the stalled request's connection was closed
    mock_clock.jump(2)  # the back-off
    await call.done.wait()
    assert call.result.stop_reason == "stop" and text_of(call.result) == "recovered"
    assert call.events[-1][1] == {"type": "auto_retry_end", "success": True, "attempt": 1}
    assert len(server.requests) == 2


@pytest.mark.parametrize("api", APIS)
async def test_a_provider_that_goes_silent_mid_stream_is_reported_stalled(api, mock_clock, nursery):
    server = await start_server(nursery, [Reply(text="partial answer", chunks=2, hang_after_start=True),
                                          Reply(text="whole answer")])
    got_text = trio.Event()

    async def watch(event) -> None:
        if isinstance(event, ai.TextDeltaEvent) and text_of(event.partial) == "partial answer":
            got_text.set()

    call = RetryingCall(api, server, mock_clock, extra={"idle_timeout_ms": 30000}, on_event=watch)
    nursery.start_soon(call.run)
    await got_text.wait()
    silent_since = trio.current_time()
    mock_clock.autojump_threshold = 0  # the server sends nothing more: only the stall can happen
    at, start = await call.next_event("auto_retry_start")
    assert start["errorMessage"] == "Provider stalled: no data for 30 s mid-stream (provider.idleTimeoutMs)"
    assert at - silent_since == pytest.approx(30)
    # The failed reply kept what had arrived.
    (failed,) = call.failed
    assert failed.stop_reason == "error" and text_of(failed) == "partial answer"
    mock_clock.jump(2)
    await call.done.wait()
    assert text_of(call.result) == "whole answer"


def test_a_stall_is_a_transient_error():
    for text in ("Provider stalled: no data for 60 s waiting for the response (provider.firstByteTimeoutMs)",
                 "Provider stalled: no data for 30 s mid-stream (provider.idleTimeoutMs)"):
        message = {"role": "assistant", "content": [], "stopReason": "error", "errorMessage": text}
        assert is_retryable_error(message)


async def test_a_bad_timeout_option_is_a_clear_error_event(nursery):
    server = await start_server(nursery, [Reply(text="never")])
    options = ai.StreamOptions(api_key="k", extra={"idle_timeout_ms": "soon"})
    result = await ai.stream(model_for("openai-completions", server), context(), options, _ignore)
    assert result.stop_reason == "error"
    assert result.error_message == "Bad option idle_timeout_ms: 'soon' (expected a number of milliseconds, 0 or more)"


async def _ignore(event) -> None:
    pass


# -- Retry-After -------------------------------------------------------------------------------


async def _retried_after(api, server, clock, nursery, **kw) -> tuple[RetryingCall, dict]:
    call = RetryingCall(api, server, clock, **kw)
    nursery.start_soon(call.run)
    _, start = await call.next_event("auto_retry_start")
    return call, start


async def _finish_after(call: RetryingCall, server: ScriptedLLM, clock, delay_ms: int) -> None:
    """Move the clock to just before ``delay_ms``: still one request; then past it: the retry."""
    clock.jump(delay_ms / 1000 - 0.05)
    await trio.testing.wait_all_tasks_blocked()
    assert len(server.requests) == 1, "retried before the server's delay was over"
    clock.jump(0.1)
    await call.done.wait()
    assert len(server.requests) == 2 and text_of(call.result) == "ok"


@pytest.mark.parametrize("api", APIS)
async def test_a_429_with_retry_after_5_is_retried_after_5_seconds(api, mock_clock, nursery):
    server = await start_server(nursery, [Reply(status=429, headers={"retry-after": "5"}), Reply(text="ok")])
    call, start = await _retried_after(api, server, mock_clock, nursery)
    assert start["delayMs"] == 5000
    assert start["errorMessage"].startswith("429 ") and start["errorMessage"].endswith(
        "(the server asked to retry in 5 s)")
    await _finish_after(call, server, mock_clock, 5000)


@pytest.mark.parametrize("api", APIS)
async def test_retry_after_ms_is_honoured(api, mock_clock, nursery):
    server = await start_server(nursery, [Reply(status=503, headers={"retry-after-ms": "1500", "retry-after": "9"}),
                                          Reply(text="ok")])
    call, start = await _retried_after(api, server, mock_clock, nursery)
    assert start["delayMs"] == 1500  # retry-after-ms wins over retry-after
    await _finish_after(call, server, mock_clock, 1500)


@pytest.mark.parametrize("api", APIS)
async def test_retry_after_as_an_http_date_is_honoured(api, mock_clock, nursery):
    date = email.utils.formatdate(time.time() + 30, usegmt=True)
    server = await start_server(nursery, [Reply(status=429, headers={"retry-after": date}), Reply(text="ok")])
    call, start = await _retried_after(api, server, mock_clock, nursery)
    # An HTTP date has whole seconds, and the request took a moment of real time.
    assert 25000 <= start["delayMs"] <= 30000
    await _finish_after(call, server, mock_clock, start["delayMs"])


@pytest.mark.parametrize("api", APIS)
async def test_a_retry_after_above_the_maximum_fails_at_once_with_a_clear_error(api, mock_clock, nursery):
    server = await start_server(nursery, [Reply(status=429, headers={"retry-after": "3600"}), Reply(text="ok")])
    call = RetryingCall(api, server, mock_clock, extra={"max_retry_delay_ms": 60000}, forbid_retry=True)
    await call.run()
    assert call.events == []  # not retried
    assert call.result.stop_reason == "error"
    assert call.result.error_message.startswith(
        "Server requested a 3600 s retry delay, above the maximum of 60 s (retry.maxDelayMs): 429 ")
    assert len(server.requests) == 1


@pytest.mark.parametrize("api", ["anthropic-messages"])
async def test_without_retry_after_the_back_off_is_the_policys(api, mock_clock, nursery):
    server = await start_server(nursery, [Reply(status=503), Reply(text="ok")])
    call, start = await _retried_after(api, server, mock_clock, nursery)
    assert start["delayMs"] == 2000 and "asked to retry" not in start["errorMessage"]
    await _finish_after(call, server, mock_clock, 2000)


def test_retry_after_headers_are_read_as_the_standard_says():
    now = 1_700_000_000.0
    assert parse_retry_after({"retry-after": "5"}, now) == 5000
    assert parse_retry_after({"retry-after": " 2.5 "}, now) == 2500
    assert parse_retry_after({"retry-after-ms": "1500", "retry-after": "9"}, now) == 1500
    assert parse_retry_after({"retry-after": email.utils.formatdate(now + 42, usegmt=True)}, now) == 42000
    assert parse_retry_after({"retry-after": email.utils.formatdate(now - 42, usegmt=True)}, now) == 0
    assert parse_retry_after({"retry-after": "-3"}, now) == 0
    for junk in ("", "soon", "nan", "inf", "Mon, 99 Foo 2024 99:99:99 GMT", "1e999"):
        assert parse_retry_after({"retry-after": junk}, now) is None, junk
    assert parse_retry_after({}, now) is None and parse_retry_after(None, now) is None


from hypothesis import given
from hypothesis import strategies as st


@given(st.dictionaries(st.sampled_from(["retry-after", "retry-after-ms", "x"]), st.text(max_size=40)))
def test_hostile_retry_after_values_never_raise(headers):
    value = parse_retry_after(headers, 1_700_000_000.0)
    assert value is None or 0 <= value <= 365 * 24 * 3600 * 1000


@given(st.text(max_size=80).map(lambda t: "429 " + t), st.integers(min_value=0, max_value=10**9),
       st.integers(min_value=0, max_value=10**9))
def test_the_delay_travels_in_the_message_and_is_read_back(base, delay, maximum):
    from pi_actors.ai.retry_after import describe_retry_after

    message = describe_retry_after(base, delay, maximum)
    if maximum and delay > maximum:
        assert delay_exceeds_maximum(message) and message.endswith(base)
    else:
        assert requested_delay_ms(message) == delay and not delay_exceeds_maximum(message)


# -- settings ----------------------------------------------------------------------------------


def test_the_timeouts_and_the_maximum_delay_come_from_settings_json(tmp_path):
    from pi_actors.cli import load_settings, stream_limits
    from pi_actors.protocol.config import Settings, StreamLimits

    home, work = tmp_path / "home", tmp_path / "work"
    (work / ".pi-actors").mkdir(parents=True)
    home.mkdir()
    (home / "settings.json").write_text(json.dumps({"provider": {"firstByteTimeoutMs": 5000, "idleTimeoutMs": 7000},
                                                    "retry": {"maxDelayMs": 90000}}))
    (work / ".pi-actors" / "settings.json").write_text(json.dumps({"provider": {"idleTimeoutMs": -1}}))
    settings, warnings = load_settings(str(home), str(work))
    assert warnings == ["Warning (settings): provider.idleTimeoutMs must be a number of milliseconds, "
                        "0 or more; using 120000"]
    assert stream_limits(settings) == StreamLimits(first_byte_timeout_ms=5000, idle_timeout_ms=120000, max_retry_delay_ms=90000)
    assert stream_limits(Settings()) == StreamLimits(first_byte_timeout_ms=120000, idle_timeout_ms=120000, max_retry_delay_ms=60000)


async def test_a_stalled_provider_is_retried_by_the_cli_with_the_settings_timeout(scripted, env):
    """End to end: settings.json's provider.firstByteTimeoutMs reaches the provider actor; the
    stalled request is retried by the coordinator and the answer printed."""
    (env.home / "settings.json").write_text(json.dumps({"provider": {"firstByteTimeoutMs": 300},
                                                       "retry": {"baseDelayMs": 0}}))
    scripted.script.extend([Reply(hang_before_headers=True), Reply(text="after the stall")])
    done = await env.run("--model", "scripted/scripted-model", "--no-session", "--mode", "json", "hi")
    assert done.returncode == 0, done.stderr.decode()
    events = [json.loads(line) for line in done.stdout.decode().splitlines() if line.strip()]
    starts = [e for e in events if e.get("type") == "auto_retry_start"]
    assert [s["errorMessage"] for s in starts] == [
        "Provider stalled: no data for 0.3 s waiting for the response (provider.firstByteTimeoutMs)"]
    assert any(e.get("type") == "auto_retry_end" and e.get("success") for e in events)
    assert len(scripted.requests) == 2


def test_the_sdks_do_not_retry_on_their_own():
    """One retry policy only: the SDK clients are built with max_retries=0, so a 429 or a
    timeout is never retried inside the SDK before ours sees it (the Retry-After tests also
    see exactly one request per attempt)."""
    from pi_actors.ai.providers import anthropic_messages, openai_completions

    model = ai.Model(id="m", api="openai-completions", provider="openai", base_url="http://127.0.0.1:9/v1")
    client = openai_completions.make_client(model, ai.StreamOptions(), "k")
    assert client.max_retries == 0
    model = ai.Model(id="m", api="anthropic-messages", provider="anthropic", base_url="http://127.0.0.1:9")
    client = anthropic_messages._make_client(model, ai.StreamOptions(), "k", False)
    assert client.max_retries == 0
