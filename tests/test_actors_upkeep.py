"""Compaction and auto-retry through the actors, summaries from the scripted model."""

from __future__ import annotations

import trio
from conftest import actor_config
from support.prompts import send_prompt

from pi_actors.actors import open_local_runtime
from pi_actors.testing.scripted_server import Reply
from pi_actors.testing.wire_formats import ScriptUsage

SUMMARY = "## Goal\nShip it\n\n## Constraints & Preferences\n(none)\n\n## Progress\n### Done\n- [x] talked\n"


class Events:
    def __init__(self, on=None) -> None:
        self.events: list[dict] = []
        self.on = on

    def event(self, event: dict) -> None:
        self.events.append(event)
        if self.on is not None:
            self.on(event)

    def of(self, kind: str) -> list[dict]:
        return [e for e in self.events if e["type"] == kind]


def _text(content) -> str:
    return content if isinstance(content, str) else "".join(p.get("text", "") for p in content)


def _is_summary_request(request: dict) -> bool:
    messages = request["body"]["messages"]
    return "context summarization assistant" in _text(messages[0]["content"]) and _text(messages[1]["content"]).startswith("<conversation>")


async def test_manual_compaction_summarizes_through_the_model_and_the_next_request_starts_from_it(scripted, tmp_path):
    scripted.script += [Reply(text="one"), Reply(text="two"), Reply(text=SUMMARY), Reply(text="after compaction")]
    async with open_local_runtime(actor_config(scripted, tmp_path)) as coordinator:
        await send_prompt(coordinator, "first", Events())
        await send_prompt(coordinator, "second", Events())
        result = await coordinator.call("compact", {"customInstructions": "focus on shipping"})
        assert result["summary"].startswith(SUMMARY.strip()) and result["tokensBefore"] > 0
        messages = (await coordinator.call("get_messages"))["messages"]
        assert messages[0]["role"] == "compactionSummary"
        await send_prompt(coordinator, "third", Events())
    summary_request = scripted.requests[2]
    assert _is_summary_request(summary_request)
    assert "Additional focus: focus on shipping" in _text(summary_request["body"]["messages"][1]["content"])
    text = _text(scripted.requests[3]["body"]["messages"][1]["content"])
    assert text.startswith("The conversation history before this point was compacted") and "Ship it" in text


async def test_a_reply_over_the_context_threshold_triggers_auto_compaction(scripted, tmp_path):
    scripted.script += [Reply(text="big", usage=ScriptUsage(input=19000)), Reply(text=SUMMARY)]
    config = actor_config(scripted, tmp_path, context_window=20000, settings={"retry": {"enabled": False}})
    async with open_local_runtime(config) as coordinator:
        seen = Events()
        await send_prompt(coordinator, "fill the window", seen)
        messages = (await coordinator.call("get_messages"))["messages"]
    (start,) = seen.of("compaction_start")
    (end,) = seen.of("compaction_end")
    assert start["reason"] == "threshold" and end["reason"] == "threshold"
    assert end["willRetry"] is False and end["aborted"] is False and end["result"]["summary"].startswith("## Goal")
    assert _is_summary_request(scripted.requests[1])
    assert messages[0]["role"] == "compactionSummary"


async def test_a_context_overflow_compacts_and_retries_the_request_once(scripted, tmp_path):
    too_long = {"error": {"message": "prompt is too long: 210000 tokens > 200000 maximum", "type": "invalid_request_error"}}
    scripted.script += [Reply(status=400, error_body=too_long), Reply(text=SUMMARY), Reply(text="fits now")]
    async with open_local_runtime(actor_config(scripted, tmp_path)) as coordinator:
        seen = Events()
        await send_prompt(coordinator, "a huge request", seen)
    (start,) = seen.of("compaction_start")
    (end,) = seen.of("compaction_end")
    assert start["reason"] == "overflow" and end["willRetry"] is True
    assert _is_summary_request(scripted.requests[1])
    assert seen.of("message_end")[-1]["message"]["content"][0]["text"] == "fits now"
    assert len(scripted.requests) == 3


async def test_a_second_overflow_reports_that_recovery_failed(scripted, tmp_path):
    too_long = {"error": {"message": "prompt is too long: 210000 tokens > 200000 maximum"}}
    scripted.script += [Reply(status=400, error_body=too_long), Reply(text=SUMMARY), Reply(status=400, error_body=too_long)]
    async with open_local_runtime(actor_config(scripted, tmp_path)) as coordinator:
        seen = Events()
        await send_prompt(coordinator, "a huge request", seen)
    ends = seen.of("compaction_end")
    assert ends[-1]["willRetry"] is False and "recovery failed" in ends[-1]["errorMessage"]
    assert len(scripted.requests) == 3


async def test_a_transient_provider_error_is_retried_with_events(scripted, tmp_path):
    overloaded = {"error": {"message": "Overloaded", "type": "overloaded_error"}}
    scripted.script += [Reply(status=503, error_body=overloaded), Reply(text="worked the second time")]
    config = actor_config(scripted, tmp_path, settings={"retry": {"enabled": True, "baseDelayMs": 1}})
    async with open_local_runtime(config) as coordinator:
        seen = Events()
        await send_prompt(coordinator, "try", seen)
        messages = (await coordinator.call("get_messages"))["messages"]
    (start,) = seen.of("auto_retry_start")
    (end,) = seen.of("auto_retry_end")
    assert start["attempt"] == 1 and start["maxAttempts"] == 3 and "503" in start["errorMessage"]
    assert end == {"type": "auto_retry_end", "success": True, "attempt": 1}
    # The failed reply left the transcript; the answer follows the prompt directly.
    assert [m["role"] for m in messages] == ["user", "assistant"] and messages[-1]["stopReason"] == "stop"


async def test_abort_retry_cancels_a_retry_wait(scripted, tmp_path):
    overloaded = {"error": {"message": "Overloaded"}}
    scripted.script += [Reply(status=529, error_body=overloaded)]
    config = actor_config(scripted, tmp_path, settings={"retry": {"enabled": True, "baseDelayMs": 600000}})
    async with open_local_runtime(config) as coordinator:
        async with trio.open_nursery() as nursery:

            def on(event: dict) -> None:
                if event["type"] == "auto_retry_start":
                    nursery.start_soon(coordinator.call, "abort_retry")

            seen = Events(on)
            with trio.fail_after(30):  # the scheduled wait is ten minutes
                await send_prompt(coordinator, "try", seen)
    (end,) = seen.of("auto_retry_end")
    assert end["success"] is False and end["finalError"] == "Retry cancelled"
    assert len(scripted.requests) == 1
