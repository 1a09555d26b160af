"""Driving the text-run parser in-process: the provider mappers of openai-completions,
anthropic-messages and openai-responses fed a body cut into reads, event by event or with runs
joined (used by ``test_ai_text_runs`` and ``test_ai_text_shape``)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from pi_actors import ai
from pi_actors.ai import types as T
from pi_actors.ai.providers import anthropic_messages, openai_completions, openai_responses
from pi_actors.ai.providers._common import StreamRun, run_stream
from pi_actors.ai.providers._stream import sse_reader
from pi_actors.testing.wire_formats import anthropic_frames, openai_frames, responses_frames
from support.providers import tag


def _completions(run: StreamRun) -> tuple[Any, Callable[[], Any]]:
    mapper = openai_completions._Mapper(run)
    return mapper, mapper.finish


def _anthropic(run: StreamRun) -> tuple[Any, Callable[[], Any]]:
    mapper = anthropic_messages._Mapper(run, T.Context(messages=[]), False)
    return mapper, mapper.check_stopped


def _responses(run: StreamRun) -> tuple[Any, Callable[[], Any]]:
    mapper = openai_responses._Mapper(run, None)
    return mapper, mapper.check_completed


APIS = {
    "openai-completions": (_completions, openai_frames),
    "anthropic-messages": (_anthropic, anthropic_frames),
    "openai-responses": (_responses, responses_frames),
}


async def feed(api: str, reads: list[bytes], *, runs: bool, live: bool) -> tuple[list[Any], T.AssistantMessage]:
    """The mapper of ``api`` over a body arriving as ``reads``: (events, final message)."""
    make = APIS[api][0]
    events: list[Any] = []

    async def emit(event: Any) -> None:
        events.append(event)

    async def body(run: StreamRun) -> None:
        await run.start()
        mapper, finish = make(run)

        async def chunks() -> AsyncIterator[bytes]:
            for piece in reads:
                yield piece

        await sse_reader(run, mapper.sse, finish, mapper if runs else None)(chunks())

    options = ai.StreamOptions(api_key="k")
    options.live_partial = live
    model = T.Model(id="m", name="m", api=api, provider="p", base_url="http://127.0.0.1:9")
    final = await run_stream(model, options, emit, body)
    return events, final


def joined(events: list[Any]) -> list[tuple[Any, ...]]:
    """The events as (kind, block, payload), consecutive deltas of one block joined."""
    out: list[tuple[Any, ...]] = []
    for e in events:
        kind = tag(e)
        if kind.endswith("_delta"):
            if out and out[-1][0] == kind and out[-1][1] == e.content_index:
                out[-1] = (kind, e.content_index, out[-1][2] + e.delta)
            else:
                out.append((kind, e.content_index, e.delta))
        elif kind in ("text_end", "thinking_end"):
            out.append((kind, e.content_index, e.content))
        elif kind == "toolcall_end":
            out.append((kind, e.content_index, json.dumps(T.to_plain(e.tool_call), sort_keys=True)))
        elif kind in ("done", "error"):
            message = T.to_plain(e.message if kind == "done" else e.error)
            message.pop("timestamp", None)
            out.append((kind, None, json.dumps(message, sort_keys=True)))
        else:
            out.append((kind, getattr(e, "content_index", None), None))
    return out


def plain(message: T.AssistantMessage) -> dict[str, Any]:
    data = T.to_plain(message)
    data.pop("timestamp", None)
    return data


def cut(body: bytes, points: list[int]) -> list[bytes]:
    marks = sorted({min(p, len(body)) for p in points})
    return [body[a:b] for a, b in zip([0, *marks], [*marks, len(body)], strict=True) if b > a]


async def check_same(api: str, body: bytes, points: list[int], live: bool) -> tuple[list[Any], list[Any]]:
    """Runs joined over ``body`` cut at ``points`` == event by event over the whole body."""
    reference, ref_final = await feed(api, [body], runs=False, live=live)
    events, final = await feed(api, cut(body, points), runs=True, live=live)
    assert plain(final) == plain(ref_final)
    assert joined(events) == joined(reference)
    assert len(events) <= len(reference)
    return events, reference


# --- the streams ---------------------------------------------------------------------------------
